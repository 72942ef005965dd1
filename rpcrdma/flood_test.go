//go:build linux

package rpcrdma

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
)

// The floods of the admission tests: from one host, more connections
// than the Listener keeps, of three kinds. Run at a small scale (limits of
// 64, floods of 100) by default; RPCRDMA_FLOOD_FULL=1 runs them at the
// defaults of `rpcrdma serve` (MaxConnsPerAddr 1024, the provider's 128
// handshakes per host) with floods of 1,500.

// floodScale returns the flood's size, the Listener's and the provider's
// bounds for it.
func floodScale(t *testing.T) (flood int, b Bounds, o iwarp.Options) {
	o = iwarp.Options{FirstSendDelay: -1}
	if os.Getenv("RPCRDMA_FLOOD_FULL") == "" {
		o.MaxHandshakes, o.MaxHandshakesPerHost = 64, 64
		return 100, Bounds{MaxConns: 64, MaxConnsPerAddr: 64, ServerMemory: 16 << 20}, o
	}
	raiseFDLimit(t, 8192)
	return 1500, Bounds{}, o
}

// raiseFDLimit raises the process's open file limit to n, or as near as
// the hard limit allows: a flood holds both ends of its connections.
func raiseFDLimit(t *testing.T, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	if lim.Cur < n {
		lim.Cur = min(n, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Skip(err)
		}
	}
}

// rss returns the process's resident set size in bytes, or 0 if unknown.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// floodServer listens on p at addr with b, its log counted by h, and
// serves testServer.
func floodServer(t *testing.T, p rdma.Provider, addr string, b Bounds, h *countingHandler) *Listener {
	t.Helper()
	l, err := Listen(context.Background(), p, addr, &Config{Bounds: b, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	serveAll(t, l)
	return l
}

// goodNull dials l on p as a well-behaved client and makes a NULL call,
// within one second; it returns how long that took.
func goodNull(t *testing.T, p rdma.Provider, l *Listener) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	if _, err := dialNull(t, ctx, p, l); err != nil {
		t.Fatalf("the well-behaved client during the flood: %v", err)
	}
	return time.Since(start)
}

// checkFloodBounds checks what the flood made the server hold: the bytes
// registered within the rings of the connections it may keep and the
// memory budget, and RSS growth within that and a fixed allowance for
// goroutines and the runtime; and what it logged: a few lines a second.
func checkFloodBounds(t *testing.T, l *Listener, keep int, ring int64, rss0 int64, h *countingHandler) {
	t.Helper()
	s := l.Stats()
	budget := int64(keep)*ring + l.cfg.Bounds.serverMemory()
	if s.Registered > int64(keep)*ring+s.Memory {
		t.Errorf("%d bytes registered, more than %d connections' rings (%d each) and the %d the calls hold", s.Registered, keep, ring, s.Memory)
	}
	const allowance = 96 << 20
	if grew := rss() - rss0; rss0 > 0 && grew > budget+allowance {
		t.Errorf("RSS grew by %d MiB, more than the budget of %d MiB and %d MiB", grew>>20, budget>>20, allowance>>20)
	}
	if most := h.busiestSecond(); most > 2*limitLogBurst {
		t.Errorf("%d log lines in one second", most)
	}
	h.mu.Lock()
	t.Logf("RSS +%d MiB (budget %d MiB), %d connections, limits %v, log lines %v", (rss()-rss0)>>20, budget>>20, s.Conns, s.Limits, h.msgs)
	h.mu.Unlock()
}

// TestFloodSilentTCP: TCP connections to the RDMA port that never send
// an MPA Request close the oldest handshakes in the provider; a
// well-behaved client from the same host connects and is answered within
// one second, nothing is logged at Info level.
func TestFloodSilentTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("opens many TCP connections")
	}
	flood, b, o := floodScale(t)
	p, err := iwarp.New(o)
	if err != nil {
		t.Fatal(err)
	}
	h := newCountingHandler()
	l := floodServer(t, p, "127.0.0.1:0", b, h)
	rss0 := rss()
	var socks []net.Conn
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	var d net.Dialer
	ctx := ctxT(t)
	for i := range flood {
		s, err := d.DialContext(ctx, "tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("TCP connection %d: %v", i, err)
		}
		socks = append(socks, s)
	}
	took := goodNull(t, p, l)
	if p.Stats().HandshakesEvicted == 0 || l.Stats().Limits[EvictHandshake] == 0 {
		t.Error("no handshake evicted")
	}
	checkFloodBounds(t, l, 1, 2<<20, rss0, h)
	if n := h.lines(); n > 0 {
		t.Errorf("%d lines logged at Info level for handshakes the provider evicted", n)
	}
	t.Logf("the well-behaved client was answered in %v", took)
}

