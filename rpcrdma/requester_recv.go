package rpcrdma

import (
	"sync"

	"github.com/go-rpcrdma/rpcrdma/internal/reuse"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// How a requester's replies reach the rpc layer. Whoever completes a call
// (finish: the loop, a caller with the turn, or a side goroutine after a
// pull or a failed resend) hands its reply, or the error failing it, to
// deliver. Before Push, deliver queues it for Recv in c.incoming; once
// Push has been called (the rpc.Client does), it goes straight to the
// deliver function Push set, on the goroutine that completed it.

// replyQueue is the part of a requester that replies reach the rpc layer
// through.
type replyQueue struct {
	// pushMu guards pushTo and pushEnded and serializes every call of
	// pushTo.
	pushMu    sync.Mutex
	pushTo    func(*rpc.Msg, error) bool // set by Push
	pushEnded bool                       // the loop has ended and pushTo has had the final error

	replies reuse.Spare[replyMsg] // getReplyMsg's, in front of replyMsgs
}

// deliver hands a reply (or a *rpc.CallError failing one call) to the rpc
// layer: to Push's deliver function once Push has been called, else to
// Recv. The responder can have no more replies in flight than there are
// receive slots, and Recv drains the queue, so a full queue means Recv
// is not being called; the reply is then dropped rather than stalling
// the loop. It reports whether the reply was taken.
func (r *requester) deliver(in inbound) bool {
	c := r.c
	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	if r.pushTo != nil {
		r.pushTo(r.replyOf(in))
		r.wakeTurn()
		return true
	}
	if c.incoming.put(in) {
		c.wake()
		return true
	}
	c.drop(DropCreditOverrun, in.hdr.XID, "why", "receive queue full")
	return false
}

// recv is Conn.Recv on a requester: the next reply, or a *rpc.CallError
// failing one call.
func (r *requester) recv() (*rpc.Msg, error) {
	c := r.c
	for {
		// Replies that arrived before the connection ended are
		// delivered first.
		in, ok := c.incoming.get()
		if !ok {
			select {
			case <-c.ready:
				continue // look again
			case <-c.done:
			}
			if in, ok = c.incoming.get(); !ok {
				return nil, c.Err()
			}
		}
		return r.replyOf(in)
	}
}

// replyOf turns what the requester received into what Recv returns.
func (r *requester) replyOf(in inbound) (*rpc.Msg, error) {
	if in.err != nil {
		return nil, &rpc.CallError{XID: in.hdr.XID, Err: in.err}
	}
	p := r.getReplyMsg()
	p.m = rpc.Msg{Body: rpc.Body{XDR: in.payload}, Release: p.put}
	for i, wc := range in.hdr.Chunks.Writes {
		if n := wc.Length(); n > 0 {
			p.m.Items = append(p.m.Items, rpc.DDPItem{Offset: rpc.Unplaced, Data: in.writes[i][:n]})
		}
	}
	return &p.m, nil
}

// push is Conn.Push on a requester: what Recv would have returned goes
// to deliver, first what is queued already.
func (r *requester) push(deliver func(*rpc.Msg, error) bool) {
	c := r.c
	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	for {
		in, ok := c.incoming.get()
		if !ok {
			break
		}
		deliver(r.replyOf(in))
	}
	if r.pushEnded {
		deliver(nil, c.Err())
		return
	}
	r.pushTo = deliver
}

// pushing reports whether Push has been called and the loop has not
// ended.
func (r *requester) pushing() bool {
	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	return r.pushTo != nil
}

// loopEnded runs on the loop as it returns: it gives a pushing requester
// the error that ended the connection, once the loop has delivered every
// reply before it.
func (r *requester) loopEnded() {
	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	r.pushEnded = true
	if r.pushTo != nil {
		r.pushTo(nil, r.c.Err())
		r.pushTo = nil
	}
}

// sideEnded does nothing: a requester's side goroutines queue nothing
// that Recv would have to give back.
func (r *requester) sideEnded() {}

// replyMsg is a recycled rpc.Msg for a reply Recv returns; the rpc.Client
// releases it once it has the results, which alias the caller's memory
// (or memory given up to it), never the Msg's own.
type replyMsg struct {
	m   rpc.Msg
	r   *requester // whose spare it goes back to
	put func()     // m.Release, bound once
}

// getReplyMsg returns r's spare replyMsg, else a pooled one.
func (r *requester) getReplyMsg() *replyMsg {
	p := r.replies.Get(&replyMsgs)
	if p.put == nil {
		p.put = func() {
			r := p.r
			if r == nil {
				return // released already
			}
			p.m = rpc.Msg{} // Items went to the caller: not reused
			p.r = nil
			r.replies.Put(p, &replyMsgs)
		}
	}
	p.r = r
	return p
}

var replyMsgs sync.Pool
