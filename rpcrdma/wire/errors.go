package wire

import (
	"strconv"
)

// Rule names a rule a transport header broke. Its String is a stable token
// for counters; it is also an error, so errors.Is(err, RulePositionAlign)
// tests which rule a *HeaderError reports.
type Rule uint8

// The rules. The first four are Decode's; the rest are Validate's.
const (
	// RuleMalformed: the header is not valid XDR for its version: an item
	// is missing, a discriminant is not 0 or 1, or bytes follow a header
	// that stands alone. The *xdr.DecodeError is wrapped.
	RuleMalformed Rule = iota + 1
	// RuleVersion: rdma_vers is not a version this package knows; answer
	// with ERR_VERS.
	RuleVersion
	// RuleProc: rdma_proc is not a member of the version's enum
	// (draft-ietf-nfsv4-rpcrdma-01 and draft-cel-nfsv4-rpcrdma-version-two-00
	// section 4.2 have no default arm).
	RuleProc
	// RuleErrorCode: a Version Two RDMA_ERROR carries a code outside
	// rpcrdma2_errcode.
	RuleErrorCode
	// RuleReserved: a Version Two header uses RDMA_MSGP or RDMA_DONE, which
	// draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2 reserves.
	RuleReserved
	// RuleVersRange: an ERR_VERS body's low version exceeds its high one.
	RuleVersRange
	// RuleHeaderSize: the encoded header exceeds Limits.MaxHeaderSize.
	RuleHeaderSize
	// RuleOptInfoSize: rdma_optinfo exceeds Limits.MaxOptInfo.
	RuleOptInfoSize
	// RuleSegments: more segments than Limits.MaxSegments.
	RuleSegments
	// RuleChunks: more chunks than Limits.MaxChunks.
	RuleChunks
	// RuleEmptyChunk: a write chunk or reply chunk has no segments.
	RuleEmptyChunk
	// RuleZeroLength: a segment has length zero where data must move.
	RuleZeroLength
	// RulePositionAlign: a read position is not a multiple of four.
	RulePositionAlign
	// RuleChunkSplit: the segments of one read chunk are not adjacent.
	RuleChunkSplit
	// RulePositionOrder: read positions decrease along the list.
	RulePositionOrder
	// RulePositionZero: a position-zero read chunk with a type other than
	// RDMA_NOMSG.
	RulePositionZero
	// RuleNoMsgBody: RDMA_NOMSG with nowhere for the RPC message to be.
	RuleNoMsgBody
	// RuleReadInReply: a read list in a reply.
	RuleReadInReply
	// RuleReplyChunkInMsg: an RDMA_MSG reply reports bytes written to the
	// reply chunk.
	RuleReplyChunkInMsg
)

var ruleTokens = [...]string{
	RuleMalformed:       "malformed",
	RuleVersion:         "version",
	RuleProc:            "proc",
	RuleErrorCode:       "error-code",
	RuleReserved:        "reserved-proc",
	RuleVersRange:       "vers-range",
	RuleHeaderSize:      "header-size",
	RuleOptInfoSize:     "optinfo-size",
	RuleSegments:        "segments",
	RuleChunks:          "chunks",
	RuleEmptyChunk:      "empty-chunk",
	RuleZeroLength:      "zero-length",
	RulePositionAlign:   "position-align",
	RuleChunkSplit:      "chunk-split",
	RulePositionOrder:   "position-order",
	RulePositionZero:    "position-zero",
	RuleNoMsgBody:       "nomsg-body",
	RuleReadInReply:     "read-in-reply",
	RuleReplyChunkInMsg: "reply-chunk-in-msg",
}

// String returns the rule's stable token, e.g. "position-align".
func (r Rule) String() string {
	if int(r) < len(ruleTokens) && ruleTokens[r] != "" {
		return ruleTokens[r]
	}
	return "Rule(" + strconv.Itoa(int(r)) + ")"
}

// Error returns "rpcrdma: " and the token, so that a Rule can be an
// errors.Is target.
func (r Rule) Error() string { return "rpcrdma: " + r.String() }

