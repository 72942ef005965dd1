package rpcrdma

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// Defaults. Inline sizes follow what Linux sends in its RFC 8797 private
// data (4096 each way; docs/linux-interop.md section 1).
const (
	// DefaultInlineSize is the Send and Receive size this side offers in
	// its private data, and the size of its receive and send buffers
	// (Config.InlineSend and InlineRecv say how many a connection has).
	DefaultInlineSize = 4096
	// DefaultDDPThreshold: a DDP-eligible item shorter than this travels
	// inline; at or above it, in a chunk. Registration and an RDMA
	// round trip cost more than copying a small item (Linux's client uses
	// its inline threshold the same way, rpcrdma_args_inline).
	DefaultDDPThreshold = 1024
	// DefaultRequestCredits is what a requester asks for, as Linux's
	// client does (rdma_slot_table_entries).
	DefaultRequestCredits = 128
	// DefaultDoneTimeout bounds how long a responder keeps a read-chunk
	// reply registered while waiting for RDMA_DONE.
	DefaultDoneTimeout = 10 * time.Second
	// DefaultAbandonTimeout bounds how long a requester waits for the
	// reply to a call its caller gave up on before ending the connection.
	DefaultAbandonTimeout = time.Minute
)

// Config configures one side of an RPC-over-RDMA connection. The zero value
// gives every documented default. A Config is read when a connection is
// created and must not change afterwards.
type Config struct {
	// Versions are the RPC-over-RDMA versions this side speaks. A requester
	// sends its first call in the highest and falls back to Version One when
	// the responder answers ERR_VERS (draft-cel-nfsv4-rpcrdma-version-two-00
	// section 5); a responder serves all of them and answers in the
	// requester's version. Default: Version One only for a requester, One and
	// Two for a responder.
	Versions []wire.Version

	// InlineSend and InlineRecv are this side's largest Send and its receive
	// buffer size, offered in RFC 8797 private data. 1 KiB to 256 KiB;
	// default DefaultInlineSize. The size used for each direction is the
	// smaller of the sender's send size and the receiver's receive size; a
	// peer that sends no private data is assumed to take 1024 (Version One,
	// RFC 8166 section 3.3.2) or 4096 (Version Two,
	// draft-cel-nfsv4-rpcrdma-version-two-00 section 2.3).
	//
	// They size the buffers each connection registers: every receive is
	// InlineRecv bytes and every send buffer InlineSend bytes. A requester
	// registers (Credits + 1 + BackwardCredits) × (InlineRecv +
	// InlineSend); a responder (Grant.Max + 2 + BackwardCredits) ×
	// (InlineRecv + InlineSend), or, with Bounds.SharedReceives,
	// 2 × InlineSend per connection and SharedReceives × InlineRecv for
	// the Listener's pool.
	InlineSend int
	InlineRecv int

	// Credits is, for a requester, the credits it asks for and the most
	// calls it will have outstanding (it clamps larger grants to this);
	// default DefaultRequestCredits. Each costs the requester a receive
	// and a send buffer, InlineRecv + InlineSend bytes registered, plus
	// one more receive for a message outside the credit count. A
	// responder uses Grant instead.
	Credits uint32

	// Grant decides what a responder grants; the zero value grants
	// DefaultCredits. Without Bounds.SharedReceives, every connection
	// posts a receive for each credit of Grant.Max, two more for
	// messages outside the credit count, and as many send buffers,
	// whether or not its requester uses them: (Grant.Max + 2) ×
	// (InlineRecv + InlineSend) bytes registered per connection, idle or
	// not. With it, a credit costs a receive of the pool only while a
	// connection's calls keep its grant busy.
	Grant GrantPolicy

	// DDPThreshold is the smallest DDP-eligible argument a requester moves
	// by RDMA instead of inline. Default DefaultDDPThreshold; negative
	// moves every DDP-eligible item by RDMA.
	DDPThreshold int

	// NoRemoteInvalidation, on a requester, stops it advertising that it
	// accepts Send With Invalidate; on a responder, stops it sending them.
	// By default both are allowed (RFC 8797 flag 0x01).
	NoRemoteInvalidation bool

	// MSGP makes a responder honour RDMA_MSGP (RFC 5666 section 3.9,
	// draft-ietf-nfsv4-rpcrdma-01 section 3.5). Off by default: like RFC 8166
	// peers, the responder answers it with ERR_CHUNK.
	MSGP bool

	// ReadChunkReplies opts in to RFC 5666 read-chunk replies (RFC 5666
	// sections 3.8 and 5): a responder sends a Version One reply that fits
	// neither inline nor the offered reply chunk as a position-zero read
	// chunk for the requester to pull, instead of answering ERR_CHUNK; a
	// requester accepts such replies, pulls them and answers RDMA_DONE.
	// RFC 8166 removed them, so both sides must opt in.
	ReadChunkReplies bool

	// DoneTimeout bounds how long a responder keeps a read-chunk reply
	// registered waiting for RDMA_DONE; default DefaultDoneTimeout.
	DoneTimeout time.Duration

	// AbandonTimeout is how long a requester waits for the reply to a
	// call whose caller gave up (its context ended). The call's credit
	// may not be reused before that reply arrives, since the responder
	// still counts it; a responder that never answers would take it for
	// good, and the connection would stall once every credit went that
	// way. After AbandonTimeout the requester ends the connection
	// instead, as Linux's client disconnects when a call times out; its
	// calls fail with a *ConnError. Default DefaultAbandonTimeout;
	// negative: wait for ever.
	AbandonTimeout time.Duration

	// BackwardCredits turns on the backward direction (RFC 8167): calls
	// from the responder to the requester on the same connection, which
	// Conn.Backchannel carries. On a requester it is the number of
	// backward calls it takes at once: it posts that many more receives
	// and grants that many backward credits. On a responder it is the
	// most backward calls it has outstanding: it posts a receive for the
	// reply to each. Zero, the default, leaves the backward direction
	// off: a requester drops backward calls and Conn.Backchannel is nil.
	// A responder learns that a requester takes backward calls from the
	// upper layer (RFC 8167 section 2.2.3), and sends none before it has.
	// Each costs a connection a receive and a send buffer, InlineRecv +
	// InlineSend bytes registered (on a responder with
	// Bounds.SharedReceives, a receive promised from the pool).
	BackwardCredits uint32

	// Limits bounds what a peer's transport headers may contain; zero
	// fields take wire's defaults. MaxHeaderSize is always set from the
	// negotiated inline size.
	Limits wire.Limits

	// Bounds limit what peers can make a responder hold: connections,
	// handshake and idle time, memory per call, connection and Listener.
	// The zero value gives the documented defaults.
	Bounds Bounds

	// Options are the Version Two optional features (RDMA_OPTIONAL,
	// draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2) this side
	// understands, by rdma_opttype. A responder answers any other opttype
	// with RDMA_ERR_INVAL_OPTION; a requester drops it.
	Options map[uint32]OptionHandler

	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger

	// ConnState, on a responder, is called as each connection a
	// Listener admits changes state (ConnState says when, and on which
	// goroutine), as net/http's Server.ConnState is: for metrics, logs
	// and tracking what Serve accepted. nil: not called. A requester
	// (Dial) ignores it.
	ConnState func(*Conn, ConnState)

	// RDMA is passed to the provider for the connection's queue pair
	// (depths, IRD/ORD). PrivateData and Prepare are set by this package
	// and ignored here.
	RDMA rdma.ConnConfig
}

