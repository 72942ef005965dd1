package rpcrdma

import (
	"context"
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

// The requester: marshaling calls (RFC 5666 sections 3.4-3.7, 5.1) and
// matching replies.
//
// Life of a call. Send takes a credit; marshal decides how each part
// travels (planCall, plan.go), registers the caller's memory for the chunks
// it offers (register); send records the call by XID and posts the Send.
// Whoever holds the completion queue, the loop or, on the short path, the
// caller of the one call in flight (short.go), receives the reply, checks
// it against what was offered, updates the grant, invalidates every
// registration (but one the responder invalidated with Send With
// Invalidate), returns the credit and hands the reply to Recv (or to
// rpc.Pusher's deliver, on that same goroutine). A call abandoned by its
// caller (CancelCall) has its registrations invalidated at once but keeps
// its credit until the reply arrives, since the responder still counts it;
// if none comes within AbandonTimeout, the connection ends (abandoned).
//
// How a call travels (planCall):
//   - DDP-eligible argument items of at least DDPThreshold bytes go in read
//     chunks, one per item, at the item's position in the un-reduced XDR
//     stream; the length word stays inline, the XDR pad is not sent (RFC
//     8166 section 3.4.5). Smaller items are copied inline.
//   - Each ResultBuf becomes a write chunk, in order; the responder fills
//     them with the reply's DDP-eligible results.
//   - A MaxReply larger than what fits in an inline reply gets a reply
//     chunk of that size.
//   - If the transport header and the reduced call do not fit in the
//     responder's receive buffer, the whole reduced call goes in a
//     position-zero read chunk of an RDMA_NOMSG message: a long call.

// requester is the requester role of a Conn: the calls outstanding, the
// credit window, the version in use, how replies reach the rpc layer
// (requester_recv.go) and its half of the backward direction
// (backchannel_serve.go). The short path (short.go) is a requester's
// too, but the turn's state stays on Conn, whose loop takes part
// (conn_turn.go).
type requester struct {
	c       *Conn
	credits *creditWindow

	vers    atomic.Uint32 // version calls are sent in
	settled atomic.Bool   // a reply other than ERR_VERS has arrived

	mu    sync.Mutex
	calls xidmap.Map[*outCall]

	spare reuse.Spare[outCall] // newOutCall's, in front of outCalls

	replyQueue // how replies reach the rpc layer (requester_recv.go)

	back *backServer // the serving half of the backward direction; nil unless Config.BackwardCredits is set
}

// outCall is a call between its Send and its reply.
type outCall struct {
	xid       uint32
	msg       rpc.Msg // shallow copy, to resend after a version fallback
	vers      wire.Version
	mrs       []rdma.MR   // every registration of the call
	writeBufs [][]byte    // ResultBufs offered as write chunks, in order
	replyBuf  []byte      // reply chunk memory, or nil
	cancelled bool        // CancelCall ran: drop the reply, keep the credit until it comes
	abandon   *time.Timer // after CancelCall: ends the connection if the reply never comes

	hdr        wire.Header // the transport header, built by marshal
	plan       callPlan    // how the call travels, built by marshal
	piecesBuf  [8][]byte   // backing for plan.pieces, enough for most calls
	chunkedBuf [4]int      // backing for plan.chunked
}

func newRequester(c *Conn) *requester {
	r := &requester{c: c, credits: newCreditWindow(c.cfg.credits())}
	r.vers.Store(uint32(c.versions[len(c.versions)-1]))
	return r
}

func (r *requester) version() wire.Version { return wire.Version(r.vers.Load()) }

// outCalls recycles outCall values: one is unreachable once finish has
// delivered its reply (or its error), or Send has failed.
var outCalls = sync.Pool{New: func() any { return new(outCall) }}

// newOutCall returns a recycled outCall for the call xid carried by m:
// the requester's spare, else a pooled one. Its slices start empty; mrs
// keeps its capacity (releaseAll is done with it before the outCall is
// put back), writeBufs does not (Recv reads the delivered slice after
// that).
func (r *requester) newOutCall(xid uint32, m *rpc.Msg) *outCall {
	oc := r.spare.Get(&outCalls)
	mrs := oc.mrs[:0]
	*oc = outCall{xid: xid, msg: *m, mrs: mrs}
	return oc
}

// putOutCall recycles oc, which is unreachable: finish has delivered its
// reply (or its error), or its Send has failed.
func (r *requester) putOutCall(oc *outCall) { r.spare.Put(oc, &outCalls) }

// sendRPC sends the call m (Conn.Send on a requester): it waits for a
// credit, respecting ctx, and returns once the Send is posted.
func (r *requester) sendRPC(ctx context.Context, m *rpc.Msg) error {
	if len(m.XDR) < 8 {
		return fmt.Errorf("rpcrdma: call of %d bytes has no RPC header", len(m.XDR))
	}
	if err := r.credits.acquire(ctx); err != nil {
		return err
	}
	if err := r.sendCall(ctx, m); err != nil {
		r.credits.release()
		return err
	}
	return nil
}

// sendCall sends the call m, for which the caller holds a credit. On
// failure nothing of the call stays registered or recorded; the caller
// keeps the credit.
func (r *requester) sendCall(ctx context.Context, m *rpc.Msg) error {
	oc := r.newOutCall(binary.BigEndian.Uint32(m.XDR), m)
	if err := r.send(ctx, oc, r.version()); err != nil {
		r.putOutCall(oc)
		return err
	}
	return nil
}

// send marshals and posts oc in version v; the caller holds a credit for
// it. On failure nothing stays registered or recorded.
func (r *requester) send(ctx context.Context, oc *outCall, v wire.Version) error {
	c := r.c
	oc.vers = v
	hdr, pieces, err := r.marshal(oc, v)
	if err != nil {
		c.releaseAll(oc.mrs)
		return err
	}
	r.mu.Lock()
	if _, dup := r.calls.Get(oc.xid); dup {
		r.mu.Unlock()
		c.releaseAll(oc.mrs)
		return fmt.Errorf("rpcrdma: call 0x%x already outstanding", oc.xid)
	}
	r.calls.Put(oc.xid, oc)
	r.mu.Unlock()
	err = c.sendMsg(ctx, hdr, pieces, 0, false)
	if err != nil {
		r.mu.Lock()
		r.calls.Delete(oc.xid)
		r.mu.Unlock()
		c.releaseAll(oc.mrs)
		return err
	}
	c.stats.add(statCallsSent, 1)
	return nil
}

// marshal decides how oc travels in version v (planCall), registers the
// memory its chunks offer (register), and returns the transport header and
// the inline payload as pieces. On failure the caller releases oc.mrs.
func (r *requester) marshal(oc *outCall, v wire.Version) (*wire.Header, [][]byte, error) {
	c := r.c
	neg := &c.negV[v]
	hdr := &oc.hdr
	*hdr = wire.Header{XID: oc.xid, Vers: v, Credits: c.cfg.credits()}
	shape := callShape{
		threshold:  c.cfg.ddpThreshold(),
		sendLimit:  neg.sendLimit,
		replyLimit: neg.replyLimit,
		cut:        cutFor(c),
		lim:        c.lim,
	}
	p := &oc.plan
	p.pieces, p.chunked = oc.piecesBuf[:0], oc.chunkedBuf[:0]
	if err := planCall(hdr, &oc.msg, &shape, p); err != nil {
		return nil, nil, err
	}
	if err := r.register(oc, hdr, p); err != nil {
		return nil, nil, err
	}
	for _, i := range p.chunked {
		c.stats.add(statReadChunks, 1)
		c.stats.add(statReadChunkBytes, uint64(len(oc.msg.Items[i].Data)))
	}
	c.stats.add(statWriteChunks, uint64(len(oc.msg.ResultBufs)))
	if p.long {
		c.stats.add(statLongCalls, 1)
		c.stats.add(statReadChunkBytes, uint64(p.inlineLen))
		return hdr, nil, nil
	}
	c.stats.add(statInline, 1)
	return hdr, p.pieces, nil
}

// cutFor returns how c cuts its calls' chunks: the zero chunkCut unless a
// test has set testHookCut (export_test.go), as net/http's test hooks are
// set. It is nil outside tests, and set once, before any connection.
func cutFor(c *Conn) chunkCut {
	if testHookCut == nil {
		return chunkCut{}
	}
	return testHookCut(c)
}

var testHookCut func(*Conn) chunkCut

// register registers the memory oc's plan p offers the responder, in the
// order of h's chunk lists, and completes their segments with the
// registrations' handles and tagged offsets. Every registration is in
// oc.mrs, also on failure.
func (r *requester) register(oc *outCall, h *wire.Header, p *callPlan) error {
	c := r.c
	reads := h.Chunks.Reads
	if p.long {
		mr, err := c.register(flatten(p.pieces, p.inlineLen), rdma.AccessRemoteRead)
		if err != nil {
			return fmt.Errorf("rpcrdma: registering long call 0x%x: %w", oc.xid, err)
		}
		oc.mrs = append(oc.mrs, mr)
		locate(&reads[0].Segment, mr)
		reads = reads[1:]
	}
	for _, i := range p.chunked {
		data := oc.msg.Items[i].Data
		if p.cut.pad && xdr.Pad(len(data)) > 0 {
			data = xdr.AppendPad(append([]byte(nil), data...), len(data))
		}
		mr, err := c.register(data, rdma.AccessRemoteRead)
		if err != nil {
			return fmt.Errorf("rpcrdma: registering read chunk of call 0x%x: %w", oc.xid, err)
		}
		oc.mrs = append(oc.mrs, mr)
		for range segmentCount(len(data), p.cut.seg) {
			locate(&reads[0].Segment, mr)
			reads = reads[1:]
		}
	}
	for i, buf := range oc.msg.ResultBufs {
		mr, err := c.register(buf, rdma.AccessRemoteWrite)
		if err != nil {
			return fmt.Errorf("rpcrdma: registering write chunk of call 0x%x: %w", oc.xid, err)
		}
		oc.mrs = append(oc.mrs, mr)
		oc.writeBufs = append(oc.writeBufs, buf)
		for j := range h.Chunks.Writes[i] {
			locate(&h.Chunks.Writes[i][j], mr)
		}
	}
	if p.replyLen > 0 {
		// The caller's ReplyBuf, when it holds the whole chunk: the
		// reply lands where Recv's message will alias it anyway. The
		// responder can write there only while the chunk is
		// registered, until the call ends (a Release waits for a
		// placement under way).
		if cap(oc.msg.ReplyBuf) >= p.replyLen {
			oc.replyBuf = oc.msg.ReplyBuf[:p.replyLen]
		} else {
			oc.replyBuf = make([]byte, p.replyLen)
		}
		mr, err := c.register(oc.replyBuf, rdma.AccessRemoteWrite)
		if err != nil {
			return fmt.Errorf("rpcrdma: registering reply chunk of call 0x%x: %w", oc.xid, err)
		}
		oc.mrs = append(oc.mrs, mr)
		locate(&h.Chunks.Reply.Chunk[0], mr)
	}
	return nil
}

// onMessage handles a message received by a requester, on the loop.
func (r *requester) onMessage(in *inbound, derr error, _ []byte) {
	c := r.c
	h := &in.hdr
	if derr != nil {
		var he *wire.HeaderError
		if !errors.As(derr, &he) || he.Rule == wire.RuleMalformed && h.XID == 0 && h.Vers == 0 {
			c.drop(DropUndecodable, h.XID, "err", derr)
			return
		}
		r.finish(h.XID, nil, &replyError{xid: h.XID, why: "undecodable transport header", err: derr})
		return
	}
	if h.Proc == wire.RDMA_OPTIONAL {
		if f := c.cfg.Options[h.Optional.Type]; f != nil {
			f(c, h.Optional.Info, clone(in.payload))
		} else {
			c.drop(DropUnknownOption, h.XID, "opttype", h.Optional.Type)
		}
		return
	}
	if h.Proc == wire.RDMA_MSG && wire.PayloadDirection(in.payload) == wire.DirCall {
		// A backward-direction call (RFC 8167). Without BackwardCredits
		// there is no receive budget for it.
		if r.back != nil {
			r.back.onCall(in)
		} else {
			c.drop(DropBackwardOff, h.XID, "why", "no Config.BackwardCredits")
		}
		return
	}
	lim := c.lim
	lim.MaxHeaderSize = c.recvSize
	lim.AllowReadReply = c.cfg.ReadChunkReplies
	if err := h.Validate(wire.DirReply, lim); err != nil {
		r.finish(h.XID, nil, &replyError{xid: h.XID, why: "invalid transport header", err: err})
		return
	}
	if g, err := r.credits.update(h.Credits); err != nil {
		c.log.Warn("rpcrdma: peer granted zero credits; using one", "xid", h.XID, "granted", g)
	}

	switch h.Proc {
	case wire.RDMA_ERROR:
		c.stats.countError(h.Error.Code, false)
		if r.fallback(h) {
			return
		}
		r.finish(h.XID, in, &RemoteError{XID: h.XID, Vers: h.Vers, Code: h.Error.Code, Low: h.Error.Low, High: h.Error.High})
	case wire.RDMA_MSG, wire.RDMA_NOMSG:
		if len(h.Chunks.Reads) > 0 {
			// An RFC 5666 read-chunk reply: pulling it posts RDMA
			// Reads, which the loop must not wait for.
			c.pullSoon.Store(true)
			cp := *in        // in lives on the loop's stack
			cp.payload = nil // borrowed, and no reply of this kind has one
			c.goSide(func() { r.pullReply(&cp) })
			return
		}
		r.finish(h.XID, in, nil)
	default:
		// RDMA_MSGP and RDMA_DONE are not replies (RFC 8166 section 4.5);
		// RDMA_OPTIONAL is not one this requester offered.
		r.finish(h.XID, in, &replyError{xid: h.XID, why: h.Proc.String() + " is not a reply"})
	}
}

// fallback handles ERR_VERS to the first call sent in Version Two: it
// switches the connection to Version One and resends the call
// (draft-cel-nfsv4-rpcrdma-version-two-00 section 5). It reports whether it
// took the message.
func (r *requester) fallback(h *wire.Header) bool {
	c := r.c
	if h.Error.Code != wire.ErrVers || r.settled.Load() || !c.supports(wire.Version1) ||
		h.Error.Low > wire.Version1 || r.version() == wire.Version1 {
		return false
	}
	r.mu.Lock()
	oc, _ := r.calls.Get(h.XID)
	if oc == nil || oc.cancelled || oc.vers == wire.Version1 {
		r.mu.Unlock()
		return false
	}
	r.calls.Delete(h.XID)
	r.mu.Unlock()
	r.vers.Store(uint32(wire.Version1))
	c.stats.add(statVersionFallback, 1)
	c.log.Info("rpcrdma: responder answered ERR_VERS; falling back to version 1", "xid", h.XID, "low", h.Error.Low, "high", h.Error.High)
	c.releaseAll(oc.mrs)
	oc.mrs, oc.writeBufs, oc.replyBuf = nil, nil, nil
	// The resend posts to the send queue, which the loop must not wait on.
	c.goSide(func() {
		if err := r.send(c.ctx, oc, wire.Version1); err != nil {
			r.credits.release()
			r.deliver(inbound{hdr: wire.Header{XID: oc.xid}, err: err})
			r.putOutCall(oc)
		}
	})
	return true
}

// pullReply reads an RFC 5666 read-chunk reply (RFC 5666 sections 3.8 and
// 5.1: the whole reply in a position-zero read chunk), tells the
// responder with RDMA_DONE that its memory can go, and completes the call.
func (r *requester) pullReply(in *inbound) {
	c := r.c
	h := &in.hdr
	chunks := h.Chunks.Reads.Chunks(nil)
	if len(chunks) != 1 || chunks[0].Position != 0 || h.Proc != wire.RDMA_NOMSG {
		r.finish(h.XID, nil, &replyError{xid: h.XID, why: "read chunks in a reply other than one position-zero chunk of RDMA_NOMSG"})
		return
	}
	if n := chunks[0].Length(); n > maxChunk {
		r.finish(h.XID, nil, &replyError{xid: h.XID, why: fmt.Sprintf("read-chunk reply of %d bytes, more than the %d this requester takes", n, maxChunk)})
		return
	}
	bufs, err := c.pull(chunks, false)
	if err != nil {
		r.finish(h.XID, nil, &replyError{xid: h.XID, why: "pulling the read-chunk reply", err: err})
		return
	}
	done := &wire.Header{XID: h.XID, Vers: h.Vers, Credits: c.cfg.credits(), Proc: wire.RDMA_DONE}
	ctx, cancel := context.WithTimeout(c.ctx, sideSendTimeout)
	defer cancel()
	if err := c.sendMsg(ctx, done, nil, 0, false); err != nil {
		c.log.Debug("rpcrdma: sending RDMA_DONE", "xid", h.XID, "err", err)
	}
	c.stats.add(statReadReplies, 1)
	in.payload = bufs[0]
	r.finish(h.XID, in, nil)
}

// finish completes the call xid with the reply in (nil if its header was
// not valid) or with err. A reply that is not an error settles the
// version negotiation.
func (r *requester) finish(xid uint32, in *inbound, err error) {
	c := r.c
	r.mu.Lock()
	oc, _ := r.calls.Take(xid)
	r.mu.Unlock()
	if oc == nil {
		c.drop(DropUnmatchedReply, xid)
		return
	}
	if in != nil && err == nil {
		r.settled.Store(true)
	}
	// Invalidate before the reply is delivered, so the caller gets its
	// memory back with no remote access possible. Release deregisters.
	// An STag the responder invalidated with Send With Invalidate
	// (comp.InvalidatedSTag) needs no local invalidation, but is still
	// deregistered.
	c.releaseAll(oc.mrs)
	r.credits.release()
	defer r.putOutCall(oc)
	c.stopTimer(oc.abandon)
	if oc.cancelled {
		c.drop(DropCancelledReply, xid)
		return
	}
	if re, ok := err.(*RemoteError); ok && re.Code == wire.ErrChunk {
		re.offered = offeredHint(c.negV[oc.vers].replyLimit, len(oc.replyBuf), oc.writeBufs)
	}
	c.stats.add(statRepliesReceived, 1)
	if err == nil {
		err = r.checkReply(oc, in)
	}
	if err != nil {
		r.deliver(inbound{hdr: wire.Header{XID: xid}, err: err})
		return
	}
	if in.borrowed {
		// The reply is the caller's: into its ReplyBuf if it fits.
		if cap(oc.msg.ReplyBuf) >= len(in.payload) {
			in.payload = append(oc.msg.ReplyBuf[:0], in.payload...)
		} else {
			in.payload = clone(in.payload)
		}
		in.borrowed = false
	}
	r.deliver(*in)
}

// checkReply checks a reply's chunks against what oc offered and completes
// in for Recv: the payload of an RDMA_NOMSG reply is what the responder
// wrote into the reply chunk.
func (r *requester) checkReply(oc *outCall, in *inbound) error {
	h := &in.hdr
	if len(h.Chunks.Writes) > len(oc.writeBufs) {
		return &replyError{xid: oc.xid, why: fmt.Sprintf("%d write chunks returned, %d offered", len(h.Chunks.Writes), len(oc.writeBufs))}
	}
	for i, wc := range h.Chunks.Writes {
		if n := wc.Length(); n > uint64(len(oc.writeBufs[i])) {
			return &replyError{xid: oc.xid, why: fmt.Sprintf("write chunk %d reports %d bytes, %d offered", i, n, len(oc.writeBufs[i]))}
		}
	}
	switch h.Proc {
	case wire.RDMA_MSG:
		if h.Chunks.Reply.Present && h.Chunks.Reply.Chunk.Length() > 0 {
			return &replyError{xid: oc.xid, why: "RDMA_MSG with a filled reply chunk"}
		}
	case wire.RDMA_NOMSG:
		if len(h.Chunks.Reads) > 0 {
			break // a read-chunk reply, already pulled into in.payload
		}
		n := h.Chunks.Reply.Chunk.Length()
		if oc.replyBuf == nil || n > uint64(len(oc.replyBuf)) {
			return &replyError{xid: oc.xid, why: fmt.Sprintf("reply chunk reports %d bytes, %d offered", n, len(oc.replyBuf))}
		}
		in.payload = oc.replyBuf[:n]
		r.c.stats.add(statReplyChunks, 1)
		r.c.stats.add(statReplyChunkBytes, n)
	}
	if len(in.payload) < 4 || binary.BigEndian.Uint32(in.payload) != oc.xid {
		return &replyError{xid: oc.xid, why: "RPC reply does not carry the call's XID"}
	}
	for _, wc := range h.Chunks.Writes {
		r.c.stats.add(statWriteChunkBytes, wc.Length())
	}
	in.writes = oc.writeBufs
	return nil
}

// cancel is CancelCall on a requester: it invalidates the call's
// registrations at once. The call keeps its credit until the reply
// arrives, which is then dropped; if it has not arrived within
// Config.AbandonTimeout, the connection ends.
func (r *requester) cancel(xid uint32) {
	c := r.c
	r.mu.Lock()
	oc, _ := r.calls.Get(xid)
	var mrs []rdma.MR
	if oc != nil && !oc.cancelled {
		oc.cancelled = true
		mrs, oc.mrs = oc.mrs, nil
		if d := c.cfg.abandonTimeout(); d > 0 {
			oc.abandon = c.afterFunc(d, func() { r.abandoned(xid, oc, d) })
		}
	}
	r.mu.Unlock()
	c.releaseAll(mrs)
}

// abandoned ends the connection if the cancelled call oc is still waiting
// for its reply: its credit would be lost for good, and with it, once
// every credit is lost so, the connection.
func (r *requester) abandoned(xid uint32, oc *outCall, d time.Duration) {
	r.mu.Lock()
	cur, _ := r.calls.Get(xid)
	waiting := cur == oc
	r.mu.Unlock()
	if !waiting {
		return
	}
	r.c.log.Warn("rpcrdma: no reply to a cancelled call; ending the connection", "xid", xid, "waited", d)
	r.c.fail(&ConnError{Op: "reply", Err: fmt.Errorf("no reply to cancelled call 0x%x within %v: its credit cannot be reused until one comes", xid, d)})
}

// outstanding returns how many calls are outstanding.
func (r *requester) outstanding() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls.Len()
}

