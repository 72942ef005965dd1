package rpcrdma

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// TestBudget: takes that fit go through, one that does not waits, waiters
// are served in arrival order (a small take does not overtake a large one
// that came first), a cancelled waiter leaves the line, and a budget of 0
// has no limit.
func TestBudget(t *testing.T) {
	b := newBudget(100)
	if !b.tryTake(60) || b.tryTake(50) || b.inUse() != 60 {
		t.Fatalf("tryTake: in use %d", b.inUse())
	}
	ctx := context.Background()
	order := make(chan int64, 2)
	var wg sync.WaitGroup
	start := func(n int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.take(ctx, n); err != nil {
				t.Error(err)
			}
			order <- n
		}()
	}
	waitWaiters := func(n int) {
		for i := 0; ; i++ {
			b.mu.Lock()
			k := len(b.waiters)
			b.mu.Unlock()
			if k == n {
				return
			}
			if i > 5000 {
				t.Fatalf("%d waiters, want %d", k, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	start(70)
	waitWaiters(1)
	start(10) // fits now, but waits behind the 70
	waitWaiters(2)
	if b.tryTake(1) {
		t.Fatal("tryTake went ahead of waiters")
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- b.take(cctx, 30) }()
	waitWaiters(3)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled take: %v", err)
	}
	b.give(20) // 40 in use: the 10 would fit, the 70 first in line not
	time.Sleep(time.Millisecond)
	if len(order) != 0 {
		t.Fatalf("take of %d served out of turn", <-order)
	}
	waitWaiters(2)
	b.give(40)
	wg.Wait()
	if len(order) != 2 {
		t.Fatalf("%d takes served, want 2", len(order))
	}
	if b.inUse() != 80 {
		t.Errorf("in use %d, want 80", b.inUse())
	}
	b.give(80)
	if b.inUse() != 0 {
		t.Errorf("in use %d after giving everything back", b.inUse())
	}
	unlimited := newBudget(0)
	if !unlimited.tryTake(1 << 40) {
		t.Error("a budget without limit refused a take")
	}
}

// serveAll serves testServer on every connection l accepts until the
// test ends.
func serveAll(t testing.TB, l *Listener) {
	srv := testServer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(ctx, l, srv)
	}()
	t.Cleanup(func() {
		cancel()
		srv.Close()
		l.Close()
		<-done
	})
}

// listenBounded listens on p at addr with b and serves every connection.
func listenBounded(t testing.TB, p rdma.Provider, addr string, b Bounds) *Listener {
	t.Helper()
	l, err := Listen(context.Background(), p, addr, &Config{Bounds: b})
	if err != nil {
		t.Fatal(err)
	}
	serveAll(t, l)
	return l
}

// dialNull dials l and makes a NULL call; the client is closed at the end
// of the test.
func dialNull(t testing.TB, ctx context.Context, p rdma.Provider, l *Listener) (*rpc.Client, error) {
	conn, err := Dial(ctx, p, l.Addr().String(), nil)
	if err != nil {
		return nil, err
	}
	cli := rpc.NewClient(conn)
	t.Cleanup(func() { cli.Close() })
	return cli, cli.Null(ctx, testProg, testVers)
}

// waitFor polls cond every millisecond for up to 10 seconds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 10000 {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMaxConns: a request beyond MaxConns closes the least recently
// active connection to make room (admission.go), counted as evict_idle,
// and the listener goes on; the connection closed finds out on its next
// call. (TestBusyNeverEvicted has the request refused.)
func TestMaxConns(t *testing.T) {
	ctx := ctxT(t)
	p := loopback.New()
	l := listenBounded(t, p, "", Bounds{MaxConns: 2})
	first, err := dialNull(t, ctx, p, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialNull(t, ctx, p, l); err != nil {
		t.Fatal(err)
	}
	if _, err := dialNull(t, ctx, p, l); err != nil {
		t.Fatalf("third connection: %v", err)
	}
	if err := first.Null(ctx, testProg, testVers); err == nil {
		t.Error("the first connection was not closed to make room")
	}
	if s := l.Stats(); s.Conns != 2 || s.Limits[EvictIdle] != 1 || s.Limits[LimitMaxConns] != 0 {
		t.Errorf("stats %+v, want 2 connections and one limit_evict_idle", s)
	}
}

// TestMaxConnsPerAddr: the connections from one host are bounded, over
// TCP where the host is the address without its port: a third from
// 127.0.0.1 closes one of the two.
func TestMaxConnsPerAddr(t *testing.T) {
	ctx := ctxT(t)
	p := newIWARP(t)
	l := listenBounded(t, p, "127.0.0.1:0", Bounds{MaxConnsPerAddr: 2})
	for range 3 {
		if _, err := dialNull(t, ctx, p, l); err != nil {
			t.Fatal(err)
		}
	}
	if s := l.Stats(); s.Limits[EvictIdle] != 1 || s.Limits[LimitMaxConnsPerAddr] != 0 || s.Conns != 2 {
		t.Errorf("stats %+v, want one limit_evict_idle and 2 connections", s)
	}
}

// TestHandshakeTimeout: a requester that connects and sends nothing is
// closed after HandshakeTimeout, counted on the Listener and on its
// connection, whose error matches ErrLimit.
func TestHandshakeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := ctxT(t)
		p := loopback.New()
		l, err := Listen(ctx, p, "", &Config{Bounds: Bounds{HandshakeTimeout: 20 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		accepted := acceptOne(t, ctx, l)
		rc, err := p.Dial(ctx, l.Addr().String(), rdma.ConnConfig{PrivateData: wire.PrivateData{SendSize: 1024, ReceiveSize: 1024}.Append(nil)})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		resp := accepted()
		defer resp.Close()
		select {
		case <-rc.Done():
		case <-ctx.Done():
			t.Fatal("a silent requester was not disconnected")
		}
		<-resp.Done()
		if err := resp.Err(); !errors.Is(err, ErrLimit) {
			t.Errorf("responder ended with %v, want ErrLimit", err)
		}
		if n := resp.Stats().Reasons[LimitHandshakeTimeout]; n != 1 {
			t.Errorf("connection counts %d handshake timeouts", n)
		}
		waitFor(t, "the connection to leave", func() bool { return l.Stats().Conns == 0 })
		if n := l.Stats().Limits[LimitHandshakeTimeout]; n != 1 {
			t.Errorf("listener counts %d handshake timeouts", n)
		}
	})
}

// TestIdleTimeout: a connection without calls is closed after
// IdleTimeout; one with calls is not.
func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := ctxT(t)
		p := loopback.New()
		// On the bubble's clock: the busy client's calls, every idle/10,
		// are never a whole period apart.
		const idle = 300 * time.Millisecond
		l := listenBounded(t, p, "", Bounds{IdleTimeout: idle})
		quiet, err := dialNull(t, ctx, p, l)
		if err != nil {
			t.Fatal(err)
		}
		busy, err := dialNull(t, ctx, p, l)
		if err != nil {
			t.Fatal(err)
		}
		// The busy client calls every idle/10 until the quiet one is closed:
		// at least two idle periods, which would close it if it counted as
		// idle.
		deadline := time.Now().Add(10 * time.Second)
		for l.Stats().Limits[LimitIdle] == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the quiet connection was not closed")
			}
			if err := busy.Null(ctx, testProg, testVers); err != nil {
				t.Fatalf("the busy connection failed: %v", err)
			}
			time.Sleep(idle / 10)
		}
		// The limit is counted as the close begins: let the close, and
		// the quiet client's learning of it, finish first.
		synctest.Wait()
		if err := quiet.Null(ctx, testProg, testVers); err == nil {
			t.Error("a call on the idle-closed connection succeeded")
		}
		if err := busy.Null(ctx, testProg, testVers); err != nil {
			t.Errorf("the busy connection: %v", err)
		}
		if n := l.Stats().Limits[LimitIdle]; n != 1 {
			t.Errorf("%d idle closes, want 1", n)
		}
	})
}

