package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// A Conn is one RPC-over-RDMA connection over an rdma.Conn, in one role:
// requester (Dial) or responder (Accept). It implements rpc.Transport, so an
// rpc.Client runs over a requester Conn and an rpc.Server over a responder
// Conn exactly as they run over TCP.
//
// Goroutines. One goroutine per Conn (the loop, conn_recv.go) owns the
// completion queue: it decodes every received message, reposts its
// receive buffer, and completes send-queue work. It never blocks on the
// send queue; everything that posts sends (calls, replies) runs on the
// goroutine of Send, or on a side goroutine (goSide) for the RDMA_ERROR
// and RDMA_DONE messages, the RDMA Reads of a call's chunks, the pull of
// a read-chunk reply and the resend after ERR_VERS; timers (afterFunc)
// run their callbacks as side tasks too. Close waits for the loop, the
// side goroutines and any timer callback running, and every timer is
// stopped when the connection ends. Received messages reach the rpc layer
// one way (delivery.go), from where each becomes ready: a responder's
// loop hands a call that needs nothing it may not wait for to the pushed
// deliver function itself, which must not block either: the rpc.Server
// runs a short one there, and its reply is sent from the loop with a
// send slot and a send-queue entry reserved before the handler runs
// (ReserveReply). Side goroutines run only while they have work, so an
// idle connection has one goroutine of its own, its loop.
//
// Roles. What only a requester or only a responder keeps lives in its
// role's type, requester (requester.go, requester_recv.go, and the
// caller's side of the short path in short.go) or responder
// (responder.go, responder_recv.go, responder_send.go), and so does each
// role's half of the backward direction (backServer, backCaller); Conn
// holds what both use (the rings, the send queue, the loop, the
// lifecycle) and reaches the role through the role interface. Only the
// two methods that implement an rpc interface for one role alone ask
// which role it is: SendDeliver (a requester's) and ReserveReply (a
// responder's).
//
// Locks. Mutexes guard only small tables, and all but two are leaves,
// never held while another is taken: Conn's opsMu, errMu and sideMu,
// requester.mu, a responder's idleMu (bounds.go), backServer.mu,
// backCaller.mu, the shared pool's mu and the credit windows' own. The
// delivery's mu is held while the rpc layer's deliver function runs,
// which may call Send or CancelCall and so take responder.mu or the
// leaves; responder.mu is held while a grant is raised or lowered, which
// takes the shared pool's mu (pool.go). So the order is the delivery's
// mu, then responder.mu, then any one leaf.
//
// Buffers. Receives land in one provider-allocated region of equal slots,
// one per posted receive; each Send is built in a slot of a second region.
// Chunks register the caller's memory directly (rdma.Conn.Register), so
// DDP-eligible data is never copied: arguments are read from the caller's
// buffers by the responder, results are written into the caller's
// ResultBufs.
type Conn struct {
	// Set before the loop starts (newConn, setup, start), read-only
	// after.
	cfg Config
	rc  rdma.Conn
	dio rdma.DirectIO // rc, if its provider offers direct I/O (conn_turn.go)
	// dirOpen says the goroutine with the turn has a direct section
	// open; only that goroutine uses it (conn_turn.go). pullSoon says a
	// message has arrived whose read chunks are about to be pulled: set
	// where messages are handled (the turn's goroutine, or a shared
	// pool's dispatcher), taken by waitTurn.
	dirOpen   bool
	pullSoon  atomic.Bool
	batch     atomic.Int32 // completions in the batch being processed by the turn holder; read by whoever sends a reply
	log       *slog.Logger
	lim       wire.Limits
	versions  []wire.Version // supported, ascending
	negV      [3]negotiated  // negV[v]: what the private data settle for version v
	recvMR    rdma.MR
	recvSlots int
	recvSize  int
	sendMR    rdma.MR
	sendSize  int
	role      role       // req or resp
	req       *requester // nil on a responder
	resp      *responder // nil on a requester

	// Owned by the loop: a receive slot's scatter list, reused when the
	// loop reposts it.
	recvSGEs [][1]rdma.SGE

	// Owned by whichever goroutine runs handleRecv (the loop, or the
	// shared pool's dispatcher; one at a time for a connection): the
	// message being dispatched. It lives here, not on handleRecv's stack,
	// because a pointer to it goes through the role interface, which
	// would make a local escape: one allocation per message.
	recvIn inbound

	// Tokens: whoever holds a token owns what it names.
	sendFree  *tokenStack   // free slots of sendMR; a slot is free once its Send has completed
	sends     []sendSlot    // per send slot, owned by the holder of its sendFree token
	sqFree    *tokenStack   // free send-queue entries
	readSlots chan struct{} // one token per RDMA Read we may have outstanding (ORD)

	// Send-queue work in flight, by entry: a work request's ID is the
	// entry its poster took from sqFree. post registers the completion
	// callback; the loop (onSendQueue) or, once the connection has ended,
	// failOps runs it and clears it.
	opsMu   sync.Mutex
	ops     []func(rdma.Completion) // by entry; nil while the entry is not posted
	opsN    int                     // entries posted and not completed
	opsIdle chan struct{}           // closed when opsN falls to zero, for drain; nil when no one waits

	// deliv is how received messages reach the rpc layer, for either
	// role (delivery.go).
	deliv delivery

	// Lifecycle: fail ends the connection once (closeOnce); err is why.
	closeOnce sync.Once
	done      chan struct{}   // closed when the connection ends
	ctx       context.Context // the connection's: cancelled when it ends
	cancel    context.CancelFunc
	loopDone  chan struct{} // closed when the loop has returned
	errMu     sync.Mutex
	err       error

	// Side goroutines (goSide) and timers (afterFunc): the sends, reads
	// and checks the loop must not wait for. Close waits for them.
	sideMu     sync.Mutex
	sideClosed bool // set by Close once the loop has ended: no more side goroutines
	side       sync.WaitGroup
	timers     atomic.Int32 // timers armed by afterFunc, neither stopped nor fired

	stats counters // atomic, updated by whoever sees the event

	short shortPath // a requester's turn: the loop's, or a caller's (conn_turn.go)

	// The Listener that accepted the connection, nil on a dialed one:
	// the memory registered here counts there too (addRegistered,
	// conn_send.go), and so do the limits that act here (bounds.go).
	ln *Listener
	// A responder's request, for its addresses before rc is set, and
	// whether StateClosed has been reported (connstate.go).
	creq        rdma.ConnRequest
	stateClosed atomic.Bool
}

