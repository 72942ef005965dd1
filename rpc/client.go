package rpc

// A Client multiplexes calls over one Transport at a time, its link. Each
// call gets a fresh xid and an entry in the pending-call table before it is
// sent; one reader goroutine (or the transport itself, for a Pusher)
// receives every message of a link, takes the pending entry of the reply's
// xid out of the table and hands the message to the waiting caller, which
// decodes the reply header itself. Whoever removes an entry from the table
// (the reader with a reply, the caller giving up, or the failure path with
// a connection error) is the only one to complete it, so each call ends
// exactly once.
//
// A Client from NewClient has one link: after it fails, or the Client is
// closed, the table is emptied with a *ConnError and new calls fail with
// the same error. A Client from DialClient replaces a failed link
// (reconnect.go): the link's lost channel is closed, every caller waiting
// on it sends its call again, with the same xid, on the next link, and a
// reconnecting goroutine dials that link, waiting longer after each failed
// dial. Only the caller sends its call, so its memory is never read by two
// transports at once, and a caller that gives up tells the one transport
// it last sent on (CallCanceler).

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/internal/reuse"
	"github.com/go-rpcrdma/rpcrdma/internal/xidmap"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Request is one call to make: the procedure, the authentication, the
// arguments, and hints for transports that place results directly.
type Request struct {
	Prog, Vers, Proc uint32
	Cred, Verf       OpaqueAuth // the zero value is AUTH_NONE
	// Args are the procedure's arguments. Their memory must stay unchanged
	// until Call returns.
	Args Body
	// ResultBufs and MaxReply are passed to the transport in the Msg (see
	// Msg). Results placed into ResultBufs appear as held-apart items of
	// Reply.Results whose Data aliases them; decode them with
	// BodyDecoder.DDPOpaqueInto to find them in the buffers whichever
	// transport carried them.
	ResultBufs [][]byte
	MaxReply   int
	// ReplyBuf, if not nil, is memory the transport may put the reply in
	// (see Msg.ReplyBuf); Reply.Results may then alias it. A caller that
	// reuses one buffer, large enough for its replies, lets RPC-over-RDMA
	// make inline calls, and calls whose reply comes in a reply chunk
	// (MaxReply), without allocating for the reply. Until Call returns the
	// transport may write to it.
	ReplyBuf []byte
}

// Reply is the successful outcome of a call.
type Reply struct {
	XID  uint32
	Verf OpaqueAuth // the server's verifier
	// Results is the reply message after the reply header, with item
	// offsets relative to it. It aliases the received message (and
	// possibly the Request's ResultBufs) and belongs to the caller.
	Results Body
}

// ClientStats counts the messages a Client dropped or could not use, and
// how it replaced lost connections.
type ClientStats struct {
	UnknownXID uint64 // replies matching no pending call (late, duplicate or bogus), dropped
	NotReply   uint64 // messages whose msg_type is not REPLY, dropped
	Short      uint64 // messages too short for an xid and msg_type, dropped
	BadReply   uint64 // replies whose header failed to decode (the call failed with *BadReplyError)
	Abandoned  uint64 // calls given up because their context ended

	// For a Client from DialClient:
	Reconnects  uint64 // connections made after the first
	DialErrors  uint64 // dials that failed
	Retransmits uint64 // calls sent again on a new connection
	Timeouts    uint64 // connections ended by ReconnectConfig.ReplyTimeout
	IdleCloses  uint64 // connections closed by ReconnectConfig.IdleTimeout

	// ShortPath counts the calls whose reply the caller received itself
	// (a DirectPusher transport, one call in flight;
	// see the package documentation).
	ShortPath uint64
}

type clientCounters struct {
	unknownXID, notReply, short, badReply, abandoned atomic.Uint64
	reconnects, dialErrors, retransmits, timeouts,
	idleCloses, shortPath atomic.Uint64
}

