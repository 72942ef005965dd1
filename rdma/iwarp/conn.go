package iwarp

// A connection's life after the MPA handshake (handshake.go describes the
// states before it).
//
//	setup  created by Dial (after the Reply) or ConnRequest.Accept (before
//	       the Reply); ConnConfig.Prepare runs. Memory calls and posts are
//	       allowed; nothing is transmitted and nothing is read yet.
//	up     established: two goroutines run. The reader (conn_recv.go) parses
//	       every inbound FPDU, checks it and places its payload; the writer
//	       (conn_send.go) transmits the RDMA Read Responses owed, then the
//	       send queue, in order. A responder's writer sends nothing until the
//	       initiator's first FPDU has arrived (MPA fencing, RFC 5044 section
//	       7.1.2); an initiator's writer starts, after FirstSendDelay, with a
//	       zero-length RDMA Write that lifts that fence.
//	dead   ended, for good: by Close (ErrClosed here, ErrDisconnected at the
//	       peer, which reads a TCP FIN), by the peer's FIN
//	       (ErrDisconnected), a TCP error (ErrConnectionLost), or a protocol
//	       violation (TerminateError; Remote on the side that received the
//	       Terminate). Every outstanding work request is flushed into the
//	       completion queue at once. The side that detected a violation
//	       sends its Terminate (the writer, at an FPDU boundary), half-closes
//	       and lets the reader discard what still arrives for at most
//	       terminateLinger, so the peer reads the Terminate rather than a
//	       reset. The reader, last to leave, waits for the writer, closes
//	       the socket and closes readerDone, which Close waits for.
//
// A work request occupies its queue slot from Post until Poll or Wait has
// returned its completion, so the completion queue, sized for both queues,
// never overflows. Sends and RDMA Writes complete when their last FPDU has
// been handed to TCP (RFC 5040 section 5.5); RDMA Reads when their whole
// response has been placed. Completions keep posting order.
//
// Locking: c.mu guards the queues, the state and the MRs' mutable state; it
// is never held across socket I/O. c.placeMu is held by the reader while
// it writes payload into registered memory (see mem.go).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/srq"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/wq"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
)

// terminateLinger bounds how long a side that sent a Terminate keeps
// reading (and discarding) before it closes the socket.
const terminateLinger = 500 * time.Millisecond

// readBufSize is the size of the buffered reader FPDU headers are read
// through. Payloads bypass it once it is empty.
const readBufSize = 8 << 10

type connState uint8

const (
	stateSetup connState = iota
	stateUp
	stateDead
)

// outRead is an RDMA Read whose Read Request has been sent and whose
// response is not yet complete.
type outRead struct {
	seq      uint64 // of the work request
	sinkSTag uint32
	sinkTO   uint64
	size     int
}

// inRead is an inbound RDMA Read Request not yet served.
type inRead struct {
	hdr  ddp.Header      // its DDP header, for a Terminate
	rr   ddp.ReadRequest // its RDMAP header
	ulen int             // its ULPDU_Length
}