// TestFloodIdle: complete RPC-over-RDMA connections that make a NULL call
// and stay idle close the least recently active ones; a well-behaved
// client from the same host is answered within one second.
func TestFloodIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("opens many connections")
	}
	flood, b, o := floodScale(t)
	p, err := iwarp.New(o)
	if err != nil {
		t.Fatal(err)
	}
	h := newCountingHandler()
	l := floodServer(t, p, "127.0.0.1:0", b, h)
	ctx := ctxT(t)
	if _, err := dialNull(t, ctx, p, l); err != nil {
		t.Fatal(err)
	}
	ring := l.Stats().Registered // one connection's rings
	rss0 := rss()
	var wg sync.WaitGroup
	work := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				dialNull(t, ctx, p, l) // a flood connection evicted early fails: no matter
			}
		}()
	}
	for range flood {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	took := goodNull(t, p, l)
	// A flood connection is evicted idle, or before its NULL arrived when
	// the next came first.
	keep := b.maxConnsPerAddr()
	if s := l.Stats(); int(s.Limits[EvictIdle]+s.Limits[EvictHandshake]) < flood+2-keep || s.Limits[LimitMaxConnsPerAddr] != 0 {
		t.Errorf("limits %v: want %d evictions and no refusal", s.Limits, flood+2-keep)
	}
	checkFloodBounds(t, l, keep, ring, rss0, h)
	t.Logf("the well-behaved client was answered in %v", took)
}

// TestFloodStalledCalls: connections that each send a long call and
// withhold the Read Responses it needs. Their calls never reach the
// rpc.Server, so they hold no call in flight and go, least recently
// active first; a well-behaved client is answered within one second. The
// loopback provider stalls the Reads; its requesters all come from one
// network, bounded by MaxConns (at full scale set to the default
// MaxConnsPerAddr, as the host's limit would be over TCP).
func TestFloodStalledCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("opens many connections")
	}
	flood, b, _ := floodScale(t)
	if b.MaxConns == 0 {
		b.MaxConns = DefaultMaxConnsPerAddr
	}
	const size = 64 << 10
	b.PullTimeout = time.Hour
	n := loopback.New()
	h := newCountingHandler()
	l := floodServer(t, n, "", b, h)
	ctx := ctxT(t)
	if _, err := dialNull(t, ctx, n, l); err != nil {
		t.Fatal(err)
	}
	ring := l.Stats().Registered // one connection's rings
	rss0 := rss()
	for i := range flood {
		hs := dialHostile(t, n, l, size)
		stallLongCall(t, hs, uint32(i+1), size)
	}
	took := goodNull(t, n, l)
	// A stalled connection is evicted idle, or before its call arrived
	// when the next came first (TestEvictStalledPull has the first case
	// alone).
	s := l.Stats()
	if int(s.Limits[EvictIdle]+s.Limits[EvictHandshake]) < flood+2-b.MaxConns || s.Limits[LimitMaxConns] != 0 || s.Memory > int64(b.MaxConns)*size {
		t.Errorf("stats %+v: want %d evictions, no refusal and at most %d bytes held", s, flood+2-b.MaxConns, int64(b.MaxConns)*size)
	}
	checkFloodBounds(t, l, b.MaxConns, ring, rss0, h)
	t.Logf("the well-behaved client was answered in %v", took)
}