// Client makes calls over a Transport. It is safe for concurrent use; any
// number of calls may be in flight, and replies may arrive in any order.
type Client struct {
	re *reconnector // nil for a Client from NewClient

	mu      sync.Mutex
	pending xidmap.Map[*pendingCall]
	xid     uint32
	err     error         // set once: the error every later call gets
	dead    chan struct{} // closed when err is set
	cur     *link         // nil while a DialClient Client reconnects
	ready   chan struct{} // closed when cur is set again
	started uint64        // calls begun
	want    chan struct{} // DialClient: a call is waiting for a connection

	// calls recycles this Client's pendingCall values: a call's is
	// unreachable once Call returns (its xid has left the table, and
	// the transport is done with its memory: the reply came, or
	// CancelCall was called). The pool is the Client's, not the
	// package's: a pendingCall's channel belongs to the testing/synctest
	// bubble that made it, and a Client made in one bubble is used only
	// there.
	calls sync.Pool                // *pendingCall
	spare reuse.Spare[pendingCall] // in front of calls

	stats clientCounters
}

// link is one transport a Client has used.
type link struct {
	t        Transport
	canceler CallCanceler // t as a CallCanceler, or nil
	// lost is closed once t has failed and a DialClient Client has
	// stopped using it. It is nil on a Client from NewClient, whose
	// failure completes the pending calls instead, so that a call's wait
	// selects on two channels, not three.
	lost     chan struct{}
	lostErr  error         // why: the transport's error, set before lost is closed
	recvDone chan struct{} // closed once t's last message was delivered and its reader has exited
	received atomic.Uint64 // messages delivered (DialClient only)

	push Pusher // t, or t adapted (recvPusher): what delivers t's messages
	// direct is t as a DirectPusher, or nil: a caller runs t's delivery
	// until its reply is delivered (the short path, see doc.go).
	direct DirectPusher
}

func newLink(t Transport, reconnecting bool) *link {
	l := &link{t: t, recvDone: make(chan struct{})}
	if reconnecting {
		l.lost = make(chan struct{})
	}
	l.canceler, _ = t.(CallCanceler)
	l.push = asPusher(t)
	l.direct, _ = t.(DirectPusher)
	return l
}

type pendingCall struct {
	done    chan callResult      // buffered: the completer never blocks
	arrived func() bool          // reports whether done holds the outcome; bound once, for DirectPusher
	msg     Msg                  // the call as sent
	buf     []byte               // backing for msg.XDR, kept across uses
	items   []DDPItem            // backing for msg.Items, kept across uses
	on      *link                // the link the call was last sent on; c.mu
	scratch *[nullReplySize]byte // Null's reply buffer, made on first use
	state   atomic.Int32         // outcomeNone, outcomeHeld or outcomeWait
	res     callResult           // the outcome, when outcomeHeld
}

type callResult struct {
	msg *Msg
	err error
}

// A call's outcome goes to its caller through pc.res when the caller is
// not waiting for it yet, as on the short path, where the caller's own
// goroutine delivers it: an atomic compare-and-swap each way, where a
// send and a receive on done cost some 400 instructions (cachegrind, a
// NULL round trip). A caller that is to wait commits to done first, and
// the outcome then goes there.
const (
	outcomeNone = iota // not come, and the caller does not wait on done
	outcomeHeld        // in pc.res
	outcomeWait        // the caller waits on done: it goes there
)

// complete hands pc its outcome r. It is called once per call, by
// whoever took the call out of the pending table.
func (pc *pendingCall) complete(r callResult) {
	if pc.state.Load() == outcomeNone {
		pc.res = r
		if pc.state.CompareAndSwap(outcomeNone, outcomeHeld) {
			return
		}
		pc.res = callResult{}
	}
	pc.done <- r
}

// take returns pc's outcome if it has come, without committing the caller
// to wait on done.
func (pc *pendingCall) take() (callResult, bool) {
	switch pc.state.Load() {
	case outcomeHeld:
		return pc.res, true
	case outcomeWait:
		select {
		case r := <-pc.done:
			return r, true
		default:
		}
	}
	return callResult{}, false
}

// commit returns pc's outcome if it is held in pc.res; otherwise it
// commits the caller to wait for it on done, where it may already be,
// and reports false.
func (pc *pendingCall) commit() (callResult, bool) {
	if pc.state.Load() == outcomeNone && pc.state.CompareAndSwap(outcomeNone, outcomeWait) {
		return callResult{}, false
	}
	if pc.state.Load() == outcomeHeld {
		return pc.res, true
	}
	return callResult{}, false
}

