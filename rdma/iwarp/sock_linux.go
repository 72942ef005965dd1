//go:build linux

package iwarp

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// tcpMSS returns the connection's effective send MSS, which RFC 5044
// section 7.1 sizes FPDUs from (its MULPDU): the MSS the path
// MTU allows (IP_MTU or IPV6_MTU, less the IP and TCP headers and a
// timestamp option), or TCP_MAXSEG when larger or when the MTU is unknown.
// TCP_MAXSEG alone can be half that: early in a connection Linux bounds
// its segments by half the largest window the peer has offered (32741 on
// loopback, where the MTU allows 65483, the size Linux siw uses there).
func tcpMSS(nc net.Conn) (int, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	v6 := false
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok && a.IP.To4() == nil {
		v6 = true
	}
	var mss, mtu int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		mss, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
		if v6 {
			mtu, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_MTU)
		} else {
			mtu, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU)
		}
	}); err != nil || serr != nil || mss <= 0 {
		return 0, false
	}
	return max(mss, mtuMSS(mtu, v6)), true
}

// mtuMSS is the largest TCP payload a segment of an mtu-byte IP packet
// carries with the timestamp option on (as Linux has it by default); 0
// for an unknown MTU.
func mtuMSS(mtu int, v6 bool) int {
	const tcpHeader, timestamps = 20, 12
	ipHeader := 20
	if v6 {
		ipHeader = 40
	}
	return max(mtu-ipHeader-tcpHeader-timestamps, 0)
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

// stashSize is how many bytes after a payload one readv may take: the
// trailer and the next FPDU's header, and with small FPDUs several whole
// ones, which then reach the buffered reader without a system call.
const stashSize = 4 << 10

// vecReader reads a payload and what follows it with one readv through
// the socket's RawConn, so that it waits in the netpoller and honours the
// read deadline as net.Conn.Read does. It allocates nothing per read: the
// callback is bound once and its arguments live in the struct.
type vecReader struct {
	rc    syscall.RawConn
	fn    func(fd uintptr) bool
	iov   [2]syscall.Iovec
	stash []byte
	n     int
	errno syscall.Errno
	lowat int // SO_RCVLOWAT in force; 0 is the default (1)
}

// minLowat is the smallest payload remainder worth waiting for whole. A
// reader that finds part of a large payload arrived would read that part,
// find the socket empty, sleep and be woken for the rest: with the socket's
// low-water mark set to what it still needs, it sleeps until all of it is
// there and reads it with one system call. It waits for nothing it does not
// need: the mark never exceeds the rest of the payload being read, and it
// is back at 1 before any other read.
const minLowat = 16 << 10

// newVecReader returns a vecReader for nc, or nil when nc has no file
// descriptor to read from.
func newVecReader(nc net.Conn) *vecReader {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	v := &vecReader{rc: rc}
	v.fn = v.readv
	return v
}

func (v *vecReader) readv(fd uintptr) bool {
	for {
		n, _, errno := syscall.Syscall(syscall.SYS_READV, fd, uintptr(unsafe.Pointer(&v.iov[0])), uintptr(len(v.iov)))
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if want := int(v.iov[0].Len); want >= minLowat && want != v.lowat {
				// Best effort: without it, we only wake up more often.
				if syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, want) == nil {
					v.lowat = want
				}
			}
			return false // wait in the netpoller
		}
		v.n, v.errno = int(n), errno
		if v.lowat != 0 {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, 1)
			v.lowat = 0
		}
		return true
	}
}

// read reads at most len(p) bytes into p and what follows them, up to
// stashSize bytes, into the stash, with one system call. It returns how
// many bytes went to p and the stash bytes; the latter only when p is full.
// The stash is overwritten by the next call. It is allocated by the
// first: a connection whose payloads all arrive in its rxBuf, as small
// messages do, never needs one.
func (v *vecReader) read(p []byte) (int, []byte, error) {
	if v.stash == nil {
		v.stash = make([]byte, stashSize)
	}
	v.iov[0].Base = &p[0]
	v.iov[0].SetLen(len(p))
	v.iov[1].Base = &v.stash[0]
	v.iov[1].SetLen(len(v.stash))
	v.n, v.errno = 0, 0
	err := v.rc.Read(v.fn)
	v.iov = [2]syscall.Iovec{} // keep nothing of p alive
	switch {
	case err != nil:
		return 0, nil, err
	case v.errno != 0:
		return 0, nil, os.NewSyscallError("readv", v.errno)
	case v.n == 0:
		return 0, nil, io.EOF
	case v.n <= len(p):
		return v.n, nil, nil
	}
	return len(p), v.stash[:v.n-len(p)], nil
}
