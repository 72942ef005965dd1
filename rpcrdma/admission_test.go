package rpcrdma

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// dialSilent connects to l on p and sends nothing: a connection that has
// not completed its handshake.
func dialSilent(t testing.TB, ctx context.Context, p rdma.Provider, l *Listener) rdma.Conn {
	t.Helper()
	rc, err := p.Dial(ctx, l.Addr().String(), rdma.ConnConfig{PrivateData: wire.PrivateData{SendSize: 1024, ReceiveSize: 1024}.Append(nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}

// waitClosed waits, within ctx, for rc to end.
func waitClosed(t testing.TB, ctx context.Context, rc rdma.Conn, what string) {
	t.Helper()
	select {
	case <-rc.Done():
	case <-ctx.Done():
		t.Fatalf("%s was not closed", what)
	}
}

// TestEvictIdle: at MaxConns, a new connection closes the least recently
// active one, whatever the order the connections came in: of three idle
// clients, first the oldest (all three active since the Listener last
// looked), then the one that has not called since, not an older one that
// has.
func TestEvictIdle(t *testing.T) {
	leaktest.Check(t)
	ctx := ctxT(t)
	p := loopback.New()
	l := listenBounded(t, p, "", Bounds{MaxConns: 3})
	var clis []*rpc.Client
	for range 3 {
		cli, err := dialNull(t, ctx, p, l)
		if err != nil {
			t.Fatal(err)
		}
		clis = append(clis, cli)
	}
	a, b, c := clis[0], clis[1], clis[2]
	if _, err := dialNull(t, ctx, p, l); err != nil {
		t.Fatalf("the fourth connection: %v", err)
	}
	if err := a.Null(ctx, testProg, testVers); err == nil {
		t.Fatal("the oldest of connections equally active was not closed")
	}
	if err := b.Null(ctx, testProg, testVers); err != nil {
		t.Fatalf("b: %v", err)
	}
	// b has called since the Listener last looked, c has not.
	if _, err := dialNull(t, ctx, p, l); err != nil {
		t.Fatalf("the fifth connection: %v", err)
	}
	if err := c.Null(ctx, testProg, testVers); err == nil {
		t.Fatal("the least recently active connection was not closed")
	}
	if err := b.Null(ctx, testProg, testVers); err != nil {
		t.Fatalf("the more recently active connection was closed: %v", err)
	}
	s := l.Stats()
	if s.Conns != 3 || s.Limits[EvictIdle] != 2 || s.Limits[LimitMaxConns] != 0 {
		t.Errorf("stats %+v, want 3 connections, 2 evict_idle and no refusal", s)
	}
}

// TestEvictHandshakeFirst: at MaxConns, connections that have not sent
// their first message go first, oldest first, before an idle one that
// has; each eviction is counted by reason on the Listener and on the
// connection closed.
func TestEvictHandshakeFirst(t *testing.T) {
	leaktest.Check(t)
	ctx := ctxT(t)
	p := loopback.New()
	l := listenBounded(t, p, "", Bounds{MaxConns: 3})
	idle, err := dialNull(t, ctx, p, l)
	if err != nil {
		t.Fatal(err)
	}
	s1 := dialSilent(t, ctx, p, l)
	s2 := dialSilent(t, ctx, p, l)
	if _, err := dialNull(t, ctx, p, l); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ctx, s1, "the oldest silent connection")
	if err := s2.Err(); err != nil {
		t.Fatalf("the newer silent connection went first: %v", err)
	}
	if _, err := dialNull(t, ctx, p, l); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ctx, s2, "the second silent connection")
	if err := idle.Null(ctx, testProg, testVers); err != nil {
		t.Fatalf("an idle connection went before a silent one: %v", err)
	}
	s := l.Stats()
	if s.Limits[EvictHandshake] != 2 || s.Limits[EvictIdle] != 0 {
		t.Errorf("limits %v, want 2 evict_handshake", s.Limits)
	}
}

// TestBusyNeverEvicted: a connection with a call in flight is never
// closed to make room: with one busy and one idle the idle one goes, and
// with every connection busy a new request is refused, over TCP where
// MaxConnsPerAddr counts the host. The calls in flight complete.
func TestBusyNeverEvicted(t *testing.T) {
	leaktest.Check(t)
	ctx := ctxT(t)
	p := newIWARP(t)
	l, err := Listen(ctx, p, "127.0.0.1:0", &Config{Bounds: Bounds{MaxConnsPerAddr: 2}})
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer()
	release := make(chan struct{})
	srv.Handle(testProg, testVers, procBlock, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		select {
		case <-release:
			return rpc.Body{}, nil
		case <-ctx.Done():
			return rpc.Body{}, ctx.Err()
		}
	})
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() { defer close(served); Serve(sctx, l, srv) }()
	t.Cleanup(func() { cancel(); srv.Close(); l.Close(); <-served })

	busyErrs := make(chan error, 2)
	startBusy := func() *rpc.Client {
		cli, err := dialNull(t, ctx, p, l)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procBlock})
			busyErrs <- err
		}()
		return cli
	}
	busy := startBusy()
	waitServerCalls(t, srv, 2) // NULL and the blocked call
	idle, err := dialNull(t, ctx, p, l)
	if err != nil {
		t.Fatal(err)
	}
	busy2 := startBusy() // closes idle, not busy
	if err := idle.Null(ctx, testProg, testVers); err == nil {
		t.Fatal("the idle connection was not closed")
	}
	waitServerCalls(t, srv, 5)
	if _, err := dialNull(t, ctx, p, l); !errors.Is(err, rdma.ErrRejected) {
		t.Fatalf("a connection with every other busy: %v, want a rejection", err)
	}
	close(release)
	for range 2 {
		if err := <-busyErrs; err != nil {
			t.Errorf("a call in flight failed: %v", err)
		}
	}
	for _, cli := range []*rpc.Client{busy, busy2} {
		if err := cli.Null(ctx, testProg, testVers); err != nil {
			t.Errorf("a busy connection after its call: %v", err)
		}
	}
	s := l.Stats()
	if s.Limits[EvictIdle] != 1 || s.Limits[LimitMaxConnsPerAddr] != 1 || s.Conns != 2 {
		t.Errorf("stats %+v, want one evict_idle, one limit_max_conns_per_addr, 2 connections", s)
	}
}

