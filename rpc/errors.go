package rpc

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
)

// Errors fall in two classes by reach.
//
// Per call: *AcceptError, *RejectError and *BadReplyError end one call; the
// connection stays usable and other calls proceed. A context's error
// (context.Canceled, context.DeadlineExceeded) is returned as is when the
// caller gave up.
//
// Per connection: *ConnError means the transport is gone (closed locally,
// closed by the peer, or failed); every pending and later call on it fails
// the same way. It matches net.ErrClosed under errors.Is, whatever the cause,
// so callers test for it in one place and reconnect.

// ErrGarbageArgs is returned by a handler whose arguments could not be
// decoded; the server answers GARBAGE_ARGS. A *AcceptError with Stat
// GarbageArgs matches it under errors.Is.
var ErrGarbageArgs = errors.New("rpc: garbage arguments")

// ErrServerClosed is returned by Server.Serve and Server.ServeListener after
// Server.Shutdown or Server.Close.
var ErrServerClosed = errors.New("rpc: server closed")

// AcceptError reports a call the server accepted (authenticated) but did not
// run successfully: accept_stat other than SUCCESS (RFC 5531 section 9). It
// ends that call only.
type AcceptError struct {
	Call CallID
	Stat AcceptStat
	// Low and High are the program versions the server supports, for
	// PROG_MISMATCH.
	Low, High uint32
}

// Error says in words what the server refused, then gives the
// accept_stat in parentheses: e.g. "rpc: call 0x1a2b: program 100003
// version 4 is not offered; the server has version 3 (PROG_MISMATCH)".
// Where the words name the program, version and procedure, the call is
// named by its xid alone; otherwise by its CallID.
func (e *AcceptError) Error() string {
	b := make([]byte, 0, 128)
	b = append(b, "rpc: call 0x"...)
	b = strconv.AppendUint(b, uint64(e.Call.XID), 16)
	b = append(b, ": "...)
	switch e.Stat {
	case ProgUnavail:
		b = append(b, "the server does not offer program "...)
		b = AppendProg(b, e.Call.Prog)
	case ProgMismatch:
		b = appendProgVers(b, e.Call.Prog, e.Call.Vers)
		b = append(b, " is not offered; the server has "...)
		if e.Low == e.High {
			b = append(b, "version "...)
			b = strconv.AppendUint(b, uint64(e.Low), 10)
		} else {
			b = append(b, "versions "...)
			b = strconv.AppendUint(b, uint64(e.Low), 10)
			b = append(b, " to "...)
			b = strconv.AppendUint(b, uint64(e.High), 10)
		}
	case ProcUnavail:
		b = appendProgVers(b, e.Call.Prog, e.Call.Vers)
		b = append(b, " has no procedure "...)
		b = strconv.AppendUint(b, uint64(e.Call.Proc), 10)
	default:
		b = append(b[:len("rpc: ")], e.Call.String()...)
		b = append(b, ": "...)
		switch e.Stat {
		case GarbageArgs:
			b = append(b, "the server could not decode the arguments"...)
		case SystemErr:
			b = append(b, "the server failed to run it"...)
		default:
			b = append(b, "accept_stat "...)
			b = strconv.AppendInt(b, int64(e.Stat), 10)
			return string(b)
		}
	}
	b = append(b, " ("...)
	b = append(b, e.Stat.String()...)
	b = append(b, ')')
	return string(b)
}

// appendProgVers appends "program 100003 version 3".
func appendProgVers(b []byte, prog, vers uint32) []byte {
	b = append(b, "program "...)
	b = AppendProg(b, prog)
	b = append(b, " version "...)
	return strconv.AppendUint(b, uint64(vers), 10)
}

// Is reports whether target is ErrGarbageArgs and e is GARBAGE_ARGS, or
// target is an *AcceptError with the same Stat (its other fields are not
// compared).
func (e *AcceptError) Is(target error) bool {
	if target == ErrGarbageArgs {
		return e.Stat == GarbageArgs
	}
	t, ok := target.(*AcceptError)
	return ok && t.Stat == e.Stat
}

// RejectError reports a call the server denied: MSG_DENIED with RPC_MISMATCH
// or AUTH_ERROR (RFC 5531 section 9). It ends that call only.
type RejectError struct {
	Call CallID
	Stat RejectStat
	// Low and High are the RPC versions the server supports, for
	// RPC_MISMATCH.
	Low, High uint32
	// AuthStat says why authentication failed, for AUTH_ERROR.
	AuthStat AuthStat
}

// Error returns e.g. "rpc: call 0x1a2b prog 100003 vers 3 proc 6:
// AUTH_ERROR AUTH_TOOWEAK".
func (e *RejectError) Error() string {
	s := "rpc: " + e.Call.String() + ": " + e.Stat.String()
	if e.Stat == RPCMismatch {
		return s + versionRange(e.Low, e.High)
	}
	return s + " " + e.AuthStat.String()
}

// Is reports whether target is the AuthStat of an AUTH_ERROR e, or an
// *RejectError with the same Stat and, for AUTH_ERROR, the same AuthStat.
func (e *RejectError) Is(target error) bool {
	switch t := target.(type) {
	case AuthStat:
		return e.Stat == AuthError && e.AuthStat == t
	case *RejectError:
		return t.Stat == e.Stat && (e.Stat != AuthError || t.AuthStat == e.AuthStat)
	}
	return false
}

// BadReplyError reports a reply to a pending call whose header could not be
// decoded, or whose held-apart data items do not fit its XDR stream. It ends
// that call only; Err is the decoding error.
type BadReplyError struct {
	Call CallID
	Err  error
}

func (e *BadReplyError) Error() string {
	return "rpc: " + e.Call.String() + ": malformed reply: " + e.Err.Error()
}

func (e *BadReplyError) Unwrap() error { return e.Err }

// ConnError reports that a transport is closed or failed. It concerns the
// whole connection: every pending and later call fails with it. It matches
// net.ErrClosed under errors.Is, and also its cause.
type ConnError struct {
	// Err is the cause: net.ErrClosed after a local Close, io.EOF when the
	// peer closed, an I/O or framing error otherwise.
	Err error
}

func (e *ConnError) Error() string {
	switch e.Err {
	case nil, net.ErrClosed:
		return "rpc: connection closed"
	case io.EOF:
		return "rpc: connection failed: the peer closed it (EOF)"
	}
	// A cause from this package carries the same prefix: said once.
	return "rpc: connection failed: " + strings.TrimPrefix(e.Err.Error(), "rpc: ")
}

// Unwrap returns net.ErrClosed and the cause.
func (e *ConnError) Unwrap() []error {
	if e.Err == nil || e.Err == net.ErrClosed {
		return []error{net.ErrClosed}
	}
	return []error{net.ErrClosed, e.Err}
}

// connError wraps err in a *ConnError unless it already is one.
func connError(err error) error {
	if _, ok := errors.AsType[*ConnError](err); ok {
		return err
	}
	return &ConnError{Err: err}
}

func versionRange(low, high uint32) string {
	return " (versions " + strconv.FormatUint(uint64(low), 10) + " to " + strconv.FormatUint(uint64(high), 10) + ")"
}