// HeaderError reports a transport header that Decode or Validate rejected.
// It concerns that one message only: the connection carries on. A responder
// answers a call with an RDMA_ERROR carrying Code (and, for ErrVers, the
// range of versions it supports) unless it could not decode the XID; a
// requester never answers, it fails the RPC the XID names.
//
// errors.Is matches the Rule, and the wrapped *xdr.DecodeError's kind for
// RuleMalformed; errors.As reaches the *xdr.DecodeError.
type HeaderError struct {
	// Vers is the version of the rejected header; it selects the token
	// Error prints for Code.
	Vers Version
	// Code is the error code to send back: ErrVers, or ErrChunk
	// (ErrBadHeader in Version Two), which share a value.
	Code ErrorCode
	// Rule is the rule the header broke.
	Rule Rule
	// Proc is the header's type, when it was decoded.
	Proc Proc
	// Dir is the direction Validate was told the header travels in.
	Dir Direction
	// Where locates the offending item, e.g. "read segment 2", "write
	// chunk 1 segment 0" or "RDMA_MSG header"; empty when the header as a
	// whole is at fault.
	Where string
	// Value is the offending value (a position, count, size, version or
	// code) and Limit the bound it broke, where the rule has them.
	Value, Limit uint64
	// Err is the *xdr.DecodeError behind RuleMalformed, else nil.
	Err error
}

// PerMessage reports that the error concerns one message, not the
// connection. It is always true; the method lets a transport that handles
// errors from several layers ask the question uniformly.
func (e *HeaderError) PerMessage() bool { return true }

// Unwrap returns the Rule and, for RuleMalformed, the decoding error.
func (e *HeaderError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Rule, e.Err}
	}
	return []error{e.Rule}
}

func (e *HeaderError) Error() string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	var s string
	switch e.Rule {
	case RuleMalformed:
		s = "malformed "
		if e.Vers != 0 {
			s += "version " + u(uint64(e.Vers)) + " "
		}
		if e.Where != "" {
			s += e.Where
		} else {
			s += "header"
		}
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
	case RuleVersion:
		s = "unsupported version " + u(e.Value)
	case RuleProc:
		s = "unknown procedure " + u(e.Value) + " in version " + u(uint64(e.Vers))
	case RuleErrorCode:
		s = "unknown error code " + u(e.Value) + " in version " + u(uint64(e.Vers))
	case RuleReserved:
		s = e.Proc.String() + " is reserved in version " + u(uint64(e.Vers))
	case RuleVersRange:
		s = "ERR_VERS range low " + u(e.Value) + " > high " + u(e.Limit)
	case RuleHeaderSize:
		s = "header of " + u(e.Value) + " bytes exceeds " + u(e.Limit)
	case RuleOptInfoSize:
		s = "optinfo of " + u(e.Value) + " bytes exceeds " + u(e.Limit)
	case RuleSegments:
		s = u(e.Value) + " segments exceed " + u(e.Limit)
	case RuleChunks:
		s = u(e.Value) + " chunks exceed " + u(e.Limit)
	case RuleEmptyChunk:
		s = "empty " + e.Where
	case RuleZeroLength:
		s = e.Where + " has zero length"
	case RulePositionAlign:
		s = "read chunk position " + u(e.Value) + " not 4-byte aligned"
	case RuleChunkSplit:
		s = "read chunk position " + u(e.Value) + " split: " + e.Where + " not adjacent to its chunk"
	case RulePositionOrder:
		s = "read chunk position " + u(e.Value) + " after position " + u(e.Limit)
	case RulePositionZero:
		s = "position-zero read chunk in " + e.Proc.String()
	case RuleNoMsgBody:
		s = "RDMA_NOMSG without " + noMsgNeeds(e.Dir)
		if e.Dir != DirUnknown {
			s = "RDMA_NOMSG " + e.Dir.String() + " without " + noMsgNeeds(e.Dir)
		}
	case RuleReadInReply:
		s = "read list in a reply"
	case RuleReplyChunkInMsg:
		s = e.Proc.String() + " reply reports " + u(e.Value) + " bytes in the reply chunk"
	default:
		s = e.Rule.String()
	}
	return "rpcrdma: " + s
}

func noMsgNeeds(d Direction) string {
	switch d {
	case DirCall:
		return "a position-zero read chunk"
	case DirReply:
		return "a reply chunk"
	}
	return "a position-zero read chunk or a reply chunk"
}
