package iwarp_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// BenchmarkThroughput measures bulk transfer over a pair of connections on
// loopback TCP, keeping tputDepth operations in flight:
//
//	write/SIZE/crc=off|on   RDMA Writes of SIZE bytes from initiator to responder
//	read/SIZE/crc=off|on    RDMA Reads of SIZE bytes by the initiator
//	rawtcp/SIZE             the baseline: SIZE-byte messages over a plain TCP
//	                        connection, each acknowledged by the receiver
//
// The rawtcp framing is that of cmd/rpcrdma's rawtcp bulk case (a 4-byte
// length, the data, an ack of min(SIZE, 64) bytes), pipelined to the same
// depth. Every sub-benchmark counts SIZE bytes per operation, so the ratio
// of MB/s between write or read and rawtcp is what iWARP framing, DDP
// placement and (with crc=on) CRC32c cost on top of TCP. Allocations are
// those of both sides, which share the process.
func BenchmarkThroughput(b *testing.B) {
	sizes := []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"4MiB", 4 << 20}}
	for _, op := range []rdma.Op{rdma.OpWrite, rdma.OpRead} {
		name := "write"
		if op == rdma.OpRead {
			name = "read"
		}
		b.Run(name, func(b *testing.B) {
			for _, size := range sizes {
				b.Run(size.name, func(b *testing.B) {
					for _, crc := range []iwarp.CRCPolicy{iwarp.CRCFollow, iwarp.CRCRequire} {
						crcName := "crc=off"
						if crc == iwarp.CRCRequire {
							crcName = "crc=on"
						}
						b.Run(crcName, func(b *testing.B) { tputRDMA(b, op, size.n, crc) })
					}
				})
			}
		})
	}
	b.Run("rawtcp", func(b *testing.B) {
		for _, size := range sizes {
			b.Run(size.name, func(b *testing.B) { tputRawTCP(b, size.n) })
		}
	})
}

// tputDepth is how many operations each benchmark keeps in flight.
const tputDepth = 4

// tputPair connects two connections of a fresh provider over loopback TCP.
func tputPair(b *testing.B, crc iwarp.CRCPolicy) (x, y rdma.Conn) {
	b.Helper()
	// No first-send delay: our own responder has no accept race.
	p, err := iwarp.New(iwarp.Options{CRC: crc, FirstSendDelay: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if n := p.Registered(); n != 0 {
			b.Errorf("%d memory regions still registered", n)
		}
	})
	return rdmatest.Pair(b, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0"}, rdma.ConnConfig{}, rdma.ConnConfig{})
}

// tputWait waits for one completion on c, which must succeed.
func tputWait(b *testing.B, c rdma.Conn, cs []rdma.Completion) {
	if _, err := c.Wait(context.Background(), cs[:1]); err != nil {
		b.Fatalf("wait: %v", err)
	}
	if cs[0].Status != rdma.StatusSuccess {
		b.Fatalf("completion %+v", cs[0])
	}
}

// tputRDMA runs RDMA Writes (x writes into y) or Reads (x reads from y) of
// size bytes, tputDepth at a time, each into or from its own slot.
func tputRDMA(b *testing.B, op rdma.Op, size int, crc iwarp.CRCPolicy) {
	rdmatest.CheckGoroutines(b)
	x, y := tputPair(b, crc)
	local := rdmatest.Alloc(b, x, tputDepth*size, rdma.AccessLocalWrite)
	remoteAccess := rdma.AccessRemoteWrite
	if op == rdma.OpRead {
		remoteAccess = rdma.AccessRemoteRead
	}
	remote := rdmatest.Alloc(b, y, tputDepth*size, remoteAccess)
	// The data sent is written first, as tputRawTCP's is: a buffer
	// nothing has written is Linux's shared zero page, always in cache.
	for _, m := range []rdma.MR{local, remote} {
		for i, p := 0, m.Bytes(); i < len(p); i++ {
			p[i] = byte(i*7 + 1)
		}
	}
	wrs := make([]rdma.WorkRequest, tputDepth)
	for i := range wrs {
		wrs[i] = rdma.WorkRequest{
			ID: uint64(i), Op: op,
			Local:      []rdma.SGE{{MR: local, Offset: i * size, Length: size}},
			RemoteSTag: remote.STag(), RemoteTO: remote.TO() + uint64(i*size),
		}
	}
	// A Send from x, posted after the Writes, reaches y only once they
	// have been placed: the end of the measurement (Writes complete at x
	// when handed to TCP).
	sendBuf := rdmatest.Alloc(b, x, 8, 0)
	recvBuf := rdmatest.Alloc(b, y, 8, rdma.AccessLocalWrite)
	fence := rdma.WorkRequest{ID: tputDepth, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(sendBuf)}}
	csx, csy := make([]rdma.Completion, 1), make([]rdma.Completion, 1)

	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	inflight := 0
	for i := range b.N {
		if inflight == tputDepth {
			tputWait(b, x, csx)
			inflight--
		}
		if err := x.PostSend(&wrs[i%tputDepth]); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
	for ; inflight > 0; inflight-- {
		tputWait(b, x, csx)
	}
	if err := y.PostRecv(1, []rdma.SGE{rdmatest.Whole(recvBuf)}); err != nil {
		b.Fatal(err)
	}
	if err := x.PostSend(&fence); err != nil {
		b.Fatal(err)
	}
	tputWait(b, y, csy)
	tputWait(b, x, csx)
	b.StopTimer()
}

// tputRawTCP sends size-byte messages over loopback TCP, each answered
// with a min(size, 64)-byte ack, tputDepth unacknowledged at a time.
func tputRawTCP(b *testing.B, size int) {
	rdmatest.CheckGoroutines(b)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf[:4]); err != nil {
				return
			}
			n := int(binary.BigEndian.Uint32(buf))
			if n > len(buf) {
				return
			}
			if _, err := io.ReadFull(c, buf[:n]); err != nil {
				return
			}
			if _, err := c.Write(buf[:min(n, 64)]); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	l.Close()
	if err != nil {
		wg.Wait()
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(); wg.Wait() })
	msg := make([]byte, 4+size)
	for i := range msg {
		msg[i] = byte(i*7 + 1) // written data, as tputRDMA sends
	}
	binary.BigEndian.PutUint32(msg, uint32(size))
	ack := make([]byte, min(size, 64))

	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	inflight := 0
	for range b.N {
		if inflight == tputDepth {
			if _, err := io.ReadFull(c, ack); err != nil {
				b.Fatal(err)
			}
			inflight--
		}
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
	for ; inflight > 0; inflight-- {
		if _, err := io.ReadFull(c, ack); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}
