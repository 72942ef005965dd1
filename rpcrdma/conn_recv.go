package rpcrdma

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The receive side of a Conn: the loop, which owns the completion queue
// (but while a requester's caller has the turn and processes it in the
// loop's place, short.go), and what it hands received messages to. The loop
// decodes each received message and passes it to the role's onMessage
// (requester.go, responder.go) or the Backchannel, reposts the receive, and
// runs the completion callbacks of send-queue work (conn_send.go). What it
// passes on goes either to Recv through c.incoming (a fifo), or, once
// rpc.Pusher's Push has been called, straight to the rpc layer's deliver
// function (a requester's replies; a responder's calls without read chunks,
// pushCall). The loop never blocks: everything that could (posting a Send,
// an RDMA Read) runs in Send, Recv or a side goroutine (goSide).

// loop owns the completion queue until the connection ends, except while
// a requester's caller has the turn (short.go).
func (c *Conn) loop() {
	defer close(c.loopDone)
	cs := make([]rdma.Completion, firstBatch)
	c.beginDirect()
	defer c.endDirect()
	for {
		n, err := c.waitTurn(context.Background(), cs)
		c.complete(cs[:n])
		cs = growBatch(cs, n)
		if err != nil {
			c.endTurns()
			c.fail(err)
			// Drain what the provider flushed so every waiter hears.
			// Messages received before the end still count: a peer
			// may send its last replies and close.
			for {
				n := c.rc.Poll(cs)
				if n == 0 {
					break
				}
				c.complete(cs[:n])
			}
			c.failOps()
			c.dropPulled()
			c.endPush()
			return
		}
		c.yieldTurn()
	}
}

// complete processes a batch of completions, in order. It runs on
// whoever has the turn: the loop, or a caller on the short path.
func (c *Conn) complete(cs []rdma.Completion) {
	c.batch.Store(int32(len(cs)))
	for _, comp := range cs {
		if comp.Op == rdma.OpRecv {
			c.onRecv(comp)
		} else {
			c.onSendQueue(comp)
		}
	}
}

// dropPulled gives back the calls whose pulls ended with the connection,
// and those that waited for their share of the budgets, that no Recv
// will take any more (a responder's Recv returns the connection's error
// once it has ended): their buffers and what they reserved from the
// budgets. The loop calls it once failOps has completed every pull, and
// Close once the side goroutines have exited.
func (c *Conn) dropPulled() {
	for {
		if pc, ok := c.pulled.get(); ok {
			for _, b := range pc.bufs {
				putBuf(b)
			}
			pc.im.free()
			continue
		}
		in, ok := c.reserved.get()
		if !ok {
			return
		}
		in.im.free()
	}
}

// onSendQueue completes one send-queue work request.
func (c *Conn) onSendQueue(comp rdma.Completion) {
	e := int(comp.ID)
	c.opsMu.Lock()
	var done func(rdma.Completion)
	if e >= 0 && e < len(c.ops) {
		done = c.ops[e]
		c.ops[e] = nil
	}
	if done == nil {
		// Not ours to complete: failOps has already done so.
		c.opsMu.Unlock()
		return
	}
	c.opsN--
	if c.opsN == 0 && c.opsIdle != nil {
		close(c.opsIdle)
		c.opsIdle = nil
	}
	c.opsMu.Unlock()
	c.sqFree.put(e)
	done(comp)
}

// failOps completes every send-queue operation the provider did not, after
// the connection has ended.
func (c *Conn) failOps() {
	c.opsMu.Lock()
	var ids []int
	var dones []func(rdma.Completion)
	for e, done := range c.ops {
		if done != nil {
			ids, dones = append(ids, e), append(dones, done)
			c.ops[e] = nil
		}
	}
	c.opsN = 0
	if c.opsIdle != nil {
		close(c.opsIdle)
		c.opsIdle = nil
	}
	c.opsMu.Unlock()
	for k, done := range dones {
		done(rdma.Completion{ID: uint64(ids[k]), Status: rdma.StatusFlushed})
	}
}

