package rpcrdma

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// Counters. Each counter has one entry in statTable, which names it and
// locates it in a StatsSnapshot; Conn.Stats, StatsSnapshot.Add and
// StatsSnapshot.Counters all walk that table, so a counter is added in
// one place. Drops and rejections count by Reason, as http2's countError
// names each protocol error, so that an operator can tell a credit
// overrun from a bad chunk.

// stat names a counter of counters.n.
type stat uint8

const (
	statCallsSent stat = iota
	statRepliesReceived
	statCallsReceived
	statRepliesSent
	statInline
	statReadChunks
	statWriteChunks
	statReplyChunks
	statLongCalls
	statInlineBytes
	statReadChunkBytes
	statWriteChunkBytes
	statReplyChunkBytes
	statRemoteInvalid
	statVersionFallback
	statReadReplies
	statBackwardCalls
	statBackwardReplies
	numStats
)

// statTable names each counter, as StatsSnapshot.Counters reports it, and
// locates it in a StatsSnapshot.
var statTable = [numStats]struct {
	name  string
	field func(*StatsSnapshot) *uint64
}{
	statCallsSent:       {"calls_sent", func(s *StatsSnapshot) *uint64 { return &s.CallsSent }},
	statRepliesReceived: {"replies_received", func(s *StatsSnapshot) *uint64 { return &s.RepliesReceived }},
	statCallsReceived:   {"calls_received", func(s *StatsSnapshot) *uint64 { return &s.CallsReceived }},
	statRepliesSent:     {"replies_sent", func(s *StatsSnapshot) *uint64 { return &s.RepliesSent }},
	statInline:          {"inline", func(s *StatsSnapshot) *uint64 { return &s.Inline }},
	statReadChunks:      {"read_chunks", func(s *StatsSnapshot) *uint64 { return &s.ReadChunks }},
	statWriteChunks:     {"write_chunks", func(s *StatsSnapshot) *uint64 { return &s.WriteChunks }},
	statReplyChunks:     {"reply_chunks", func(s *StatsSnapshot) *uint64 { return &s.ReplyChunks }},
	statLongCalls:       {"long_calls", func(s *StatsSnapshot) *uint64 { return &s.LongCalls }},
	statInlineBytes:     {"inline_bytes", func(s *StatsSnapshot) *uint64 { return &s.InlineBytes }},
	statReadChunkBytes:  {"read_chunk_bytes", func(s *StatsSnapshot) *uint64 { return &s.ReadChunkBytes }},
	statWriteChunkBytes: {"write_chunk_bytes", func(s *StatsSnapshot) *uint64 { return &s.WriteChunkBytes }},
	statReplyChunkBytes: {"reply_chunk_bytes", func(s *StatsSnapshot) *uint64 { return &s.ReplyChunkBytes }},
	statRemoteInvalid:   {"remote_invalidations", func(s *StatsSnapshot) *uint64 { return &s.RemoteInvalid }},
	statVersionFallback: {"version_fallbacks", func(s *StatsSnapshot) *uint64 { return &s.VersionFallback }},
	statReadReplies:     {"read_chunk_replies", func(s *StatsSnapshot) *uint64 { return &s.ReadReplies }},
	statBackwardCalls:   {"backward_calls", func(s *StatsSnapshot) *uint64 { return &s.BackwardCalls }},
	statBackwardReplies: {"backward_replies", func(s *StatsSnapshot) *uint64 { return &s.BackwardReplies }},
}

// Reason is why a received message was dropped (nothing is sent back) or
// rejected (the responder answers RDMA_ERROR). Its String is a stable
// name for metrics and logs.
type Reason uint8

// Drops.
const (
	DropUndecodable       Reason = iota // too short to carry an XID, or a reply header without one
	DropErrorToResponder                // an RDMA_ERROR reached a responder, which never answers one
	DropNotACall                        // a responder received an RPC message that is not a call
	DropCreditOverrun                   // a call beyond the credits granted: more calls than receives
	DropUnmatchedReply                  // a reply or RDMA_ERROR to no call outstanding
	DropCancelledReply                  // the reply to a call its caller gave up on
	DropStrayDone                       // RDMA_DONE for no read-chunk reply
	DropUnknownOption                   // a requester received RDMA_OPTIONAL of a type it has no handler for
	DropBackwardOff                     // a backward call or reply with the backward direction off or closed
	DropBackwardMalformed               // a backward call not in RFC 8167's form
	DropBackwardOverrun                 // a backward call beyond the backward credits
	DropBackwardUnmatched               // a backward reply to no backward call
	firstReject
)

