package rpcrdma

import (
	"encoding/binary"
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// How a responder's calls reach the rpc layer. The loop checks a call's
// transport header (responder.onMessage) and hands it to arrive, which
// counts it as pending and sends it one of two ways:
//
//   - A call that needs nothing the loop may not wait for (no read chunks
//     to pull, not CONF_RDMA, its share of the budgets free now) is built
//     on the loop and handed to the Conn's delivery there (delivery.go):
//     to the rpc.Server's deliver function once Push has been called.
//   - The others go to a side goroutine (goSide), which may wait: for
//     the budgets (bounds.go), for a position-zero chunk to be pulled,
//     for Read slots and send-queue entries to post the Reads of the
//     data chunks, for a send slot to answer CONF_RDMA itself. A call
//     with data chunks is handed over from where its last Read
//     completes, the loop.
//
// Each call is handed over once, from where it became ready; nothing
// queues between the two ends but the delivery's own queue before Push.

// arrive takes a call whose transport header the loop has checked, its
// inline part copied into in.im. A requester with as many calls
// unanswered as this responder posts receives is ignoring its credits:
// the call is dropped (and counted), so what is prepared and what waits
// for a handler stay bounded. A call becomes pending (answerable, and
// counted as in flight: Conn.Stats' CallsPending, the Listener's choice
// of an idle connection to evict) when it is handed over.
func (r *responder) arrive(in *inbound) {
	c := r.c
	h := &in.hdr
	im := in.im
	im.ic = inCall{xid: h.XID, vers: h.Vers, credits: h.Credits, writes: h.Chunks.Writes, reply: h.Chunks.Reply, inv: soleSTag(&h.Chunks)}
	if !r.admit(im) {
		c.drop(DropCreditOverrun, h.XID)
		im.free()
		return
	}
	c.stats.add(statCallsReceived, 1)
	if len(h.Chunks.Reads) > 0 || isConfigCall(in.payload) {
		r.prepareSide(*in)
		return
	}
	r.prepare(in, false)
}

// prepareSide runs prepare for in on a side goroutine, where it may wait.
func (r *responder) prepareSide(in inbound) {
	if !r.c.goSide(func() { r.prepare(&in, true) }) {
		in.im.free() // Close has begun
	}
}

// prepare turns the call in into the rpc.Msg the rpc layer gets, and hands
// it over, or answers it. On the loop (side false) it must not wait: a
// call whose share of the budgets is not free now goes on to a side
// goroutine. A call without data chunks is handed over here, a long
// call's position-zero chunk pulled first; a call with data chunks once
// its Reads have completed (finishCall), so the Reads of several calls
// are in flight together. A call whose chunks do not fit is answered with
// ERR_CHUNK. The Msg's Release gives in.im back.
func (r *responder) prepare(in *inbound, side bool) {
	c := r.c
	h := &in.hdr
	im := in.im
	var chunks []wire.ReadChunk
	if len(h.Chunks.Reads) > 0 {
		chunks = h.Chunks.Reads.Chunks(nil)
	}
	for _, ch := range chunks {
		if n := ch.Length(); n > maxChunk {
			r.refuse(im, RejectChunk, fmt.Sprintf("read chunk at position %d holds %d bytes, more than the %d this responder takes", ch.Position, n, maxChunk))
			return
		}
	}
	// What the call may make us hold, reserved before anything is
	// allocated or read (bounds.go).
	if why := r.reserve(im, h, side); why != "" {
		r.refuse(im, RejectTooLarge, why)
		return
	}
	switch {
	case im.held < 0 && !side:
		im.held = 0
		r.prepareSide(*in)
		return
	case im.held < 0 || (side && c.Err() != nil):
		// The wait ended with the connection.
		im.held = max(im.held, 0)
		im.free()
		return
	}
	m := &im.msg
	m.XDR = in.payload
	m.Release = im.release
	if h.Proc == wire.RDMA_MSGP && h.Padding.Align > 1 {
		// RFC 5666 section 3.9: opaques of at least rdma_thresh bytes
		// are padded so their data is aligned to rdma_align in the
		// receive buffer, which the transport header starts.
		m.Padding = rpc.Padding{Align: int(h.Padding.Align), Thresh: int(h.Padding.Thresh), Base: h.EncodedLen()}
	}
	if len(chunks) > 0 && chunks[0].Position == 0 {
		// A long call (only on a side goroutine): the reduced message
		// comes first, so the data chunks can be checked against it
		// before they are pulled.
		bufs, err := c.pull(chunks[:1], true)
		if err != nil {
			im.free()
			c.fail(err)
			return
		}
		m.XDR = bufs[0]
		im.pzrc = bufs[0]
		chunks = chunks[1:]
		c.stats.add(statLongCalls, 1)
	}
	if reason, why := r.checkCall(m, h.XID, chunks); why != "" {
		r.refuse(im, reason, why)
		return
	}
	if why := r.argLimit(m.XDR, chunks); why != "" {
		r.refuse(im, RejectTooLarge, why)
		return
	}
	if len(chunks) == 0 {
		r.addPending(im)
		if side && isConfigCall(m.XDR) && r.answerConfig(m) {
			return
		}
		r.hand(im)
		return
	}
	c.startPull(chunks, true, func(bufs [][]byte, err error) { r.finishCall(im, bufs, err) })
}

// checkCall checks the RPC call m against its transport header's xid
// and, before any RDMA Read, each data chunk against the length word it
// replaces, recording where each chunk's item goes in m.Items: a chunk
// that does not fit costs the requester an ERR_CHUNK, not us a transfer.
// It returns why the call is refused, under which reason, or "".
func (r *responder) checkCall(m *rpc.Msg, xid uint32, chunks []wire.ReadChunk) (Reason, string) {
	if got, _, ok := rpc.PeekHeader(m.XDR); !ok || got != xid {
		return RejectXID, "RPC call does not carry the transport header's XID"
	}
	shift := 0
	for _, ch := range chunks {
		off := int(ch.Position) - shift
		if off < 4 || off > len(m.XDR) || (len(m.Items) > 0 && off < m.Items[len(m.Items)-1].Offset+4) {
			return RejectChunk, fmt.Sprintf("read chunk position %d outside the call", ch.Position)
		}
		n := int(binary.BigEndian.Uint32(m.XDR[off-4:]))
		// The chunk holds the item's data, with or without its XDR pad
		// (RFC 8166 section 3.4.5).
		if got := ch.Length(); got != uint64(n) && got != uint64(xdr.RoundUp(n)) {
			return RejectChunk, fmt.Sprintf("read chunk at position %d holds %d bytes, its length word says %d", ch.Position, got, n)
		}
		m.Items = append(m.Items, rpc.DDPItem{Offset: off, Data: nil})
		shift += xdr.RoundUp(n)
	}
	return 0, ""
}

// finishCall completes the call im, whose data chunks have been pulled
// into bufs (or failed to be, err, a connection failure), and hands it
// over. It runs where the last Read completed, the loop, or where posting
// them failed.
func (r *responder) finishCall(im *inMsg, bufs [][]byte, err error) {
	if err != nil {
		im.free()
		r.c.fail(err)
		return
	}
	im.bufs = append(im.bufs, bufs...)
	m := &im.msg
	for i := range m.Items {
		n := binary.BigEndian.Uint32(m.XDR[m.Items[i].Offset-4:])
		m.Items[i].Data = bufs[i][:n]
	}
	r.addPending(im)
	r.hand(im)
}

// hand gives the call im to the rpc layer (delivery.go), or gives it back
// when nothing will take it: the connection has ended, or neither Push
// nor Recv is being called and the queue for them is full.
func (r *responder) hand(im *inMsg) {
	ok, full := r.c.deliv.hand(&im.msg, nil)
	if ok {
		return
	}
	if full {
		r.c.drop(DropCreditOverrun, im.ic.xid, "why", "receive queue full")
	}
	im.free()
}

// answerConfig answers the call m if it is to CONF_RDMA's program (RFC
// 8797 Section 5), itself, on a side goroutine, and reports whether it
// did: such a call never reaches the rpc layer.
func (r *responder) answerConfig(m *rpc.Msg) bool {
	rep, ok := r.configReply(m)
	if !ok {
		return false
	}
	if err := r.sendReply(r.c.ctx, rep); err != nil {
		r.c.log.Debug("rpcrdma: answering CONF_RDMA", "err", err)
	}
	m.Release()
	return true
}

// refuse answers a call with ERR_CHUNK, counting it under reason, and
// gives im back.
func (r *responder) refuse(im *inMsg, reason Reason, why string) {
	ic := &im.ic
	if reason == RejectTooLarge && r.c.ln != nil {
		r.c.ln.reasons[reason].Add(1)
	}
	r.reject(reason, ic.xid, ic.vers, wire.ErrChunk, "why", why)
	im.free()
}

// ReserveReply implements rpc.InlineReplier on a responder. The rpc layer
// asks it from the deliver function Push set, which the loop runs, before
// it runs a short call's handler there (rpc.Server.HandleShort): the reply
// is then sent from the loop, which must not wait for a send slot or a
// send-queue entry, since only the loop frees them, nor for the reply's
// RDMA Writes. So it takes a send slot and a send-queue entry for the
// reply now, if both are free, and only for a call that offered no write
// chunk and no reply chunk (its reply goes inline, or is refused with
// ERR_CHUNK from a side goroutine) while read-chunk replies are off; it
// reports whether it did. The reply's Send uses what it took; a call
// released without one gives it back.
//
// It is the responder's alone, and here with the rest of how calls reach
// the rpc layer; a Conn method, not one the Conn passes on to its
// responder, so that the loop's short calls pay for no second call.
func (c *Conn) ReserveReply(m *rpc.Msg) bool {
	r := c.resp
	if r == nil || c.cfg.ReadChunkReplies {
		return false
	}
	xid, _, ok := rpc.PeekHeader(m.XDR)
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ic, _ := r.pending.Get(xid)
	if ic == nil || ic.next != nil || len(ic.writes) > 0 || ic.reply.Present || ic.res.slot != 0 {
		return false
	}
	res, ok := c.reserveSend()
	if ok {
		ic.res = res
	}
	return ok
}

// isConfigCall reports whether the RPC call b is to the Connection
// Configuration Protocol's program.
func isConfigCall(b []byte) bool {
	return len(b) >= 16 && binary.BigEndian.Uint32(b[12:]) == wire.ConfigProgram
}