// role is what a requester and a responder each do for their Conn: with
// the messages the loop receives, with Send, and when the connection
// ends (requester.go, responder.go).
type role interface {
	// onMessage handles a received message on the loop; derr is why its
	// transport header did not decode, raw its first bytes then.
	onMessage(in *inbound, derr error, raw []byte)
	// sendRPC is Conn.Send: a requester sends a call, a responder the
	// reply to a call it received.
	sendRPC(ctx context.Context, m *rpc.Msg) error
	// ending runs once the connection has ended, before the rdma.Conn
	// is closed; closeAll releases what the role holds, after.
	ending()
	closeAll(err error)
	// outstanding returns how many calls are outstanding (requester)
	// or received and unanswered (responder).
	outstanding() int
	// takePeak returns the most calls outstanding at once since the
	// last takePeak (requester), or 0 (responder).
	takePeak() int
	// version returns the version in use (requester) or the highest
	// one served (responder).
	version() wire.Version
	// granted returns the credit grant: the one last received
	// (requester) or the one offered (responder).
	granted() uint32
	// invalidates reports whether Send With Invalidate is used, given
	// what the private data settle for the version in use.
	invalidates(n *negotiated) bool
	// cancel abandons the outstanding call xid (CancelCall); a
	// responder has none.
	cancel(xid uint32)
	// backchannel returns the Backchannel whose half the role owns
	// (RFC 8167), or nil.
	backchannel() *Backchannel
}

// sendSlot is the reusable state of one send buffer: providers do not
// keep a work request after PostSend returns, so each slot's is built
// once.
type sendSlot struct {
	wr     rdma.WorkRequest
	sge    [1]rdma.SGE
	wait   bool       // the poster waits on result
	result chan error // capacity 1
	done   func(rdma.Completion)
}

