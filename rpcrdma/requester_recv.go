package rpcrdma

import (
	"sync"

	"github.com/go-rpcrdma/rpcrdma/internal/reuse"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// How a requester's replies reach the rpc layer: whoever completes a
// call (finish: the loop, a caller with the turn, or a side goroutine
// after a pull or a failed resend) hands its reply, or the error failing
// it, to the Conn's delivery (delivery.go).

// replyQueue is the requester's part of the way to the rpc layer.
type replyQueue struct {
	replies reuse.Spare[replyMsg] // getReplyMsg's, in front of replyMsgs
}

// deliver hands a reply (or a *rpc.CallError failing one call) to the
// rpc layer. The responder can have no more replies in flight than there
// are receive slots, and Recv drains the queue, so a full queue means
// neither Push nor Recv is being called; the reply is then dropped rather
// than stalling the loop.
func (r *requester) deliver(in inbound) {
	c := r.c
	m, err := r.replyOf(in)
	ok, full := c.deliv.hand(m, err)
	if ok {
		r.wakeTurn()
		return
	}
	if m != nil {
		m.Release()
	}
	if full {
		c.drop(DropCreditOverrun, in.hdr.XID, "why", "receive queue full")
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
