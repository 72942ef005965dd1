// Package rdma is the provider model of go-rpcrdma: the RDMA verbs that
// RPC-over-RDMA (RFC 8166, RFC 8167, RFC 8797) needs, and no more.
//
// A provider implements [Provider]: rdma/loopback (in-process, strict, with
// fault injection), rdma/iwarp (RFC 5040 RDMAP, RFC 5041 DDP, RFC 5044 MPA
// over TCP) and rdma/verbs (cgo over libibverbs and librdmacm, built with
// -tags verbs). Every provider passes the conformance suite in
// rdma/rdmatest. The model is iWARP's, as Linux's siw
// implements it (RFC 5040, RFC 5041, RFC 5042; what siw adds is in
// docs/linux-interop.md).
//
// # Connections
//
// The initiator calls [Provider.Dial] with private data. The responder's
// [Listener.Accept] returns a [ConnRequest] carrying the initiator's private
// data, so the upper layer can read it (RFC 8797) before it chooses its own
// reply and calls [ConnRequest.Accept] or [ConnRequest.Reject]. Private data is
// at most [MaxPrivateData] bytes each way, or less where the transport carries
// less (see [PrivateDataLimits]); on such transports the receiver may see it
// zero-padded to a fixed size, so an upper layer parses it by its own format
// and never by its length.
//
// A [Conn] is a reliable connected queue pair with its own protection domain
// (PD) and one completion queue. [ConnConfig.Prepare] runs on each side before
// the peer can send, so that receives are posted in time: there is no
// receiver-not-ready flow control in iWARP.
//
// # Memory
//
// Memory is registered on a Conn and belongs to its PD. [Conn.Alloc] hands
// out memory that the provider owns (a cgo provider gives memory that does not
// move); [Conn.Register] registers a caller's []byte. Both return an [MR]
// named by an [STag] (24-bit index, 8-bit key) with [Access] rights and a
// tagged offset (TO) base chosen by the provider: byte i of the region is
// addressed remotely as MR.TO()+i. Upper layers advertise STag, TO and length
// exactly as the MR reports them and never assume that TOs start at zero.
// The key changes on every (re)registration, so a stale STag never matches.
// Invalidation, local ([MR.Invalidate]) or remote (Send with Invalidate),
// makes an STag dead at once.
//
// # Work and completions
//
// [Conn.PostRecv] posts a receive buffer; [Conn.PostSend] posts a Send (with
// Invalidate and/or Solicited Event), an RDMA Write or an RDMA Read. Local
// buffers are scatter/gather lists of [SGE]s, each naming a range of an MR of
// the same Conn. A Post that returns nil yields exactly one [Completion]; a
// Post that returns an error posted nothing. [Conn.Poll] and [Conn.Wait]
// return completions into a caller's slice without allocating.
//
// Ordering is RDMA's (RFC 5040 section 5.5):
//   - Work requests on the send queue are executed in posting order, and
//     their completions are returned in posting order. The same holds for
//     the receive queue. The two queues' completions interleave freely.
//   - A Send posted after RDMA Writes is delivered to the peer only after the
//     Writes have been placed, so "Write, then Send" signals that data is
//     ready (the RPC-over-RDMA reply pattern).
//   - An RDMA Read completes only after its whole response has been placed.
//   - Nothing is ordered between the two directions of a connection.
//
// # Interrupting a Wait
//
// A provider whose connections implement [WaitInterrupter] lets one
// goroutine make another's [Conn.Wait] return early, without ending the
// connection and without allocating. An upper layer that has one goroutine
// waiting on the completion queue uses it to hand that goroutine's place
// to another (the short path of package rpcrdma: a caller takes over the
// completion queue to receive its own reply). The capability is optional;
// a provider without it does not implement the interface.
//
// # Direct I/O
//
// A software provider does its transmit and receive work on goroutines of
// its own, and a round trip through it then costs hand-offs between them
// and the goroutine that waits for completions. A provider whose
// connections implement [DirectIO] can do that work on the waiting
// goroutine instead, while an upper layer that knows one goroutine
// processes the completions says so ([DirectIO.BeginDirect]). The
// capability is optional, and an RNIC, which does the work itself, has no
// use for it.
//
// # Shared receive queues
//
// A provider that implements [SharedRecvProvider] offers shared receive
// queues (SRQ semantics, as verbs' ibv_create_srq): a [SharedRecvQueue]
// holds receives that any connection attached to it consumes, so that a
// responder with many connections posts receives for the traffic it
// expects rather than for each connection's worst case. The capability is
// optional; a provider without it does not implement the interface.
//   - A connection is attached at creation: [ConnConfig.SharedRecv] names
//     the queue on Dial or ConnRequest.Accept. An attached Conn has no
//     receive queue of its own: its Limits report RecvQueueDepth 0 and
//     its PostRecv fails with ErrInvalid. Its own completion queue carries
//     only send-queue completions.
//   - Receive memory comes from [SharedRecvQueue.Alloc]: provider-owned,
//     local-write only, never exposed for remote access, owned by the
//     queue (not by a connection's protection domain) until MR.Release or
//     the queue's Close. [SharedRecvQueue.PostRecv] takes SGEs of such
//     MRs only. The memory belongs to the provider from PostRecv until
//     the receive's completion has been returned.
//   - An arriving Send takes the oldest receive posted to the queue, from
//     whichever connection it arrives on; the receives of one connection
//     complete in the order its Sends arrived. Each receive yields exactly
//     one completion, returned by the queue's Poll and Wait (not by the
//     Conn's), whose [Completion.Conn] names the connection the Send
//     arrived on.
//   - What ends a connection is what ends one with its own receive queue:
//     a Send arriving while the queue holds no receive is fatal for that
//     connection, as on iWARP (a verbs provider on RoCE or InfiniBand
//     reports receiver-not-ready retries first and ends the connection
//     when they run out); a Send longer than the receive it took ends the
//     connection and completes that receive with StatusLocalLength. Other
//     connections and the queue are not affected. A receive taken by a
//     connection that ends before the message is complete completes with
//     StatusFlushed, naming that connection; receives still in the queue
//     stay posted for the others.
//   - [SharedRecvQueue.ArmLimit] arms the limit event (verbs'
//     IBV_EVENT_SRQ_LIMIT_REACHED): once fewer than the limit receives
//     remain posted, [SharedRecvQueue.LimitReached] delivers one token and
//     the limit is disarmed until armed again.
//   - [SharedRecvQueue.Close] fails while a connection attached to the
//     queue has not been closed (as ibv_destroy_srq does); otherwise it
//     flushes every receive still posted with StatusFlushed (Completion.Conn
//     nil) and releases the queue's memory.
//
// # Errors
//
// Errors come in two reaches. Errors returned by a method (a full queue, an
// invalid argument) concern that call only; the connection survives. Errors
// that end a connection are those an RNIC reports as fatal, and they end it
// on both sides:
//   - a Send arriving with no posted receive, or longer than the posted
//     receive buffer;
//   - a remote access violation: unknown, invalidated or foreign STag,
//     missing access right, out of bounds;
//   - an RDMA Read beyond the responder's IRD; a Send with Invalidate naming
//     an STag that cannot be invalidated;
//   - a local protection failure while executing a work request;
//   - the peer closing, or the link failing.
//
// The side that detects a protocol violation sends an RDMAP Terminate and
// both sides see it as a [TerminateError] from [Conn.Err] (with Remote set on
// the side that received it). The work request that caused the error
// completes with a matching [Status] where the provider still holds it (see
// [TerminateError.Status]); every other outstanding work request on both
// sides completes with [StatusFlushed]. Every connection-ending error matches
// errors.Is(err, net.ErrClosed).
package rdma

