package iwarp

// Direct I/O (rdma.DirectIO): a connection's socket work on the goroutine
// that processes its completions.
//
// Two roles, each a mutex, say who does a connection's socket I/O:
//   - the receive role (rxMu): whoever holds it reads FPDUs. The reader
//     goroutine holds it, except while parked;
//   - the transmit role (txMu): whoever holds it fills and writes batches.
//     The writer goroutine takes it for each batch.
//
// Between BeginDirect and EndDirect one goroutine, the owner, takes them
// too. Its WaitDirect writes what was left to it (below) when the writer
// is idle, then reads the socket itself until completions are ready, so
// that a round trip runs on one goroutine per side, as a plain TCP
// ping-pong does, instead of handing off to the writer and the reader
// and back.
//
// The reader goroutine gives the receive role up at an FPDU boundary,
// with nothing buffered, once a section has begun (wantDirect), and parks
// until no section has been open for directIdle, or a plain Wait needs
// it: with nobody waiting, it is what notices the peer's Terminate, its
// Read Requests and the end of the stream.
//
// What the owner posts with PostSendDirect does not wake the writer: the
// owner transmits it before it blocks again, or EndDirect hands it to the
// writer. Neither does a Read Response owed for a Read Request the owner
// read itself. Everything else wakes the writer as before.
//
// The owner blocks only at an FPDU boundary, with nothing buffered.
// Whatever would end a plain Wait ends that read with a read deadline in
// the past (kickDirectLocked): a completion the writer adds,
// InterruptWait, the end of the connection. The end of ctx is seen within
// ctxPoll: the read's deadline is at most that far, and never past ctx's.
// That deadline stays armed for the waits after it while it comes no
// later than theirs would (armWaitDeadlineLocked), so that a call does
// not pay to set and clear it. A read ended there has taken nothing of
// an FPDU, so the parse is never cut in the middle, and any other read
// of the socket, the rest of an FPDU or the reader goroutine's, clears
// the deadline first (dropWaitDeadline): no other read of the
// connection ever ends at one but the end's.
//
import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/wq"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
)

const (
	// directIdle is how long the receive role stays with direct owners
	// after the last section ended before the reader goroutine takes it
	// back: calls closer together than this run without the reader
	// goroutine, and a peer's Terminate or close that arrives while
	// nobody waits is noticed at most this late.
	directIdle = 5 * time.Millisecond

	// ctxPoll bounds how long an owner's wait goes without looking at a
	// ctx that can end.
	ctxPoll = 10 * time.Millisecond

	// directBatch bounds the FPDUs an owner reads, of those already
	// buffered, before it returns what they completed.
	directBatch = 16

	// kickDelay is how long a completion the writer adds may wait
	// for an owner that waits for data (kickSoonLocked).
	kickDelay = time.Millisecond
)

// pastDeadline ends a wait at once.
var pastDeadline = time.Unix(1, 0)

// directState is the direct section's state, guarded by Conn.mu.
type directState struct {
	open     bool          // a section is open
	blocked  bool          // the owner blocks (reading, or waiting for the reader goroutine)
	reading  bool          // the owner waits for data at an FPDU boundary
	kicked   bool          // a past read deadline has been set to end that read
	deferred bool          // work is queued that the owner is to transmit
	ownRead  bool          // the owner holds the receive role and reads an FPDU
	parked   bool          // the reader goroutine is parked, without the receive role
	lastEnd  time.Duration // when the last section ended (monoNow)
	timerOn  bool          // idle is armed
	rxErr    error         // why a direct read ended the stream, for the reader goroutine
	kickSoon bool          // kickTimer is armed
	// idleAfter, when not zero, replaces directIdle: a test lengthens it
	// so that a parked reader goroutine stays parked however slowly the
	// test runs.
	idleAfter time.Duration
}

// idle is how long the receive role stays with direct owners after a
// section: directIdle unless a test set idleAfter.
func (d *directState) idle() time.Duration {
	if d.idleAfter > 0 {
		return d.idleAfter
	}
	return directIdle
}

// BeginDirect implements rdma.DirectIO.
func (c *Conn) BeginDirect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir.open = true
	c.wantDirect.Store(true)
}

// DirectReads returns how many FPDUs owners of direct sections have read
// on c themselves (rdma.DirectIO), rather than the reader goroutine: how
// often the direct path ran.
func (c *Conn) DirectReads() uint64 { return c.dirReads.Load() }

// EndDirect implements rdma.DirectIO.
func (c *Conn) EndDirect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dir.open {
		return
	}
	c.dir.open = false
	if c.dir.deferred {
		c.dir.deferred = false
		wq.Signal(c.kick)
	}
	c.dir.lastEnd = monoNow()
	if !c.dir.timerOn && c.state != stateDead {
		c.dir.timerOn = true
		arm(&c.idle, c.dir.idle(), c.idleCheck)
	}
}