// onRecv handles a received message in the loop: it copies the message out,
// reposts the buffer and dispatches by role.
func (c *Conn) onRecv(comp rdma.Completion) {
	slot := int(comp.ID)
	if comp.Status != rdma.StatusSuccess {
		return // flushed: the connection is ending
	}
	c.handleRecv(comp, c.recvBuf(slot)[:comp.Len])
	// A repost fails only once the connection has ended; the provider
	// then returns every completion it still holds before Wait reports
	// the end, and the loop fails the connection there. Failing it here
	// would forget calls whose replies are still in those completions.
	if c.Err() == nil {
		if err := c.postRecv(slot); err != nil {
			c.log.Debug("rpcrdma: receive not reposted", "slot", slot, "err", err)
		}
	}
}

// handleRecv decodes the message msg that comp completed and dispatches
// it by role. It copies what it keeps: msg is given back when it
// returns. It runs on the loop, on a requester's caller that has the turn
// (short.go), or, for a connection receiving from its Listener's shared
// pool, on the pool's dispatcher (pool.go); in every case one goroutine at
// a time for a connection.
func (c *Conn) handleRecv(comp rdma.Completion, msg []byte) {
	c.received.Add(1)
	if comp.Invalidated {
		c.stats.add(statRemoteInvalid, 1)
	}
	in := &c.recvIn
	*in = inbound{}
	defer func() { *in = inbound{} }() // keep nothing of msg alive
	_, derr := in.hdr.Decode(msg)
	if derr == nil && in.hdr.HasPayload() {
		in.payload, in.borrowed = msg[in.hdr.EncodedLen():], true
	}
	// The header's lists were copied by Decode except Optional.Info, which
	// aliases the buffer.
	if len(in.hdr.Optional.Info) > 0 {
		in.hdr.Optional.Info = append([]byte(nil), in.hdr.Optional.Info...)
	}
	var raw []byte
	if derr != nil {
		raw = append([]byte(nil), msg[:min(len(msg), wire.PrefixLen+4)]...)
	}
	// Dispatch before reposting: when the peer has closed after its last
	// message, the repost fails, and the message must still count.
	c.role.onMessage(in, derr, raw)
}

// deliver hands a message to Recv. The peer can have no more messages in
// flight than there are receive slots, and Recv drains the channel, so a
// full channel means Recv is not being called; the message is then dropped
// rather than stalling the loop.
func (c *Conn) deliver(in inbound) bool {
	if c.req != nil {
		c.pushMu.Lock()
		defer c.pushMu.Unlock()
		if c.push != nil {
			c.push(c.replyOf(in))
			c.wakeTurn()
			return true
		}
	} else if c.pushCall(&in) {
		return true
	}
	if c.incoming.put(in) {
		c.wake()
		return true
	}
	c.drop(DropCreditOverrun, in.hdr.XID, "why", "receive queue full")
	return false
}

