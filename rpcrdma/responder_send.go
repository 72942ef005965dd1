package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The responder's send side: replies (RFC 5666 sections 3.5-3.8, 5), and
// RDMA_ERROR answers. Send, called with the reply, plans it (planReply,
// plan.go): the reply's held-apart results go into the write chunks in
// order (never the pad), then the reply is sent inline if it fits, else
// written into the reply chunk and announced with RDMA_NOMSG, else
// answered with ERR_CHUNK. sendReply then registers the results and
// posts the RDMA Writes and the Send; only a reply with RDMA Writes waits
// for its Send to complete. Replies go out in the requester's version.

// readReply is an RFC 5666 read-chunk reply whose memory stays registered
// until the requester's RDMA_DONE or a timeout.
type readReply struct {
	mr    rdma.MR
	timer *time.Timer
}

// reject counts a call rejected for reason r, logs it at debug level with
// attrs, and answers it with RDMA_ERROR code in version vers.
func (r *responder) reject(reason Reason, xid uint32, vers wire.Version, code wire.ErrorCode, attrs ...any) {
	c := r.c
	c.stats.reasons[reason].Add(1)
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("rpcrdma: call rejected", append([]any{"reason", reason.String(), "xid", xid, "answer", code.Name(vers)}, attrs...)...)
	}
	r.sendError(xid, vers, code)
}

// sendError answers xid with RDMA_ERROR. It runs on a goroutine of its own
// because the loop must not wait for a send slot; the number of such
// goroutines is bounded by the receives the requester can fill.
func (r *responder) sendError(xid uint32, vers wire.Version, code wire.ErrorCode) {
	c := r.c
	h := &wire.Header{XID: xid, Vers: vers, Credits: r.grant.load(), Proc: wire.RDMA_ERROR, Error: wire.ErrorBody{Code: code}}
	if code == wire.ErrVers {
		h.Error.Low, h.Error.High = c.versions[0], c.versions[len(c.versions)-1]
	}
	c.stats.countError(code, true)
	c.goSide(func() {
		ctx, cancel := context.WithTimeout(c.ctx, sideSendTimeout)
		defer cancel()
		if err := c.sendMsg(ctx, h, nil, 0, false); err != nil {
			c.log.Debug("rpcrdma: sending RDMA_ERROR", "xid", xid, "err", err)
		}
	})
}

// sendRPC is Conn.Send on a responder: it sends the reply m and returns
// once the reply's memory is no longer in use.
func (r *responder) sendRPC(ctx context.Context, m *rpc.Msg) error { return r.sendReply(ctx, m) }

// sendReply sends the reply m to the call it answers.
func (r *responder) sendReply(ctx context.Context, m *rpc.Msg) error {
	c := r.c
	xid, _, ok := rpc.PeekHeader(m.XDR)
	if !ok {
		return fmt.Errorf("rpcrdma: reply of %d bytes has no RPC header", len(m.XDR))
	}
	r.mu.Lock()
	ic, _ := r.pending.Get(xid)
	if ic != nil {
		r.unpend(ic)
	}
	r.mu.Unlock()
	if ic == nil {
		return fmt.Errorf("rpcrdma: reply 0x%x answers no call received on this connection", xid)
	}
	res := ic.res // a reservation, if the loop runs this call (ReserveReply)
	ic.res = sendReservation{}
	err := r.sendReplyTo(ctx, m, ic, xid, &res)
	c.unreserveSend(&res) // if not used
	return err
}

