package rpcrdma

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// The turn: the right to wait on a Conn's completion queue and process
// what it returns. Whoever has it is the only goroutine that does, so
// completions are processed one batch at a time, in the provider's order,
// as the loop alone would. The loop has it but while a requester's caller
// on the short path (short.go) does. The turn is in one of three places:
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
// The turn's state (shortPath) is the Conn's, and so is what the loop
// does with it, here: the loop gives it and takes it back (yieldTurn,
// awaitTurn), every post may have to wake the loop (unparkTurn), and
// whoever has the turn waits with waitTurn, inside the provider's direct
// section where it offers one (beginDirect, endDirect). What a caller
// does with the turn is the requester's (short.go).

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
