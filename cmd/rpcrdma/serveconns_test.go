package main

import (
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// TestRDMAConns: the follower calls opened and closed once for a
// connection established and then closed, counting it in its WaitGroup
// meanwhile, and neither for a handshake that failed (StateNew then
// StateClosed), which the Listener logs and counts itself.
func TestRDMAConns(t *testing.T) {
	var wg sync.WaitGroup
	var opened, closed []*rpcrdma.Conn
	f := newRDMAConns(&wg, func(c *rpcrdma.Conn) { opened = append(opened, c) },
		func(c *rpcrdma.Conn, d time.Duration) {
			if d < 0 {
				t.Errorf("closed after %v", d)
			}
			closed = append(closed, c)
		})
	failed, ok := new(rpcrdma.Conn), new(rpcrdma.Conn)
	f.state(failed, rpcrdma.StateNew)
	f.state(failed, rpcrdma.StateClosed)
	f.state(ok, rpcrdma.StateNew)
	f.state(ok, rpcrdma.StateEstablished)
	if len(opened) != 1 || opened[0] != ok || len(closed) != 0 {
		t.Fatalf("after the handshakes: opened %v, closed %v; want the established one opened", opened, closed)
	}
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("the WaitGroup did not count the open connection")
	case <-time.After(10 * time.Millisecond):
	}
	f.state(ok, rpcrdma.StateClosed)
	<-waited
	if len(closed) != 1 || closed[0] != ok {
		t.Errorf("closed %v, want the established one", closed)
	}
}
