package rpcrdma

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// TestCloseStopsTimers arms every timer a connection has: a responder's
// idle check, its pull timeout (a call whose Read Response never comes)
// and its wait for RDMA_DONE (a read-chunk reply the requester does not
// acknowledge), and a requester's abandon timer (a cancelled call whose
// reply never comes). Each is armed long; once the connections are
// closed, none is armed any more, and no goroutine outlives the test.
func TestCloseStopsTimers(t *testing.T) {
	leaktest.Check(t)
	const long = time.Hour
	n := loopback.New()
	ctx := ctxT(t)
	l, err := Listen(ctx, n, "", &Config{
		ReadChunkReplies: true,
		DoneTimeout:      long,
		Bounds:           Bounds{PullTimeout: long, IdleTimeout: long, HandshakeTimeout: long},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := testServer()
	defer srv.Close()
	accepted := acceptOne(t, ctx, l)
	conn, err := Dial(ctx, n, l.Addr().String(), &Config{AbandonTimeout: long})
	if err != nil {
		t.Fatal(err)
	}
	resp := accepted()
	served := make(chan struct{})
	go func() { srv.Serve(resp); close(served) }()
	cli := rpc.NewClient(conn)
	defer cli.Close()

	// The read-chunk reply: the requester has not opted in, so it
	// never sends RDMA_DONE.
	if _, err := cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procBig, Args: u32Args(20000)}); !errors.Is(err, ErrBadReply) {
		t.Fatalf("read-chunk reply to a requester not opted in: %v, want ErrBadReply", err)
	}
	// The abandoned call: procBlock answers only when its connection
	// ends.
	cctx, cancel := context.WithCancel(ctx)
	blocked := make(chan error, 1)
	calls := srv.Stats().Calls
	go func() {
		_, err := cli.Call(cctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procBlock})
		blocked <- err
	}()
	waitServerCalls(t, srv, calls+1)
	cancel()
	if err := <-blocked; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}

	// The stalled pull, from a raw requester whose Read Response is
	// lost.
	accepted = acceptOne(t, ctx, l)
	const size = 64 << 10
	h := dialHostile(t, n, l, size)
	stalled := accepted()
	go func() { srv.Serve(stalled) }()
	if err := h.rc.(*loopback.Conn).SetFaults(loopback.Faults{Drop: 2, LinkTimeout: long}); err != nil {
		t.Fatal(err)
	}
	msg := sumCall(1, h.src.STag(), h.src.TO(), size, 0, 0)
	copy(h.send.Bytes(), msg)
	if err := h.rc.PostSend(&rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{{MR: h.send, Length: len(msg)}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stalled call to take its share", func() bool { return l.Stats().Memory == size })

	// What each has armed: idle check and RDMA_DONE wait; abandon;
	// idle check and pull timeout.
	for _, w := range []struct {
		name string
		c    *Conn
		want int32
	}{{"responder", resp, 2}, {"requester", conn, 1}, {"stalled responder", stalled, 2}} {
		if got := w.c.timers.Load(); got != w.want {
			t.Errorf("%s: %d timers armed, want %d", w.name, got, w.want)
		}
	}
	for _, c := range []*Conn{conn, resp, stalled} {
		c.Close()
		if got := c.timers.Load(); got != 0 {
			t.Errorf("%d timers still armed after Close", got)
		}
	}
	<-served
}

// TestCloseWaitsForTimerCallback: Close waits for a timer callback that is
// running, and a timer that fires after Close runs nothing. It runs in a
// testing/synctest bubble, so "Close has not returned" is exact: every
// goroutine of the bubble is blocked.
func TestCloseWaitsForTimerCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn, resp := dialAccept(t, loopback.New(), "", nil, nil)
		defer conn.Close()
		started, release := make(chan struct{}), make(chan struct{})
		resp.afterFunc(0, func() {
			close(started)
			<-release
		})
		<-started
		closed := make(chan struct{})
		go func() {
			resp.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a timer callback was running")
		default:
		}
		close(release)
		<-closed

		var ran atomic.Bool
		resp.afterFunc(time.Second, func() { ran.Store(true) })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if ran.Load() || resp.timers.Load() != 0 {
			t.Errorf("after Close: callback ran %v, %d timers armed", ran.Load(), resp.timers.Load())
		}
	})
}

// TestClosePushFinal: a responder's Push hands on the error that ends the
// connection from a goroutine Close waits for, so once Close returns the
// deliver function has had it.
func TestClosePushFinal(t *testing.T) {
	leaktest.Check(t)
	for range 20 {
		conn, resp := dialAccept(t, loopback.New(), "", nil, nil)
		var final atomic.Bool
		resp.Push(func(m *rpc.Msg, err error) bool {
			if err != nil {
				if _, perCall := errors.AsType[*rpc.CallError](err); !perCall {
					final.Store(true)
				}
			}
			return true
		})
		resp.Close()
		if !final.Load() {
			t.Fatal("Close returned before Push's goroutine delivered the final error")
		}
		conn.Close()
	}
	// Push after Close delivers the final error at once.
	conn, resp := dialAccept(t, loopback.New(), "", nil, nil)
	defer conn.Close()
	resp.Close()
	var final atomic.Bool
	resp.Push(func(m *rpc.Msg, err error) bool { final.Store(err != nil); return true })
	if !final.Load() {
		t.Error("Push after Close did not deliver the final error")
	}
}