// TestEvictStalledPull: a connection whose call's RDMA Reads the peer
// withholds has no call in flight (the rpc.Server has not got the call):
// at MaxConns it is evicted as idle, which releases what the call held.
func TestEvictStalledPull(t *testing.T) {
	leaktest.Check(t)
	ctx := ctxT(t)
	const size = 64 << 10
	n, l, good := hostileServer(t, Bounds{MaxConns: 2, PullTimeout: time.Hour})
	h := dialHostile(t, n, l, size)
	stallLongCall(t, h, 1, size)
	waitFor(t, "the stalled call to take its share", func() bool { return l.Stats().Memory == size })
	if err := good.Null(ctx, testProg, testVers); err != nil {
		t.Fatal(err)
	}
	if _, err := dialNull(t, ctx, n, l); err != nil {
		t.Fatalf("a new connection with a pull stalled: %v", err)
	}
	waitClosed(t, ctx, h.rc, "the stalled connection")
	waitFor(t, "the stalled call's share to be given back", func() bool { return l.Stats().Memory == 0 })
	if err := good.Null(ctx, testProg, testVers); err != nil {
		t.Fatalf("the active client: %v", err)
	}
	if s := l.Stats(); s.Limits[EvictIdle] != 1 {
		t.Errorf("limits %v, want one evict_idle", s.Limits)
	}
}

// stallLongCall sends a long call (RDMA_NOMSG, the RPC message in a
// position-zero read chunk of size bytes, RFC 8166 Section 3.5.3) on h and
// withholds the Read Responses it asks for.
func stallLongCall(t testing.TB, h *hostile, xid uint32, size uint32) {
	t.Helper()
	if err := h.rc.(*loopback.Conn).SetFaults(loopback.Faults{Drop: 2, LinkTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	hdr := wire.Header{XID: xid, Vers: wire.Version1, Credits: 8, Proc: wire.RDMA_NOMSG}
	hdr.Chunks.Reads = wire.ReadList{{Position: 0, Segment: wire.Segment{Handle: uint32(h.src.STag()), Length: size, Offset: h.src.TO()}}}
	msg := hdr.Append(nil)
	copy(h.send.Bytes(), msg)
	if err := h.rc.PostSend(&rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{{MR: h.send, Length: len(msg)}}}); err != nil {
		t.Fatal(err)
	}
}