// monoStart is what monoNow counts from.
var monoStart = time.Now()

// monoNow is the time on the monotonic clock alone: one clock read where
// time.Now makes two (the wall clock too), on every section's end.
func monoNow() time.Duration { return time.Since(monoStart) }

// arm runs f after d on *t, made on first use.
func arm(t **time.Timer, d time.Duration, f func()) {
	if *t == nil {
		*t = time.AfterFunc(d, f)
	} else {
		(*t).Reset(d)
	}
}

// idleCheck runs directIdle after a section ended: if none has been open
// since, the reader goroutine takes the receive role back.
func (c *Conn) idleCheck() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir.timerOn = false
	if c.dir.open || c.state == stateDead {
		return // EndDirect arms it again; a dead connection's reader has been woken
	}
	if d := monoNow() - c.dir.lastEnd; d < c.dir.idle() {
		c.dir.timerOn = true
		c.idle.Reset(c.dir.idle() - d)
		return
	}
	c.resumeReaderLocked()
}

// resumeReaderLocked makes the reader goroutine read again. The caller
// holds c.mu.
func (c *Conn) resumeReaderLocked() {
	c.wantDirect.Store(false)
	select {
	case c.rxWake <- struct{}{}:
	default:
	}
}

// PostSendDirect implements rdma.DirectIO.
func (c *Conn) PostSendDirect(wr *rdma.WorkRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.postSendLocked(wr); err != nil {
		return err
	}
	if c.dir.open && !c.dir.blocked {
		// The owner transmits it before it blocks; a post from
		// another goroutine while the owner blocks wakes the writer.
		c.dir.deferred = true
	} else {
		wq.Signal(c.kick)
	}
	return nil
}

// wakeWriterLocked wakes the writer for work the receive path queued (a
// Read Response owed, the fence lifted), unless the owner is the one
// reading: it transmits the work itself before it waits again. The
// caller holds c.mu.
func (c *Conn) wakeWriterLocked() {
	if c.dir.ownRead {
		c.dir.deferred = true
		return
	}
	wq.Signal(c.kick)
}

// kickDirectLocked ends the owner's wait for data, if it is in one, so
// that it looks at the completion queue again. The caller holds c.mu.
func (c *Conn) kickDirectLocked() {
	if c.dir.reading && !c.dir.kicked && c.state != stateDead {
		c.dir.kicked = true
		c.nc.SetReadDeadline(pastDeadline)
	}
}

// kickSoonLocked has the owner's read at an FPDU boundary, if it is in
// one, end within kickDelay unless data ends it first, for completions
// the writer has added. In a request and response exchange the next
// message comes first, and the owner returns them with it; a kick at
// once would cost each reply sent from another goroutine a read ended
// by a deadline (and the error value net allocates for it). The caller
// holds c.mu.
func (c *Conn) kickSoonLocked() {
	if !c.dir.reading || c.dir.kicked || c.dir.kickSoon || c.state == stateDead {
		return
	}
	c.dir.kickSoon = true
	arm(&c.kickTimer, kickDelay, c.kickLate)
}

// kickLate is kickSoonLocked's timer.
func (c *Conn) kickLate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir.kickSoon = false
	if c.q.CQ.Len() > 0 {
		c.kickDirectLocked()
	}
}

// rxEmpty reports whether nothing read from the socket is waiting to be
// parsed. The caller holds the receive role.
func (c *Conn) rxEmpty() bool { return c.br.Buffered() == 0 && len(c.cr.pend) == 0 }

// parkReader is the reader goroutine giving the receive role up until it
// is woken (resumeReaderLocked) or the connection ends. It returns with
// the role, and with the error that ended the stream, if it has ended.
func (c *Conn) parkReader() error {
	c.rxMu.Unlock()
	c.mu.Lock()
	c.dir.parked = true
	if c.dir.blocked && !c.dir.reading {
		// The owner found the role taken and waits for what this
		// goroutine delivers: it can read now.
		wq.Signal(c.q.Ready)
	}
	c.mu.Unlock()
	select {
	case <-c.rxWake:
	case <-c.done:
	}
	c.rxMu.Lock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir.parked = false
	if c.state != stateDead {
		return nil
	}
	// An owner's read may have moved the deadline endLocked set.
	c.nc.SetReadDeadline(c.endDeadline)
	if c.dir.rxErr != nil {
		return c.dir.rxErr
	}
	return errEnded
}

// Transmit implements rdma.DirectIO.
func (c *Conn) Transmit() {
	c.mu.Lock()
	ok := c.dir.open && c.dir.deferred
	c.dir.deferred = false
	c.mu.Unlock()
	if ok {
		c.transmit()
	}
}