// TestConnectionFlood floods an iWARP listener with TCP connections that
// never send their MPA Request, connections that send part of it and
// stall, and complete connections (MPA and RFC 8797) beyond MaxConns that
// then send nothing, which close each other to make room. Throughout, a
// well-behaved client is served, and the server's goroutines and heap
// stay within what its limits allow; after the flood they come back down.
func TestConnectionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 400 TCP connections")
	}
	const (
		maxHS    = 16
		maxConns = 8
		hsTime   = time.Second // long enough for a complete handshake on a loaded machine under -race
		raw      = 250         // TCP connections that send nothing
		slow     = 50          // TCP connections that send half a Request
		full     = 40          // complete connections that send nothing
	)
	ctx := ctxT(t)
	p, err := iwarp.New(iwarp.Options{FirstSendDelay: -1, MaxHandshakes: maxHS, MaxHandshakesPerHost: maxHS, HandshakeTimeout: hsTime})
	if err != nil {
		t.Fatal(err)
	}
	l := listenBounded(t, p, "127.0.0.1:0", Bounds{MaxConns: maxConns, HandshakeTimeout: hsTime})
	good, err := dialNull(t, ctx, p, l)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	goodDone := make(chan error, 1)
	goodCalls := 0
	go func() {
		for {
			select {
			case <-stop:
				goodDone <- nil
				return
			default:
			}
			if err := good.Null(ctx, testProg, testVers); err != nil {
				goodDone <- err
				return
			}
			goodCalls++
			time.Sleep(time.Millisecond)
		}
	}()

	runtime.GC()
	g0 := runtime.NumGoroutine()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	// Per accepted connection: the provider's reader and writer on both
	// sides, the responder's loop and its rpc.Server goroutines, and the
	// idle timer; per handshake in progress, one. A generous constant
	// covers the dialers below.
	maxGoroutines := g0 + maxHS + maxConns*12 + 32
	var peak int
	sample := func() {
		peak = max(peak, runtime.NumGoroutine())
	}

	// Phase one: TCP connections that never finish their MPA Request.
	var socks []net.Conn
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	var d net.Dialer
	for i := range raw + slow {
		s, err := d.DialContext(ctx, "tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("TCP connection %d: %v", i, err)
		}
		socks = append(socks, s)
		if i >= raw {
			// The first half of an MPA Request frame: its key.
			s.Write([]byte("MPA ID Req Frame"[:8]))
		}
		sample()
	}
	// Phase two, once the handshakes of phase one have timed out:
	// complete connections that then send nothing.
	waitFor(t, "phase one's connections to be evicted or time out", func() bool {
		return p.Stats().HandshakeFailures >= raw+slow
	})
	var fullWG sync.WaitGroup
	var mu sync.Mutex
	var rejected, accepted int
	var otherErrs []error
	var fullConns []rdma.Conn
	work := make(chan struct{})
	for range 8 {
		fullWG.Add(1)
		go func() {
			defer fullWG.Done()
			for range work {
				rc, err := p.Dial(ctx, l.Addr().String(), rdma.ConnConfig{PrivateData: wire.PrivateData{SendSize: 1024, ReceiveSize: 1024}.Append(nil)})
				mu.Lock()
				switch {
				case err == nil:
					accepted++
					fullConns = append(fullConns, rc)
				case errors.Is(err, rdma.ErrRejected):
					rejected++
				default:
					otherErrs = append(otherErrs, err)
				}
				mu.Unlock()
			}
		}()
	}
	for range full {
		work <- struct{}{}
		sample()
	}
	close(work)
	fullWG.Wait()
	sample()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	if peak > maxGoroutines {
		t.Errorf("%d goroutines during the flood, more than %d (%d before it)", peak, maxGoroutines, g0)
	}
	if grew := int64(m1.HeapInuse) - int64(m0.HeapInuse); grew > 64<<20 {
		t.Errorf("heap grew by %d bytes during the flood", grew)
	}
	if rejected != 0 || len(otherErrs) != 0 {
		t.Errorf("complete connections: %d accepted, %d rejected, other dial errors: %v; want all accepted, older ones closed to make room", accepted, rejected, otherErrs)
	}
	st := p.Stats()
	if st.HandshakesEvicted == 0 {
		t.Error("no handshake was evicted for too many in progress")
	}
	// The accepted silent connections are closed for their handshake.
	for _, rc := range fullConns {
		select {
		case <-rc.Done():
		case <-ctx.Done():
			t.Fatal("a silent connection was not closed")
		}
		rc.Close()
	}
	close(stop)
	if err := <-goodDone; err != nil {
		t.Fatalf("the well-behaved client failed during the flood: %v", err)
	}
	if goodCalls == 0 {
		t.Error("the well-behaved client made no call during the flood")
	}
	// Each silent complete connection was closed to make room or timed
	// out; the provider's evictions count as evict_handshake too.
	ls := l.Stats()
	if closed := ls.Limits[EvictHandshake] - p.Stats().HandshakesEvicted + ls.Limits[LimitHandshakeTimeout]; int(closed) != accepted || ls.Limits[LimitMaxConns] != 0 {
		t.Errorf("listener limits %v (provider evictions %d): want the %d silent connections evicted or timed out, none refused", ls.Limits, p.Stats().HandshakesEvicted, accepted)
	}
	for _, s := range socks {
		s.Close()
	}
	socks = nil
	waitFor(t, "the flood's goroutines to exit", func() bool { return runtime.NumGoroutine() <= g0+8 })
	t.Logf("peak %d goroutines (%d before), heap +%d KiB, %d handshakes evicted, %d/%d complete ones accepted/rejected, %d good calls",
		peak, g0, (int64(m1.HeapInuse)-int64(m0.HeapInuse))>>10, st.HandshakesEvicted, accepted, rejected, goodCalls)
}
