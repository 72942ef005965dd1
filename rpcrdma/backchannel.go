package rpcrdma

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The backward direction (RFC 8167): RPC calls from the
// responder to the requester on the connection the requester opened, as
// NFSv4.1 sends its callbacks.
//
// Each backward message is one RDMA_MSG with all three chunk lists empty and
// the RPC message inline right after the transport header (RFC 8167, "Sending
// a Backward-Direction Call" and "... Reply"), so a receiver tells a backward
// call from a forward reply by the RPC msg_type alone. Backward messages are
// never larger than the inline threshold: there are no chunks to carry more.
//
// Credits and receives are separate from the forward direction's (RFC 8167,
// "Backward Credits" and "Managing Receive Buffers"). The requester posts
// BackwardCredits receives beyond those for its forward replies and grants
// that many backward credits in every backward reply; a backward call that
// would take it past that is dropped, as the responder drops forward calls
// beyond its receives. The responder posts a receive for each backward call
// it may have outstanding, starts with one backward credit (like every
// requester, RFC 5666 section 3.3) and takes the grant of each backward
// reply. The rdma_credit of a backward message never changes forward credits,
// and forward messages never change backward ones. XIDs of the two directions
// are independent (RFC 8167, "XID Values").
//
// The backward direction is off unless Config.BackwardCredits is set on both
// sides: a requester without it drops backward calls, which it has no
// receives for. RFC 8167 ("In the Absence of Backward-Direction Support")
// leaves it to the upper layer to tell the responder when backward calls may
// be sent (NFSv4.1 does it with CREATE_SESSION), so the requester has always
// sent a forward call first. That matters on iWARP: an MPA responder sends
// nothing before the initiator's first FPDU (RFC 5044 section 7.1.2), so a
// backward call sent earlier waits, queued, for it.

// Backchannel is the backward direction of a Conn, as an rpc.Transport. On
// a requester's Conn it is the serving side, for an rpc.Server: Recv
// returns the responder's backward calls and Send takes their replies. On a
// responder's Conn it is the calling side, for an rpc.Client: Send sends
// backward calls and Recv returns their replies. Get it with
// Conn.Backchannel.
//
// Backward calls are for after the requester has said it takes them (see
// Config.BackwardCredits); on iWARP one sent before the requester's first
// message waits for it. A backward call its caller gives up on keeps its
// backward credit until its reply arrives, since the requester still
// counts it. Backward messages carry no chunks: DDP-eligible items travel
// inline and ResultBufs are not used, and a message that does not fit the
// inline threshold fails its Send with an error naming the sizes.
//
// Close ends the backward direction only; the connection carries on, and
// its end ends the Backchannel too.
type Backchannel struct {
	c       *Conn
	credits uint32 // Config.BackwardCredits

	incoming  chan bcIn // backward calls (requester) or replies (responder)
	closed    chan struct{}
	closeOnce sync.Once

	mu sync.Mutex
	// A requester's backward calls received and not yet answered, oldest
	// first for each XID; their number never passes credits.
	calls    map[uint32][]*bcCall
	npending int
	// A responder's backward calls sent and not yet answered: the
	// version each went in, by XID; and its backward credit window.
	sent   map[uint32][]wire.Version
	window *creditWindow

	vers atomic.Uint32 // responder: the version backward calls go in
}

// bcIn is what Recv returns: a message, or a *rpc.CallError failing one
// backward call. A reply (or its error) on a responder holds its call's
// backward credit until Recv takes it, so replies waiting for Recv never
// outnumber the credits, nor the room in incoming.
type bcIn struct {
	m      *rpc.Msg
	err    error
	credit bool
}

// bcCall is a backward call a requester has received. It is in calls from
// its arrival until its reply is sent or the server releases it.
type bcCall struct {
	b    *Backchannel
	xid  uint32
	vers wire.Version
	msg  rpc.Msg
}

func newBackchannel(c *Conn) *Backchannel {
	n := c.cfg.BackwardCredits
	b := &Backchannel{
		c:        c,
		credits:  n,
		incoming: make(chan bcIn, n),
		closed:   make(chan struct{}),
		calls:    make(map[uint32][]*bcCall),
		sent:     make(map[uint32][]wire.Version),
		window:   newCreditWindow(n),
	}
	b.vers.Store(uint32(c.versions[0]))
	return b
}

