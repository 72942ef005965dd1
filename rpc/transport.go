package rpc

import (
	"context"
	"errors"
)

// Msg is one RPC message crossing a Transport: a call or a reply, starting
// with its xid.
type Msg struct {
	Body
	// For calls only, read by transports that can place results directly
	// (RPC-over-RDMA write chunks); others ignore them:
	ResultBufs [][]byte // caller memory for the reply's DDP-eligible items, in result order
	// ReplyBuf, for calls only, is caller memory a transport may put the
	// reply in instead of allocating (RPC-over-RDMA copies an inline reply
	// there when it fits its capacity, and offers it as the reply chunk
	// when its capacity holds MaxReply rounded up to 4 bytes, for the
	// responder to write into until the call ends); the reply Recv
	// returns then aliases it.
	ReplyBuf []byte
	// Release, when a transport sets it on a message it returns from Recv,
	// gives the message back to the transport. The Server calls it once
	// the call's handler has returned and its reply has been sent, or
	// once it has dropped the call (while closing), so a
	// handler must not keep Call.Args (or slices of it) after it returns;
	// copy what it needs: the transport reuses that memory. The Client
	// calls it once it is done with a reply: it has taken the results or
	// the error, or dropped the message (late, unknown, not a reply).
	// Results belong to the caller from then on, so the transport may
	// reuse the Msg itself but none of the memory its Body and Items
	// point to.
	Release func()

	// MaxReply is the largest reply the caller expects, in bytes, not
	// counting DDP-eligible results placed into ResultBufs; 0 means the
	// reply is known to be small. An RPC-over-RDMA transport offers a
	// reply chunk when MaxReply may not fit an inline reply.
	MaxReply int
}

// Transport carries whole RPC messages between two peers. The record-marking
// StreamTransport (TCP) and the RPC-over-RDMA transport implement it, so
// Client and Server run unchanged over either.
//
// Memory. Send reads m and its memory but does not keep them after it
// returns, with one exception: a transport that lets the peer fetch a call's
// data itself (RDMA Read chunks) or place results into ResultBufs uses that
// memory until the reply to the call is received or the call is cancelled
// (see CallCanceler); the Client keeps a call's memory untouched that long.
// A Msg returned by Recv, with all its memory, belongs to the caller.
type Transport interface {
	// Send transmits one whole message. Safe for concurrent use. Returns an error wrapping net.ErrClosed after Close or a connection failure.
	Send(ctx context.Context, m *Msg) error
	// Recv returns the next whole message. Called by one goroutine at a
	// time. The Msg and its memory belong to the caller. An error is the
	// end of the transport, except a *CallError, which fails one call and
	// leaves the transport usable.
	Recv() (*Msg, error)
	// Close closes the transport and makes a Recv in progress return. It
	// is safe to call more than once and concurrently with Send and Recv.
	Close() error
}

// Pusher is the delivery contract between this package and its
// transports: the Client and the Server have a transport hand over what
// it receives by calling a function on its own goroutine, and a caller
// may run that delivery itself (DirectPusher), which saves goroutine
// hand-offs. StreamTransport and the RPC-over-RDMA transport (package
// rpcrdma) push; a Transport that does not is adapted by a goroutine that
// calls its Recv and delivers what it returns.
//
// After Push(deliver), the transport calls deliver for every message and
// error Recv would have returned, in the same order, one call at a time,
// beginning with any it had queued for Recv; the last call carries the
// error that ends the transport (not a *CallError), and none follows it.
// Recv must not be called any more. Push is called at most once.
//
// deliver must not block: the transport's receive path waits for it. A
// transport a Server pushes to must therefore bound what it delivers, as
// RPC-over-RDMA's credits do, since the Server cannot stop it the way it
// stops calling Recv when MaxInFlight calls run. (The transports of this
// package that read a byte stream are the exception the Server knows: it
// waits in their deliver for a free slot, and the peer is held back by
// the stream's flow control.)
//
// deliver reports whether the receiver expects another message now: a
// Client does while calls wait for replies, a Server always. A transport
// that learns of a message only by reading for it (a byte stream) may stop
// reading once deliver reports false, until a caller's SendDeliver asks
// again or it is closed; a peer's close is then noticed by the next call.
// Transports that are told of messages anyway may ignore the report.
type Pusher interface {
	Push(deliver func(*Msg, error) bool)
}