// Conn is one side of an iWARP connection; it implements rdma.Conn.
type Conn struct {
	p         *Provider
	nc        net.Conn
	raw       net.Conn     // nc before any test wrapper, for socket ioctls
	cr        *countReader // what br reads from
	br        *rxBuf
	local     net.Addr
	remote    net.Addr
	peerPD    []byte
	limits    rdma.Limits
	crc       bool
	rev       int
	mulpdu    int
	initiator bool
	log       *slog.Logger
	sendFrom  time.Time // the first FPDU goes no earlier; set by start under mu

	done       chan struct{} // closed when the state becomes dead
	kick       chan struct{} // wakes the writer; capacity 1
	readerDone chan struct{} // closed when the reader has closed the socket
	writerDone chan struct{} // closed when the writer exits
	closeOnce  sync.Once     // closes nc

	placeMu sync.Mutex // held by the reader while placing payload
	rxMu    sync.Mutex // the receive role (direct.go)
	txMu    sync.Mutex // the transmit role (direct.go)
	// wantDirect asks the reader goroutine to give the receive role up
	// at its next FPDU boundary; rxWake (capacity 1) wakes it when it
	// parked. idle takes the role back after directIdle (direct.go).
	wantDirect atomic.Bool
	rxWake     chan struct{}
	// dirReads counts the FPDUs direct owners have read (DirectReads);
	// atomic, so that counting costs no lock per FPDU.
	dirReads  atomic.Uint64
	idle      *time.Timer
	kickTimer *time.Timer // kickSoonLocked's
	// placing is the region the reader places payload into now: set under
	// mu once an FPDU has passed its checks, nil again once its payload
	// is read; placingSeveral when the destination spans several.
	placing atomic.Pointer[memreg.Region]
	rxDone  atomic.Uint64 // stream bytes of the FPDUs the reader has finished (see countReader)

	mu      sync.Mutex
	state   connState
	err     error
	started bool   // the goroutines run
	fenced  bool   // responder: the initiator's first FPDU has not arrived
	serving bool   // the writer is sending a Read Response: it counts against IRD
	term    []byte // the Terminate FPDU the writer sends before it exits
	dir     directState
	// endDeadline is the socket deadline endLocked set.
	endDeadline time.Time
	q           wq.Queues
	sqNext      uint64 // sequence of the next work request to transmit
	orq         wq.Ring[outRead]
	irq         wq.Ring[inRead]
	regs        memreg.Domain // the regions registered on c (mem.go)
	closed      bool          // Close has run (and detached c from srq)

	// srq is the shared receive queue c is attached to, or nil. srqWR is
	// the receive the Send being received took from it (the reader's),
	// srqHeld says whether one is held (guarded by mu): the reader
	// completes it, with StatusFlushed if c ends first, once it no longer
	// places into it.
	srq     *srq.Queue
	srqWR   wq.RecvWR
	srqHeld bool

	tx txState // owned by the writer
	rx rxState // owned by the reader
}

var (
	_ rdma.Conn            = (*Conn)(nil)
	_ rdma.WaitInterrupter = (*Conn)(nil)
	_ rdma.DirectIO        = (*Conn)(nil)
)

// connParams are what the handshake settled.
type connParams struct {
	nc, raw   net.Conn
	cr        *countReader
	br        *rxBuf
	mulpdu    int
	s         settings
	crc       bool
	rev       int
	initiator bool
	rtr       bool // initiator: peer-to-peer mode agreed, send the RTR first
	peerPD    []byte
}

func newConn(p *Provider, cp connParams) *Conn {
	c := &Conn{
		p:      p,
		nc:     cp.nc,
		raw:    cp.raw,
		cr:     cp.cr,
		br:     cp.br,
		local:  cp.nc.LocalAddr(),
		remote: cp.nc.RemoteAddr(),
		peerPD: cp.peerPD,
		limits: rdma.Limits{
			SendQueueDepth:     cp.s.sq,
			RecvQueueDepth:     cp.s.rq,
			IRD:                cp.s.ird,
			ORD:                cp.s.ord,
			MaxSGE:             MaxSGE,
			MaxReadSGE:         MaxSGE,
			MaxMessageSize:     MaxMessageSize,
			RemoteInvalidation: true,
		},
		crc:        cp.crc,
		rev:        cp.rev,
		mulpdu:     cp.mulpdu,
		initiator:  cp.initiator,
		log:        p.log,
		done:       make(chan struct{}),
		kick:       make(chan struct{}, 1),
		rxWake:     make(chan struct{}, 1),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
		fenced:     !cp.initiator,
		q:          wq.New(cp.s.sq, cp.s.rq),
		orq:        wq.NewRing[outRead](cp.s.ord),
		irq:        wq.NewRing[inRead](cp.s.ird),
		srq:        cp.s.srq,
	}
	c.regs = c.newDomain()
	if c.srq != nil {
		c.srq.Attach()
	}
	c.tx.rtrSent = !cp.rtr
	c.rx.init()
	c.rxDone.Store(cp.cr.n.Load() - uint64(cp.br.Buffered()+len(cp.cr.pend)))
	cp.cr.before = c.dropWaitDeadline
	if cp.cr.r == io.Reader(cp.raw) {
		// Only an unwrapped socket: readv would bypass a wrapper's Read.
		cp.cr.vr = newVecReader(cp.raw)
	}
	return c
}