func (r *requester) takePeak() int { return int(r.credits.takePeak()) }

// backchannel returns the Backchannel whose serving half r owns, or nil.
func (r *requester) backchannel() *Backchannel {
	if r.back == nil {
		return nil
	}
	return r.back.b
}

// ending does nothing: a requester has nothing to give back before the
// rdma.Conn is closed.
func (r *requester) ending() {}

// closeAll forgets every outstanding call when the connection ends.
func (r *requester) closeAll(err error) {
	r.credits.close(err)
	r.mu.Lock()
	var calls []*outCall
	for _, oc := range r.calls.All() {
		calls = append(calls, oc)
	}
	r.calls.Clear()
	r.mu.Unlock()
	for _, oc := range calls {
		r.c.stopTimer(oc.abandon)
		r.c.releaseAll(oc.mrs)
	}
}

// SendOptional sends a Version Two RDMA_OPTIONAL message
// (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2) carrying opttype and
// info, optionally followed by payload, and returns once it is posted. It
// fails on a connection not in Version Two. A responder that does not support
// opttype answers RDMA_ERR_INVAL_OPTION, which arrives as an RDMA_ERROR for
// xid and is counted in Stats().ErrorsReceived; no call is failed.
// SendOptional does not take a credit: the optional feature defines its own
// flow control.
func (c *Conn) SendOptional(ctx context.Context, xid, opttype uint32, info, payload []byte) error {
	v := c.role.version()
	if v != wire.Version2 {
		return fmt.Errorf("rpcrdma: RDMA_OPTIONAL needs Version Two; the connection uses version %d", v)
	}
	h := &wire.Header{XID: xid, Vers: v, Credits: c.cfg.credits(), Proc: wire.RDMA_OPTIONAL,
		Optional: wire.Optional{Type: opttype, Info: info}}
	return c.sendMsg(ctx, h, [][]byte{payload}, 0, false)
}

// granted returns the grant the responder last sent.
func (r *requester) granted() uint32 {
	n, _ := r.credits.state()
	return n
}

// invalidates reports whether the responder may use Send With
// Invalidate: a requester accepts it unless configured not to, whatever
// the private data say.
func (r *requester) invalidates(*negotiated) bool { return !r.c.cfg.NoRemoteInvalidation }
