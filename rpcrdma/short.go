package rpcrdma

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// The short path of a requester (see the package documentation): the
// caller of the one call in flight processes the connection's
// completions itself until its reply has been delivered. The right to
// wait on the completion queue and process what it returns is the turn;
// whoever has it is the only goroutine that does, so completions are
// processed one batch at a time, in the provider's order, as the loop
// alone would. The turn is in one of three places:
//
//   - the loop's: it waits on the completion queue (rdma.Conn.Wait);
//   - a caller's: it waits on the completion queue, processing every
//     completion (its reply, other replies, send completions, backward
//     calls) until its reply has been delivered; meanwhile the loop
//     waits for the turn to come back (awaitTurn);
//   - nobody's (free): after a caller's reply, when nothing can arrive
//     that is not an answer to a call (no call outstanding, no send-queue
//     work, no backward direction, no RDMA_OPTIONAL handlers), the caller
//     leaves the turn free instead of waking the loop, and the next
//     caller takes it without waking anybody. Any other post to the send
//     queue, the connection's end and Close give a free turn back to the
//     loop.
//
// A caller takes the turn from the loop by setting want and interrupting
// the loop's Wait (rdma.WaitInterrupter); the loop, after the batch it is
// processing, gives it (given). The loop alone ends the connection: a
// caller whose Wait reports the end, or whose ctx ends, gives the turn
// back, and the loop then hears the end from its own Wait.
//
// The turn's state (shortPath) is the Conn's, since the loop gives and
// takes it back (yieldTurn, awaitTurn) and every post may have to wake
// the loop (unparkTurn); what a caller does with it is the requester's
// (SendDeliver, a Conn method that works on the requester's state;
// takeTurn, deliverHeld, giveTurn).

// shortPath is a Conn's turn state. mu guards the fields but waits and
// free's mirror; the channels and cs are made once, under mu, by the
// first caller to ask.
type shortPath struct {
	mu      sync.Mutex
	want    bool              // a caller has asked the loop for the turn
	caller  bool              // a caller has the turn
	free    bool              // nobody has the turn
	reclaim bool              // the connection is ending: the turn goes back to the loop, never free
	ended   bool              // the loop has ended: no more turns
	given   chan struct{}     // cap 1: the loop gives the turn to a caller
	back    chan struct{}     // cap 1: the turn goes back to the loop
	cs      []rdma.Completion // the callers' batch: used by whichever has the turn

	// isFree mirrors free, for a cheap check on every post.
	isFree atomic.Bool
	// waits is set while the caller that has the turn is between
	// batches, and so may be blocked in Wait.
	waits atomic.Bool
}

var _ rpc.DirectPusher = (*Conn)(nil)

// SendDeliver implements rpc.DirectPusher: it sends the call m, as Send
// does, and then, on a requester whose provider can interrupt a Wait,
// with no other call outstanding, processes the connection's completions
// on the calling goroutine, delivering replies through the function
// given to Push, until arrived reports true after a batch, ctx ends or
// the connection ends. It returns Send's error, and whether arrived became
// true after a batch it processed itself. Safe for concurrent use; with
// another call outstanding, or another caller processing, it is Send.
//
// Nothing waits while a caller has the turn, since what it would wait
// for (a credit, a send slot, a send-queue entry) may be freed only by
// completions it is the one to process: the credit is taken first, and
// the call is sent with the turn only if a send slot and a send-queue
// entry are free at once; else the turn goes back first.
//
// It is the requester's alone, and works on the requester's state; a
// Conn method, not one the Conn passes on to its requester, so that a
// call pays for no second call.
func (c *Conn) SendDeliver(ctx context.Context, m *rpc.Msg, arrived func() bool) (bool, error) {
	r := c.req
	if r == nil || len(m.XDR) < 8 {
		return false, c.Send(ctx, m)
	}
	if err := r.credits.acquire(ctx); err != nil {
		return false, err
	}
	direct := r.directCall(m)
	if cs, held := r.takeFreeTurn(direct); held {
		err := r.sendCall(noWait, m)
		if err == nil {
			got := r.deliverHeld(ctx, cs, arrived)
			r.giveTurn()
			return got, nil
		}
		r.giveTurn()
		if !errors.Is(err, context.Canceled) {
			r.credits.release()
			return false, err
		}
		// It would have waited: send it the usual way.
	}
	if err := r.sendCall(ctx, m); err != nil {
		r.credits.release()
		return false, err
	}
	return r.deliverUntil(ctx, arrived, direct), nil
}

