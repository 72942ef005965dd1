package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The send side of a Conn. Send is rpc.Transport's: a call on a
// requester (requester.sendRPC, then send: plan, register, post), a reply on a responder
// (responder.sendReply). Both post through sendMsg, which builds the
// message in a send slot, and post, which takes a send-queue entry and
// records the completion callback the loop runs (conn_recv.go). Memory a
// chunk offers is registered with register and released with releaseAll;
// addRegistered counts what is registered, the rings' too (setup), on the
// Conn and on its Listener.

// Send implements rpc.Transport. On a requester it sends the call m: it
// blocks until a credit is available (respecting ctx) and returns after
// posting the Send; the call's memory (Items, ResultBufs) stays in use
// until its reply arrives or CancelCall. On a responder it sends the reply
// m to the call it answers, and returns once the reply's memory is no
// longer in use (responder.sendReply). Send may be called concurrently.
func (c *Conn) Send(ctx context.Context, m *rpc.Msg) error {
	return c.role.sendRPC(ctx, m)
}

// post posts a send-queue work request whose completion runs done on the
// loop goroutine. It waits for a free send-queue entry, respecting ctx.
func (c *Conn) post(ctx context.Context, wr *rdma.WorkRequest, done func(rdma.Completion)) error {
	e, err := c.sqFree.take(ctx, c.done, c.Err)
	if err != nil {
		return err
	}
	return c.postTaken(e, wr, done, false)
}

// postTaken is post for a caller that holds send-queue entry e, which it
// gives back if the post fails. direct says the caller has the turn and
// waits for completions next (waitTurn), so the provider may leave the
// transmission to that wait (rdma.DirectIO.PostSendDirect).
func (c *Conn) postTaken(e int, wr *rdma.WorkRequest, done func(rdma.Completion), direct bool) error {
	wr.ID = uint64(e)
	c.opsMu.Lock()
	c.ops[e] = done
	c.opsN++
	c.opsMu.Unlock()
	c.unparkTurn() // someone must process the completion (conn_turn.go)
	var err error
	if direct && c.dio != nil {
		err = c.dio.PostSendDirect(wr)
	} else {
		err = c.rc.PostSend(wr)
	}
	if err != nil {
		c.opsMu.Lock()
		mine := c.ops[e] != nil
		if mine {
			c.ops[e] = nil
			c.opsN--
		}
		c.opsMu.Unlock()
		if !mine {
			// The connection ended meanwhile, and failOps has
			// completed the request as flushed: done has the outcome.
			return nil
		}
		c.sqFree.put(e)
		if errors.Is(err, net.ErrClosed) {
			return c.connErr(err)
		}
		return fmt.Errorf("rpcrdma: posting %v: %w", wr.Op, err)
	}
	return nil
}

// sendMsg builds the message hdr followed by pieces in a send slot and
// posts it as a Send (with Invalidate when inv is not zero). It waits for a
// free send slot. If wait is true it returns after the Send completes, else
// after posting.
func (c *Conn) sendMsg(ctx context.Context, hdr *wire.Header, pieces [][]byte, inv rdma.STag, wait bool) error {
	slot, err := c.sendFree.take(ctx, c.done, c.Err)
	if err != nil {
		return err
	}
	e, err := c.sqFree.take(ctx, c.done, c.Err)
	if err != nil {
		c.sendFree.put(slot)
		return err
	}
	// A send with noWait comes from the caller that has the turn
	// (SendDeliver), which waits with waitTurn next.
	return c.sendIn(slot, e, hdr, pieces, inv, wait, ctx == noWait)
}

// noWait is a context that has ended: a send with it takes what it needs
// only if it is free at once (tokenStack.take), and otherwise fails with
// context.Canceled.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// A sendReservation is a send slot and a send-queue entry taken ahead of
// the message that will use them (reserveSend), so that sending it does
// not wait: a responder's loop sends the replies of the calls it runs
// itself this way (Conn.ReserveReply). The zero value holds nothing.
type sendReservation struct {
	slot, entry int // the slot + 1, the send-queue entry
}