// wait returns pc's outcome, waiting for it.
func (pc *pendingCall) wait() callResult {
	if r, ok := pc.commit(); ok {
		return r
	}
	return <-pc.done
}

// NewClient returns a Client making calls over t, and starts the goroutine
// that receives t's messages (or, if t is a Pusher, has t deliver them);
// Close stops it. The Client owns t from then on. If t implements
// CallCanceler, abandoned calls are reported to it. When t fails, the
// Client fails with it; DialClient makes a Client that reconnects.
func NewClient(t Transport) *Client {
	c := newClient()
	c.start(newLink(t, false))
	return c
}

func newClient() *Client {
	c := &Client{
		xid:   rand.Uint32(),
		dead:  make(chan struct{}),
		ready: make(chan struct{}),
	}
	c.calls.New = newPendingCall
	return c
}

// newPendingCall returns a new *pendingCall, for the pool of a Client.
func newPendingCall() any {
	pc := &pendingCall{done: make(chan callResult, 1)}
	pc.arrived = func() bool { return pc.state.Load() == outcomeHeld || len(pc.done) > 0 }
	return pc
}

// start makes l the current link and starts receiving from it. It
// reports false, having closed l's transport, if the Client has failed
// or been closed meanwhile.
func (c *Client) start(l *link) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		l.t.Close()
		close(l.recvDone)
		return false
	}
	c.cur = l
	close(c.ready)
	c.mu.Unlock()
	l.push.Push(func(m *Msg, err error) bool { return c.deliver(l, m, err) })
	return true
}

// Call makes one call and waits for its reply.
//
// On success it returns the reply's verifier and results. Errors:
//   - ctx's error, if ctx ends first; the call is abandoned (a late reply is
//     dropped) and the transport is told (CallCanceler);
//   - *AcceptError or *RejectError, if the server did not run the call
//     successfully; *BadReplyError, if the reply was malformed;
//   - *ConnError (matching net.ErrClosed), if the Client is closed or the
//     transport failed; the Client is then unusable. A Client from
//     DialClient instead sends the call again on its next connection,
//     and fails it only when it gives up reconnecting or is closed, or,
//     with ReconnectConfig.FailPending, when the connection the call was
//     sent on is lost;
//   - other errors from the transport refusing this message, or for a
//     credential or verifier body over MaxAuthBytes.
//
// The call's memory (req.Args, req.ResultBufs) may be used by the transport
// until Call returns.
func (c *Client) Call(ctx context.Context, req *Request) (Reply, error) {
	return c.call(ctx, req, false)
}

// call is Call; with scratch, the reply goes in the call's own scratch
// buffer instead of req.ReplyBuf (Null, which drops the results). It
// sends the call, again on each new link of a DialClient Client, until
// its outcome comes or the call is given up.
func (c *Client) call(ctx context.Context, req *Request, scratch bool) (Reply, error) {
	if len(req.Cred.Body) > MaxAuthBytes || len(req.Verf.Body) > MaxAuthBytes {
		return Reply{}, errors.New("rpc: credential or verifier body over 400 bytes")
	}
	if err := ctx.Err(); err != nil {
		return Reply{}, err
	}
	pc := c.spare.Get(&c.calls)
	defer c.putCall(pc)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return Reply{}, err
	}
	xid := c.nextXID()
	c.pending.Put(xid, pc)
	c.started++
	l := c.cur
	pc.on = l
	c.mu.Unlock()

	id := pc.encode(xid, req, scratch)
	m := &pc.msg
	var err error
	for sends := 0; ; sends++ {
		if l == nil {
			if l, err = c.link(ctx, xid, pc); err != nil {
				return c.giveUp(ctx, xid, pc, id, err)
			}
		}
		if sends > 0 {
			c.stats.retransmits.Add(1)
		}
		short := false
		if l.direct != nil {
			short, err = l.direct.SendDeliver(ctx, m, pc.arrived)
		} else {
			err = l.t.Send(ctx, m)
		}
		if err != nil {
			again, r, err := c.sendFailed(ctx, l, xid, pc, id, err)
			if !again {
				return r, err
			}
			l = nil
			continue
		}

		if short {
			// The short path: the reply was delivered on this
			// goroutine, into pc.res.
			c.stats.shortPath.Add(1)
			if r, ok := pc.take(); ok {
				return c.finish(id, r)
			}
		}
		if r, ok := pc.commit(); ok {
			return c.finish(id, r)
		}
		select {
		case r := <-pc.done:
			return c.finish(id, r)
		case <-ctx.Done():
			return c.giveUp(ctx, xid, pc, id, ctx.Err())
		case <-l.lost:
			// Send it again on the next link, unless the reply or an
			// error got here first.
			l = nil
		}
	}
}