// directCall reports whether the caller of m, with the turn, does the
// provider's socket work itself (rdma.DirectIO): for a call the responder
// pulls nothing of, not for one with a read chunk. With the caller direct
// as well, a 1 MiB read-chunk call one at a time ran 1.12x slower on two
// cores (six alternated pairs, after the responder's loop was kept off
// the Read Responses; docs/performance.md, "Direct I/O"): the caller
// then writes the 1 MiB Read Response itself, on its own thread, where
// the provider's writer would overlap it with the caller's wait. It
// asks planCall's questions ahead of the plan, which is made once the
// turn is held: no item goes in a read chunk, and the message fits
// inline. The second leaves the transport header out, so a call within
// a header's length of the limit may still go long (RDMA_NOMSG, pulled
// whole); it is then pulled with the caller direct, which costs only
// speed.
func (r *requester) directCall(m *rpc.Msg) bool {
	c := r.c
	if c.dio == nil {
		return false
	}
	t := c.cfg.ddpThreshold()
	for _, it := range m.Items {
		if readChunked(len(it.Data), t) {
			return false
		}
	}
	return m.Len() <= c.negV[r.version()].sendLimit
}

// noWait is a context that has ended: a send with it takes what it needs
// only if it is free at once (tokenStack.take), and otherwise fails with
// context.Canceled.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// takeFreeTurn takes a free turn when no call is outstanding, which
// needs no other goroutine's help, and returns the batch slice to use.
func (r *requester) takeFreeTurn(direct bool) ([]rdma.Completion, bool) {
	c := r.c
	s := &c.short
	if !s.isFree.Load() {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.free || r.outstanding() != 0 {
		return nil, false
	}
	s.free, s.caller = false, true
	s.isFree.Store(false)
	if direct {
		c.beginDirect()
	}
	return s.cs, true
}

// deliverUntil takes the turn from the loop for the one call outstanding,
// if the provider can interrupt a Wait, and processes completions until
// arrived (deliverHeld). It reports whether arrived became true after a
// batch it processed.
func (r *requester) deliverUntil(ctx context.Context, arrived func() bool, direct bool) bool {
	if r.outstanding() != 1 {
		return false
	}
	wi, ok := r.c.rc.(rdma.WaitInterrupter)
	if !ok {
		return false
	}
	cs, ok := r.takeTurn(ctx, wi, direct)
	if !ok {
		return false
	}
	got := r.deliverHeld(ctx, cs, arrived)
	r.giveTurn()
	return got
}

// deliverHeld processes completions, with the turn, until arrived
// reports true, ctx ends or Wait reports the connection's end.
func (r *requester) deliverHeld(ctx context.Context, cs []rdma.Completion, arrived func() bool) bool {
	c := r.c
	// A reply may also be delivered off the turn, by a side goroutine
	// (a read-chunk reply pulled, a resend that failed): waits tells
	// such a deliverer to interrupt this goroutine's Wait (wakeTurn).
	// It is set before arrived is checked, so a delivery either comes
	// before the check, which sees it, or sees waits and interrupts.
	s := &c.short
	got := false
	s.waits.Store(true)
	for !arrived() {
		n, err := c.waitTurn(ctx, cs)
		if n > 0 {
			s.waits.Store(false)
			c.complete(cs[:n])
			got = arrived()
			s.waits.Store(true)
		}
		if err != nil {
			// ctx's, or the connection's: the loop hears the latter
			// from its own Wait once it has the turn back.
			break
		}
	}
	s.waits.Store(false)
	return got
}

// wakeTurn interrupts the Wait of a caller that has the turn, when a
// reply has been delivered by a goroutine other than the one processing
// completions.
func (r *requester) wakeTurn() {
	if c := r.c; c.short.waits.Load() {
		c.rc.(rdma.WaitInterrupter).InterruptWait()
	}
}

// takeTurn asks the loop for the turn and waits until it is given, ctx
// ends or the loop has ended. It returns the batch slice to use and true
// once the caller has the turn.
func (r *requester) takeTurn(ctx context.Context, wi rdma.WaitInterrupter, direct bool) ([]rdma.Completion, bool) {
	c := r.c
	s := &c.short
	s.mu.Lock()
	if s.ended || s.want || s.caller || s.reclaim {
		s.mu.Unlock()
		return nil, false
	}
	if s.free {
		s.free, s.caller = false, true
		s.isFree.Store(false)
		s.mu.Unlock()
		if direct {
			c.beginDirect()
		}
		return s.cs, true
	}
	if !c.deliv.pushing() {
		s.mu.Unlock()
		return nil, false
	}
	if s.given == nil {
		s.given, s.back = make(chan struct{}, 1), make(chan struct{}, 1)
		s.cs = make([]rdma.Completion, fullBatch)
	}
	s.want = true
	given, cs := s.given, s.cs
	s.mu.Unlock()
	wi.InterruptWait()
	select {
	case <-given:
		if direct {
			c.beginDirect()
		}
		return cs, true
	case <-ctx.Done():
	case <-c.loopDone:
	}
	s.mu.Lock()
	if s.want {
		s.want = false
		s.mu.Unlock()
		return nil, false
	}
	s.mu.Unlock()
	// The loop gave the turn meanwhile: give it back.
	<-given
	r.giveTurn()
	return nil, false
}

// giveTurn ends a caller's turn: it leaves the turn free when nothing
// but replies to calls can arrive and none is outstanding, else gives it
// back to the loop.
func (r *requester) giveTurn() {
	c := r.c
	c.endDirect()
	s := &c.short
	s.mu.Lock()
	s.caller = false
	if !s.reclaim && r.quiet() {
		s.free = true
		s.isFree.Store(true)
		s.mu.Unlock()
		return
	}
	back := s.back
	s.mu.Unlock()
	back <- struct{}{}
}

// quiet reports whether nothing can arrive on a requester but the answer
// to a call sent from now on: no call outstanding, no send-queue work in
// flight, no backward direction, no RDMA_OPTIONAL handlers.
func (r *requester) quiet() bool {
	c := r.c
	if r.back != nil || len(c.cfg.Options) > 0 || r.outstanding() != 0 {
		return false
	}
	c.opsMu.Lock()
	defer c.opsMu.Unlock()
	return c.opsN == 0
}

// unparkTurn gives a free turn back to the loop. Every post to the send
// queue calls it (a free turn is taken before a call's own post), so
// that the loop processes the completion. It costs an atomic load when
// the turn is not free.
func (c *Conn) unparkTurn() {
	s := &c.short
	if !s.isFree.Load() {
		return
	}
	s.mu.Lock()
	if !s.free {
		s.mu.Unlock()
		return
	}
	s.free = false
	s.isFree.Store(false)
	back := s.back
	s.mu.Unlock()
	back <- struct{}{}
}

// yieldTurn runs on the loop between batches: if a caller has asked for
// the turn, it gives it and waits until the turn comes back.
func (c *Conn) yieldTurn() {
	s := &c.short
	s.mu.Lock()
	if !s.want {
		s.mu.Unlock()
		return
	}
	s.want, s.caller = false, true
	given, back := s.given, s.back
	s.mu.Unlock()
	c.endDirect()
	given <- struct{}{}
	c.awaitTurn(back)
	c.beginDirect()
}

// awaitTurn is the loop without the turn: it waits until the turn comes
// back, or, when the connection ends (by the peer, a fatal error or
// Close), takes a free turn back itself and has a caller's given back as
// soon as that caller is done, never free.
func (c *Conn) awaitTurn(back chan struct{}) {
	select {
	case <-back:
		return
	case <-c.rc.Done():
	case <-c.done:
	}
	s := &c.short
	s.mu.Lock()
	s.reclaim = true
	if s.free {
		s.free = false
		s.isFree.Store(false)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	<-back
}

// waitTurn waits for completions on the goroutine that has the turn:
// with WaitDirect where the provider offers it, so that the provider's
// socket work runs on this goroutine too (rdma.DirectIO), else with Wait.
// After a message whose read chunks are to be pulled, it waits once with
// the section closed: the provider's own receive goroutine then reads the
// Read Responses, bulk data that arrives while this goroutine would be
// busy with other work. WaitDirect does the same by itself for Reads it
// sees posted, but the Reads of a call are posted by a side goroutine
// (startPull) once this goroutine is back in its wait, perhaps reading
// the socket already; closing the section first leaves the socket to the
// receive goroutine from the start.
func (c *Conn) waitTurn(ctx context.Context, cs []rdma.Completion) (int, error) {
	pull := c.pullSoon.Swap(false)
	if !c.dirOpen {
		return c.rc.Wait(ctx, cs)
	}
	if !pull {
		return c.dio.WaitDirect(ctx, cs)
	}
	c.endDirect()
	n, err := c.rc.Wait(ctx, cs)
	c.beginDirect()
	return n, err
}

// beginDirect opens the provider's direct section for the goroutine that
// has just taken the turn; endDirect closes it before the turn goes.
func (c *Conn) beginDirect() {
	if c.dio != nil {
		c.dio.BeginDirect()
		c.dirOpen = true
	}
}

func (c *Conn) endDirect() {
	if c.dio != nil {
		c.dio.EndDirect()
		c.dirOpen = false
	}
}

// endTurns records that the loop has ended: no caller takes the turn any
// more. The loop calls it before it returns.
func (c *Conn) endTurns() {
	s := &c.short
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}
