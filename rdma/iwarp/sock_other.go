//go:build !linux

package iwarp

import "net"

// tcpMSS is not implemented here; callers fall back to DefaultMSS.
func tcpMSS(net.Conn) (int, bool) { return 0, false }

// peerClosed cannot tell here.
func peerClosed(net.Conn) (closed, ok bool) { return false, false }

// vecReader is not implemented here: payload is read with plain reads.
type vecReader struct{}

func newVecReader(net.Conn) *vecReader { return nil }

func (*vecReader) read([]byte) (int, []byte, error) { panic("iwarp: no vectored reads") }