// sendReplyTo sends the reply m to the call ic, whose xid it is, with the
// send reservation res, if it holds one. A reply with anything to move
// through chunks goes to writeReply; an inline one defers nothing, as
// sendReply does not (with their many returns, deferred calls would not
// be open-coded, and each reply would pay the runtime's defer records).
func (r *responder) sendReplyTo(ctx context.Context, m *rpc.Msg, ic *inCall, xid uint32, res *sendReservation) error {
	c := r.c
	neg := &c.negV[ic.vers]

	// Plan. The header lives in ic, which stays until the call's Msg is
	// released, after this returns.
	h := &ic.hdr
	*h = wire.Header{XID: xid, Vers: ic.vers, Credits: r.replyGrant()}
	shape := replyShape{
		writes:    ic.writes,
		reply:     ic.reply,
		sendLimit: neg.sendLimit,
		readReply: c.cfg.ReadChunkReplies && ic.vers == wire.Version1,
	}
	p := replyPlan{pieces: ic.piecesBuf[:0], results: ic.resultsBuf[:0]}
	if err := planReply(h, m, &shape, &p); err != nil {
		var pe *planError
		if errors.As(err, &pe) {
			// The requester sees only ERR_CHUNK: say here what it
			// would have had to offer.
			c.log.Warn("rpcrdma: reply does not fit the chunks the call offered; answering ERR_CHUNK", "xid", xid, "why", pe.why)
			r.reject(RejectReplyTooLarge, xid, ic.vers, wire.ErrChunk)
		}
		return err
	}
	var inv rdma.STag
	if neg.peerInvalidates && !c.cfg.NoRemoteInvalidation {
		inv = ic.inv
	}
	if p.kind == replyInline && len(p.results) == 0 {
		// An inline reply is copied into the send buffer: there is
		// nothing to wait for.
		c.stats.add(statInline, 1)
		return r.sendReplyMsg(ctx, res, h, p.pieces, inv, false)
	}
	return r.writeReply(ctx, m, ic, xid, res, h, &p, inv)
}

// sendReplyMsg sends the reply message h with pieces, and counts it.
// With Writes before it (wait), it returns once the Send has completed,
// and so have they; else after posting, on the reservation res if it
// holds one (on the loop: ReserveReply).
func (r *responder) sendReplyMsg(ctx context.Context, res *sendReservation, h *wire.Header, pieces [][]byte, inv rdma.STag, wait bool) error {
	c := r.c
	var err error
	if res.slot != 0 && !wait {
		err = c.sendReserved(res, h, pieces, inv)
	} else {
		err = c.sendMsg(ctx, h, pieces, inv, wait)
	}
	if err == nil {
		c.stats.add(statRepliesSent, 1)
	}
	return err
}

// writeReply sends the reply m, planned in p, whose results or whole
// message go through chunks: it registers them, posts the RDMA Writes
// that move them, then the reply message.
func (r *responder) writeReply(ctx context.Context, m *rpc.Msg, ic *inCall, xid uint32, res *sendReservation, h *wire.Header, p *replyPlan, inv rdma.STag) error {
	c := r.c
	// Register: each result and a reply sent through a chunk, with the
	// RDMA Writes that move them.
	var mrs []rdma.MR
	var pooled []byte // a reply chunk's source, back to its pool once sent
	sent := false
	defer func() {
		c.releaseAll(mrs)
		if pooled != nil && sent {
			// The Send completed, so did the Writes before it
			// (below): nothing reads pooled any more. After a
			// failure a Write may still be in the provider's hands,
			// so the garbage collector takes it then.
			putBuf(pooled)
		}
	}()
	var writes []*rdma.WorkRequest
	maxMsg := c.rc.Limits().MaxMessageSize
	for next, i := range p.results {
		data := m.Items[i].Data
		mr, err := c.register(data, 0)
		if err != nil {
			return fmt.Errorf("rpcrdma: registering result of reply 0x%x: %w", xid, err)
		}
		mrs = append(mrs, mr)
		writes = appendWrites(writes, mr, len(data), ic.writes[next], maxMsg)
		c.stats.add(statWriteChunks, 1)
		c.stats.add(statWriteChunkBytes, uint64(len(data)))
	}
	pieces := p.pieces
	switch p.kind {
	case replyInline:
		c.stats.add(statInline, 1)
	case replyChunk:
		flat := flattenInto(getBuf(p.inlineLen)[:0], p.pieces)
		mr, err := c.register(flat, 0)
		if err != nil {
			return fmt.Errorf("rpcrdma: registering reply 0x%x: %w", xid, err)
		}
		pooled = flat
		mrs = append(mrs, mr)
		writes = appendWrites(writes, mr, len(flat), ic.reply.Chunk, maxMsg)
		pieces = nil
		c.stats.add(statReplyChunks, 1)
		c.stats.add(statReplyChunkBytes, uint64(len(flat)))
	case replyReadChunk:
		return r.sendReadReply(ctx, h, flatten(p.pieces, p.inlineLen), writes)
	}

	// Post.
	for _, wr := range writes {
		if err := c.post(ctx, wr, func(rdma.Completion) {}); err != nil {
			return err
		}
	}
	// With RDMA Writes, waiting for the Send's completion also waits for
	// the Writes before it (completions return in posting order), so the
	// caller's memory is free when Send returns.
	err := r.sendReplyMsg(ctx, res, h, pieces, inv, len(writes) > 0)
	sent = err == nil
	return err
}

