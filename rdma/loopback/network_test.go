package loopback_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

func TestListen(t *testing.T) {
	n := loopback.New()
	ctx := context.Background()
	ln, err := n.Listen(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if a := ln.Addr(); a.Network() != "loopback" || a.String() == "" {
		t.Fatalf("address %q on %q", a, a.Network())
	}
	if _, err := n.Listen(ctx, ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second listen on %v: %v", ln.Addr(), err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := n.Listen(cancelled, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("listen with a cancelled context: %v", err)
	}
	if _, err := ln.Accept(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("accept with a cancelled context: %v", err)
	}
	ln.Close()
	if _, err := ln.Accept(ctx); !errors.Is(err, rdma.ErrClosed) {
		t.Fatalf("accept after close: %v", err)
	}
	if _, err := n.Listen(ctx, ln.Addr().String()); err != nil {
		t.Fatalf("listen on a closed listener's address: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	n := loopback.New()
	ctx := context.Background()
	if _, err := n.Dial(ctx, "nobody", rdma.ConnConfig{}); err == nil || !strings.Contains(err.Error(), "no listener") {
		t.Fatalf("dial without listener: %v", err)
	}
	ln, err := n.Listen(ctx, "server")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, cfg := range []rdma.ConnConfig{{SendQueueDepth: -1}, {RecvQueueDepth: -1}, {IRD: -1}, {ORD: -1}} {
		if _, err := n.Dial(ctx, "server", cfg); !errors.Is(err, rdma.ErrInvalid) {
			t.Errorf("dial with %+v: %v, want ErrInvalid", cfg, err)
		}
	}
}

// TestBacklog fills the listener's backlog; the next Dial fails at once and
// closing the listener fails the waiting ones.
func TestBacklog(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	n := loopback.New()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, err := n.Listen(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := n.Dial(ctx, "busy", rdma.ConnConfig{})
			errs <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		// A probe that gets queued gives up after a while but keeps its
		// slot until the listener looks at it.
		probe, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		_, err := n.Dial(probe, "busy", rdma.ConnConfig{})
		cancel()
		if err != nil && strings.Contains(err.Error(), "backlog") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backlog never filled: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	// Close only once every dialer has dialed (and either failed on the
	// full backlog or waits in it): one that dialed after Close would find
	// no listener at all.
	for dialing := 0; ; dialing = 0 {
		buf := make([]byte, 1<<20)
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			lines := strings.SplitN(g, "\n", 3)
			if strings.Contains(g, "created by github.com/go-rpcrdma/rpcrdma/rdma/loopback_test.TestBacklog") &&
				(len(lines) < 2 || !strings.Contains(lines[0], "[select") || !strings.Contains(lines[1], "loopback.(*Network).Dial(")) {
				dialing++
			}
		}
		if dialing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dialers still on their way after 5 s", dialing)
		}
		time.Sleep(time.Millisecond)
	}
	ln.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil || !strings.Contains(err.Error(), "closed") && !strings.Contains(err.Error(), "backlog") {
			t.Fatalf("dial to a listener closed while waiting: %v", err)
		}
	}
}

// TestAcceptAfterInitiatorLeft: the initiator's Dial gives up while the
// responder's Prepare runs; Accept then fails and leaves nothing behind.
func TestAcceptAfterInitiatorLeft(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	n := loopback.New()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, err := n.Listen(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialCtx, giveUp := context.WithCancel(ctx)
	dialed := make(chan error, 1)
	go func() {
		_, err := n.Dial(dialCtx, ln.Addr().String(), rdma.ConnConfig{})
		dialed <- err
	}()
	req, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := req.Accept(ctx, rdma.ConnConfig{IRD: -1}); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("accept with a negative IRD: %v", err)
	}
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if _, err := req.Accept(cancelled, rdma.ConnConfig{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("accept with a cancelled context: %v", err)
	}
	_, err = req.Accept(ctx, rdma.ConnConfig{Prepare: func(c rdma.Conn) error {
		if _, err := c.Alloc(8, 0); err != nil {
			return err
		}
		giveUp()
		if err := <-dialed; !errors.Is(err, context.Canceled) {
			t.Errorf("dial: %v", err)
		}
		return nil
	}})
	if err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("accept after the initiator left: %v", err)
	}
	if r := n.Registered(); r != 0 {
		t.Fatalf("%d regions registered after the failed accept", r)
	}
}

func TestConnMisc(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	cfg := rdmatest.Config{Provider: loopback.New()}
	a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	if _, err := a.Wait(context.Background(), nil); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("Wait with no room: %v", err)
	}
	if s := a.(*loopback.Conn).String(); !strings.Contains(s, a.LocalAddr().String()) || !strings.Contains(s, b.LocalAddr().String()) {
		t.Fatalf("String %q", s)
	}
	if a.LocalAddr().String() != b.RemoteAddr().String() || b.LocalAddr().String() != a.RemoteAddr().String() {
		t.Fatalf("addresses %v-%v and %v-%v", a.LocalAddr(), a.RemoteAddr(), b.LocalAddr(), b.RemoteAddr())
	}
	m := rdmatest.Alloc(t, a, 8, rdma.AccessRemoteRead)
	if m.TO() == 0 || m.Access() != rdma.AccessRemoteRead || !m.Valid() || len(m.Bytes()) != 8 {
		t.Fatalf("MR %v TO %#x access %v valid %v", m.STag(), m.TO(), m.Access(), m.Valid())
	}
}
