//go:build linux

package iwarp

import (
	"io"
	"net"
	"os"
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
}

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
	v := &vecReader{rc: rc, stash: make([]byte, stashSize)}
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
			return false // wait in the netpoller
		}
		v.n, v.errno = int(n), errno
		return true
	}
}

// read reads at most len(p) bytes into p and what follows them, up to
// stashSize bytes, into the stash, with one system call. It returns how
// many bytes went to p and the stash bytes; the latter only when p is full.
// The stash is overwritten by the next call.
func (v *vecReader) read(p []byte) (int, []byte, error) {
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
