package rpcrdma

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The serving half of the backward direction, a requester's (RFC 8167):
// the loop takes the responder's backward calls (onCall) within the
// BackwardCredits this side grants, Recv returns them, and Send answers
// them in the version each came in, granting BackwardCredits again.

// backServer is a requester's half of its Backchannel.
type backServer struct {
	b *Backchannel

	mu sync.Mutex
	// Backward calls received and not yet answered, oldest first for
	// each XID; their number never passes b.credits.
	calls    map[uint32][]*bcCall
	npending int
}

// bcCall is a backward call a requester has received. It is in calls from
// its arrival until its reply is sent or the server releases it.
type bcCall struct {
	s    *backServer
	xid  uint32
	vers wire.Version
	msg  rpc.Msg
}

// newBackServer returns the serving half of c's backward direction.
func newBackServer(c *Conn) *backServer {
	s := &backServer{calls: make(map[uint32][]*bcCall)}
	s.b = newBackchannel(c, s)
	return s
}

// send sends the reply to a backward call, in the call's version,
// granting BackwardCredits.
func (s *backServer) send(ctx context.Context, m *rpc.Msg) error {
	b := s.b
	xid := binary.BigEndian.Uint32(m.XDR)
	s.mu.Lock()
	calls := s.calls[xid]
	if len(calls) == 0 {
		s.mu.Unlock()
		return fmt.Errorf("rpcrdma: no backward call with xid %#x to answer", xid)
	}
	bc := calls[0]
	s.unpendLocked(bc)
	s.mu.Unlock()
	h := &wire.Header{XID: xid, Vers: bc.vers, Credits: b.credits, Proc: wire.RDMA_MSG}
	if err := b.sendInline(ctx, h, m, "reply"); err != nil {
		return err
	}
	b.c.stats.add(statBackwardReplies, 1)
	return nil
}

// close does nothing: nothing waits on the serving half but Recv, which
// Backchannel.Close and the connection's end stop themselves.
func (s *backServer) close(error) {}

// unpendLocked removes bc from the calls awaiting a reply, if it is still
// there. s.mu is held.
func (s *backServer) unpendLocked(bc *bcCall) {
	list := s.calls[bc.xid]
	i := slices.Index(list, bc)
	switch {
	case i < 0:
		return
	case len(list) == 1:
		delete(s.calls, bc.xid)
	default:
		s.calls[bc.xid] = slices.Delete(list, i, i+1)
	}
	s.npending--
}

// onCall takes a backward call a requester received, on the loop: it
// copies it out of the receive buffer for Recv, or drops it when the
// backward direction is closed, the call breaks RFC 8167's rules, or the
// responder has more backward calls unanswered than it was granted.
func (s *backServer) onCall(in *inbound) {
	b := s.b
	c := b.c
	h := &in.hdr
	select {
	case <-b.closed:
		c.drop(DropBackwardOff, h.XID, "why", "backward direction closed")
		return
	default:
	}
	if !isBackward(h) || !c.supports(h.Vers) {
		c.drop(DropBackwardMalformed, h.XID, "proc", h.Proc, "vers", h.Vers)
		return
	}
	s.mu.Lock()
	if s.npending >= int(b.credits) {
		s.mu.Unlock()
		c.drop(DropBackwardOverrun, h.XID, "credits", b.credits)
		return
	}
	bc := &bcCall{s: s, xid: h.XID, vers: h.Vers}
	bc.msg = rpc.Msg{Body: rpc.Body{XDR: clone(in.payload)}, Release: bc.release}
	s.calls[h.XID] = append(s.calls[h.XID], bc)
	s.npending++
	s.mu.Unlock()
	c.stats.add(statBackwardCalls, 1)
	select {
	case b.incoming <- bcIn{m: &bc.msg}:
	default:
		// npending bounds what is queued and incoming holds that many,
		// unless a reply was sent for a call Recv had not returned yet.
		// The loop must not block: drop the call.
		bc.release()
		c.drop(DropBackwardOverrun, h.XID, "why", "receive queue full")
	}
}

// release is the Msg.Release of a backward call: a call the server dropped
// without a reply no longer counts against the backward credits.
func (bc *bcCall) release() {
	s := bc.s
	s.mu.Lock()
	s.unpendLocked(bc)
	s.mu.Unlock()
}