// inbound is one received message handed from the loop to Recv.
type inbound struct {
	hdr     wire.Header
	payload []byte   // the RPC message after the transport header
	writes  [][]byte // requester: the call's write-chunk buffers
	err     error    // requester: a per-call failure
	im      *inMsg   // responder: the call's pooled state, payload copied in
	// borrowed: payload aliases the receive buffer, which is reposted
	// when the role's onMessage returns; it copies what it passes on.
	borrowed bool
}

// clone returns a copy of b, nil if b is empty: how either role keeps
// what it passes on of a borrowed payload.
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// The loop takes completions from the provider firstBatch at a time until
// the provider fills a batch, then fullBatch at a time: a connection that
// stays idle keeps a small batch (a Completion is about a hundred bytes),
// one that is busy takes more per Wait.
const (
	firstBatch = 4
	fullBatch  = 32
)

// growBatch returns the loop's batch for its next Wait: cs, or a
// fullBatch one once n, what the last Wait returned, filled cs.
func growBatch(cs []rdma.Completion, n int) []rdma.Completion {
	if n < len(cs) || len(cs) >= fullBatch {
		return cs
	}
	return make([]rdma.Completion, fullBatch)
}

// Info describes what a connection negotiated.
type Info struct {
	Version            wire.Version // version in use: a requester's, or that of the last call a responder received (before any, the highest it serves)
	PeerPrivateData    bool         // the peer sent RFC 8797 private data
	SendInline         int          // largest Send this side posts
	RecvInline         int          // this side's receive buffer size
	RemoteInvalidation bool         // Send With Invalidate is used on this connection
	Credits            uint32       // requester: current grant; responder: grant offered
	Local, Remote      net.Addr
}

// Info returns what the connection negotiated so far. For a requester the
// version and credits settle with the first reply.
func (c *Conn) Info() Info {
	v := c.role.version()
	n := c.negV[v]
	local, remote := c.addrs()
	return Info{
		Version:            v,
		PeerPrivateData:    n.peerPD,
		SendInline:         n.sendLimit,
		RecvInline:         n.recvLimit,
		RemoteInvalidation: c.role.invalidates(&n),
		Credits:            c.role.granted(),
		Local:              local,
		Remote:             remote,
	}
}

// CancelCall implements rpc.CallCanceler. On a requester it invalidates
// the call's registrations at once; the call keeps its credit until the
// reply arrives, which is then dropped, and if it has not arrived within
// Config.AbandonTimeout, the connection ends. On a responder it does
// nothing.
func (c *Conn) CancelCall(xid uint32) { c.role.cancel(xid) }

// TakePeakInFlight returns the most calls a requester had sent and not
// yet seen answered at once, since the connection opened or since the
// last TakePeakInFlight, and starts a new period: how much of the credit
// grant a workload used, which a sampled StatsSnapshot.CallsPending can
// miss between samples. On a responder it returns 0.
func (c *Conn) TakePeakInFlight() int { return c.role.takePeak() }

// RDMA returns the underlying RDMA connection, for its limits and address.
func (c *Conn) RDMA() rdma.Conn { return c.rc }

// RemoteAddr returns the peer's address. An rpc.Server's reply cache uses
// it to tell clients apart.
func (c *Conn) RemoteAddr() net.Addr {
	_, remote := c.addrs()
	return remote
}

// sharedSendSlots is how many send buffers a connection receiving from a
// shared pool registers.
const sharedSendSlots = 2

// shared reports whether c receives from its Listener's pool.
func (c *Conn) shared() bool { return c.ln != nil && c.ln.pool != nil }