// validate returns an error naming the first field of c outside its
// documented range; Dial and Listen refuse such a Config rather than
// replace the value.
func (c *Config) validate() error {
	for _, f := range []struct {
		name string
		n    int
	}{{"InlineSend", c.InlineSend}, {"InlineRecv", c.InlineRecv}} {
		if f.n != 0 && (f.n < wire.MinInlineSize || f.n > wire.MaxInlineSize) {
			return fmt.Errorf("rpcrdma: Config.%s is %d bytes; want 0 (for %d) or %d to %d (what RFC 8797 private data can express)",
				f.name, f.n, DefaultInlineSize, wire.MinInlineSize, wire.MaxInlineSize)
		}
	}
	for _, v := range c.Versions {
		if v != wire.Version1 && v != wire.Version2 {
			return fmt.Errorf("rpcrdma: Config.Versions holds version %d; this package speaks versions 1 and 2", uint32(v))
		}
	}
	if c.DoneTimeout < 0 {
		return fmt.Errorf("rpcrdma: Config.DoneTimeout is %v; want 0 (for %v) or more", c.DoneTimeout, DefaultDoneTimeout)
	}
	return nil
}

func (c *Config) inlineSend() int { return clampInline(c.InlineSend) }
func (c *Config) inlineRecv() int { return clampInline(c.InlineRecv) }