// transmit writes what is waiting to go, on the calling goroutine, if
// the writer is idle; otherwise it makes sure the writer will.
func (c *Conn) transmit() {
	if !c.txMu.TryLock() {
		// The writer is writing; it may be past its last look at the
		// queues, on its way to park.
		wq.Signal(c.kick)
		return
	}
	if c.tx.kick > 0 {
		// The first FPDU is held back (Options.FirstSendDelay): the
		// writer's timer does that.
		c.txMu.Unlock()
		wq.Signal(c.kick)
		return
	}
	for {
		alive, delay := c.fill(c.sendFrom)
		if !alive {
			break
		}
		if c.tx.nfpdu > 0 {
			c.flush()
			continue
		}
		if delay > 0 {
			wq.Signal(c.kick)
		}
		break
	}
	c.txMu.Unlock()
}

// WaitDirect implements rdma.DirectIO. Outside a section it is Wait;
// while an RDMA Read of ours is outstanding, waitPullingLocked. Otherwise
// each turn of its loop transmits what was left to the owner and polls;
// when nothing is ready it blocks (blockLocked).
func (c *Conn) WaitDirect(ctx context.Context, cs []rdma.Completion) (int, error) {
	if len(cs) == 0 {
		return 0, fmt.Errorf("iwarp: wait: empty completion slice: %w", rdma.ErrInvalid)
	}
	c.mu.Lock()
	if !c.dir.open {
		c.mu.Unlock()
		return c.Wait(ctx, cs)
	}
	if c.q.Reads > 0 {
		return c.waitPullingLocked(ctx, cs)
	}
	if !c.wantDirect.Load() {
		c.wantDirect.Store(true)
	}
	// What is queued for the owner to transmit is flagged deferred
	// (PostSendDirect, wakeWriterLocked); anything else has woken the
	// writer. So the owner transmits only when the flag is up: a look
	// at the queues that finds nothing costs two locks.
	tx := c.dir.deferred
	if tx {
		c.dir.deferred = false
	}
	c.mu.Unlock()
	for {
		if tx {
			c.transmit()
		}
		rx := c.rxMu.TryLock()
		c.mu.Lock()
		c.dir.ownRead = false
		n := c.q.Poll(cs)
		dead, err := c.state == stateDead, c.err
		tx = c.dir.deferred
		c.dir.deferred = false
		switch {
		case n > 0:
		case dead:
			wq.Signal(c.q.Ready) // for another waiter: it ended for all
		case c.q.TakeInterrupt():
		case ctx.Err() != nil:
			err = ctx.Err()
		case c.q.Reads > 0:
			// An RDMA Read of ours was posted since this wait began (an
			// upper layer posts a call's Reads from another goroutine):
			// its Read Responses go to the reader goroutine, as at the
			// top. waitPullingLocked transmits what was left.
			if rx {
				c.rxMu.Unlock()
			}
			return c.waitPullingLocked(ctx, cs)
		case tx, !rx && c.dir.parked:
			// Posted since the owner last looked (a Read Response
			// owed for what it read, say), or the reader goroutine
			// has just given the receive role up: look again.
			c.mu.Unlock()
			if rx {
				c.rxMu.Unlock()
			}
			continue
		default:
			c.blockLocked(ctx, rx)
			continue
		}
		c.mu.Unlock()
		if rx {
			c.rxMu.Unlock()
		}
		if tx {
			c.transmit() // before the caller goes on with what it got
		}
		if n > 0 {
			return n, nil
		}
		return 0, err
	}
}

// waitPullingLocked is WaitDirect in an open section while an RDMA Read
// of ours is outstanding: its Read Responses are bulk data, which the
// reader goroutine takes in better (a 1 MiB read chunk ran slower read
// by the owner on two cores: docs/performance.md, "Direct I/O"). It gives the socket back to the
// reader goroutine, transmits what was left to the owner, and waits as
// Wait does. WaitDirect looks for Reads at its start and each time it
// has found nothing to return; one posted while the owner is already
// reading the socket is seen after the FPDU it reads, so an upper layer
// that knows Reads are coming may also wait with its section closed
// (rpcrdma does). The caller holds c.mu; it is released.
func (c *Conn) waitPullingLocked(ctx context.Context, cs []rdma.Completion) (int, error) {
	c.dir.deferred = false
	c.resumeReaderLocked()
	c.mu.Unlock()
	c.transmit()
	return c.Wait(ctx, cs)
}

