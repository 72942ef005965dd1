package rpcrdma

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/reuse"
	"github.com/go-rpcrdma/rpcrdma/internal/xidmap"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The responder: receiving calls (RFC 5666 sections 3.5-3.8, 4.2, 5) and
// marshaling replies.
//
// Life of a call. The loop decodes and validates the transport header of
// every message. Anything it cannot serve is answered at once with
// RDMA_ERROR (ERR_VERS with the versions served, or ERR_CHUNK /
// RDMA_ERR_BAD_HEADER), except an RDMA_ERROR, which is never answered, and
// a message too short to carry an XID, which is dropped. Once Push has
// been called (the rpc.Server does), a good call without read chunks goes
// from the loop straight to deliver (pushCall), unless the requester
// already has as many calls unanswered as there are receives, a credit
// overrun, which is dropped. Other good calls go to Recv, which checks the
// call's chunks against it and posts the RDMA Reads
// that pull them (as many in flight as the ORD allows, over this call and
// the calls after it: Recv does not wait for them, the completion loop
// hands the call back once its last Read is done). The call is rebuilt as
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

	recvQueues // how calls reach the rpc layer (responder_recv.go)
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
	waited  bool     // recvCall has seen the call once and left it waiting for its share
	release func()   // msg.Release, bound once
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

// overrun reports whether the requester has as many calls unanswered as
// this responder posts receives, more than any grant of its allows: a
// requester ignoring its credits. Such calls are dropped rather than
// passed on, so the calls waiting for a handler stay bounded.
func (r *responder) overrun() bool {
	c := r.c
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.npending >= r.grant.mostUnanswered(c.shared(), c.recvSlots, int(c.cfg.BackwardCredits))
}

