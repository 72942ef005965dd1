package rpcrdma

import (
	"errors"
	"net"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// ConnError reports that the connection failed or was closed: every call
// outstanding on it fails, and it carries no more. It matches
// errors.Is(err, net.ErrClosed).
type ConnError struct {
	Op  string // what was being done: "connection", "Send", "RDMA Read", ...
	Err error  // the cause, often an rdma error or rdma.TerminateError
}

func (e *ConnError) Error() string {
	return "rpcrdma: connection failed (" + e.Op + "): " + e.Err.Error()
}

// Unwrap returns the cause and net.ErrClosed.
func (e *ConnError) Unwrap() []error { return []error{e.Err, net.ErrClosed} }

// RemoteError reports that the responder answered a call with RDMA_ERROR (RFC
// 5666 section 4.2 / draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). It
// fails that call only.
type RemoteError struct {
	XID  uint32
	Vers wire.Version   // version of the error message
	Code wire.ErrorCode // ERR_VERS, ERR_CHUNK / RDMA_ERR_BAD_HEADER, RDMA_ERR_INVAL_OPTION
	Low  wire.Version   // ERR_VERS: lowest version the responder supports
	High wire.Version   // ERR_VERS: highest

	// offered says, for ERR_CHUNK, what the call offered for its reply,
	// since a reply that outgrew it is the usual cause and only the
	// responder knows the reply's size.
	offered string
}

func (e *RemoteError) Error() string {
	s := "rpcrdma: call 0x" + strconv.FormatUint(uint64(e.XID), 16) + " failed: responder answered " + e.Code.Name(e.Vers)
	if e.Code == wire.ErrVers {
		s += " (supports versions " + e.Low.String() + " to " + e.High.String() + ")"
	}
	if e.offered != "" {
		s += " (" + e.offered + ")"
	}
	return s
}

// offeredHint describes what a call offered for its reply, for an
// ERR_CHUNK answer: the inline limit, the reply chunk (rpc.Request.MaxReply)
// and the write chunks (rpc.Request.ResultBufs), and which knob raises
// each. Write chunks take only the results the server's handler marks
// for direct data placement (RFC 8166, Section 6): a result it leaves
// unmarked goes inline or in the reply chunk however large the write
// chunks are, which the requester cannot tell from ERR_CHUNK, so the
// hint names the server side too.
func offeredHint(inline int, replyChunk int, writes [][]byte) string {
	s := "if the reply outgrew what the call offered: inline replies up to " + strconv.Itoa(inline) + " bytes, "
	if replyChunk == 0 {
		s += "no reply chunk (set rpc.Request.MaxReply to offer one)"
	} else {
		s += "a reply chunk of " + strconv.Itoa(replyChunk) + " bytes (raise rpc.Request.MaxReply)"
	}
	if len(writes) > 0 {
		s += ", write chunks of"
		for i, w := range writes {
			if i > 0 {
				s += ","
			}
			s += " " + strconv.Itoa(len(w))
		}
		s += " bytes for the results (enlarge rpc.Request.ResultBufs; the server places only the results " +
			"its handler marks with rpc.Body.AppendDDPOpaque there, the others must fit inline or in the reply chunk)"
	}
	return s
}

// ErrCallTooLarge: a call does not fit in what the connection can carry
// (more chunks or segments than the limits allow, or a message too long
// for any chunk). It fails that call only.
var ErrCallTooLarge = errors.New("rpcrdma: call too large")

// ErrBadReply: the reply to a call broke the protocol (a malformed or
// invalid transport header, chunk lengths beyond what was offered). It
// fails that call only; the connection carries on.
var ErrBadReply = errors.New("rpcrdma: malformed reply")

// replyError wraps ErrBadReply with what was wrong.
type replyError struct {
	xid uint32
	why string
	err error
}

func (e *replyError) Error() string {
	s := "rpcrdma: reply to call 0x" + strconv.FormatUint(uint64(e.xid), 16) + " rejected: " + e.why
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *replyError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrBadReply, e.err}
	}
	return []error{ErrBadReply}
}
