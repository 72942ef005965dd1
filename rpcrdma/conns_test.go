package rpcrdma

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// TestManyConnections opens 300 connections to one responder over the
// software iWARP, a NULL call on each, and checks what each costs: the
// same registered memory on every responder connection (its receives and
// send buffers, nothing per call), a bounded number of goroutines per
// connection pair, and everything given back at close. The README's
// memory figures come from the same setup with 1,000.
func TestManyConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 300 connections")
	}
	const n = 300
	p, err := iwarp.New(iwarp.Options{FirstSendDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := Listen(ctx, p, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(nil)
	srv.Handle(testProg, testVers, procEcho, func(context.Context, *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })
	goroutines := runtime.NumGoroutine()
	var m0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)

	served := make(chan *Conn, n)
	go func() {
		for range n {
			c, err := l.Accept(ctx)
			if err != nil {
				t.Error(err)
				close(served)
				return
			}
			go srv.Serve(c)
			served <- c
		}
	}()
	clients := make([]*rpc.Client, 0, n)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range n {
		conn, err := Dial(ctx, p, l.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		cli := rpc.NewClient(conn)
		clients = append(clients, cli)
		if err := cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
	}
	var resps []*Conn
	for c := range served {
		resps = append(resps, c)
		if len(resps) == n {
			break
		}
	}
	if len(resps) != n {
		t.Fatalf("%d connections accepted, want %d", len(resps), n)
	}

	var m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m1)
	perPair := float64(runtime.NumGoroutine()-goroutines) / n
	reg := resps[0].Stats().Registered
	for i, c := range resps {
		if r := c.Stats().Registered; r != reg {
			t.Fatalf("responder %d registers %d bytes, responder 0 %d: memory per connection should not vary", i, r, reg)
		}
	}
	t.Logf("%d connections: %.1f goroutines and %d KiB of Go heap allocated (receive and send buffers, mostly untouched) per pair; a responder registers %d KiB",
		n, perPair, (m1.HeapInuse-m0.HeapInuse)/n>>10, reg>>10)
	if perPair > 10 {
		t.Errorf("%.1f goroutines per connection pair, want at most 10", perPair)
	}
	if want := int64(1040 << 10); reg > want {
		t.Errorf("a responder registers %d bytes, want at most %d (its receives and send buffers)", reg, want)
	}

	for _, c := range clients {
		c.Close()
	}
	clients = nil
	l.Close()
	srv.Close()
	deadline := time.Now().Add(10 * time.Second)
	for (p.Registered() != 0 || runtime.NumGoroutine() > goroutines+2) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r, g := p.Registered(), runtime.NumGoroutine(); r != 0 || g > goroutines+2 {
		t.Errorf("after closing: %d registrations and %d goroutines left (%d before)", r, g-goroutines, goroutines)
	}
}