// Backchannel returns the backward direction of c (RFC 8167), or nil if
// Config.BackwardCredits was zero when c was created.
func (c *Conn) Backchannel() *Backchannel { return c.bc }

// errBackClosed is what a closed Backchannel returns.
var errBackClosed = &rpc.ConnError{Err: fmt.Errorf("rpcrdma: backchannel closed: %w", net.ErrClosed)}

// Close ends the backward direction: Recv returns an error wrapping
// net.ErrClosed, and so do later Sends. Backward calls that arrive after
// it are dropped. The connection is not closed.
func (b *Backchannel) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		b.window.close(errBackClosed)
	})
	return nil
}

// Recv returns the next backward call (on a requester's Conn) or the reply
// to a backward call (on a responder's), or a *rpc.CallError failing a
// backward call whose reply broke the rules. It implements rpc.Transport.
func (b *Backchannel) Recv() (*rpc.Msg, error) {
	select {
	case in := <-b.incoming:
		return b.take(in)
	default:
	}
	select {
	case in := <-b.incoming:
		return b.take(in)
	case <-b.closed:
		return nil, errBackClosed
	case <-b.c.done:
		// What arrived before the end is delivered first.
		select {
		case in := <-b.incoming:
			return b.take(in)
		default:
			return nil, b.c.Err()
		}
	}
}

// take returns what Recv delivers, giving back the credit a reply held.
func (b *Backchannel) take(in bcIn) (*rpc.Msg, error) {
	if in.credit {
		b.window.release()
	}
	return in.m, in.err
}

// Send sends a backward call (on a responder's Conn), waiting for a
// backward credit, or the reply to a backward call (on a requester's). It
// implements rpc.Transport.
func (b *Backchannel) Send(ctx context.Context, m *rpc.Msg) error {
	select {
	case <-b.closed:
		return errBackClosed
	default:
	}
	if len(m.XDR) < 8 {
		return fmt.Errorf("rpcrdma: backward message of %d bytes has no RPC header", len(m.XDR))
	}
	if b.c.resp != nil {
		return b.sendCall(ctx, m)
	}
	return b.sendReply(ctx, m)
}

// sendCall sends a backward call from a responder.
func (b *Backchannel) sendCall(ctx context.Context, m *rpc.Msg) error {
	c := b.c
	xid := binary.BigEndian.Uint32(m.XDR)
	if err := b.window.acquire(ctx); err != nil {
		return err
	}
	v := wire.Version(b.vers.Load())
	b.mu.Lock()
	b.sent[xid] = append(b.sent[xid], v)
	b.mu.Unlock()
	h := &wire.Header{XID: xid, Vers: v, Credits: b.credits, Proc: wire.RDMA_MSG}
	if err := b.send(ctx, h, m, "call"); err != nil {
		b.mu.Lock()
		b.forgetLocked(xid, v)
		b.mu.Unlock()
		b.window.release()
		return err
	}
	c.stats.add(statBackwardCalls, 1)
	return nil
}

// sendReply sends the reply to a backward call from a requester, in the
// call's version, granting BackwardCredits.
func (b *Backchannel) sendReply(ctx context.Context, m *rpc.Msg) error {
	xid := binary.BigEndian.Uint32(m.XDR)
	b.mu.Lock()
	calls := b.calls[xid]
	if len(calls) == 0 {
		b.mu.Unlock()
		return fmt.Errorf("rpcrdma: no backward call with xid %#x to answer", xid)
	}
	bc := calls[0]
	b.unpendLocked(bc)
	b.mu.Unlock()
	h := &wire.Header{XID: xid, Vers: bc.vers, Credits: b.credits, Proc: wire.RDMA_MSG}
	if err := b.send(ctx, h, m, "reply"); err != nil {
		return err
	}
	b.c.stats.add(statBackwardReplies, 1)
	return nil
}

// send posts m inline behind h, which the peer must be able to receive.
func (b *Backchannel) send(ctx context.Context, h *wire.Header, m *rpc.Msg, what string) error {
	c := b.c
	n := h.EncodedLen() + m.Len()
	if limit := c.negV[h.Vers].sendLimit; n > limit {
		return fmt.Errorf("rpcrdma: backward %s of %d bytes (transport header included) exceeds the %d-byte inline threshold; backward messages carry no chunks (RFC 8167)", what, n, limit)
	}
	payload := m.AppendFlat(make([]byte, 0, m.Len()))
	return c.sendMsg(ctx, h, [][]byte{payload}, 0, false)
}

