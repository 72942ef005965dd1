package rpcrdma

import (
	"context"
	"errors"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// The short path of a requester (see the package documentation): the
// caller of the one call in flight processes the connection's
// completions itself until its reply has been delivered, with the turn
// (conn_turn.go, which says where the turn can be and how the loop gives
// it and takes it back). What a caller does with the turn is the
// requester's, here: SendDeliver, a Conn method that works on the
// requester's state, takes a free turn (takeFreeTurn) or asks the loop
// for it (takeTurn), processes completions until its reply has been
// delivered (deliverHeld), and ends its turn (giveTurn), leaving it free
// when nothing but the answer to a later call can arrive (quiet).

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
// as well, a 1 MiB read-chunk call one at a time ran slower on two cores
// (docs/performance.md, "Direct I/O"): the caller then writes the 1 MiB Read Response itself, on its own thread, where
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