// setup allocates the buffer rings and posts every receive. It runs from
// rdma.ConnConfig.Prepare, before the peer may send.
func (c *Conn) setup(rc rdma.Conn, recvSlots int) error {
	c.rc = rc
	c.dio, _ = rc.(rdma.DirectIO)
	peer := rc.PeerPrivateData()
	// Settled before any message can arrive: with a shared pool, the
	// dispatcher may hand one over before start.
	for _, v := range []wire.Version{wire.Version1, wire.Version2} {
		c.negV[v] = negotiate(&c.cfg, peer, v)
	}
	lim := rc.Limits()
	c.recvSize = c.cfg.inlineRecv()
	var err error
	if c.shared() {
		// The Listener's pool receives for every connection
		// (pool.go); recvSlots bounds what may be in flight.
		c.recvSlots = recvSlots
	} else {
		c.recvSlots = min(recvSlots, lim.RecvQueueDepth)
		c.recvSGEs = make([][1]rdma.SGE, c.recvSlots)
		c.recvMR, err = rc.Alloc(c.recvSlots*c.recvSize, rdma.AccessLocalWrite)
		if err != nil {
			return fmt.Errorf("rpcrdma: allocating %d receive buffers: %w", c.recvSlots, err)
		}
		c.addRegistered(int64(c.recvSlots * c.recvSize))
		for i := 0; i < c.recvSlots; i++ {
			if err := c.postRecv(i); err != nil {
				return err
			}
		}
	}
	// Send slots: enough for every credit plus error replies, bounded by
	// the send queue, which Writes and Reads share; with a shared pool,
	// a few, so that an idle connection registers little (a reply waits
	// for a slot whose Send has completed).
	sq := lim.SendQueueDepth
	nsend := max(min(c.recvSlots+2, sq/2), 1)
	if c.shared() {
		nsend = min(nsend, sharedSendSlots)
	}
	c.sendSize = c.cfg.inlineSend()
	c.sendMR, err = rc.Alloc(nsend*c.sendSize, 0)
	if err != nil {
		return fmt.Errorf("rpcrdma: allocating %d send buffers: %w", nsend, err)
	}
	c.addRegistered(int64(nsend * c.sendSize))
	c.sendFree = newTokenStack(nsend)
	c.sends = make([]sendSlot, nsend)
	for i := 0; i < nsend; i++ {
		s := &c.sends[i]
		s.result = make(chan error, 1)
		// A waiting poster frees the slot once it has the result; else
		// the completion frees it.
		s.done = func(comp rdma.Completion) {
			if s.wait {
				s.result <- c.compErr(comp, "Send")
			} else {
				c.sendFree.put(i)
			}
		}
	}
	c.sqFree = newTokenStack(sq)
	c.ops = make([]func(rdma.Completion), sq)
	ord := max(lim.ORD, 1)
	c.readSlots = make(chan struct{}, ord)
	for i := 0; i < ord; i++ {
		c.readSlots <- struct{}{}
	}
	c.deliv.init(c.recvSlots + 1)
	return nil
}

// newConn returns a Conn with cfg that supports the versions cfg names,
// else the role's defaults defVers.
func newConn(cfg Config, defVers ...wire.Version) *Conn {
	c := &Conn{
		cfg:      cfg,
		log:      cfg.logger(),
		lim:      cfg.Limits,
		versions: sortVersions(cfg.versions(defVers...)),
		done:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

func sortVersions(vs []wire.Version) []wire.Version {
	out := make([]wire.Version, 0, 2)
	for _, v := range []wire.Version{wire.Version1, wire.Version2} {
		for _, w := range vs {
			if w == v {
				out = append(out, v)
				break
			}
		}
	}
	if len(out) == 0 {
		out = append(out, wire.Version1)
	}
	return out
}

func (c *Conn) supports(v wire.Version) bool {
	for _, w := range c.versions {
		if w == v {
			return true
		}
	}
	return false
}

// recvBuf returns receive slot i.
func (c *Conn) recvBuf(i int) []byte {
	return c.recvMR.Bytes()[i*c.recvSize : (i+1)*c.recvSize]
}

func (c *Conn) postRecv(i int) error {
	sgl := c.recvSGEs[i][:]
	sgl[0] = rdma.SGE{MR: c.recvMR, Offset: i * c.recvSize, Length: c.recvSize}
	err := c.rc.PostRecv(uint64(i), sgl)
	if err != nil {
		return fmt.Errorf("rpcrdma: posting receive %d: %w", i, err)
	}
	return nil
}

// fail ends the connection with err (the first error wins).
func (c *Conn) fail(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = c.connErr(err)
	}
	c.errMu.Unlock()
	c.closeOnce.Do(func() {
		close(c.done)
		c.cancel()
		if c.role != nil {
			c.role.ending()
		}
		c.rc.Close()
		if c.role != nil {
			c.role.closeAll(c.Err())
		}
	})
}

func (c *Conn) connErr(err error) error {
	var ce *ConnError
	if errors.As(err, &ce) {
		return err
	}
	return &ConnError{Op: "connection", Err: err}
}

// Err returns nil while the connection is up, then why it ended, as a
// *ConnError (which matches net.ErrClosed).
func (c *Conn) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// closeDrain bounds how long Close waits for posted work to complete.
const closeDrain = time.Second

// drain waits, for up to d, until no send-queue work is outstanding or
// the connection has ended.
func (c *Conn) drain(d time.Duration) {
	c.opsMu.Lock()
	if c.opsN == 0 {
		c.opsMu.Unlock()
		return
	}
	if c.opsIdle == nil {
		c.opsIdle = make(chan struct{})
	}
	idle := c.opsIdle
	c.opsMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
	case <-c.done:
	case <-t.C:
	}
}

