package rpcrdma

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// Many connections to one responder in one process, on the loopback
// provider (the software iWARP would need two sockets per connection,
// more than the descriptors a test may count on). The responder receives
// from a shared pool with a receive for every connection and a margin,
// and 1 KiB inline messages each way; each requester asks for one
// credit.

// manyConfig is the responder's configuration for n connections.
func manyConfig(n int) *Config {
	return &Config{InlineSend: 1024, InlineRecv: 1024, Bounds: Bounds{MaxConns: -1, MaxConnsPerAddr: -1, SharedReceives: n + 128}}
}

// manyConns opens n connections to one responder and makes a NULL call on
// each; it returns the clients and the Listener, all closed at the end of
// tb.
func manyConns(tb testing.TB, n int) ([]*rpc.Client, *Listener) {
	tb.Helper()
	p := loopback.New()
	l, err := Listen(context.Background(), p, "", manyConfig(n))
	if err != nil {
		tb.Fatal(err)
	}
	serveAll(tb, l)
	clients := dialMany(tb, p, l, n)
	tb.Cleanup(func() { closeAll(clients) })
	return clients, l
}

// dialMany opens n more connections to l, on p, and makes a NULL call on
// each; the caller closes them.
func dialMany(tb testing.TB, p *loopback.Network, l *Listener, n int) []*rpc.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clients := make([]*rpc.Client, n)
	var wg sync.WaitGroup
	var failed atomic.Int64
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				conn, err := Dial(ctx, p, l.Addr().String(), &Config{InlineSend: 1024, InlineRecv: 1024, Credits: 1})
				if err != nil {
					failed.Add(1)
					continue
				}
				clients[i] = rpc.NewClient(conn)
				if err := clients[i].Null(ctx, testProg, testVers); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		closeAll(clients)
		tb.Fatalf("%d of %d connections failed to connect or to answer a NULL", f, n)
	}
	return clients
}

// closeAll closes the clients dialMany opened.
func closeAll(clients []*rpc.Client) {
	for _, c := range clients {
		if c != nil {
			c.Close()
		}
	}
}

// TestManyIdleConnections is the short form of BenchmarkManyConnections:
// 1,000 connections, a NULL answered on every one, and what an idle
// connection pair costs reported.
func TestManyIdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,000 connections")
	}
	const n = 1000
	runtime.GC()
	g0 := runtime.NumGoroutine()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	clients, l := manyConns(t, n)
	// Every connection is still served after all have been opened.
	ctx := ctxT(t)
	for i, c := range clients {
		if err := c.Null(ctx, testProg, testVers); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	s := l.Stats()
	if s.Conns != n {
		t.Errorf("the Listener counts %d connections, want %d", s.Conns, n)
	}
	perConn := s.Registered / n
	t.Logf("%d idle connections: responder registers %d KiB in all, %d bytes per connection; %.1f goroutines and %d KiB of heap per connection pair",
		n, s.Registered>>10, perConn, float64(runtime.NumGoroutine()-g0)/n, int64(m1.HeapInuse-m0.HeapInuse)/n>>10)
	// A receive of the pool and two send buffers of 1 KiB, and a share
	// of the pool's margin: at most 64 MiB for 10,000 connections.
	if limit := int64(64<<20) / 10000; perConn > limit {
		t.Errorf("%d bytes registered per connection, more than %d (64 MiB for 10,000)", perConn, limit)
	}
}

// BenchmarkManyConnections opens RPCRDMA_CONNS connections (default
// 10,000) to one responder, a NULL answered on each, and reports the
// registered memory, the heap and goroutines per idle connection pair.
// BenchmarkBusyAmongIdle measures what the idle ones cost the busy.
func BenchmarkManyConnections(b *testing.B) {
	n := manyCount(b)
	for range b.N {
		runtime.GC()
		g0 := runtime.NumGoroutine()
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, l := manyConns(b, n)
		runtime.GC()
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		s := l.Stats()
		b.ReportMetric(float64(s.Registered)/(1<<20), "registered-MiB")
		b.ReportMetric(float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/float64(n)/1024, "heap-KiB/pair")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(n), "goroutines/pair")
	}
}

// manyCount returns RPCRDMA_CONNS (default 10,000; 1,000 with -short).
func manyCount(b *testing.B) int {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	if s := os.Getenv("RPCRDMA_CONNS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("RPCRDMA_CONNS=%q: want a number of at least 100", s)
		}
	}
	return n
}

// BenchmarkBusyAmongIdle makes NULL calls on 100 connections at once, one
// call outstanding on each, to a responder with no other connection
// (idle=0) and then with RPCRDMA_CONNS-100 more open and idle (default
// 9,900; 900 with -short, the form CI runs), in three rounds (one with
// -short) that open and close the idle ones around the same 100 busy
// ones. The two sub-benchmarks of a round run back to back, so their
// ns/op compare as the busy connections' throughputs do, under the same
// load from the rest of the machine: compare them round by round.
//
//	go test -run '^$' -bench BusyAmongIdle -benchtime 300000x ./rpcrdma/
func BenchmarkBusyAmongIdle(b *testing.B) {
	const busy = 100
	idle := manyCount(b) - busy
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	p := loopback.New()
	l, err := Listen(context.Background(), p, "", manyConfig(busy+idle))
	if err != nil {
		b.Fatal(err)
	}
	serveAll(b, l)
	clients := dialMany(b, p, l, busy)
	defer closeAll(clients)
	run := func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		var next atomic.Int64
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if err := c.Null(ctx, testProg, testVers); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	for r := range rounds {
		b.Run(fmt.Sprintf("round=%d/idle=0", r), run)
		others := dialMany(b, p, l, idle)
		b.Run(fmt.Sprintf("round=%d/idle=%d", r, idle), run)
		closeAll(others)
		// The responder ends its side of each as it sees the close.
		for deadline := time.Now().Add(time.Minute); l.Stats().Conns > busy; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d connections still open a minute after closing all but %d", l.Stats().Conns, busy)
			}
		}
	}
}
