package rpcrdma

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/reuse"
	"github.com/go-rpcrdma/rpcrdma/internal/xidmap"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The responder: receiving calls (RFC 5666 sections 3.5-3.8, 4.2, 5) and
// marshaling replies.
//
// Life of a call. The loop decodes and validates the transport header of
// every message. Anything it cannot serve is answered at once with
// RDMA_ERROR (ERR_VERS with the versions served, or ERR_CHUNK /
// RDMA_ERR_BAD_HEADER), except an RDMA_ERROR, which is never answered, and
// a message too short to carry an XID, which is dropped, and a call beyond
// what the requester's credits allow (a credit overrun), which is dropped
// too. A good call is prepared (responder_recv.go): on the loop when it
// needs nothing the loop may not wait for, else on a side goroutine,
// which checks the call's chunks against it and posts the RDMA Reads that
// pull them (as many in flight as the ORD allows, over this call and the
// calls after it: it does not wait for them, the loop hands the call over
// once its last Read is done). The call is rebuilt as
// an rpc.Body (a position-zero chunk becomes the XDR stream, data chunks
// become held-apart items, with their XDR pad dropped if the requester sent
// it), and what it offered for its reply is remembered. Send, called with
// the reply, answers it (responder_send.go).

// responder is the responder role of a Conn: the calls received and not
// yet answered, the grant, how calls reach the rpc layer
// (responder_recv.go), how replies go out (responder_send.go), the bounds
// its Listener applies (bounds.go) and its half of the backward
// direction (backchannel_call.go).
type responder struct {
	c *Conn

	mu       sync.Mutex
	pending  xidmap.Map[*inCall]   // calls received and not yet answered, chained by next for a repeated xid
	npending int                   // calls in pending
	nprep    int                   // calls arrived and not yet in pending: being pulled, waiting for memory (responder_recv.go)
	done     map[uint32]*readReply // read-chunk replies awaiting RDMA_DONE
	spareMsg reuse.Spare[inMsg]    // newInMsg's, in front of inMsgs
	// grant is the credits granted in every reply (credits.go). With a
	// shared pool it rises while calls keep it busy and falls as the
	// connection goes idle; the receives of a lowered grant go back to
	// the pool when reclaim runs (pool.go).
	grant   grantState
	reclaim *time.Timer
	// allot is the receives of the Listener's pool promised to this
	// connection (pool.go).
	allot atomic.Int64
	// vers is the version of the last call received (0 before any),
	// what Info reports.
	vers atomic.Uint32

	connBounds // the Listener's Bounds applied to this connection (bounds.go)

	back *backCaller // the calling half of the backward direction; nil unless Config.BackwardCredits is set
}

// newResponder returns the responder role of c, which a Listener has
// accepted; the Listener sets up the rest (dial.go).
func newResponder(c *Conn) *responder {
	r := &responder{c: c, done: make(map[uint32]*readReply)}
	r.mem = newBudget(c.cfg.Bounds.connMemory())
	return r
}

// inCall is what a received call offered for its reply.
type inCall struct {
	xid     uint32
	credits uint32 // the credits the requester asked for (RFC 8166 Section 3.3.1)
	vers    wire.Version
	writes  wire.WriteList
	reply   wire.ReplyChunk
	inv     rdma.STag   // the one STag the call named, for Send With Invalidate; 0 if none or several
	next    *inCall     // a later call with the same xid
	hdr     wire.Header // the reply's transport header, built by sendReply

	piecesBuf  [4][]byte // backing for the reply plan's pieces
	resultsBuf [2]int    // backing for the reply plan's results

	// What ReserveReply took for the reply, when the loop runs the call
	// itself: sendReply uses it, inMsg.free gives back one not used.
	res sendReservation
}