// onMessage handles a message received by a responder, on the loop. raw
// holds the first bytes of an undecodable message.
func (r *responder) onMessage(in *inbound, derr error, raw []byte) {
	c := r.c
	r.received.Add(1)
	h := &in.hdr
	if derr != nil {
		p, perr := wire.DecodePrefix(raw)
		if perr != nil {
			c.drop(DropUndecodable, 0, "err", derr) // nothing to answer (RFC 5666 section 4.2)
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
		return
	}
	if !c.supports(h.Vers) {
		r.reject(RejectVersion, h.XID, c.versions[0], wire.ErrVers, "vers", h.Vers)
		return
	}
	switch h.Proc {
	case wire.RDMA_ERROR:
		c.stats.countError(h.Error.Code, false)
		c.drop(DropErrorToResponder, h.XID, "code", h.Error.Code)
		return
	case wire.RDMA_DONE:
		// The requester has pulled a read-chunk reply (RFC 5666 section
		// 3.8): its memory can go. A DONE for nothing is dropped.
		if !r.releaseReadReply(h.XID) {
			c.drop(DropStrayDone, h.XID)
		}
		return
	case wire.RDMA_MSGP:
		// Off by default: RFC 8166 peers answer ERR_CHUNK.
		if !c.cfg.MSGP {
			r.reject(RejectMSGP, h.XID, h.Vers, wire.ErrChunk)
			return
		}
	case wire.RDMA_OPTIONAL:
		lim := c.lim
		lim.MaxHeaderSize = c.recvSize
		if err := h.Validate(wire.DirCall, lim); err != nil {
			r.reject(RejectOptionHeader, h.XID, h.Vers, wire.ErrBadHeader, "err", err)
			return
		}
		// draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2: an opttype the
		// receiver does not support is answered RDMA_ERR_INVAL_OPTION.
		if f := c.cfg.Options[h.Optional.Type]; f == nil {
			r.reject(RejectOption, h.XID, h.Vers, wire.ErrInvalOption, "opttype", h.Optional.Type)
		} else if err := f(c, h.Optional.Info, clone(in.payload)); err != nil {
			r.reject(RejectOption, h.XID, h.Vers, wire.ErrInvalOption, "opttype", h.Optional.Type, "err", err)
		}
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
	if r.back != nil {
		// Backward calls go in the version the requester speaks.
		r.back.vers.Store(uint32(h.Vers))
	}
	if len(h.Chunks.Reads) > 0 {
		c.pullSoon.Store(true)
	}
	in.im = r.newInMsg(in.payload)
	in.payload, in.borrowed = in.im.payload, false
	if !r.deliver(*in) {
		in.im.free()
	}
}

// answerVers picks the version of an error reply: the requester's if we
// speak it, else our lowest.
func (r *responder) answerVers(v wire.Version) wire.Version {
	if r.c.supports(v) {
		return v
	}
	return r.c.versions[0]
}

// recvCall turns a validated call into the rpc.Msg Recv returns. A call
// without data chunks comes back at once, a long call's position-zero
// chunk pulled first. A call with data chunks comes back with ok false:
// its Reads are posted, and once they complete the loop passes it to Recv
// through r.pulled (finishCall), so the Reads of several calls are in
// flight together. A call whose chunks do not fit is answered with
// ERR_CHUNK and reported with ok false; err is a connection failure. The
// Msg's Release gives in.im back.
func (r *responder) recvCall(in *inbound) (m *rpc.Msg, ok bool, err error) {
	c := r.c
	h := &in.hdr
	im := in.im
	if !im.waited {
		c.stats.add(statCallsReceived, 1)
	}
	ic := &im.ic
	*ic = inCall{xid: h.XID, vers: h.Vers, credits: h.Credits, writes: h.Chunks.Writes, reply: h.Chunks.Reply, inv: soleSTag(&h.Chunks)}

	var chunks []wire.ReadChunk
	if len(h.Chunks.Reads) > 0 {
		chunks = h.Chunks.Reads.Chunks(nil)
	}
	for _, ch := range chunks {
		if n := ch.Length(); n > maxChunk {
			return r.refuse(im, RejectChunk, fmt.Sprintf("read chunk at position %d holds %d bytes, more than the %d this responder takes", ch.Position, n, maxChunk))
		}
	}
	// What the call may make us hold, reserved before anything is
	// allocated or read (bounds.go). A call that must wait for it waits
	// on a side goroutine, so that this Recv goes on delivering the
	// calls that hold the budget.
	if why := r.reserve(im, h, false); why != "" {
		return r.refuse(im, RejectTooLarge, why)
	}
	if im.held < 0 {
		im.held, im.waited = 0, true
		r.waitReserve(*in)
		return nil, false, nil
	}
	m = &im.msg
	m.XDR = in.payload
	m.Release = im.release
	if h.Proc == wire.RDMA_MSGP && h.Padding.Align > 1 {
		// RFC 5666 section 3.9: opaques of at least rdma_thresh bytes
		// are padded so their data is aligned to rdma_align in the
		// receive buffer, which the transport header starts.
		m.Padding = rpc.Padding{Align: int(h.Padding.Align), Thresh: int(h.Padding.Thresh), Base: h.EncodedLen()}
	}
	if len(chunks) > 0 && chunks[0].Position == 0 {
		// A long call: the reduced message comes first, so the data
		// chunks can be checked against it before they are pulled.
		bufs, err := c.pull(chunks[:1], true)
		if err != nil {
			im.free()
			return nil, false, err
		}
		m.XDR = bufs[0]
		im.pzrc = bufs[0]
		chunks = chunks[1:]
		c.stats.add(statLongCalls, 1)
	}
	if xid, _, ok := rpc.PeekHeader(m.XDR); !ok || xid != h.XID {
		return r.refuse(im, RejectXID, "RPC call does not carry the transport header's XID")
	}
	if why := r.argLimit(m.XDR, chunks); why != "" {
		return r.refuse(im, RejectTooLarge, why)
	}
	// Check every data chunk against the length word it replaces before
	// any RDMA Read: a chunk that does not fit costs the requester an
	// ERR_CHUNK, not us a transfer.
	shift := 0
	for _, ch := range chunks {
		off := int(ch.Position) - shift
		if off < 4 || off > len(m.XDR) || (len(m.Items) > 0 && off < m.Items[len(m.Items)-1].Offset+4) {
			return r.refuse(im, RejectChunk, fmt.Sprintf("read chunk position %d outside the call", ch.Position))
		}
		n := int(binary.BigEndian.Uint32(m.XDR[off-4:]))
		// The chunk holds the item's data, with or without its XDR pad
		// (RFC 8166 section 3.4.5).
		if got := ch.Length(); got != uint64(n) && got != uint64(xdr.RoundUp(n)) {
			return r.refuse(im, RejectChunk, fmt.Sprintf("read chunk at position %d holds %d bytes, its length word says %d", ch.Position, got, n))
		}
		m.Items = append(m.Items, rpc.DDPItem{Offset: off, Data: nil})
		shift += xdr.RoundUp(n)
	}
	if len(chunks) == 0 {
		r.addPending(ic)
		return m, true, nil
	}
	c.startPull(chunks, true, func(bufs [][]byte, err error) {
		if r.pulled.put(pulledCall{im: im, bufs: bufs, err: err}) {
			r.wake()
			return
		}
		// More calls than receive slots are being pulled: the peer
		// overran its credits, and the connection is ending.
		for _, b := range bufs {
			putBuf(b)
		}
		c.drop(DropCreditOverrun, im.ic.xid, "why", "more calls pulling than receives")
	})
	return nil, false, nil
}

// A pulledCall is a call whose data chunks have been pulled (or failed to
// be), on its way from the loop to Recv.
type pulledCall struct {
	im   *inMsg
	bufs [][]byte
	err  error
}

// finishCall completes a call recvCall left pulling its data chunks.
func (r *responder) finishCall(pc pulledCall) (*rpc.Msg, error) {
	im := pc.im
	if pc.err != nil {
		im.free()
		return nil, pc.err
	}
	im.bufs = append(im.bufs, pc.bufs...)
	m := &im.msg
	for i := range m.Items {
		n := binary.BigEndian.Uint32(m.XDR[m.Items[i].Offset-4:])
		m.Items[i].Data = pc.bufs[i][:n]
	}
	r.addPending(&im.ic)
	return m, nil
}

// addPending records ic as received and not yet answered.
func (r *responder) addPending(ic *inCall) {
	r.mu.Lock()
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

// refuse answers a call with ERR_CHUNK from Recv, counting it under
// reason, and gives im back.
func (r *responder) refuse(im *inMsg, reason Reason, why string) (*rpc.Msg, bool, error) {
	ic := &im.ic
	if reason == RejectTooLarge && r.c.ln != nil {
		r.c.ln.reasons[reason].Add(1)
	}
	r.reject(reason, ic.xid, ic.vers, wire.ErrChunk, "why", why)
	im.free()
	return nil, false, nil
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

// version returns the highest version served.
func (r *responder) version() wire.Version { return r.c.versions[len(r.c.versions)-1] }

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
