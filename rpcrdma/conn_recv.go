package rpcrdma

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The receive side of a Conn: the loop, which owns the completion queue
// (but while a requester's caller has the turn and processes it in the
// loop's place, short.go), and what it hands received messages to. The loop
// decodes each received message and passes it to the role's onMessage
// (requester.go, responder.go) or the Backchannel, reposts the receive, and
// runs the completion callbacks of send-queue work (conn_send.go). What a
// role accepts reaches the rpc layer one way (delivery.go): straight to
// the deliver function rpc.Pusher's Push set, or queued until Push or
// Recv takes it. The loop never blocks: everything that could (posting a
// Send, an RDMA Read) runs in Send or a side goroutine (goSide).

// start runs the loop.
func (c *Conn) start() {
	go c.loop()
}

// loop owns the completion queue until the connection ends, except while
// a requester's caller has the turn (conn_turn.go, short.go).
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
			c.deliv.end(c.Err())
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

// Recv returns the next message for the rpc layer: on a requester, the
// next reply (or a *rpc.CallError failing one call); on a responder, the
// next call, with its read chunks pulled (calls whose chunks take longer to
// pull may be overtaken by later ones). Messages received before the
// connection ended come before its error. It implements rpc.Transport,
// for a caller that does not push; it must not be called after Push.
func (c *Conn) Recv() (*rpc.Msg, error) { return c.deliv.recv() }

// Push implements rpc.Pusher: each message goes to deliver on the
// goroutine that made it ready, first those that came before Push. On a
// requester that is the goroutine that received the reply (the rpc.Client
// needs no goroutine of its own blocked in Recv); on a responder, the
// loop for a call that needed nothing more, the loop again for a call
// whose data chunks it has pulled, or a side goroutine for a call that
// waited for memory or had a position-zero chunk to pull
// (responder_recv.go), so an idle responder has no goroutine but its
// loop. The error that ends the connection comes last, once the loop has
// ended.
func (c *Conn) Push(deliver func(*rpc.Msg, error) bool) { c.deliv.push(deliver) }