// inMsg is a received call from its arrival until the rpc.Server releases
// it (rpc.Msg.Release): the Msg Recv returns, what the call offered for
// its reply, and the memory of both. It is pooled, so an inline call
// allocates nothing.
type inMsg struct {
	r       *responder
	msg     rpc.Msg
	ic      inCall
	payload []byte   // the call's inline part, copied out of the receive buffer
	pzrc    []byte   // a long call's position-zero chunk (getBuf)
	bufs    [][]byte // its data chunks (getBuf)
	held    int64    // bytes reserved from the connection's and the Listener's budgets (bounds.go)
	// preparing: the call has arrived and is counted in nprep until it
	// is added to pending (responder_recv.go).
	preparing bool
	release   func() // msg.Release, bound once
}

var inMsgs sync.Pool

// newInMsg returns a recycled inMsg (the responder's spare, else a
// pooled one) holding a copy of payload.
func (r *responder) newInMsg(payload []byte) *inMsg {
	im := r.spareMsg.Get(&inMsgs)
	if im.release == nil {
		im.release = im.free
	}
	im.r = r
	im.payload = append(im.payload[:0], payload...)
	return im
}

// free gives im back: its buffers to their pools, its call out of the
// pending table if no reply took it (the handler dropped the call).
func (im *inMsg) free() {
	r := im.r
	r.mu.Lock()
	r.unpend(&im.ic)
	if im.preparing {
		r.nprep--
	}
	r.mu.Unlock()
	r.unreserve(im)
	r.c.unreserveSend(&im.ic.res)
	if im.pzrc != nil {
		putBuf(im.pzrc)
	}
	for _, b := range im.bufs {
		putBuf(b)
	}
	clear(im.bufs)
	if cap(im.payload) > 64<<10 {
		im.payload = nil // do not pin a large buffer
	}
	*im = inMsg{payload: im.payload[:0], bufs: im.bufs[:0], msg: rpc.Msg{Body: rpc.Body{Items: im.msg.Items[:0]}}, release: im.release}
	r.spareMsg.Put(im, &inMsgs)
}

// unpend removes ic from the pending table, if it is there. r.mu is held.
func (r *responder) unpend(ic *inCall) {
	first, _ := r.pending.Get(ic.xid)
	switch {
	case first == nil:
	case first == ic:
		if ic.next != nil {
			r.pending.Put(ic.xid, ic.next)
		} else {
			r.pending.Delete(ic.xid)
		}
		r.npending--
	default:
		for p := first; p.next != nil; p = p.next {
			if p.next == ic {
				p.next = ic.next
				r.npending--
				break
			}
		}
	}
	ic.next = nil
}

// onMessage handles a message received by a responder, on the loop. raw
// holds the first bytes of an undecodable message.
func (r *responder) onMessage(in *inbound, derr error, raw []byte) {
	c := r.c
	r.received.Add(1)
	h := &in.hdr
	if derr != nil {
		r.onUndecodable(derr, raw)
		return
	}
	if !c.supports(h.Vers) {
		r.reject(RejectVersion, h.XID, c.versions[0], wire.ErrVers, "vers", h.Vers)
		return
	}
	if h.Proc != wire.RDMA_MSG && r.onControl(in) {
		return
	}
	if h.Proc == wire.RDMA_MSG && wire.PayloadDirection(in.payload) == wire.DirReply {
		// The reply to a backward call (RFC 8167), or nothing we
		// asked for.
		if r.back != nil {
			r.back.onReply(in)
		} else {
			c.drop(DropBackwardOff, h.XID, "why", "no Config.BackwardCredits")
		}
		return
	}
	lim := c.lim
	lim.MaxHeaderSize = c.recvSize
	if err := h.Validate(wire.DirCall, lim); err != nil {
		r.reject(RejectInvalidHeader, h.XID, h.Vers, wire.ErrChunk, "err", err)
		return
	}
	if h.HasPayload() && wire.PayloadDirection(in.payload) != wire.DirCall {
		c.drop(DropNotACall, h.XID)
		return
	}
	if v := uint32(h.Vers); r.vers.Load() != v {
		r.vers.Store(v)
	}
	if r.back != nil {
		// Backward calls go in the version the requester speaks.
		r.back.vers.Store(uint32(h.Vers))
	}
	if len(h.Chunks.Reads) > 0 {
		c.pullSoon.Store(true)
	}
	in.im = r.newInMsg(in.payload)
	in.payload, in.borrowed = in.im.payload, false
	r.arrive(in) // responder_recv.go
}

