package rpc

import (
	"errors"
	"io"
	"net"
	"testing"
)

// TestAcceptErrorWords: each accept_stat reads as what the server
// refused, in words, with the spec token in parentheses, and still
// matches its sentinel under errors.Is.
func TestAcceptErrorWords(t *testing.T) {
	id := CallID{XID: 0x1a2b, Prog: 100003, Vers: 4, Proc: 6}
	for _, tt := range []struct {
		err  *AcceptError
		want string
		is   error
	}{
		{&AcceptError{Call: id, Stat: ProgMismatch, Low: 3, High: 3},
			"rpc: call 0x1a2b: program 100003 version 4 is not offered; the server has version 3 (PROG_MISMATCH)", &AcceptError{Stat: ProgMismatch}},
		{&AcceptError{Call: id, Stat: ProgMismatch, Low: 2, High: 3},
			"rpc: call 0x1a2b: program 100003 version 4 is not offered; the server has versions 2 to 3 (PROG_MISMATCH)", &AcceptError{Stat: ProgMismatch}},
		{&AcceptError{Call: CallID{XID: 7, Prog: 0x20049001, Vers: 1}, Stat: ProgUnavail},
			"rpc: call 0x7: the server does not offer program 0x20049001 (PROG_UNAVAIL)", &AcceptError{Stat: ProgUnavail}},
		{&AcceptError{Call: id, Stat: ProcUnavail},
			"rpc: call 0x1a2b: program 100003 version 4 has no procedure 6 (PROC_UNAVAIL)", &AcceptError{Stat: ProcUnavail}},
		{&AcceptError{Call: id, Stat: GarbageArgs},
			"rpc: call 0x1a2b prog 100003 vers 4 proc 6: the server could not decode the arguments (GARBAGE_ARGS)", ErrGarbageArgs},
		{&AcceptError{Call: id, Stat: SystemErr},
			"rpc: call 0x1a2b prog 100003 vers 4 proc 6: the server failed to run it (SYSTEM_ERR)", &AcceptError{Stat: SystemErr}},
		{&AcceptError{Call: id, Stat: 9},
			"rpc: call 0x1a2b prog 100003 vers 4 proc 6: accept_stat 9", &AcceptError{Stat: 9}},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%v:\n got %q\nwant %q", tt.err.Stat, got, tt.want)
		}
		if !errors.Is(tt.err, tt.is) {
			t.Errorf("%q does not match %v", tt.want, tt.is)
		}
	}
}

// TestConnErrorWords: a connection the peer closed says so in words.
func TestConnErrorWords(t *testing.T) {
	for _, tt := range []struct {
		err  *ConnError
		want string
	}{
		{&ConnError{}, "rpc: connection closed"},
		{&ConnError{Err: net.ErrClosed}, "rpc: connection closed"},
		{&ConnError{Err: io.EOF}, "rpc: connection failed: the peer closed it (EOF)"},
		{&ConnError{Err: io.ErrUnexpectedEOF}, "rpc: connection failed: unexpected EOF"},
		// A cause of this package's says "rpc:" once.
		{&ConnError{Err: ErrHTTP}, "rpc: connection failed: the peer speaks HTTP"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%#v: %q, want %q", tt.err.Err, got, tt.want)
		}
		if !errors.Is(tt.err, net.ErrClosed) || tt.err.Err != nil && !errors.Is(tt.err, tt.err.Err) {
			t.Errorf("%q does not match net.ErrClosed and its cause", tt.want)
		}
	}
}