import (
	"context"
	"fmt"
	"net"
)

// MaxPrivateData is the largest private data, in bytes, that a Dial, Accept
// or Reject may carry. MPA allows 512 bytes but Linux siw refuses frames with
// more than 256, and MPA v2 (RFC 6581 section 7.1) spends 4 of those on the
// IRD/ORD word, which leaves 252 for the upper layer.
const MaxPrivateData = 252

// Provider creates connections. Implementations are values (no global
// state); their methods are safe for concurrent use.
type Provider interface {
	// Dial connects to the listener at addr as the initiator, offering
	// cfg.PrivateData, and returns the established connection. It blocks
	// until the responder accepts or rejects, or ctx is done; ctx does not
	// bound the connection's life once Dial has returned.
	//
	// A rejection returns a *RejectError carrying the responder's private
	// data (errors.Is(err, ErrRejected)). Private data longer than
	// MaxPrivateData and invalid limits return an error matching ErrInvalid
	// before anything is sent. If cfg.Prepare fails, the connection is
	// closed and its error returned.
	Dial(ctx context.Context, addr string, cfg ConnConfig) (Conn, error)

	// Listen starts accepting connection requests at addr. The address
	// format is the provider's ("host:port" for iwarp; any name for
	// loopback, "" picks one). Listener.Addr reports the address to dial.
	Listen(ctx context.Context, addr string) (Listener, error)
}