// appendWrites appends the RDMA Writes that move the first length bytes of
// mr into the segments of chunk, in order, as planReply's fill reports
// them. Each Write carries at most maxMsg bytes. The caller has checked
// that chunk is long enough.
func appendWrites(wrs []*rdma.WorkRequest, mr rdma.MR, length int, chunk wire.WriteChunk, maxMsg int) []*rdma.WorkRequest {
	if maxMsg <= 0 {
		maxMsg = 1 << 20
	}
	off := 0
	for _, seg := range chunk {
		if length == 0 {
			break
		}
		n := min(length, int(seg.Length))
		for done := 0; done < n; {
			k := min(n-done, maxMsg)
			wrs = append(wrs, &rdma.WorkRequest{
				Op:         rdma.OpWrite,
				Local:      []rdma.SGE{{MR: mr, Offset: off, Length: k}},
				RemoteSTag: rdma.STag(seg.Handle),
				RemoteTO:   seg.Offset + uint64(done),
			})
			off += k
			done += k
		}
		length -= n
	}
	return wrs
}

// sendReadReply sends a reply too long for any chunk the requester offered
// as an RFC 5666 read-chunk reply (RFC 5666 sections 3.8 and 5.1): the
// whole reply in a position-zero read chunk of an RDMA_NOMSG message, for
// the requester to pull with RDMA Reads and acknowledge with RDMA_DONE.
// The reply stays registered until then, or for Config.DoneTimeout. RFC
// 8166 removed this; Config.ReadChunkReplies opts in. h is planReply's,
// flat the reduced reply, writes the RDMA Writes of results, whose
// registrations the caller releases.
func (r *responder) sendReadReply(ctx context.Context, h *wire.Header, flat []byte, writes []*rdma.WorkRequest) error {
	c := r.c
	mr, err := c.register(flat, rdma.AccessRemoteRead)
	if err != nil {
		return fmt.Errorf("rpcrdma: registering read-chunk reply 0x%x: %w", h.XID, err)
	}
	locate(&h.Chunks.Reads[0].Segment, mr)
	rr := &readReply{mr: mr}
	r.mu.Lock()
	if c.Err() != nil {
		// closeAll has run or will find nothing: nothing would stop
		// the timer.
		r.mu.Unlock()
		c.releaseAll([]rdma.MR{mr})
		return c.Err()
	}
	if old := r.done[h.XID]; old != nil {
		c.stopTimer(old.timer)
		defer c.releaseAll([]rdma.MR{old.mr})
	}
	r.done[h.XID] = rr
	timeout := c.cfg.DoneTimeout
	if timeout <= 0 {
		timeout = DefaultDoneTimeout
	}
	xid := h.XID // h is reused once the call is released
	rr.timer = c.afterFunc(timeout, func() { r.releaseReadReply(xid) })
	r.mu.Unlock()
	for _, wr := range writes {
		if err := c.post(ctx, wr, func(rdma.Completion) {}); err != nil {
			return err
		}
	}
	err = c.sendMsg(ctx, h, nil, 0, true)
	if err == nil {
		c.stats.add(statRepliesSent, 1)
		c.stats.add(statReadReplies, 1)
	}
	return err
}

// releaseReadReply releases the read-chunk reply to xid, on RDMA_DONE or
// its timeout, and reports whether there was one.
func (r *responder) releaseReadReply(xid uint32) bool {
	r.mu.Lock()
	rr := r.done[xid]
	delete(r.done, xid)
	r.mu.Unlock()
	if rr == nil {
		return false
	}
	r.c.stopTimer(rr.timer)
	r.c.releaseAll([]rdma.MR{rr.mr})
	return true
}
