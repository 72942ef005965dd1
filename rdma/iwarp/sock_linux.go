//go:build linux

package iwarp

import (
	"net"
	"syscall"
	"unsafe"
)

// tcpMSS returns the socket's TCP_MAXSEG: the effective MSS that RFC 5044
// section 7.1 sizes FPDUs from (notes/iwarp-wire.md 1.8).
func tcpMSS(nc net.Conn) (int, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var mss int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		mss, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
	}); err != nil || serr != nil || mss <= 0 {
		return 0, false
	}
	return mss, true
}

// tcpInq returns how many bytes the socket holds that have not been read
// yet (SIOCINQ).
func tcpInq(nc net.Conn) (int, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return 0, false
	}
	return int(n), true
}

// peerClosed reports, without blocking, whether the peer has closed its
// end and nothing is left to read (a zero-byte MSG_PEEK). ok is false when
// the socket cannot tell.
func peerClosed(nc net.Conn) (closed, ok bool) {
	sc, isSC := nc.(syscall.Conn)
	if !isSC {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var n int
	var rerr error
	var b [1]byte
	if err := rc.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return false, false
	}
	switch {
	case rerr == syscall.EAGAIN:
		return false, true
	case rerr != nil:
		return true, true // reset
	}
	return n == 0, true
}