// pushCall hands a responder's call straight to the rpc.Server that
// Push registered, on the loop, when nothing in taking it can block: no
// read chunks to pull (their Reads may wait for the send queue) and not
// CONF_RDMA (answered by Recv, whose Send may wait for a slot). It
// reports whether it took the call; the rest go through Recv.
func (c *Conn) pushCall(in *inbound) bool {
	if len(in.hdr.Chunks.Reads) > 0 || isConfigCall(in.payload) {
		return false
	}
	if c.resp.reserve(in.im, &in.hdr, false) != "" || in.im.held < 0 {
		// Refused, or waiting for memory: Recv answers or waits.
		in.im.held = 0
		return false
	}
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	if c.callPush == nil {
		return false
	}
	if c.resp.overrun() {
		// Recv's queue, which is as long as the receives, drops what
		// overflows it; this path drops what goes beyond it.
		c.drop(DropCreditOverrun, in.hdr.XID)
		in.im.free()
		return true
	}
	if m, ok, _ := c.resp.recvCall(in); ok {
		// Without read chunks recvCall pulls nothing and so has no
		// connection error to report; a call it refused is answered.
		c.callPush(m, nil)
	}
	return true
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

// Recv returns the next message for the rpc layer: on a requester, the
// next reply (or a *rpc.CallError failing one call); on a responder, the
// next call, with its read chunks pulled (calls whose chunks take longer to
// pull may be overtaken by later ones). It implements rpc.Transport.
func (c *Conn) Recv() (*rpc.Msg, error) {
	m, _, err := c.recv(true)
	return m, err
}

// recv is Recv, and reports whether it returns a message or an error:
// when block is false and nothing is queued while the connection is up,
// it returns neither, and false.
func (c *Conn) recv(block bool) (*rpc.Msg, bool, error) {
	for {
		// Messages that arrived before the connection ended are
		// delivered first.
		in, ok := c.incoming.get()
		var pc pulledCall
		pulled := false
		if !ok {
			pc, pulled = c.pulled.get()
		}
		if !ok && !pulled {
			in, ok = c.reserved.get()
		}
		if !ok && !pulled {
			if block {
				select {
				case <-c.ready:
					continue // look again
				case <-c.done:
				}
			} else {
				select {
				case <-c.done:
				default:
					return nil, false, nil
				}
			}
			if in, ok = c.incoming.get(); !ok {
				return nil, true, c.Err()
			}
		}
		if pulled {
			m, err := c.resp.finishCall(pc)
			if err != nil {
				c.fail(err)
				return nil, true, c.Err()
			}
			return m, true, nil
		}
		if c.req != nil {
			m, err := c.replyOf(in)
			return m, true, err
		}
		m, ok, err := c.resp.recvCall(&in)
		if err != nil {
			c.fail(err)
			return nil, true, c.Err()
		}
		if !ok {
			continue
		}
		if rep, ok := c.resp.configReply(m); ok {
			if err := c.resp.sendReply(c.ctx, rep); err != nil {
				c.log.Debug("rpcrdma: answering CONF_RDMA", "err", err)
			}
			m.Release()
			continue
		}
		return m, true, nil
	}
}

// replyOf turns what the requester received into what Recv returns.
func (c *Conn) replyOf(in inbound) (*rpc.Msg, error) {
	if in.err != nil {
		return nil, &rpc.CallError{XID: in.hdr.XID, Err: in.err}
	}
	p := c.getReplyMsg()
	p.m = rpc.Msg{Body: rpc.Body{XDR: in.payload}, Release: p.put}
	for i, wc := range in.hdr.Chunks.Writes {
		if n := wc.Length(); n > 0 {
			p.m.Items = append(p.m.Items, rpc.DDPItem{Offset: rpc.Unplaced, Data: in.writes[i][:n]})
		}
	}
	return &p.m, nil
}

// Push implements rpc.Pusher: a requester hands each reply to deliver on
// the goroutine that received it (the rpc.Client uses it, and so needs no
// goroutine of its own blocked in Recv). A responder hands calls without
// read chunks to deliver from the loop (the rpc.Server uses it, and its
// worker gets the call one hand-off sooner); the rest, the calls whose
// chunks are pulled first, those that waited for memory and CONF_RDMA,
// go through Recv on a side goroutine, the pump, that runs only while
// they are queued, so an idle responder has no goroutine but its loop.
// The error that ends the connection comes last, once the loop has ended.
func (c *Conn) Push(deliver func(*rpc.Msg, error)) {
	if c.req == nil {
		c.pushMu.Lock()
		c.callPush = deliver
		c.pushMu.Unlock()
		c.pumpMu.Lock()
		c.pumpTo, c.pumpFn = deliver, c.pump
		c.pumping = true
		c.pumpMu.Unlock()
		// The first pump delivers what was queued before Push; a side
		// goroutine, so that Close waits for it (conn.go).
		if !c.goSide(c.pumpFn) { // closed already
			c.pushMu.Lock()
			c.callPush = nil
			deliver(nil, c.Err())
			c.pushMu.Unlock()
		}
		return
	}
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	for {
		in, ok := c.incoming.get()
		if !ok {
			break
		}
		deliver(c.replyOf(in))
	}
	if c.pushEnded {
		deliver(nil, c.Err())
		return
	}
	c.push = deliver
}

// startPump starts a responder's pump once Push has been called, unless
// one runs already (or has delivered the final error). Whoever queues a
// message for Recv calls it, through wake, after queueing it; the loop
// calls it when it ends, for the final error.
func (c *Conn) startPump() {
	c.pumpMu.Lock()
	if c.pumpTo == nil || c.pumping {
		c.pumpMu.Unlock()
		return
	}
	c.pumping = true
	c.pumpMu.Unlock()
	if !c.goSide(c.pumpFn) {
		// Close has stopped waiting for side goroutines, so the loop
		// has ended and a pump has delivered the final error: Close
		// gives back what is still queued (dropPulled).
		c.pumpMu.Lock()
		c.pumping = false
		c.pumpMu.Unlock()
	}
}

// pump hands what Recv returns to the deliver function a responder's
// Push set, one message at a time under pushMu, until nothing is queued;
// then it returns, unless the connection has ended: then it delivers the
// final error, once the loop has ended, and no pump runs again.
func (c *Conn) pump() {
	c.pumpMu.Lock()
	deliver := c.pumpTo
	c.pumpMu.Unlock()
	for {
		m, ok, err := c.recv(false)
		if !ok {
			c.pumpMu.Lock()
			// Whoever queued a message after recv looked starts a pump
			// after queueing it; this one may only stop if that start
			// will see it stopped, so it looks again under pumpMu.
			// The loop's end starts one too, after the connection has
			// ended: if it has, this one delivers the final error.
			ended := false
			select {
			case <-c.done:
				ended = true
			default:
			}
			if ended || c.incoming.len()+c.pulled.len()+c.reserved.len() > 0 {
				c.pumpMu.Unlock()
				continue
			}
			c.pumping = false
			c.pumpMu.Unlock()
			return
		}
		final := err != nil
		if final {
			_, perCall := errors.AsType[*rpc.CallError](err)
			final = !perCall
		}
		if final {
			// The loop delivers nothing once it has ended.
			<-c.loopDone
		}
		c.pushMu.Lock()
		if final {
			c.callPush = nil
		}
		deliver(m, err)
		c.pushMu.Unlock()
		if final {
			return // pumping stays set: nothing follows the final error
		}
	}
}

// endPush gives a pushing requester the error that ended the connection,
// once the loop has delivered everything before it.
func (c *Conn) endPush() {
	if c.resp != nil {
		c.startPump() // a pushing responder's, on its pump
		return
	}
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	c.pushEnded = true
	if c.push != nil {
		c.push(nil, c.Err())
		c.push = nil
	}
}

// replyMsg is a recycled rpc.Msg for a reply Recv returns; the rpc.Client
// releases it once it has the results, which alias the caller's memory
// (or memory given up to it), never the Msg's own.
type replyMsg struct {
	m   rpc.Msg
	c   *Conn  // whose spare it goes back to
	put func() // m.Release, bound once
}

// getReplyMsg returns c's spare replyMsg, else a pooled one.
func (c *Conn) getReplyMsg() *replyMsg {
	p := c.replies.Get(&replyMsgs)
	if p.put == nil {
		p.put = func() {
			c := p.c
			if c == nil {
				return // released already
			}
			p.m = rpc.Msg{} // Items went to the caller: not reused
			p.c = nil
			c.replies.Put(p, &replyMsgs)
		}
	}
	p.c = c
	return p
}

var replyMsgs sync.Pool