// putCall gives pc back to c's pool once its call has returned.
func (c *Client) putCall(pc *pendingCall) {
	pc.msg = Msg{}
	pc.on = nil
	pc.state.Store(outcomeNone)
	pc.res = callResult{}
	clear(pc.items) // drop the references to the caller's memory
	if cap(pc.buf) > 64<<10 {
		pc.buf = nil // do not hold on to a large long call
	}
	c.spare.Put(pc, &c.calls)
}

// encode builds the call message for req with xid in pc.msg, in pc's
// buffers, and returns the call's identity for errors.
func (pc *pendingCall) encode(xid uint32, req *Request, scratch bool) CallID {
	h := CallHeader{
		XID: xid, RPCVers: RPCVersion,
		Prog: req.Prog, Vers: req.Vers, Proc: req.Proc,
		Cred: req.Cred, Verf: req.Verf,
	}
	m := &pc.msg
	*m = Msg{ResultBufs: req.ResultBufs, MaxReply: req.MaxReply, ReplyBuf: req.ReplyBuf}
	if scratch {
		if pc.scratch == nil {
			pc.scratch = new([nullReplySize]byte)
		}
		m.ReplyBuf = pc.scratch[:0]
	}
	hlen := h.EncodedLen()
	m.XDR = h.Append(pc.buf[:0])
	m.XDR = append(m.XDR, req.Args.XDR...)
	pc.buf = m.XDR
	if len(req.Args.Items) > 0 {
		m.Items = pc.items[:0]
		for _, it := range req.Args.Items {
			m.Items = append(m.Items, DDPItem{Offset: it.Offset + hlen, Data: it.Data})
		}
		pc.items = m.Items
	}
	return h.ID()
}

// sendFailed handles a call whose Send on l failed with err. It reports
// again when the call is to be sent on the next link (a DialClient Client
// whose link closed, once the Client has stopped using l); otherwise it
// returns the call's outcome: the reply or error that completed it
// meanwhile, ctx's error, a *ConnError, or err.
func (c *Client) sendFailed(ctx context.Context, l *link, xid uint32, pc *pendingCall, id CallID, err error) (again bool, r Reply, _ error) {
	closed := errors.Is(err, net.ErrClosed)
	if closed {
		// The link failed under the Send: make sure its receiving
		// side hears (a stream's reader may be parked).
		l.t.Close()
	}
	if ctx.Err() == nil && c.re != nil && closed {
		// Wait for the next link.
		if !c.waitLost(ctx, l) {
			r, err = c.giveUp(ctx, xid, pc, id, ctx.Err())
			return false, r, err
		}
		return true, Reply{}, nil
	}
	if !c.forget(xid) {
		// A connection error (or, for a call sent before, its reply)
		// completed the call meanwhile.
		r, err = c.finish(id, pc.wait())
		return false, r, err
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, Reply{}, ctxErr
	}
	if closed {
		return false, Reply{}, connError(err)
	}
	return false, Reply{}, err
}

