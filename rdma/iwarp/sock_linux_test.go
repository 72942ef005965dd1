//go:build linux

package iwarp

import (
	"bytes"
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestMTUMSS: the MSS a path MTU allows is what Linux uses with
// timestamps on: 1448 for IPv4 over a 1500-byte MTU, 1428 for IPv6.
func TestMTUMSS(t *testing.T) {
	for _, c := range []struct {
		mtu  int
		v6   bool
		want int
	}{{1500, false, 1448}, {1500, true, 1428}, {65535, false, 65483}, {9000, false, 8948}, {0, false, 0}} {
		if got := mtuMSS(c.mtu, c.v6); got != c.want {
			t.Errorf("mtuMSS(%d, v6 %v) = %d, want %d", c.mtu, c.v6, got, c.want)
		}
	}
}

// TestTCPMSSLoopback: on a fresh loopback connection TCP_MAXSEG is bounded
// by half the peer's first window; tcpMSS reports what the MTU allows, the
// larger, so FPDUs are not needlessly halved.
func TestTCPMSSLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var maxseg, mtu int
	rc.Control(func(fd uintptr) {
		maxseg, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
		mtu, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU)
	})
	got, ok := tcpMSS(c)
	if !ok {
		t.Fatal("tcpMSS failed on a TCP socket")
	}
	if want := max(maxseg, mtuMSS(mtu, false)); got != want || got < maxseg {
		t.Fatalf("tcpMSS = %d, want %d (TCP_MAXSEG %d, IP_MTU %d)", got, want, maxseg, mtu)
	}
	t.Logf("TCP_MAXSEG %d, IP_MTU %d: EMSS %d", maxseg, mtu, got)
}

// TestLowWaterMark: a large payload that arrives in two parts is read once
// the rest is there (the socket's low-water mark set to the rest), and the
// mark is back at 1 afterwards: a small Send that follows is received at
// once, not held until more bytes come.
func TestLowWaterMark(t *testing.T) {
	p, err := New(Options{FirstSendDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, c, _ := connectRaw(t, p, true, false, rdma.ConnConfig{})
	defer c.Close()
	dst := rdmatest.Alloc(t, c, 256<<10, rdma.AccessRemoteWrite)
	small := rdmatest.Alloc(t, c, 64, rdma.AccessLocalWrite)
	rdmatest.PostRecv(t, c, 1, rdmatest.Whole(small))

	payload := make([]byte, 60000)
	for i := range payload {
		payload[i] = byte(i)
	}
	seg := ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, true, uint32(dst.STag()), dst.TO()), Payload: payload}
	fpdu := mpa.AppendFPDU(nil, false, seg.Append(nil))
	r.write(fpdu[:1000])
	// The reader has the header and finds most of the payload missing.
	deadline := time.Now().Add(5 * time.Second)
	for lowat(t, c) <= 1 {
		if time.Now().After(deadline) {
			t.Fatal("low-water mark not raised while most of a payload is missing")
		}
		time.Sleep(time.Millisecond)
	}
	missing := len(fpdu) - 1000 - mpa.CRCLen // the payload's rest; its pad is 0
	if got := lowat(t, c); got > missing || got < minLowat {
		t.Errorf("low-water mark %d, want at least %d and at most the %d payload bytes missing", got, minLowat, missing)
	}
	r.write(fpdu[1000:])
	r.send([]byte("after"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs := make([]rdma.Completion, 1)
	if _, err := c.Wait(ctx, cs); err != nil || cs[0].ID != 1 || cs[0].Len != 5 {
		t.Fatalf("small Send after the large Write: %+v %v", cs[0], err)
	}
	if !bytes.Equal(dst.Bytes()[:len(payload)], payload) {
		t.Error("Write placed wrong bytes")
	}
	if got := lowat(t, c); got > 1 {
		t.Errorf("low-water mark %d after the payload, want 1", got)
	}
}

// lowat returns c's socket SO_RCVLOWAT.
func lowat(t *testing.T, c *Conn) int {
	rc, err := c.raw.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	rc.Control(func(fd uintptr) { v, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT) })
	return v
}