// onUndecodable answers a message whose transport header did not decode
// (derr), of which raw holds the first bytes: ERR_VERS for a version not
// served, ERR_CHUNK for the rest, nothing for an RDMA_ERROR or a message
// too short to name its XID (RFC 5666 section 4.2).
func (r *responder) onUndecodable(derr error, raw []byte) {
	c := r.c
	p, perr := wire.DecodePrefix(raw)
	if perr != nil {
		c.drop(DropUndecodable, 0, "err", derr)
		return
	}
	var he *wire.HeaderError
	errors.As(derr, &he)
	if he != nil && he.Code == wire.ErrVers {
		r.reject(RejectVersion, p.XID, c.versions[0], wire.ErrVers, "vers", p.Vers)
		return
	}
	if len(raw) >= 16 && binary.BigEndian.Uint32(raw[12:]) == uint32(wire.RDMA_ERROR) {
		c.drop(DropErrorToResponder, p.XID, "err", derr) // never answer an RDMA_ERROR
		return
	}
	r.reject(RejectUndecodable, p.XID, r.answerVers(p.Vers), wire.ErrChunk, "err", derr)
}

// onControl handles a message that carries no call for the rpc layer
// (RDMA_ERROR, RDMA_DONE, RDMA_OPTIONAL, and RDMA_MSGP when padding is
// off) and reports true; for a call (RDMA_NOMSG, an RDMA_MSGP taken) it
// reports false.
func (r *responder) onControl(in *inbound) bool {
	c := r.c
	h := &in.hdr
	switch h.Proc {
	case wire.RDMA_ERROR:
		c.stats.countError(h.Error.Code, false)
		c.drop(DropErrorToResponder, h.XID, "code", h.Error.Code)
	case wire.RDMA_DONE:
		// The requester has pulled a read-chunk reply (RFC 5666 section
		// 3.8): its memory can go. A DONE for nothing is dropped.
		if !r.releaseReadReply(h.XID) {
			c.drop(DropStrayDone, h.XID)
		}
	case wire.RDMA_MSGP:
		// Off by default: RFC 8166 peers answer ERR_CHUNK.
		if c.cfg.MSGP {
			return false
		}
		r.reject(RejectMSGP, h.XID, h.Vers, wire.ErrChunk)
	case wire.RDMA_OPTIONAL:
		lim := c.lim
		lim.MaxHeaderSize = c.recvSize
		if err := h.Validate(wire.DirCall, lim); err != nil {
			r.reject(RejectOptionHeader, h.XID, h.Vers, wire.ErrBadHeader, "err", err)
			return true
		}
		// draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2: an opttype the
		// receiver does not support is answered RDMA_ERR_INVAL_OPTION.
		if f := c.cfg.Options[h.Optional.Type]; f == nil {
			r.reject(RejectOption, h.XID, h.Vers, wire.ErrInvalOption, "opttype", h.Optional.Type)
		} else if err := f(c, h.Optional.Info, clone(in.payload)); err != nil {
			r.reject(RejectOption, h.XID, h.Vers, wire.ErrInvalOption, "opttype", h.Optional.Type, "err", err)
		}
	default:
		return false
	}
	return true
}

// answerVers picks the version of an error reply: the requester's if we
// speak it, else our lowest.
func (r *responder) answerVers(v wire.Version) wire.Version {
	if r.c.supports(v) {
		return v
	}
	return r.c.versions[0]
}