// link returns the link to send pc on, waiting for one while the Client
// reconnects, and records it as the call's. It returns ctx's error, or
// the Client's once it has failed or been closed.
func (c *Client) link(ctx context.Context, xid uint32, pc *pendingCall) (*link, error) {
	for {
		c.mu.Lock()
		l, ready, err := c.cur, c.ready, c.err
		if !c.pendingIs(xid, pc) {
			// Completed (FailPending, or the Client failing) while
			// it was between links.
			c.mu.Unlock()
			return nil, errCompleted
		}
		if l != nil {
			pc.on = l
		}
		c.mu.Unlock()
		switch {
		case err != nil:
			return nil, err
		case l != nil:
			return l, nil
		}
		if c.want != nil {
			select {
			case c.want <- struct{}{}: // after an idle close, dial again
			default:
			}
		}
		select {
		case <-ready:
		case <-c.dead:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// errCompleted tells giveUp that the call's outcome is in its done
// channel.
var errCompleted = errors.New("rpc: call completed")

// waitLost waits until the Client has stopped using l (or failed), and
// reports false if ctx ended first.
func (c *Client) waitLost(ctx context.Context, l *link) bool {
	select {
	case <-l.lost:
	case <-c.dead:
	case <-ctx.Done():
		return false
	}
	return true
}

// giveUp ends a call that is not to be sent (again): err is ctx's error,
// the Client's, or errCompleted. If the call is still pending it is
// abandoned, and the link it was last sent on is told; otherwise its
// outcome is already on its way and is used.
func (c *Client) giveUp(ctx context.Context, xid uint32, pc *pendingCall, id CallID, err error) (Reply, error) {
	c.mu.Lock()
	cur, _ := c.pending.Take(xid)
	mine := cur == pc
	on := pc.on
	c.mu.Unlock()
	if !mine {
		return c.finish(id, pc.wait())
	}
	if ctx.Err() != nil && err == ctx.Err() {
		c.stats.abandoned.Add(1)
	}
	if on != nil && on.canceler != nil {
		on.canceler.CancelCall(xid)
	}
	return Reply{}, err
}

// nextXID returns an xid no pending call uses. c.mu must be held.
func (c *Client) nextXID() uint32 {
	for {
		c.xid++
		if _, busy := c.pending.Get(c.xid); !busy {
			return c.xid
		}
	}
}

// forget removes xid from the pending table and reports whether it was
// still there.
func (c *Client) forget(xid uint32) bool {
	c.mu.Lock()
	_, ok := c.pending.Take(xid)
	c.mu.Unlock()
	return ok
}

// finish turns the message or error completing a call into Call's results.
func (c *Client) finish(id CallID, r callResult) (Reply, error) {
	if r.err != nil {
		return Reply{}, r.err
	}
	// Whatever the outcome, nothing below keeps the Msg itself: results
	// and the verifier alias memory the transport gave up.
	defer release(r.msg)
	var h ReplyHeader
	d := xdr.NewDecoder(r.msg.XDR)
	if err := h.Decode(&d); err != nil {
		c.stats.badReply.Add(1)
		return Reply{}, &BadReplyError{Call: id, Err: err}
	}
	if h.Stat == MsgDenied {
		return Reply{}, &RejectError{Call: id, Stat: h.RejectStat, Low: h.Low, High: h.High, AuthStat: h.AuthStat}
	}
	if h.AcceptStat != Success {
		return Reply{}, &AcceptError{Call: id, Stat: h.AcceptStat, Low: h.Low, High: h.High}
	}
	results, err := r.msg.tail(d.Offset())
	if err != nil {
		c.stats.badReply.Add(1)
		return Reply{}, &BadReplyError{Call: id, Err: err}
	}
	return Reply{XID: h.XID, Verf: h.Verf, Results: results}, nil
}

// release gives a received message back to its transport (Msg.Release).
func release(m *Msg) {
	if m.Release != nil {
		m.Release()
	}
}

// deliver completes the call a message received on l answers, or fails
// one call (a *CallError), or handles the end of l (any other error, after
// which l's receiving is done). It reports whether a reply is still
// expected (Pusher). It never blocks: it runs on the transport's goroutine
// or a caller's (DirectPusher).
func (c *Client) deliver(l *link, m *Msg, err error) bool {
	if ce, ok := errors.AsType[*CallError](err); ok {
		// The transport failed one call; the connection carries on.
		c.mu.Lock()
		pc, _ := c.pending.Take(ce.XID)
		more := c.pending.Len() > 0
		c.mu.Unlock()
		if pc == nil {
			c.stats.unknownXID.Add(1)
			return more
		}
		pc.complete(callResult{err: ce.Err})
		return more
	}
	if err != nil {
		c.lose(l, connError(err))
		close(l.recvDone)
		return false
	}
	if c.re != nil {
		l.received.Add(1)
	}
	xid, mt, ok := PeekHeader(m.XDR)
	switch {
	case !ok:
		c.stats.short.Add(1)
		release(m)
		return c.expecting()
	case mt != MsgReply:
		c.stats.notReply.Add(1)
		release(m)
		return c.expecting()
	}
	c.mu.Lock()
	pc, _ := c.pending.Take(xid)
	more := c.pending.Len() > 0
	c.mu.Unlock()
	if pc == nil {
		c.stats.unknownXID.Add(1)
		release(m)
		return more
	}
	pc.complete(callResult{msg: m})
	return more
}

// expecting reports whether calls wait for replies.
func (c *Client) expecting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending.Len() > 0
}

// lose handles the end of l with err: a Client from NewClient fails with
// it; a DialClient Client stops using l, and its callers and its
// reconnecting goroutine take it from there.
func (c *Client) lose(l *link, err error) {
	if c.re == nil {
		c.fail(err)
		return
	}
	c.mu.Lock()
	if c.cur == l {
		c.cur = nil
		c.ready = make(chan struct{})
	}
	if c.re.cfg.FailPending && c.err == nil {
		for xid, pc := range c.pending.All() {
			if pc.on == l {
				c.pending.Delete(xid)
				pc.complete(callResult{err: err})
			}
		}
	}
	c.mu.Unlock()
	l.lostErr = err
	close(l.lost)
}

// fail records err as the Client's error, unless one is recorded, and
// completes every pending call with it.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.dead)
	}
	for xid, pc := range c.pending.All() {
		c.pending.Delete(xid)
		pc.complete(callResult{err: c.err})
	}
	c.mu.Unlock()
}

