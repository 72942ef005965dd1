package rawtcp

import (
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSendFromFile measures, over raw TCP on loopback and without
// any RPC, what serving a file's data costs against sending one
// cache-hot buffer, as `rpcrdma bench`'s plain READ does: 1 MiB at a
// time, in 64 KiB segments each framed by 16 bytes before and 4 after
// (an RDMA Write's FPDUs with CRC off), from a 64 MiB file on tmpfs
// (/dev/shm) read sequentially:
//
//   - pattern: the segments of one buffer, written with one writev;
//   - pread: the file's next MiB read into a buffer first, as an NFS
//     server does, then written the same way;
//   - sendfile: each segment sent from the file by sendfile(2), the
//     framing written around it under TCP_CORK, as a zero-copy READ
//     would be sent.
//
// It reports MB/s and the sending thread's CPU time per MiB
// (sender-us/MiB; the loopback delivery to the receiver runs on it
// too). On the 2-core VM, -count 5 (each mode five times in a row):
// pattern 4443-4465 MB/s and 213-221 us per MiB (and one first run at
// 2921), pread 2407-2487 MB/s and 418-431 us, sendfile 2076-2561 MB/s
// and 406-474 us; by hand, with an 8 MiB file instead of 64, the same
// proportions. So serving file data, copied or not, runs at about 0.55
// of sending one cache-hot buffer, before any RPC: reading the file's
// pages costs about what sending them does, however they are sent.
func BenchmarkSendFromFile(b *testing.B) {
	const seg = 64 << 10
	f, pattern := tmpfsFile(b)
	c := servedConn(b, func(c net.Conn) {
		buf := make([]byte, mib)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
	rc, err := c.SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	fc, err := f.SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	var ffd int
	fc.Control(func(fd uintptr) { ffd = int(fd) })
	hdr, trailer := make([]byte, 16), make([]byte, 4)
	between := make([]byte, 0, 20)
	between = append(append(between, trailer...), hdr...)
	buf := make([]byte, mib)
	bufs := make(net.Buffers, 0, 3*mib/seg)
	cork := func(on int) {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, on) })
	}
	sendfile := func(off int64, n int) {
		for n > 0 {
			var err error
			werr := rc.Write(func(fd uintptr) bool {
				var m int
				m, err = syscall.Sendfile(int(fd), ffd, &off, n)
				if err == syscall.EAGAIN {
					return false
				}
				n -= max(m, 0)
				return true
			})
			if err == nil {
				err = werr
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, mode := range []string{"pattern", "pread", "sendfile"} {
		b.Run(mode, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.SetBytes(mib)
			cpu0 := threadCPU()
			i := 0
			for b.Loop() {
				off := int64(i%span) * mib
				i++
				switch mode {
				case "pattern", "pread":
					src := pattern
					if mode == "pread" {
						if _, err := f.ReadAt(buf, off); err != nil {
							b.Fatal(err)
						}
						src = buf
					}
					bufs = bufs[:0]
					for s := 0; s < mib; s += seg {
						bufs = append(bufs, hdr, src[s:s+seg], trailer)
					}
					if _, err := bufs.WriteTo(c); err != nil {
						b.Fatal(err)
					}
				case "sendfile":
					cork(1)
					for s := 0; s < mib; s += seg {
						h := between
						if s == 0 {
							h = hdr
						}
						if _, err := c.Write(h); err != nil {
							b.Fatal(err)
						}
						sendfile(off+int64(s), seg)
					}
					if _, err := c.Write(trailer); err != nil {
						b.Fatal(err)
					}
					cork(0)
				}
			}
			b.ReportMetric(float64((threadCPU()-cpu0).Microseconds())/float64(b.N), "sender-us/MiB")
		})
	}
}

// mib is the unit the file benchmarks move, and span the MiB of their
// file.
const mib, span = 1 << 20, 64

// tmpfsFile returns a file of span MiB on tmpfs (/dev/shm), removed when
// b ends, each MiB of it written from the returned 1 MiB pattern; it
// skips b where there is no /dev/shm.
// servedConn returns a loopback TCP connection whose other end serve
// runs on, until the benchmark ends and closes both.
func servedConn(b *testing.B, serve func(net.Conn)) *net.TCPConn {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func tmpfsFile(b *testing.B) (*os.File, []byte) {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		b.Skip("no /dev/shm (tmpfs) to keep the file in")
	}
	f, err := os.CreateTemp("/dev/shm", "rpcrdma-rawtcp-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	pattern := make([]byte, mib)
	for i := range pattern {
		pattern[i] = byte(i * 7)
	}
	for i := range span {
		if _, err := f.WriteAt(pattern, int64(i)*mib); err != nil {
			b.Fatal(err)
		}
	}
	return f, pattern
}

// threadCPU is the calling thread's CPU time, user and system.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReceiveToFile is BenchmarkSendFromFile's other direction, an
// NFS WRITE's: a sender streams 1 MiB messages from one cache-hot
// buffer, and the receiver, the measured thread, reads each into a
// buffer and either leaves it there (discard) or writes it into a 64 MiB
// tmpfs file at the next offset with pwrite (file), as an NFS server
// does. It reports MB/s and the receiving thread's CPU time per MiB
// (receiver-us/MiB). On the 2-core VM, -count 5: discard 2952-4013 MB/s
// (median 3515) and 95-148 us per MiB, file 2188-2720 MB/s (median
// 2456) and 346-400 us: writing the data into the file keeps about 0.7
// of the throughput and triples the receiver's CPU.
func BenchmarkReceiveToFile(b *testing.B) {
	f, pattern := tmpfsFile(b)
	c := servedConn(b, func(c net.Conn) {
		for {
			if _, err := c.Write(pattern); err != nil {
				return
			}
		}
	})
	buf := make([]byte, mib)
	for _, mode := range []string{"discard", "file"} {
		b.Run(mode, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.SetBytes(mib)
			cpu0 := threadCPU()
			i := 0
			for b.Loop() {
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
				if mode == "file" {
					if _, err := f.WriteAt(buf, int64(i%span)*mib); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
			b.ReportMetric(float64((threadCPU()-cpu0).Microseconds())/float64(b.N), "receiver-us/MiB")
		})
	}
}