func clampInline(n int) int {
	switch {
	case n == 0:
		return DefaultInlineSize
	case n < wire.MinInlineSize:
		return wire.MinInlineSize
	case n > wire.MaxInlineSize:
		return wire.MaxInlineSize
	}
	return n
}

func (c *Config) credits() uint32 {
	if c.Credits == 0 {
		return DefaultRequestCredits
	}
	return c.Credits
}

func (c *Config) ddpThreshold() int {
	if c.DDPThreshold == 0 {
		return DefaultDDPThreshold
	}
	return max(c.DDPThreshold, 0)
}

// abandonTimeout is AbandonTimeout with its default; 0 means never.
func (c *Config) abandonTimeout() time.Duration {
	switch {
	case c.AbandonTimeout < 0:
		return 0
	case c.AbandonTimeout == 0:
		return DefaultAbandonTimeout
	}
	return c.AbandonTimeout
}

func (c *Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// versions returns the configured versions, or def.
func (c *Config) versions(def ...wire.Version) []wire.Version {
	if len(c.Versions) == 0 {
		return def
	}
	return c.Versions
}

// privateData returns this side's RFC 8797 private data.
func (c *Config) privateData() wire.PrivateData {
	return wire.PrivateData{
		RemoteInvalidation: !c.NoRemoteInvalidation,
		SendSize:           c.inlineSend(),
		ReceiveSize:        c.inlineRecv(),
	}
}

// negotiated is what the two sides' private data settle.
type negotiated struct {
	peerPD     bool // the peer sent RFC 8797 private data
	sendLimit  int  // largest Send this side may post (transport header included)
	replyLimit int  // largest reply the peer may send this side
	recvLimit  int  // largest Send the peer may post to this side
	// peerInvalidates: the peer accepts Send With Invalidate (it set the
	// flag); only meaningful on a responder.
	peerInvalidates bool
}

// negotiate combines this side's configuration with the peer's private
// data (absent if it carried none, RFC 8797 section 4.1) for version v.
func negotiate(c *Config, peer []byte, v wire.Version) negotiated {
	var pd wire.PrivateData
	ok := pd.Decode(peer)
	n := negotiated{peerPD: ok}
	if !ok {
		def := wire.MinInlineSize
		if v == wire.Version2 {
			def = 4096
		}
		pd = wire.PrivateData{SendSize: def, ReceiveSize: def}
	}
	n.sendLimit = min(c.inlineSend(), pd.ReceiveSize)
	n.replyLimit = min(c.inlineRecv(), pd.SendSize)
	// Receive buffers are InlineRecv bytes whatever the peer says: a Send
	// longer than that ends the connection (RDMA has no partial receive).
	n.recvLimit = c.inlineRecv()
	n.peerInvalidates = ok && pd.RemoteInvalidation
	return n
}

// OptionHandler handles one RDMA_OPTIONAL message
// (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2): info is rdma_optinfo
// and payload the RPC message that followed it, if any; both are the
// handler's to keep. It runs on the connection's loop and must not block. On
// a responder, an error answers the message with RDMA_ERR_INVAL_OPTION.
type OptionHandler func(c *Conn, info, payload []byte) error