// Rejections, each answered with the RDMA_ERROR code in its comment.
const (
	RejectVersion       Reason = firstReject + iota // ERR_VERS: a version this side does not serve
	RejectUndecodable                               // ERR_CHUNK: a transport header that does not decode
	RejectInvalidHeader                             // ERR_CHUNK: a header that breaks a wire.Validate rule
	RejectMSGP                                      // ERR_CHUNK: RDMA_MSGP, which Config.MSGP does not enable
	RejectOptionHeader                              // RDMA_ERR_BAD_HEADER: an invalid RDMA_OPTIONAL header
	RejectOption                                    // RDMA_ERR_INVAL_OPTION: an opttype without a handler, or whose handler failed
	RejectChunk                                     // ERR_CHUNK: a read chunk too large, outside the call or at odds with its length word
	RejectXID                                       // ERR_CHUNK: an RPC call whose XID is not the transport header's
	RejectReplyTooLarge                             // ERR_CHUNK: a reply that fits nothing the call offered
	RejectTooLarge                                  // ERR_CHUNK: read chunks adding up to more than the call may hold (Bounds)
	firstLimit
)

// Limits: a connection refused or closed, by a responder, for one of
// Config.Bounds. Each is logged at Info level with the peer's address, a
// repeated one once per Bounds.LogInterval with its count (limitlog.go).
const (
	LimitMaxConns         Reason = firstLimit + iota // a connection request refused: Bounds.MaxConns open already
	LimitMaxConnsPerAddr                             // a connection request refused: Bounds.MaxConnsPerAddr open from its host already
	LimitHandshakeTimeout                            // closed: no message within Bounds.HandshakeTimeout of the request
	LimitIdle                                        // closed: no call for Bounds.IdleTimeout
	LimitPullTimeout                                 // closed: a call's RDMA Reads not done within Bounds.PullTimeout
	LimitReceives                                    // a connection request refused: the shared receive pool has no receive left to promise
	EvictHandshake                                   // closed to make room for a request at MaxConns or MaxConnsPerAddr: the oldest not through its handshake
	EvictIdle                                        // closed to make room for a request at MaxConns or MaxConnsPerAddr: the least recently active without a call in flight
	NumReasons                                       // the number of Reasons
)

var reasonNames = [NumReasons]string{
	DropUndecodable:       "undecodable",
	DropErrorToResponder:  "error_to_responder",
	DropNotACall:          "not_a_call",
	DropCreditOverrun:     "credit_overrun",
	DropUnmatchedReply:    "unmatched_reply",
	DropCancelledReply:    "cancelled_reply",
	DropStrayDone:         "stray_done",
	DropUnknownOption:     "unknown_option",
	DropBackwardOff:       "backward_off",
	DropBackwardMalformed: "backward_malformed",
	DropBackwardOverrun:   "backward_overrun",
	DropBackwardUnmatched: "backward_unmatched",
	RejectVersion:         "reject_version",
	RejectUndecodable:     "reject_undecodable",
	RejectInvalidHeader:   "reject_invalid_header",
	RejectMSGP:            "reject_msgp",
	RejectOptionHeader:    "reject_option_header",
	RejectOption:          "reject_option",
	RejectChunk:           "reject_chunk",
	RejectXID:             "reject_xid",
	RejectReplyTooLarge:   "reject_reply_too_large",
	RejectTooLarge:        "reject_too_large",
	LimitMaxConns:         "limit_max_conns",
	LimitMaxConnsPerAddr:  "limit_max_conns_per_addr",
	LimitHandshakeTimeout: "limit_handshake_timeout",
	LimitIdle:             "limit_idle",
	LimitPullTimeout:      "limit_pull_timeout",
	LimitReceives:         "limit_receives",
	EvictHandshake:        "limit_evict_handshake",
	EvictIdle:             "limit_evict_idle",
}

// String returns the reason's stable name, such as "credit_overrun".
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// IsDrop reports whether r is a drop rather than a rejection or a limit.
func (r Reason) IsDrop() bool { return r < firstReject }

// IsLimit reports whether r is one of the limits of Config.Bounds acting
// on a connection.
func (r Reason) IsLimit() bool { return r >= firstLimit && r < NumReasons }

// counters are a connection's counters, read through Conn.Stats. They are
// updated by whichever goroutine sees the event, atomically.
type counters struct {
	n              [numStats]atomic.Uint64
	ErrorsSent     [4]atomic.Uint64 // RDMA_ERROR messages sent, by code (index 0: unknown codes)
	ErrorsReceived [4]atomic.Uint64 // RDMA_ERROR messages received, by code
	reasons        [NumReasons]atomic.Uint64
	Registered     atomic.Int64 // bytes of memory registered now, buffer rings included
}

func (s *counters) add(i stat, n uint64) { s.n[i].Add(n) }