// countReader counts the bytes read from the socket; with rxDone, the
// bytes of the FPDUs handled, that says nothing read was lost on the way
// (TestChunkedStream checks that they meet).
//
// On Linux the reader reads payload with readv (readFull): the rest of the
// payload into its destination and, in the same system call, whatever
// follows it on the stream (the trailer, the next FPDU's header) into a
// stash, which Read hands out before it reads the socket again.
type countReader struct {
	r    io.Reader
	n    atomic.Uint64 // bytes read from the socket, pend included
	vr   *vecReader    // nil: no vectored reads (not Linux, or a wrapped socket)
	pend []byte        // read from the socket after a payload, not yet handed out
	// before, if set, runs before each read from the socket (see
	// dropWaitDeadline).
	before func()
}

func (cr *countReader) Read(p []byte) (int, error) {
	if len(cr.pend) > 0 {
		n := copy(p, cr.pend)
		cr.pend = cr.pend[n:]
		return n, nil
	}
	if cr.before != nil {
		cr.before()
	}
	n, err := cr.r.Read(p)
	cr.n.Add(uint64(n))
	return n, err
}

// readFull fills p from the stream: first from the stash, then from the
// socket, with readv where it can, so that what follows p arrives in the
// same system call. Nothing is ever written to p beyond len(p).
func (cr *countReader) readFull(p []byte) error {
	if n := copy(p, cr.pend); n > 0 {
		cr.pend = cr.pend[n:]
		p = p[n:]
	}
	if cr.vr == nil {
		_, err := io.ReadFull(cr, p)
		return err
	}
	for len(p) > 0 {
		if cr.before != nil {
			cr.before()
		}
		n, rest, err := cr.vr.read(p)
		cr.n.Add(uint64(n + len(rest)))
		if err != nil {
			return err
		}
		p, cr.pend = p[n:], rest
	}
	return nil
}

// start moves c from setup to up and starts its goroutines.
func (c *Conn) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateSetup {
		return
	}
	c.state, c.started = stateUp, true
	notBefore := time.Now()
	if c.initiator {
		notBefore = notBefore.Add(c.p.opts.FirstSendDelay)
		c.tx.kick = c.p.opts.FirstSendDelay
	}
	c.sendFrom = notBefore
	go c.reader()
	go c.writer(notBefore)
}

func (c *Conn) LocalAddr() net.Addr     { return c.local }
func (c *Conn) RemoteAddr() net.Addr    { return c.remote }
func (c *Conn) PeerPrivateData() []byte { return c.peerPD }
func (c *Conn) Limits() rdma.Limits     { return c.limits }
func (c *Conn) Done() <-chan struct{}   { return c.done }

// CRC reports whether MPA CRC32c is in use on the connection.
func (c *Conn) CRC() bool { return c.crc }

// Revision returns the MPA revision of the connection's handshake.
func (c *Conn) Revision() int { return c.rev }

// MULPDU returns the largest ULPDU this side sends: RFC 5044 section 7.1
// applied to the path MSS.
func (c *Conn) MULPDU() int { return c.mulpdu }

// String returns e.g. "iwarp conn 127.0.0.1:4242->127.0.0.1:20049".
func (c *Conn) String() string { return fmt.Sprintf("iwarp conn %v->%v", c.local, c.remote) }

func (c *Conn) deadErr(what string) error { return fmt.Errorf("iwarp: %s: %w", what, c.err) }

// Err returns why the connection ended, or nil.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// PostRecv posts a receive.
func (c *Conn) PostRecv(id uint64, sgl []rdma.SGE) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateDead {
		return c.deadErr(fmt.Sprintf("post recv %d", id))
	}
	if c.srq != nil {
		return fmt.Errorf("iwarp: post recv %d: the connection receives from a shared receive queue: %w", id, rdma.ErrInvalid)
	}
	return c.q.CheckedPostRecv("iwarp", id, sgl, c.limits.RecvQueueDepth, c.checkSGL)
}