// Listener hands out connection requests. Its methods are safe for
// concurrent use.
type Listener interface {
	// Accept waits for the next connection request. It returns an error
	// once the listener is closed or ctx is done.
	Accept(ctx context.Context) (ConnRequest, error)

	// Addr returns the address that initiators dial.
	Addr() net.Addr

	// Close stops listening, unblocks Accept calls and refuses the requests
	// not yet returned by Accept (their Dial fails). Established connections
	// are not affected. Close is idempotent.
	Close() error
}

// ConnRequest is an initiator's connection request, seen by the responder
// before it answers. The owner must call exactly one of Accept and Reject;
// later calls return an error. Its methods are safe for concurrent use.
type ConnRequest interface {
	// PrivateData returns the initiator's private data (at most
	// MaxPrivateData bytes). Where the transport carries a fixed-size area
	// (InfiniBand and RoCE) it has trailing zero padding. The slice
	// belongs to the request; it must not be modified and stays valid
	// after Accept or Reject.
	PrivateData() []byte

	// RemoteAddr returns the initiator's address.
	RemoteAddr() net.Addr

	// LocalAddr returns the address the request arrived on.
	LocalAddr() net.Addr

	// Accept creates the responder's side of the connection, runs
	// cfg.Prepare on it, and sends the reply with cfg.PrivateData. The
	// returned connection is established: work posted on it runs as soon as
	// the initiator is ready. If Prepare fails, the request is rejected
	// without private data and the error returned. Accept fails if the
	// initiator has given up (its Dial context ended).
	Accept(ctx context.Context, cfg ConnConfig) (Conn, error)

	// Reject refuses the request; the initiator's Dial returns a
	// *RejectError carrying privateData (at most MaxPrivateData bytes).
	Reject(privateData []byte) error
}

// ConnConfig configures one side of a connection. The zero value asks for
// the provider's defaults.
type ConnConfig struct {
	// PrivateData is sent to the peer at connect time: in the request by
	// Dial, in the reply by ConnRequest.Accept. At most MaxPrivateData
	// bytes. It is copied; the caller keeps ownership.
	PrivateData []byte

	// SendQueueDepth and RecvQueueDepth bound the work requests
	// outstanding on each queue (posted and whose completion has not yet
	// been returned by Poll or Wait). Zero picks the provider default; a
	// value above the provider's maximum is lowered to it. Limits reports
	// the values in force.
	SendQueueDepth int
	RecvQueueDepth int

	// IRD is how many inbound RDMA Read Requests this side holds at once;
	// ORD is how many RDMA Reads this side wants outstanding at once. Zero
	// picks the provider default; values above the provider's maximum are
	// lowered to it. They are negotiated as RFC 6581 section 9.1 describes
	// (RFC 6581 section 9.1): the responder raises its IRD to at least
	// the initiator's ORD and lowers its ORD to at most the initiator's
	// IRD; the initiator lowers its ORD to at most the responder's IRD.
	// Afterwards each side's ORD does not exceed the peer's IRD.
	IRD int
	ORD int

	// SharedRecv, if not nil, attaches the connection to a shared receive
	// queue of the same provider: Sends arriving on it consume that
	// queue's receives (see the package documentation). RecvQueueDepth is
	// then ignored. A provider without shared receive queues, or given
	// another provider's, fails with an error matching ErrInvalid.
	SharedRecv SharedRecvQueue

	// Prepare, if not nil, runs on the new Conn before the peer may send to
	// it: on the initiator after the reply has arrived, on the responder
	// before the reply is sent. It is the place to allocate and register
	// memory and post the first receives. PeerPrivateData is available.
	// Send-queue work posted from Prepare runs once the connection is
	// established. An error aborts the connection attempt.
	Prepare func(Conn) error
}