// Null calls procedure 0 of prog and vers with AUTH_NONE. By the convention
// RFC 5531 describes, procedure 0 of every program takes no arguments and
// returns no results, so it checks that the server serves the version. It
// ignores any results and returns Call's errors.
func (c *Client) Null(ctx context.Context, prog, vers uint32) error {
	// The results are dropped, so the reply can go in scratch memory.
	_, err := c.call(ctx, &Request{Prog: prog, Vers: vers}, true)
	return err
}

// nullReplySize is room for a NULL reply with a large verifier.
const nullReplySize = 512

// Close fails every pending call with a *ConnError wrapping net.ErrClosed,
// closes the transport and waits for the goroutines receiving from it (and
// reconnecting) to exit. Later calls fail the same way. It returns the
// transport's Close error and is safe to call more than once.
func (c *Client) Close() error {
	c.fail(&ConnError{Err: net.ErrClosed})
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	var err error
	if l != nil {
		err = l.t.Close()
		<-l.recvDone
	}
	if c.re != nil {
		c.re.stop()
	}
	return err
}

// Stats returns a snapshot of the Client's counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{
		UnknownXID:  c.stats.unknownXID.Load(),
		NotReply:    c.stats.notReply.Load(),
		Short:       c.stats.short.Load(),
		BadReply:    c.stats.badReply.Load(),
		Abandoned:   c.stats.abandoned.Load(),
		Reconnects:  c.stats.reconnects.Load(),
		DialErrors:  c.stats.dialErrors.Load(),
		Retransmits: c.stats.retransmits.Load(),
		Timeouts:    c.stats.timeouts.Load(),
		IdleCloses:  c.stats.idleCloses.Load(),
		ShortPath:   c.stats.shortPath.Load(),
	}
}

// pendingIs reports whether pc is the call pending as xid. c.mu is held.
func (c *Client) pendingIs(xid uint32, pc *pendingCall) bool {
	cur, _ := c.pending.Get(xid)
	return cur == pc
}