// Done is closed when the connection ends.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close ends the connection. Messages already posted (a reply the
// rpc.Server has sent, say) go out first, for up to closeDrain. Calls
// outstanding on a requester then fail with a connection error; Recv
// returns. It waits for the loop and every side goroutine to exit and is
// idempotent. On a Listener's connection it then reports StateClosed to
// Config.ConnState, once.
func (c *Conn) Close() error {
	c.drain(closeDrain)
	c.fail(rdma.ErrClosed)
	<-c.loopDone
	c.sideMu.Lock()
	c.sideClosed = true
	c.sideMu.Unlock()
	c.side.Wait()
	c.deliv.release() // what was handed over and no Recv will take
	c.reportClosed()
	return nil
}

// goSide runs f on a goroutine of its own that Close waits for: work the
// loop must not wait for (sending RDMA_ERROR or RDMA_DONE, pulling a
// read-chunk reply, resending a call after ERR_VERS, preparing a call
// that waits for a share of the budgets or has chunks to pull). f must return soon once the
// connection has ended; its sends and reads take c.ctx. It reports false,
// without running f, once Close has stopped waiting for new ones, which
// happens only after the loop has ended: so the loop can count on f
// running.
//
// goSide and afterFunc are the connection's only ways to run code on
// another goroutine besides the loop: every side send (RDMA_ERROR,
// RDMA_DONE, a resend) goes through one of them, so Close, by waiting for
// c.side, waits for all of it. They are not one control queue that a
// single writer drains, as in grpc's transport, because the sends they
// make do not need ordering among themselves: each is a whole message
// that takes a send slot and a credit of its own (conn_send.go), so a
// queue would add a hand-off without removing a race. What they need is
// an owner that bounds and waits for them: the loop starts them, one per
// received message at most, so they are bounded by the receive credits,
// and Close waits for each.
func (c *Conn) goSide(f func()) bool {
	if !c.enterSide() {
		return false
	}
	go func() {
		defer c.side.Done()
		f()
	}()
	return true
}

// enterSide counts one more side task for Close to wait for, unless Close
// has stopped waiting; the caller calls c.side.Done when the task ends.
func (c *Conn) enterSide() bool {
	c.sideMu.Lock()
	defer c.sideMu.Unlock()
	if c.sideClosed {
		return false
	}
	c.side.Add(1)
	return true
}

// afterFunc arms a timer that runs f after d as a side task: f does not
// run once Close has stopped waiting for side tasks, and Close waits for
// an f already running, so f never runs on a closed connection's freed
// state. Whoever arms one stops it with stopTimer when what it guards is
// over, and each owner does so when the connection ends (stopWatch,
// pulling.put, the roles' closeAll), so none outlives Close (c.timers
// counts those still armed, for the tests).
func (c *Conn) afterFunc(d time.Duration, f func()) *time.Timer {
	c.timers.Add(1)
	return time.AfterFunc(d, func() {
		c.timers.Add(-1)
		if !c.enterSide() {
			return
		}
		defer c.side.Done()
		f()
	})
}

// stopTimer stops t, from afterFunc; t may be nil.
func (c *Conn) stopTimer(t *time.Timer) {
	if t != nil && t.Stop() {
		c.timers.Add(-1)
	}
}

// resetTimer arms t, from afterFunc, again for d.
func (c *Conn) resetTimer(t *time.Timer, d time.Duration) {
	c.timers.Add(1)
	if t.Reset(d) {
		c.timers.Add(-1) // it was still armed
	}
}

// sideSendTimeout bounds a side goroutine's Send: an RDMA_ERROR or
// RDMA_DONE waits for a send slot at most this long.
const sideSendTimeout = 10 * time.Second
