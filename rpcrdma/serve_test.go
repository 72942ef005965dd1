package rpcrdma

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// TestServeShutdown: one rpc.Server serving TCP (ServeListener) and RDMA
// (Serve) stops both the same way on Shutdown: the listeners close, the
// connections end once idle, and both return rpc.ErrServerClosed. A Serve
// called after that returns rpc.ErrServerClosed at once.
func TestServeShutdown(t *testing.T) {
	ctx := ctxT(t)
	p := loopback.New()
	srv := rpc.NewServer(nil)
	srv.Handle(testProg, testVers, 0, func(context.Context, *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })

	l, err := Listen(ctx, p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rdmaDone, tcpDone := make(chan error, 1), make(chan error, 1)
	go func() { rdmaDone <- Serve(ctx, l, srv) }()
	go func() { tcpDone <- srv.ServeListener(tl) }()

	conn, err := Dial(ctx, p, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := rpc.NewClient(conn)
	defer cli.Close()
	if err := cli.Null(ctx, testProg, testVers); err != nil {
		t.Fatal(err)
	}

	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-rdmaDone; !errors.Is(err, rpc.ErrServerClosed) {
		t.Errorf("rpcrdma.Serve returned %v after Shutdown, want rpc.ErrServerClosed", err)
	}
	if err := <-tcpDone; !errors.Is(err, rpc.ErrServerClosed) {
		t.Errorf("ServeListener returned %v after Shutdown, want rpc.ErrServerClosed", err)
	}
	if _, err := l.Accept(ctx); err == nil {
		t.Error("Shutdown left the RDMA listener open")
	}
	if err := cli.Null(ctx, testProg, testVers); err == nil {
		t.Error("a call succeeded after Shutdown ended the connection")
	}

	l2, err := Listen(ctx, p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := Serve(ctx, l2, srv); !errors.Is(err, rpc.ErrServerClosed) {
		t.Errorf("Serve on a shut-down server returned %v, want rpc.ErrServerClosed", err)
	}
}

// TestServeEnds: without a Shutdown, Serve returns ctx's error when ctx
// ends and net.ErrClosed when its listener is closed.
func TestServeEnds(t *testing.T) {
	p := loopback.New()
	srv := rpc.NewServer(nil)
	defer srv.Close()

	ctx, cancel := context.WithCancel(ctxT(t))
	l, err := Listen(ctx, p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, srv) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve returned %v when its ctx ended, want context.Canceled", err)
	}

	l2, err := Listen(ctxT(t), p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- Serve(ctxT(t), l2, srv) }()
	l2.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve returned %v when its listener closed, want net.ErrClosed", err)
	}
}

// TestConcurrentUse exercises every lock of a Conn pair at once under the
// race detector: calls with chunks, cancelled calls, Stats and Info on
// both sides, and Close in the middle of it all. The lock order in
// conn.go's doc is what keeps it from deadlocking; a deadlock shows as the
// test's timeout, a data race as a -race report.
func TestConcurrentUse(t *testing.T) { forProviders(t, testConcurrentUse) }

func testConcurrentUse(t *testing.T, np pairFunc) {
	p := np(t, nil, nil)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := make([]byte, 3000)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if (g+i)%3 != 0 {
					p.call(ctx, procEcho, ddpArgs(data), [][]byte{make([]byte, 4096)}, 0)
					continue
				}
				// Cancelled while in flight: CancelCall. Inline only:
				// a call cancelled while the responder reads its
				// chunks is another matter (its Reads fail).
				cctx, cancel := context.WithCancel(ctx)
				go cancel()
				p.call(cctx, procEcho, ddpArgs(data[:8]), nil, 0)
				cancel()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			p.conn.Stats()
			p.resp.Stats()
			p.conn.Info()
			p.resp.Info()
			runtime.Gosched()
		}
	}()
	for p.conn.Stats().RepliesReceived < 50 {
		if ctx.Err() != nil {
			t.Fatalf("no replies: requester %+v\nresponder %+v", p.conn.Stats(), p.resp.Stats())
		}
		runtime.Gosched()
	}
	p.conn.Close()
	p.resp.Close()
	close(stop)
	wg.Wait()
}