func (s *counters) countError(code wire.ErrorCode, sent bool) {
	i := int(code)
	if i >= len(s.ErrorsSent) {
		i = 0
	}
	if sent {
		s.ErrorsSent[i].Add(1)
	} else {
		s.ErrorsReceived[i].Add(1)
	}
}

// drop counts a message dropped for reason r and logs it at debug level
// with attrs.
func (c *Conn) drop(r Reason, xid uint32, attrs ...any) {
	c.stats.reasons[r].Add(1)
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("rpcrdma: message dropped", append([]any{"reason", r.String(), "xid", xid}, attrs...)...)
	}
}

// StatsSnapshot is a connection's counters at one moment. ErrorsSent and
// ErrorsReceived are indexed by error code (ERR_VERS 1, ERR_CHUNK or
// RDMA_ERR_BAD_HEADER 2, RDMA_ERR_INVAL_OPTION 3; 0 for other codes);
// Reasons by Reason, and Dropped is the sum of its drops.
type StatsSnapshot struct {
	CallsSent, RepliesReceived, CallsReceived, RepliesSent        uint64
	Inline, ReadChunks, WriteChunks, ReplyChunks, LongCalls       uint64
	InlineBytes, ReadChunkBytes, WriteChunkBytes, ReplyChunkBytes uint64
	ErrorsSent, ErrorsReceived                                    [4]uint64
	Dropped, RemoteInvalid, VersionFallback, ReadReplies          uint64
	BackwardCalls, BackwardReplies                                uint64
	Reasons                                                       [NumReasons]uint64
	Registered                                                    int64
	CallsPending                                                  int
}

// Stats returns the connection's counters. It may be called at any time
// from any goroutine.
func (c *Conn) Stats() StatsSnapshot {
	s := &c.stats
	var snap StatsSnapshot
	for i, e := range statTable {
		*e.field(&snap) = s.n[i].Load()
	}
	for i := range s.ErrorsSent {
		snap.ErrorsSent[i] = s.ErrorsSent[i].Load()
		snap.ErrorsReceived[i] = s.ErrorsReceived[i].Load()
	}
	for r := range s.reasons {
		snap.Reasons[r] = s.reasons[r].Load()
		if Reason(r).IsDrop() {
			snap.Dropped += snap.Reasons[r]
		}
	}
	snap.Registered = s.Registered.Load()
	if c.role != nil {
		snap.CallsPending = c.role.outstanding()
	}
	return snap
}

// Add adds the counters of o to s, as a metrics writer sums the
// connections it has seen; the gauges Registered and CallsPending are
// added too.
func (s *StatsSnapshot) Add(o *StatsSnapshot) {
	for _, e := range statTable {
		*e.field(s) += *e.field(o)
	}
	for i := range s.ErrorsSent {
		s.ErrorsSent[i] += o.ErrorsSent[i]
		s.ErrorsReceived[i] += o.ErrorsReceived[i]
	}
	for r := range s.Reasons {
		s.Reasons[r] += o.Reasons[r]
	}
	s.Dropped += o.Dropped
	s.Registered += o.Registered
	s.CallsPending += o.CallsPending
}

// A Counter is one named counter of a StatsSnapshot.
type Counter struct {
	Name  string
	Value uint64
}

// Counters returns every counter of s under a stable name, in a fixed
// order, for a metrics writer: the counters ("calls_sent", "inline_bytes",
// ...), the RDMA_ERROR messages by code ("errors_sent_ERR_CHUNK", with
// "other" for unknown codes) and each reason ("dropped_credit_overrun",
// "rejected_chunk" for RejectChunk, "limit_idle" for LimitIdle). The gauges Registered and CallsPending are not
// counters and are not included.
func (s *StatsSnapshot) Counters() []Counter {
	out := make([]Counter, 0, int(numStats)+2*len(s.ErrorsSent)+int(NumReasons))
	for _, e := range statTable {
		out = append(out, Counter{e.name, *e.field(s)})
	}
	for i := range s.ErrorsSent {
		name := "other"
		if i > 0 {
			name = wire.ErrorCode(i).String()
		}
		out = append(out, Counter{"errors_sent_" + name, s.ErrorsSent[i]}, Counter{"errors_received_" + name, s.ErrorsReceived[i]})
	}
	for r := range NumReasons {
		switch {
		case r.IsDrop():
			out = append(out, Counter{"dropped_" + r.String(), s.Reasons[r]})
		case r.IsLimit():
			out = append(out, Counter{r.String(), s.Reasons[r]})
		default:
			out = append(out, Counter{"rejected_" + r.String()[len("reject_"):], s.Reasons[r]})
		}
	}
	return out
}