// admit counts the call im, which has just arrived, as being prepared,
// and reports true, unless the requester already has as many calls
// unanswered (prepared or being prepared) as this responder posts
// receives, more than any grant of its allows: a requester ignoring its
// credits.
func (r *responder) admit(im *inMsg) bool {
	c := r.c
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.npending+r.nprep >= r.grant.mostUnanswered(c.shared(), c.recvSlots, int(c.cfg.BackwardCredits)) {
		return false
	}
	r.nprep++
	im.preparing = true
	return true
}

// addPending records the call im, prepared, as received and not yet
// answered: the rpc layer is about to get it.
func (r *responder) addPending(im *inMsg) {
	ic := &im.ic
	r.mu.Lock()
	if im.preparing {
		im.preparing = false
		r.nprep--
	}
	if first, _ := r.pending.Get(ic.xid); first != nil {
		last := first
		for last.next != nil {
			last = last.next
		}
		last.next = ic
	} else {
		r.pending.Put(ic.xid, ic)
	}
	r.npending++
	r.grant.busy(r.npending)
	if want, ok := r.grant.raiseTo(r.npending, ic.credits, &r.c.cfg.Grant); ok {
		r.raiseGrant(want)
	}
	r.mu.Unlock()
}

// soleSTag returns the handle every segment of the call's chunks names, if
// there is exactly one, else 0 (the rule Linux follows for Send With
// Invalidate, RFC 8166 has no field for it).
func soleSTag(cl *wire.ChunkLists) rdma.STag {
	var s uint32
	seen := func(h uint32) bool {
		if s == 0 {
			s = h
		}
		return s == h
	}
	for _, rs := range cl.Reads {
		if !seen(rs.Handle) {
			return 0
		}
	}
	for _, wc := range cl.Writes {
		for _, seg := range wc {
			if !seen(seg.Handle) {
				return 0
			}
		}
	}
	for _, seg := range cl.Reply.Chunk {
		if !seen(seg.Handle) {
			return 0
		}
	}
	return rdma.STag(s)
}

// version returns the version of the last call received, the one the
// requester speaks; before any, the highest version served.
func (r *responder) version() wire.Version {
	if v := r.vers.Load(); v != 0 {
		return wire.Version(v)
	}
	return r.c.versions[len(r.c.versions)-1]
}

// granted returns the grant this side offers.
func (r *responder) granted() uint32 { return r.grant.load() }

func (r *responder) takePeak() int { return 0 }

// invalidates reports whether replies use Send With Invalidate: the
// requester said it accepts it (RFC 8797 section 4.1.1) and this side is
// not configured not to.
func (r *responder) invalidates(n *negotiated) bool {
	return n.peerInvalidates && !r.c.cfg.NoRemoteInvalidation
}

// cancel does nothing: a responder has no calls of its own to cancel.
func (r *responder) cancel(uint32) {}

// outstanding returns how many calls are received and not yet answered.
func (r *responder) outstanding() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.npending
}

// ending runs the Listener's hook for a connection that has ended
// (dial.go), before the rdma.Conn is closed.
func (r *responder) ending() {
	if r.onEnd != nil {
		r.onEnd()
	}
}

// closeAll runs the Listener's hook for a connection closed (dial.go),
// releases every read-chunk reply and fails the waits for a backward
// credit with err.
func (r *responder) closeAll(err error) {
	if r.onClosed != nil {
		r.onClosed()
	}
	r.mu.Lock()
	done := r.done
	r.done = map[uint32]*readReply{}
	r.mu.Unlock()
	for _, rr := range done {
		r.c.stopTimer(rr.timer)
		r.c.releaseAll([]rdma.MR{rr.mr})
	}
	r.mu.Lock()
	r.c.stopTimer(r.reclaim)
	r.mu.Unlock()
	if r.back != nil {
		r.back.close(err)
	}
}

// backchannel returns the Backchannel whose calling half r owns, or nil.
func (r *responder) backchannel() *Backchannel {
	if r.back == nil {
		return nil
	}
	return r.back.b
}
