package rpcrdma

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// How a responder's calls reach the rpc layer. The loop hands a call to
// deliver once it has checked its transport header (responder.onMessage).
// Before Push, every call goes to Recv through c.incoming. Once Push has
// been called (the rpc.Server does), a call without read chunks goes from
// the loop straight to the deliver function Push set (pushCall); the
// rest reach Recv through three queues, c.incoming (what pushCall does
// not take: calls with read chunks, before they are pulled, CONF_RDMA,
// calls refused or waiting for memory), r.pulled (calls whose data
// chunks have been pulled) and r.reserved (calls that waited for their
// share of the budgets, bounds.go), and a side goroutine, the pump, takes
// them from Recv to deliver while they are queued: an idle responder has
// no goroutine but its loop.

// recvQueues is the part of a responder that its loop, its pulls and its
// waits for memory hand calls to Recv and Push through.
type recvQueues struct {
	pulled   fifo[pulledCall] // calls whose data chunks have been pulled
	reserved fifo[inbound]    // calls that waited for their share of the budgets (bounds.go)

	// pushMu guards callPush and serializes every call of it: the
	// loop's (pushCall) and the pump's.
	pushMu   sync.Mutex
	callPush func(*rpc.Msg, error) bool // set by Push; nil once it has had the final error

	// The pump: once Push has set pumpTo, a side goroutine runs pump
	// while the queues hold anything, and once at the end for the final
	// error. pumpMu guards pumpTo and pumping; the queues' own are
	// taken under it.
	pumpMu  sync.Mutex
	pumpTo  func(*rpc.Msg, error) bool
	pumping bool   // a pump runs, or has delivered the final error
	pumpFn  func() // r.pump, bound once
}

// sizeQueues bounds the queues to Recv by n, one more than the receives
// posted. Prepare calls it once setup has posted them, before any message
// can arrive.
func (r *responder) sizeQueues(n int) {
	r.pulled.size = n
	r.reserved.size = n
}

// deliver hands a checked call to the rpc layer, straight through Push's
// deliver function if it can (pushCall), else to Recv. The peer can have
// no more messages in flight than there are receive slots, and Recv
// drains the queue, so a full queue means Recv is not being called; the
// call is then dropped rather than stalling the loop. It reports whether
// the call was taken.
func (r *responder) deliver(in inbound) bool {
	c := r.c
	if r.pushCall(&in) {
		return true
	}
	if c.incoming.put(in) {
		r.wake()
		return true
	}
	c.drop(DropCreditOverrun, in.hdr.XID, "why", "receive queue full")
	return false
}

// wake leaves Recv a token saying a queue has gained a message and, once
// Push has been called, makes sure a pump runs to deliver it.
func (r *responder) wake() {
	r.c.wake()
	r.startPump()
}