// Limits are a connection's limits in force, after defaults, provider
// maxima and IRD/ORD negotiation.
type Limits struct {
	SendQueueDepth int // maximum outstanding send-queue work requests
	RecvQueueDepth int // maximum outstanding posted receives
	IRD            int // maximum inbound RDMA Read Requests held at once
	ORD            int // maximum outstanding RDMA Reads posted here
	MaxSGE         int // maximum SGEs in one work request
	MaxReadSGE     int // maximum SGEs in an RDMA Read's sink (at most MaxSGE; Linux siw allows 1)
	MaxMessageSize int // maximum bytes in one Send, RDMA Write or RDMA Read

	// RemoteInvalidation reports whether this side's STags can be named
	// by the peer's Send with Invalidate. When false, such a Send ends
	// the connection or silently kills the STag, depending on the device
	// (a verbs provider over ibv_reg_mr regions), so an upper layer must
	// not ask the peer for it (RFC 8797 section 4.1.1). Sending a Send
	// with Invalidate from this side is not affected.
	RemoteInvalidation bool
}

// Conn is one side of a reliable connection: a queue pair with its own
// protection domain and one completion queue. All methods are safe for
// concurrent use; work requests posted concurrently are ordered by the order
// in which their Post calls took effect.
type Conn interface {
	// LocalAddr and RemoteAddr return the connection's addresses.
	LocalAddr() net.Addr
	RemoteAddr() net.Addr

	// PeerPrivateData returns the private data the peer sent at connect
	// time. The slice belongs to the Conn and must not be modified.
	PeerPrivateData() []byte

	// Limits returns the limits in force. They do not change.
	Limits() Limits

	// Alloc returns a zeroed region of size bytes of provider-owned
	// memory, registered on this connection with the given access. The
	// memory is the device's until MR.Release (or Close); a cgo provider
	// hands out memory that does not move. It stays memory-safe after
	// Release and Close: a goroutine that writes it while another closes
	// the connection reaches memory no device touches any more, never an
	// unmapped page (a cgo provider allocates Go memory and pins it while
	// registered). It returns an error matching ErrInvalid
	// for a negative size or unknown access bits, and the connection's
	// error once it has ended.
	Alloc(size int, access Access) (MR, error)

	// Register registers the caller's buffer b on this connection with the
	// given access. The caller keeps ownership of b but must not let it be
	// reused until MR.Release; a cgo provider pins b with runtime.Pinner
	// until then. Errors are as for Alloc.
	Register(b []byte, access Access) (MR, error)

	// PostRecv posts a receive of up to the SGEs' total length. The SGEs'
	// MRs must belong to this connection, be valid and have
	// AccessLocalWrite. sgl is not retained; the memory it names belongs to
	// the provider until the completion is returned. It returns an error
	// matching ErrQueueFull when RecvQueueDepth receives are outstanding,
	// ErrInvalid for a bad SGE, and the connection's error once it has
	// ended. None of these end the connection.
	PostRecv(id uint64, sgl []SGE) error

	// PostSend posts a Send (any variant), an RDMA Write or an RDMA Read.
	// wr and wr.Local are not retained. Until the completion is returned,
	// the memory that wr.Local names must not be modified (Send, Write
	// source) or read (Read sink). It returns an error matching
	// ErrQueueFull when SendQueueDepth work requests, or for a Read ORD
	// Reads, are outstanding; ErrInvalid for an invalid request (unknown
	// op, too many SGEs, an SGE outside its MR, an invalid or foreign MR,
	// a Read sink without AccessLocalWrite, more than MaxMessageSize
	// bytes); and the connection's error once it has ended. None of these
	// end the connection; remote checks happen at the peer and end it.
	PostSend(wr *WorkRequest) error

	// Poll copies up to len(cs) available completions into cs and returns
	// how many. It does not block.
	Poll(cs []Completion) int

	// Wait blocks until at least one completion is available and copies up
	// to len(cs) of them into cs. It returns (0, ctx.Err()) when ctx is
	// done, and (0, Err()) once the connection has ended and every
	// completion has been returned. len(cs) must be at least 1.
	Wait(ctx context.Context, cs []Completion) (int, error)

	// Done returns a channel that is closed when the connection ends, by
	// Close, by the peer, or by a fatal error.
	Done() <-chan struct{}

	// Err returns nil while the connection is up, then why it ended:
	// ErrClosed, ErrDisconnected, ErrConnectionLost or a TerminateError.
	// All of them match errors.Is(err, net.ErrClosed).
	Err() error

	// Close ends the connection (the peer sees ErrDisconnected), flushes
	// every outstanding work request on both sides with StatusFlushed,
	// unblocks Wait, and releases the connection's MRs. The completions
	// stay available to Poll and Wait. Close returns after the provider's
	// goroutines for this connection have exited. It is idempotent, and it
	// must be called even after the connection has failed.
	Close() error
}

