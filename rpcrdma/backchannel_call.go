package rpcrdma

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The calling half of the backward direction, a responder's (RFC 8167):
// Send sends a backward call once the backward credit window lets it, in
// the version the requester speaks; the loop matches each reply to its
// call (onReply), takes its grant, and queues it for Recv, which gives
// the call's credit back.

// backCaller is a responder's half of its Backchannel.
type backCaller struct {
	b      *Backchannel
	window *creditWindow // the backward credits the requester grants

	mu sync.Mutex
	// Backward calls sent and not yet answered: the version each went
	// in, by XID.
	sent map[uint32][]wire.Version

	vers atomic.Uint32 // the version backward calls go in
}

// newBackCaller returns the calling half of c's backward direction.
func newBackCaller(c *Conn) *backCaller {
	k := &backCaller{
		window: newCreditWindow(c.cfg.BackwardCredits),
		sent:   make(map[uint32][]wire.Version),
	}
	k.b = newBackchannel(c, k)
	k.vers.Store(uint32(c.versions[0]))
	return k
}

// send sends a backward call, waiting for a backward credit.
func (k *backCaller) send(ctx context.Context, m *rpc.Msg) error {
	b := k.b
	xid := binary.BigEndian.Uint32(m.XDR)
	if err := k.window.acquire(ctx); err != nil {
		return err
	}
	v := wire.Version(k.vers.Load())
	k.mu.Lock()
	k.sent[xid] = append(k.sent[xid], v)
	k.mu.Unlock()
	h := &wire.Header{XID: xid, Vers: v, Credits: b.credits, Proc: wire.RDMA_MSG}
	if err := b.sendInline(ctx, h, m, "call"); err != nil {
		k.mu.Lock()
		k.forgetLocked(xid, v)
		k.mu.Unlock()
		k.window.release()
		return err
	}
	b.c.stats.add(statBackwardCalls, 1)
	return nil
}

// close fails every current and future wait for a backward credit with
// err: Backchannel.Close's, or the connection's end (responder.closeAll).
func (k *backCaller) close(err error) { k.window.close(err) }

// forgetLocked removes a backward call xid sent in version v and reports
// whether there was one. k.mu is held.
func (k *backCaller) forgetLocked(xid uint32, v wire.Version) bool {
	vs := k.sent[xid]
	i := slices.Index(vs, v)
	switch {
	case i < 0:
		return false
	case len(vs) == 1:
		delete(k.sent, xid)
	default:
		k.sent[xid] = slices.Delete(vs, i, i+1)
	}
	return true
}

// onReply takes the reply to a backward call a responder received, on the
// loop: it updates the backward grant and queues the reply for Recv, or an
// error failing the call if the RPC reply inside does not carry the call's
// XID; the call's credit comes back when Recv takes it. A reply to no
// backward call of ours, or not in the version of the call, is dropped.
func (k *backCaller) onReply(in *inbound) {
	b := k.b
	c := b.c
	h := &in.hdr
	k.mu.Lock()
	ok := isBackward(h) && k.forgetLocked(h.XID, h.Vers)
	k.mu.Unlock()
	if !ok {
		c.drop(DropBackwardUnmatched, h.XID, "proc", h.Proc)
		return
	}
	if g, err := k.window.update(h.Credits); err != nil {
		c.log.Warn("rpcrdma: peer granted zero backward credits; using one", "xid", h.XID, "granted", g)
	}
	c.stats.add(statBackwardReplies, 1)
	bi := bcIn{m: &rpc.Msg{Body: rpc.Body{XDR: clone(in.payload)}}, credit: k.window}
	if len(in.payload) < 4 || binary.BigEndian.Uint32(in.payload) != h.XID {
		// The requester answered the call, but not with an RPC reply
		// to it (RFC 8166 section 4.2.1).
		bi = bcIn{err: &rpc.CallError{XID: h.XID, Err: fmt.Errorf("rpcrdma: backward reply to xid %#x does not carry the call's RPC XID", h.XID)}, credit: k.window}
	}
	select {
	case b.incoming <- bi:
	default:
		// Not reachable: every reply queued holds a credit, and there
		// are never more credits than incoming has room for. The loop
		// must not block whatever happens.
		k.window.release()
		c.drop(DropBackwardUnmatched, h.XID, "why", "receive queue full")
	}
}