// pushCall hands a call straight to the rpc.Server that Push registered,
// on the loop, when nothing in taking it can block: no read chunks to
// pull (their Reads may wait for the send queue) and not CONF_RDMA
// (answered by Recv, whose Send may wait for a slot). It reports whether
// it took the call; the rest go through Recv.
func (r *responder) pushCall(in *inbound) bool {
	c := r.c
	if len(in.hdr.Chunks.Reads) > 0 || isConfigCall(in.payload) {
		return false
	}
	if r.reserve(in.im, &in.hdr, false) != "" || in.im.held < 0 {
		// Refused, or waiting for memory: Recv answers or waits.
		in.im.held = 0
		return false
	}
	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	if r.callPush == nil {
		return false
	}
	if r.overrun() {
		// Recv's queue, which is as long as the receives, drops what
		// overflows it; this path drops what goes beyond it.
		c.drop(DropCreditOverrun, in.hdr.XID)
		in.im.free()
		return true
	}
	if m, ok, _ := r.recvCall(in); ok {
		// Without read chunks recvCall pulls nothing and so has no
		// connection error to report; a call it refused is answered.
		r.callPush(m, nil)
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

// recv is Conn.Recv on a responder.
func (r *responder) recv() (*rpc.Msg, error) {
	m, _, err := r.next(true)
	return m, err
}

// next returns the next call for Recv, with its read chunks pulled
// (calls whose chunks take longer to pull may be overtaken by later
// ones), and reports whether it returns a call or an error: when block is
// false and nothing is queued while the connection is up, it returns
// neither, and false.
func (r *responder) next(block bool) (*rpc.Msg, bool, error) {
	c := r.c
	for {
		// Calls that arrived before the connection ended are delivered
		// first.
		in, ok := c.incoming.get()
		var pc pulledCall
		pulled := false
		if !ok {
			pc, pulled = r.pulled.get()
		}
		if !ok && !pulled {
			in, ok = r.reserved.get()
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
			m, err := r.finishCall(pc)
			if err != nil {
				c.fail(err)
				return nil, true, c.Err()
			}
			return m, true, nil
		}
		m, ok, err := r.recvCall(&in)
		if err != nil {
			c.fail(err)
			return nil, true, c.Err()
		}
		if !ok {
			continue
		}
		if rep, ok := r.configReply(m); ok {
			if err := r.sendReply(c.ctx, rep); err != nil {
				c.log.Debug("rpcrdma: answering CONF_RDMA", "err", err)
			}
			m.Release()
			continue
		}
		return m, true, nil
	}
}

// push is Conn.Push on a responder: calls without read chunks go to
// deliver from the loop (pushCall), the rest from the pump.
func (r *responder) push(deliver func(*rpc.Msg, error) bool) {
	c := r.c
	r.pushMu.Lock()
	r.callPush = deliver
	r.pushMu.Unlock()
	r.pumpMu.Lock()
	r.pumpTo, r.pumpFn = deliver, r.pump
	r.pumping = true
	r.pumpMu.Unlock()
	// The first pump delivers what was queued before Push; a side
	// goroutine, so that Close waits for it (conn.go).
	if !c.goSide(r.pumpFn) { // closed already
		r.pushMu.Lock()
		r.callPush = nil
		deliver(nil, c.Err())
		r.pushMu.Unlock()
	}
}

// startPump starts a pump once Push has been called, unless one runs
// already (or has delivered the final error). Whoever queues a message
// for Recv calls it, through wake, after queueing it; the loop calls it
// when it ends, for the final error.
func (r *responder) startPump() {
	r.pumpMu.Lock()
	if r.pumpTo == nil || r.pumping {
		r.pumpMu.Unlock()
		return
	}
	r.pumping = true
	r.pumpMu.Unlock()
	if !r.c.goSide(r.pumpFn) {
		// Close has stopped waiting for side goroutines, so the loop
		// has ended and a pump has delivered the final error: Close
		// gives back what is still queued (dropQueued).
		r.pumpMu.Lock()
		r.pumping = false
		r.pumpMu.Unlock()
	}
}

// pump hands what Recv returns to the deliver function Push set, one
// message at a time under pushMu, until nothing is queued; then it
// returns, unless the connection has ended: then it delivers the final
// error, once the loop has ended, and no pump runs again.
func (r *responder) pump() {
	c := r.c
	r.pumpMu.Lock()
	deliver := r.pumpTo
	r.pumpMu.Unlock()
	for {
		m, ok, err := r.next(false)
		if !ok {
			r.pumpMu.Lock()
			// Whoever queued a message after next looked starts a pump
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
			if ended || c.incoming.len()+r.pulled.len()+r.reserved.len() > 0 {
				r.pumpMu.Unlock()
				continue
			}
			r.pumping = false
			r.pumpMu.Unlock()
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
		r.pushMu.Lock()
		if final {
			r.callPush = nil
		}
		deliver(m, err)
		r.pushMu.Unlock()
		if final {
			return // pumping stays set: nothing follows the final error
		}
	}
}

// dropQueued gives back the calls whose pulls ended with the connection,
// and those that waited for their share of the budgets, that no Recv
// will take any more (Recv returns the connection's error once it has
// ended): their buffers and what they reserved from the budgets.
func (r *responder) dropQueued() {
	for {
		if pc, ok := r.pulled.get(); ok {
			for _, b := range pc.bufs {
				putBuf(b)
			}
			pc.im.free()
			continue
		}
		in, ok := r.reserved.get()
		if !ok {
			return
		}
		in.im.free()
	}
}

// loopEnded runs on the loop as it returns, once failOps has completed
// every pull: it gives back the calls no Recv will take, and has a
// pushing responder's pump deliver the final error.
func (r *responder) loopEnded() {
	r.dropQueued()
	r.startPump()
}

// sideEnded runs in Close once the side goroutines have exited: it gives
// back what they queued after the loop had ended.
func (r *responder) sideEnded() { r.dropQueued() }
