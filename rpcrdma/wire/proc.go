package wire

import (
	"log/slog"
	"strconv"
)

// Version is the rdma_vers field of a transport header.
type Version uint32

// The protocol versions this package encodes and decodes.
const (
	// Version1 is RPC-over-RDMA Version One (RFC 5666; XDR in
	// draft-ietf-nfsv4-rpcrdma-01 section 4.2).
	Version1 Version = 1
	// Version2 is RPC-over-RDMA Version Two as of
	// draft-cel-nfsv4-rpcrdma-version-two-00 (section 4.2).
	Version2 Version = 2
)

// String returns the version number in decimal.
func (v Version) String() string { return strconv.FormatUint(uint64(v), 10) }

// LogValue implements slog.LogValuer.
func (v Version) LogValue() slog.Value { return slog.Uint64Value(uint64(v)) }

// supported reports whether Decode and Validate know v's layout.
func (v Version) supported() bool { return v == Version1 || v == Version2 }

// Proc is the message type, rdma_proc: the discriminant of the header body
// (draft-ietf-nfsv4-rpcrdma-01 section 4.2 enum rdma_proc,
// draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2 enum rpcrdma2_proc). The
// constants are named as the specifications name them.
type Proc uint32

// The message types. RDMA_OPTIONAL exists only in Version Two, where
// RDMA_MSGP and RDMA_DONE are reserved and have void bodies.
const (
	RDMA_MSG      Proc = 0 // an RPC message follows the chunk lists
	RDMA_NOMSG    Proc = 1 // no RPC message follows; it travels in a chunk
	RDMA_MSGP     Proc = 2 // v1: padded RPC message (RFC 5666 section 3.9); v2: reserved
	RDMA_DONE     Proc = 3 // v1: requester has read the reply's chunks; v2: reserved
	RDMA_ERROR    Proc = 4 // the peer rejected a header
	RDMA_OPTIONAL Proc = 5 // v2 only: an optional feature's message (Version Two, section 3.1)
)

var procNames = [...]string{
	RDMA_MSG:      "RDMA_MSG",
	RDMA_NOMSG:    "RDMA_NOMSG",
	RDMA_MSGP:     "RDMA_MSGP",
	RDMA_DONE:     "RDMA_DONE",
	RDMA_ERROR:    "RDMA_ERROR",
	RDMA_OPTIONAL: "RDMA_OPTIONAL",
}

// String returns the specification's token, or "Proc(n)" for a value no
// version defines.
func (p Proc) String() string {
	if uint64(p) < uint64(len(procNames)) {
		return procNames[p]
	}
	return "Proc(" + strconv.FormatUint(uint64(p), 10) + ")"
}

// LogValue implements slog.LogValuer.
func (p Proc) LogValue() slog.Value { return slog.StringValue(p.String()) }

// validIn reports whether p is a member of version v's rdma_proc enum.
// Version One's union has no default arm (draft-ietf-nfsv4-rpcrdma-01 section
// 4.2), so an unknown proc is undecodable; Version Two adds RDMA_OPTIONAL
// (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2).
func (p Proc) validIn(v Version) bool {
	if v == Version2 {
		return p <= RDMA_OPTIONAL
	}
	return p <= RDMA_ERROR
}

// ErrorCode is the error code of an RDMA_ERROR message: rpc_rdma_errcode in
// Version One (draft-ietf-nfsv4-rpcrdma-01 section 4.2), rpcrdma2_errcode in
// Version Two (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). The two
// enums share values: Version Two renamed ERR_CHUNK to RDMA_ERR_BAD_HEADER
// (and broadened it to any header error, as RFC 8166 did for ERR_CHUNK) and
// added RDMA_ERR_INVAL_OPTION.
type ErrorCode uint32

// The error codes.
const (
	// ErrVers (ERR_VERS, RDMA_ERR_VERS): the receiver does not support the
	// header's rdma_vers; the body carries the range it does support.
	ErrVers ErrorCode = 1
	// ErrChunk (ERR_CHUNK): Version One's code for a header the receiver
	// could not decode or whose chunk lists break the rules.
	ErrChunk ErrorCode = 2
	// ErrBadHeader (RDMA_ERR_BAD_HEADER): Version Two's name for ErrChunk.
	ErrBadHeader ErrorCode = 2
	// ErrInvalOption (RDMA_ERR_INVAL_OPTION): Version Two only; the
	// receiver does not support an RDMA_OPTIONAL message's rdma_opttype
	// (draft-cel-nfsv4-rpcrdma-version-two-00 section 3.1).
	ErrInvalOption ErrorCode = 3
)

// String returns the token for c: the Version One names for 1 and 2, the
// Version Two name for 3, "ErrorCode(n)" otherwise. Use Name for the token a
// given version uses.
func (c ErrorCode) String() string {
	switch c {
	case ErrVers:
		return "ERR_VERS"
	case ErrChunk:
		return "ERR_CHUNK"
	case ErrInvalOption:
		return "RDMA_ERR_INVAL_OPTION"
	}
	return "ErrorCode(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Name returns the token version v uses for c.
func (c ErrorCode) Name(v Version) string {
	if v != Version2 {
		if c == ErrInvalOption {
			return "ErrorCode(3)"
		}
		return c.String()
	}
	switch c {
	case ErrVers:
		return "RDMA_ERR_VERS"
	case ErrBadHeader:
		return "RDMA_ERR_BAD_HEADER"
	}
	return c.String()
}

// LogValue implements slog.LogValuer.
func (c ErrorCode) LogValue() slog.Value { return slog.StringValue(c.String()) }