// blockLocked is WaitDirect when nothing is ready: the owner reads the
// socket itself if it holds the receive role (rx; readDirect releases
// it), else waits for the reader goroutine (awaitReader). The caller holds
// c.mu; it is released.
func (c *Conn) blockLocked(ctx context.Context, rx bool) {
	c.dir.blocked = true
	boundary := rx && c.rxEmpty()
	if boundary {
		c.dir.reading = true
		c.armWaitDeadlineLocked(ctx)
	}
	c.mu.Unlock()
	if rx {
		c.readDirect(boundary)
	} else {
		c.awaitReader(ctx)
	}
}

// awaitReader is the owner's wait while the reader goroutine holds the
// receive role: it parks after the FPDU it is in, seeing wantDirect, or
// delivers completions. The owner waits for either, the end of c or of
// ctx, then looks again. The caller has set dir.blocked.
func (c *Conn) awaitReader(ctx context.Context) {
	select {
	case <-c.q.Ready:
	case <-c.done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	c.dir.blocked = false
	c.mu.Unlock()
}

// armWaitDeadlineLocked arms the read deadline for a wait at an FPDU
// boundary under ctx, if ctx can end: at most ctxPoll away, and never
// past ctx's deadline. A deadline an earlier wait armed stays while it
// comes first, so that each call's wait does not set one (each costs
// the runtime a timer update, and clearing it another): it ends this
// wait at worst early, and the caller looks at ctx and waits again.
// Reads other than these waits clear it first (dropWaitDeadline). The
// caller holds c.mu and the receive role.
func (c *Conn) armWaitDeadlineLocked(ctx context.Context) {
	if ctx.Done() == nil {
		return
	}
	d, ok := ctx.Deadline()
	if !c.rx.dl.IsZero() && (!ok || !d.Before(c.rx.dl)) {
		return
	}
	dl := time.Now().Add(ctxPoll)
	if ok && d.Before(dl) {
		dl = d
	}
	c.rx.dl = dl
	c.nc.SetReadDeadline(dl)
}

// dropWaitDeadline clears the read deadline a wait at an FPDU boundary
// left armed, before any other read from the socket: the rest of an
// FPDU, or the reader goroutine's wait, must not end at it. countReader
// calls it; the caller holds the receive role.
func (c *Conn) dropWaitDeadline() {
	if c.rx.dl.IsZero() || c.rx.waiting {
		return
	}
	c.rx.dl = time.Time{}
	c.mu.Lock()
	if c.state != stateDead {
		// Once dead, endLocked's deadline is the one that stands.
		c.nc.SetReadDeadline(time.Time{})
	}
	c.mu.Unlock()
}

// readDirect reads on the owner's goroutine, which holds the receive role
// and has set dir.blocked (and dir.reading when boundary says nothing is
// buffered: it then waits for data first). It reads one FPDU, and then
// those already buffered, up to directBatch, and gives the role back.
func (c *Conn) readDirect(boundary bool) {
	defer c.rxMu.Unlock()
	if boundary {
		c.rx.waiting = true
		b, err := c.br.Peek(4)
		c.rx.waiting = false
		c.mu.Lock()
		expired := errors.Is(err, os.ErrDeadlineExceeded)
		if (c.dir.kicked || expired) && c.state != stateDead {
			// A kick's past deadline, or ctx's that has passed: the
			// next wait arms its own.
			c.nc.SetReadDeadline(time.Time{})
			c.rx.dl = time.Time{}
		}
		c.dir.reading, c.dir.kicked, c.dir.blocked = false, false, false
		dead := c.state == stateDead
		c.dir.ownRead = err == nil
		c.mu.Unlock()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || dead {
				// A kick, ctx's time, or the end: the caller looks.
				return
			}
			c.endByStream(streamErr(b, err))
			return
		}
	} else {
		c.mu.Lock()
		c.dir.blocked, c.dir.ownRead = false, true
		c.mu.Unlock()
	}
	for i := 0; ; i++ {
		if err := c.readFPDU(); err != nil {
			c.endByStream(err)
			return
		}
		c.dirReads.Add(1)
		c.rx.yield = false // the owner writes a Read Response itself, next
		if i+1 == directBatch || c.rxEmpty() || c.nextIsReadResponse() {
			return
		}
	}
}

// nextIsReadResponse reports whether the next FPDU buffered is an RDMA
// Read Response: bulk data the owner leaves to the reader goroutine, which
// its wait hands the socket to once it sees the Read outstanding
// (WaitDirect).
func (c *Conn) nextIsReadResponse() bool {
	if c.br.Buffered() < 4 {
		return false
	}
	b, _ := c.br.Peek(4)
	return ddp.RDMAPControl(b[3]).Opcode() == ddp.OpRDMAReadResponse
}

// endByStream ends c after a read on the owner's goroutine failed with
// err, as the reader goroutine would, and leaves err for it.
func (c *Conn) endByStream(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir.rxErr = err
	c.endByStreamLocked(err)
}