// reserveSend takes a send slot and a send-queue entry if both are free
// now, without waiting.
func (c *Conn) reserveSend() (sendReservation, bool) {
	slot, ok := c.sendFree.tryTake()
	if !ok {
		return sendReservation{}, false
	}
	e, ok := c.sqFree.tryTake()
	if !ok {
		c.sendFree.put(slot)
		return sendReservation{}, false
	}
	return sendReservation{slot: slot + 1, entry: e}, true
}

// unreserveSend gives back what res holds, if anything.
func (c *Conn) unreserveSend(res *sendReservation) {
	if res.slot != 0 {
		c.sendFree.put(res.slot - 1)
		c.sqFree.put(res.entry)
		*res = sendReservation{}
	}
}

// sendReserved is sendMsg, returning after the post, with what res holds,
// which it uses up: it waits for nothing, so the loop may call it.
func (c *Conn) sendReserved(res *sendReservation, hdr *wire.Header, pieces [][]byte, inv rdma.STag) error {
	slot, e := res.slot-1, res.entry
	*res = sendReservation{}
	err := c.sendIn(slot, e, hdr, pieces, inv, false, true)
	if err == nil && c.batch.Load() == 1 && c.dio != nil {
		// The only reply of the batch: it goes now, before the rest of
		// the call's work on this goroutine, so the requester can take
		// it on the other core meanwhile. Replies of a larger batch go
		// together at the next wait.
		c.dio.Transmit()
	}
	return err
}

// sendIn is sendMsg once the caller holds slot and send-queue entry e; it
// gives both back if it fails before posting.
func (c *Conn) sendIn(slot, e int, hdr *wire.Header, pieces [][]byte, inv rdma.STag, wait, direct bool) error {
	n := hdr.EncodedLen()
	for _, p := range pieces {
		n += len(p)
	}
	if n > c.sendSize {
		c.sendFree.put(slot)
		c.sqFree.put(e)
		return fmt.Errorf("rpcrdma: message of %d bytes exceeds the %d-byte send buffer", n, c.sendSize)
	}
	off := slot * c.sendSize
	msg := hdr.Append(c.sendMR.Bytes()[off : off : off+c.sendSize])
	for _, p := range pieces {
		msg = append(msg, p...)
	}
	s := &c.sends[slot]
	s.sge[0] = rdma.SGE{MR: c.sendMR, Offset: off, Length: len(msg)}
	s.wr = rdma.WorkRequest{Op: rdma.OpSend, Local: s.sge[:]}
	if inv != 0 {
		s.wr.Op = rdma.OpSendInvalidate
		s.wr.InvalidateSTag = inv
	}
	s.wait = wait
	c.stats.add(statInlineBytes, uint64(len(msg)))
	if err := c.postTaken(e, &s.wr, s.done, direct); err != nil {
		c.sendFree.put(slot)
		return err
	}
	if !wait {
		return nil
	}
	err := <-s.result
	c.sendFree.put(slot)
	return err
}

// compErr turns a failed completion into an error. Every failed
// completion means the connection has ended (rdma.Status), so the error is
// a connection error. It runs on the loop and must not block.
func (c *Conn) compErr(comp rdma.Completion, what string) error {
	if comp.Status == rdma.StatusSuccess {
		return nil
	}
	if err := c.Err(); err != nil {
		return err
	}
	if err := c.rc.Err(); err != nil {
		// Why the provider ended the connection (a Terminate, say)
		// says more than the status; the loop may not have heard yet.
		return &ConnError{Op: what, Err: err}
	}
	return &ConnError{Op: what, Err: fmt.Errorf("completion status %v", comp.Status)}
}

// addRegistered counts n more bytes registered on c (negative: fewer),
// on c and on its Listener.
func (c *Conn) addRegistered(n int64) {
	c.stats.Registered.Add(n)
	if c.ln != nil {
		c.ln.registered.Add(n)
	}
}

// register registers b on the connection and counts it as registered
// memory.
func (c *Conn) register(b []byte, access rdma.Access) (rdma.MR, error) {
	mr, err := c.rc.Register(b, access)
	if err == nil {
		c.addRegistered(int64(len(b)))
	}
	return mr, err
}

// releaseAll deregisters mrs, which register returned.
func (c *Conn) releaseAll(mrs []rdma.MR) {
	for _, mr := range mrs {
		c.addRegistered(-int64(len(mr.Bytes())))
		mr.Release()
	}
}