// PostSend posts a send-queue work request.
func (c *Conn) PostSend(wr *rdma.WorkRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.postSendLocked(wr); err != nil {
		return err
	}
	wq.Signal(c.kick)
	return nil
}

// postSendLocked checks wr and queues it on the send queue, for PostSend
// and PostSendDirect, which then say who transmits it. The caller holds
// c.mu.
func (c *Conn) postSendLocked(wr *rdma.WorkRequest) error {
	if c.state == stateDead {
		return c.deadErr(fmt.Sprintf("post %v %d", wr.Op, wr.ID))
	}
	return c.q.CheckedPostSend("iwarp", wr, c.limits.SendQueueDepth, c.limits.ORD, MaxMessageSize, c.checkSGL)
}

// Poll returns available completions.
func (c *Conn) Poll(cs []rdma.Completion) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.q.Poll(cs)
}

// Wait blocks until completions are available, ctx is done or the
// connection has ended and been drained.
func (c *Conn) Wait(ctx context.Context, cs []rdma.Completion) (int, error) {
	if len(cs) == 0 {
		return 0, fmt.Errorf("iwarp: wait: empty completion slice: %w", rdma.ErrInvalid)
	}
	if c.wantDirect.Load() {
		// The reader goroutine may be parked for direct owners (see
		// direct.go): a plain Wait needs it reading.
		c.mu.Lock()
		if !c.dir.open {
			c.resumeReaderLocked()
		}
		c.mu.Unlock()
	}
	return c.q.Wait(ctx, c.done, func() (int, bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.q.Poll(cs), c.state == stateDead, c.err
	})
}

// endLocked ends the connection with err: everything outstanding is
// flushed, Done is closed and the goroutines are told to finish. term, if
// not nil, is the Terminate FPDU the writer sends first; the goroutines
// then get terminateLinger to deliver it, else socket I/O is cut short at
// once. Nothing happens if the connection has already ended. The caller
// holds c.mu.
func (c *Conn) endLocked(err error, term []byte) {
	if c.state == stateDead {
		return
	}
	c.state, c.err, c.term = stateDead, err, term
	c.q.Flush()
	c.irq.Clear()
	c.orq.Clear()
	close(c.done)
	wq.Signal(c.kick)
	if c.idle != nil {
		c.idle.Stop()
	}
	if c.kickTimer != nil {
		c.kickTimer.Stop()
	}
	if !c.started {
		return
	}
	deadline := time.Now()
	if term != nil {
		deadline = deadline.Add(terminateLinger)
	}
	c.nc.SetDeadline(deadline)
	c.endDeadline = deadline
	if c.dir.reading {
		// A direct owner reads at an FPDU boundary (direct.go): it
		// returns now, and the reader goroutine, which takes the
		// receive role back, reads on until the deadline.
		c.nc.SetReadDeadline(pastDeadline)
	}
}

// closeSocket closes the TCP connection once.
func (c *Conn) closeSocket() {
	c.closeOnce.Do(func() { c.nc.Close() })
}

// Close ends the connection, releases its MRs and waits for its
// goroutines to exit.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.endLocked(rdma.ErrClosed, nil)
	c.regs.ReleaseAllLocked()
	started, detach := c.started, c.srq != nil && !c.closed
	c.closed = true
	c.mu.Unlock()
	if started {
		<-c.readerDone // the reader has given back the receive it held
	} else {
		c.closeSocket()
	}
	if detach {
		c.srq.Detach()
	}
	return nil
}

// InterruptWait implements rdma.WaitInterrupter.
// It also ends a direct owner's blocking read (rdma.DirectIO).
func (c *Conn) InterruptWait() {
	c.q.Interrupt()
	c.mu.Lock()
	c.kickDirectLocked()
	c.mu.Unlock()
}