// MR is a registered memory region. Its methods are safe for concurrent
// use.
type MR interface {
	// Bytes returns the region's memory. For Alloc'd memory it belongs to
	// the provider; after Release or Close, what is written there reaches
	// no peer, but the slice stays safe to touch (Conn.Alloc). For
	// Register'd memory it is the caller's slice.
	Bytes() []byte

	// STag returns the region's current STag. It changes on Reregister.
	STag() STag

	// TO returns the tagged offset of Bytes()[0]: a peer addresses byte i
	// as TO()+i. It does not change.
	TO() uint64

	// Access returns the region's current access rights.
	Access() Access

	// Valid reports whether the STag is valid: registered, not
	// invalidated locally or remotely, not released.
	Valid() bool

	// Invalidate invalidates the STag at once (verbs local invalidate): any
	// remote access arriving after Invalidate returns fails with an
	// invalid-STag error that ends the connection, and nothing is placed
	// into the region any more. A later Post naming this MR in an SGE
	// returns ErrInvalid; a work request posted earlier that has not yet
	// run fails with StatusLocalProtection, which ends the connection.
	// Invalidating an invalid STag does nothing.
	Invalidate() error

	// Reregister makes the region valid again with a new key and the given
	// access (fast registration, as FRWR does). The old STag is dead. It
	// returns the new STag.
	Reregister(access Access) (STag, error)

	// Release deregisters the region and, for Alloc'd memory, returns it to
	// the provider. Release is idempotent.
	Release() error
}

// SGE is one element of a scatter/gather list: Length bytes at Offset in
// MR. MR must belong to the Conn the work request is posted on.
type SGE struct {
	MR     MR
	Offset int
	Length int
}

// WorkRequest is a send-queue work request.
type WorkRequest struct {
	// ID is returned in the completion; the provider does not interpret it.
	ID uint64

	// Op is OpSend, OpSendInvalidate, OpSendSE, OpSendSEInvalidate, OpWrite
	// or OpRead.
	Op Op

	// Local is the local side: the source of a Send or RDMA Write, the
	// sink of an RDMA Read. The message length is the SGEs' total.
	Local []SGE

	// RemoteSTag and RemoteTO name the peer's buffer of an RDMA Write (the
	// sink) or RDMA Read (the source), as the peer advertised them.
	RemoteSTag STag
	RemoteTO   uint64

	// InvalidateSTag is the peer's STag that a Send with Invalidate asks
	// the peer to invalidate.
	InvalidateSTag STag
}