// forgetLocked removes a backward call xid sent in version v and reports
// whether there was one. b.mu is held.
func (b *Backchannel) forgetLocked(xid uint32, v wire.Version) bool {
	vs := b.sent[xid]
	i := slices.Index(vs, v)
	switch {
	case i < 0:
		return false
	case len(vs) == 1:
		delete(b.sent, xid)
	default:
		b.sent[xid] = slices.Delete(vs, i, i+1)
	}
	return true
}

// unpendLocked removes bc from the calls awaiting a reply, if it is still
// there. b.mu is held.
func (b *Backchannel) unpendLocked(bc *bcCall) {
	list := b.calls[bc.xid]
	i := slices.Index(list, bc)
	switch {
	case i < 0:
		return
	case len(list) == 1:
		delete(b.calls, bc.xid)
	default:
		b.calls[bc.xid] = slices.Delete(list, i, i+1)
	}
	b.npending--
}

// isBackward reports whether a received RDMA_MSG is a backward message in the
// form RFC 8167 requires of backward calls and replies: every chunk list
// empty.
func isBackward(h *wire.Header) bool {
	return h.Proc == wire.RDMA_MSG && len(h.Chunks.Reads) == 0 && len(h.Chunks.Writes) == 0 && !h.Chunks.Reply.Present
}

// onCall takes a backward call a requester received, on the loop: it
// copies it out of the receive buffer for Recv, or drops it when the
// backward direction is off or closed, the call breaks RFC 8167's rules,
// or the responder has more backward calls unanswered than it was granted.
func (b *Backchannel) onCall(in *inbound) {
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
	b.mu.Lock()
	if b.npending >= int(b.credits) {
		b.mu.Unlock()
		c.drop(DropBackwardOverrun, h.XID, "credits", b.credits)
		return
	}
	bc := &bcCall{b: b, xid: h.XID, vers: h.Vers}
	bc.msg = rpc.Msg{Body: rpc.Body{XDR: clone(in.payload)}, Release: bc.release}
	b.calls[h.XID] = append(b.calls[h.XID], bc)
	b.npending++
	b.mu.Unlock()
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
	b := bc.b
	b.mu.Lock()
	b.unpendLocked(bc)
	b.mu.Unlock()
}

// onReply takes the reply to a backward call a responder received, on the
// loop: it updates the backward grant and queues the reply for Recv, or an
// error failing the call if the RPC reply inside does not carry the call's
// XID; the call's credit comes back when Recv takes it. A reply to no
// backward call of ours, or not in the version of the call, is dropped.
func (b *Backchannel) onReply(in *inbound) {
	c := b.c
	h := &in.hdr
	b.mu.Lock()
	ok := isBackward(h) && b.forgetLocked(h.XID, h.Vers)
	b.mu.Unlock()
	if !ok {
		c.drop(DropBackwardUnmatched, h.XID, "proc", h.Proc)
		return
	}
	if g, err := b.window.update(h.Credits); err != nil {
		c.log.Warn("rpcrdma: peer granted zero backward credits; using one", "xid", h.XID, "granted", g)
	}
	c.stats.add(statBackwardReplies, 1)
	bi := bcIn{m: &rpc.Msg{Body: rpc.Body{XDR: clone(in.payload)}}, credit: true}
	if len(in.payload) < 4 || binary.BigEndian.Uint32(in.payload) != h.XID {
		// The requester answered the call, but not with an RPC reply
		// to it (RFC 8166 section 4.2.1).
		bi = bcIn{err: &rpc.CallError{XID: h.XID, Err: fmt.Errorf("rpcrdma: backward reply to xid %#x does not carry the call's RPC XID", h.XID)}, credit: true}
	}
	select {
	case b.incoming <- bi:
	default:
		// Not reachable: every reply queued holds a credit, and there
		// are never more credits than incoming has room for. The loop
		// must not block whatever happens.
		b.window.release()
		c.drop(DropBackwardUnmatched, h.XID, "why", "receive queue full")
	}
}

// end closes the backward credit window once the connection has ended.
func (b *Backchannel) end(err error) {
	if b != nil {
		b.window.close(err)
	}
}