// InlineReplier is implemented by Pushers whose deliver function a Server
// may use to run a short call (Server.HandleShort) itself and send its
// reply from there, sparing the hand-off to a worker: the short path on
// the serving side (see the package documentation). Sending from the
// transport's own receiving goroutine must not wait for what only that
// goroutine frees, so before it runs the call the Server asks
// ReserveReply, which takes, without blocking, what sending the reply to
// the call m needs, and reports whether it could; it also reports false
// when calls wait behind m (a stream that has read part of the next one:
// workers then run them side by side). When it reported true, Send of
// that reply uses what it took and does not block, and a reservation the
// reply did not use is given back when m is released.
type InlineReplier interface {
	Pusher
	ReserveReply(m *Msg) bool
}

// DirectPusher is implemented by a Pusher that can run its delivery on the
// goroutine of a caller waiting for its reply, instead of on its own
// goroutine, which then wakes the caller: the short path (see the package
// documentation). StreamTransport and the RPC-over-RDMA requester
// implement it. The Client sends every call on such a transport with
// SendDeliver.
type DirectPusher interface {
	Pusher
	// SendDeliver is Send, followed, when the message was sent and the
	// transport can, by delivery on the calling goroutine: it delivers
	// what the transport receives through the function given to Push,
	// in the order Push's rule sets (every message, not only the
	// caller's reply), until arrived reports true, ctx ends or the
	// transport ends; meanwhile the transport's own goroutine delivers
	// nothing. It checks arrived, which must be cheap and must not block,
	// after each batch it delivers. It returns Send's error, and whether
	// arrived became true by what it delivered itself; false also when
	// it delivered nothing because it could not take over the delivery
	// (another call in flight, another caller delivering, Push not
	// called, the transport ended). When it returns, the transport's
	// goroutine delivers again; the error that ends the transport is
	// always delivered by that goroutine. Safe for concurrent use; it
	// allocates no more than Send.
	SendDeliver(ctx context.Context, m *Msg, arrived func() bool) (delivered bool, err error)
}

// CallCanceler is implemented by transports that hold resources for a call
// until its reply arrives, such as RPC-over-RDMA memory registrations for
// its chunks. The Client calls CancelCall when it abandons a call it sent
// successfully, because the caller's context is done, so that the transport
// can release (invalidate) them before the memory returns to the caller. It
// is not called for calls that complete with a reply or fail with the
// connection.
//
// CancelCall may be called from any goroutine, concurrently with Send and
// Recv, and for an xid whose reply is already in flight or unknown to the
// transport. When it returns, the transport no longer reads or writes the
// call's memory (Body items and ResultBufs), so it may wait for an
// invalidation to complete, but no longer than that.
type CallCanceler interface {
	CancelCall(xid uint32)
}

// CallError is returned by Transport.Recv when the transport failed one
// call without failing the connection: an RPC-over-RDMA responder answered
// it with RDMA_ERROR, say, or its reply broke the transport's rules. The
// Client fails the call XID with Err and keeps receiving.
type CallError struct {
	XID uint32
	Err error
}

func (e *CallError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *CallError) Unwrap() error { return e.Err }

// pushWaits is implemented by the Pushers of this package whose deliver
// may wait for the Server to have a free MaxInFlight slot, because their
// receiving goroutine does nothing else and their peer is held back by a
// byte stream's flow control: StreamTransport and recvPusher.
type pushWaits interface {
	Pusher
	deliverMayWait()
}

// recvPusher adapts a Transport that does not push: a goroutine calls Recv
// and delivers what it returns, until the error that ends the transport.
type recvPusher struct{ Transport }

// asPusher returns t as a Pusher, adapting it if it does not push.
func asPusher(t Transport) Pusher {
	if p, ok := t.(Pusher); ok {
		return p
	}
	return recvPusher{t}
}

// Push starts the goroutine; it exits once it has delivered the error that
// ends the transport, which its receiver waits for.
func (a recvPusher) Push(deliver func(*Msg, error) bool) {
	go func() {
		for {
			m, err := a.Recv()
			deliver(m, err)
			if _, one := errors.AsType[*CallError](err); err != nil && !one {
				return
			}
		}
	}()
}

func (recvPusher) deliverMayWait() {}