// Completion reports a finished work request.
type Completion struct {
	ID     uint64 // the work request's ID
	Op     Op     // the work request's op; OpRecv for receives
	Status Status // StatusSuccess or why it failed
	Len    int    // bytes sent, written, read or received; 0 unless StatusSuccess

	// Conn is the connection a receive completed from a SharedRecvQueue
	// was consumed by; nil for every other completion, and for a
	// receive flushed by the queue's Close.
	Conn Conn

	// For receives: Solicited is set when the Send carried the Solicited
	// Event flag; Invalidated is set when it was a Send with Invalidate
	// and InvalidatedSTag (one of this side's STags) is now invalid.
	Solicited       bool
	Invalidated     bool
	InvalidatedSTag STag
}

// Depths are a connection's queue depths and RDMA Read depths.
type Depths struct {
	SendQueue, RecvQueue, IRD, ORD int
}

// Depths returns the depths cfg asks for, with a zero field replaced by
// def's and a field above max lowered to max's, as every provider applies
// them. A negative field is an error matching ErrInvalid.
func (cfg ConnConfig) Depths(def, max Depths) (Depths, error) {
	var d Depths
	for _, f := range [...]struct {
		name        string
		v, def, max int
		p           *int
	}{
		{"send queue depth", cfg.SendQueueDepth, def.SendQueue, max.SendQueue, &d.SendQueue},
		{"receive queue depth", cfg.RecvQueueDepth, def.RecvQueue, max.RecvQueue, &d.RecvQueue},
		{"IRD", cfg.IRD, def.IRD, max.IRD, &d.IRD},
		{"ORD", cfg.ORD, def.ORD, max.ORD, &d.ORD},
	} {
		switch {
		case f.v < 0:
			return d, fmt.Errorf("rdma: %s %d is negative: %w", f.name, f.v, ErrInvalid)
		case f.v == 0:
			*f.p = f.def
		default:
			*f.p = min(f.v, f.max)
		}
	}
	return d, nil
}

// DirectIO is implemented by connections whose socket work can run on the
// goroutine that processes completions (see the package documentation).
// Between BeginDirect and EndDirect, that goroutine, the owner, waits with
// WaitDirect; posts from any goroutine keep working as before.
type DirectIO interface {
	Conn

	// BeginDirect opens a direct section: until EndDirect, the calling
	// goroutine is the one that processes the connection's completions,
	// and waits for them only with WaitDirect; what it posts with
	// PostSendDirect waits for its next WaitDirect or EndDirect. Sections
	// do not nest, and one is open at a time.
	BeginDirect()

	// PostSendDirect is Conn.PostSend for the owner: within a section,
	// the request is transmitted by the owner's next WaitDirect (or
	// handed on by EndDirect) rather than at once by the provider. Out
	// of a section it is PostSend.
	PostSendDirect(wr *WorkRequest) error

	// Transmit has the owner transmit what is queued now, on its
	// goroutine, where the provider is not already transmitting, rather
	// than at its next WaitDirect: for a message that should go before
	// the owner's remaining work, when no other will join it.
	Transmit()

	// EndDirect closes the section. It hands on anything posted and not
	// yet transmitted, and does not block.
	EndDirect()

	// WaitDirect is Conn.Wait for the owner: it first transmits what the
	// owner posted with PostSendDirect and the provider left to it (work
	// posted otherwise goes as PostSend's does), then, with nothing to
	// return, does the provider's receive work on the calling goroutine
	// until completions are ready, ctx ends, the connection ends or
	// InterruptWait is called (where the connection is a
	// WaitInterrupter). It returns as Wait does.
	WaitDirect(ctx context.Context, cs []Completion) (int, error)
}

// WaitInterrupter is implemented by connections whose Wait another
// goroutine may interrupt (see the package documentation).
type WaitInterrupter interface {
	Conn

	// InterruptWait makes the Wait in progress on the connection return
	// promptly, or, if none is in progress, the next Wait: it returns the
	// completions available, if any, or else (0, nil). The interrupt is
	// consumed by the Wait it makes return with no completions; one that
	// returns completions may leave it pending, so a later Wait may
	// return (0, nil) once without blocking. InterruptWait does not wait
	// for the Wait it interrupts (at most for a lock of the connection's
	// that no one holds long), does not allocate, and is safe to call
	// from any goroutine, at any time, also after the connection has
	// ended. It changes nothing else: completions stay queued, in order,
	// for the next Poll or Wait.
	InterruptWait()
}
