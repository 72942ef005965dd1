package rpcrdma

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// withPool returns np with the responder receiving from a shared pool of
// n receives.
func withPool(np pairFunc, n int) pairFunc {
	return func(t *testing.T, ccfg, scfg *Config) *pair {
		var s Config
		if scfg != nil {
			s = *scfg
		}
		s.Bounds.SharedReceives = n
		return np(t, ccfg, &s)
	}
}

// TestDataPathsSharedPool runs the data paths against a responder that
// receives from a shared pool.
func TestDataPathsSharedPool(t *testing.T) {
	forProviders(t, func(t *testing.T, np pairFunc) { testDataPaths(t, withPool(np, 64)) })
}

// TestSharedReceivePool: connections receive from one pool; each is
// promised one credit when accepted and more while its calls keep its
// grant busy; the grants never add up to more than the pool holds, less
// its spare, and a request the pool cannot promise a credit to is
// refused. The pool's memory is registered once, not per connection.
func TestSharedReceivePool(t *testing.T) {
	const depth = 32 // a spare of 2: 30 receives to promise
	ctx := ctxT(t)
	n := loopback.New()
	l := listenBounded(t, n, "", Bounds{SharedReceives: depth})
	busyConn, err := Dial(ctx, n, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	busy := rpc.NewClient(busyConn)
	t.Cleanup(func() { busy.Close() })
	clients := []*rpc.Client{busy}
	for range 3 {
		cli, err := dialNull(t, ctx, n, l)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cli)
	}
	s := l.Stats()
	if want := int64(depth*DefaultInlineSize + 4*sharedSendSlots*DefaultInlineSize); s.Registered != want {
		t.Errorf("%d bytes registered with 4 idle connections, want %d (the pool and each connection's send buffers)", s.Registered, want)
	}
	// A busy connection: 16 calls at once, several times over.
	for range 5 {
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := busy.Null(ctx, testProg, testVers); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	granted := busyConn.Info().Credits
	if granted <= 1 {
		t.Errorf("a busy connection's grant stayed at %d", granted)
	}
	if granted > depth-2-3 {
		t.Errorf("a busy connection was granted %d, more than the pool can promise beside 3 other connections", granted)
	}
	// Connections until the pool has nothing left to promise.
	opened := 0
	for {
		_, err := dialNull(t, ctx, n, l)
		if errors.Is(err, rdma.ErrRejected) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		opened++
		if opened > depth {
			t.Fatal("more connections than the pool holds receives")
		}
	}
	if got := l.Stats().Limits[LimitReceives]; got != 1 {
		t.Errorf("%d requests refused for the pool, want 1", got)
	}
	pool := l.pool
	pool.mu.Lock()
	allotted := pool.allotted
	pool.mu.Unlock()
	// Each other connection has one credit, or two once a call has
	// kept its one busy.
	if allotted > depth-pool.spare || allotted < int(granted)+3+opened {
		t.Errorf("%d receives promised: the busy connection's %d, 3 others, %d more; at most %d", allotted, granted, opened, depth-pool.spare)
	}
	// Every connection is still served.
	for i, c := range clients {
		if err := c.Null(ctx, testProg, testVers); err != nil {
			t.Errorf("connection %d: %v", i, err)
		}
	}
}

// TestSharedPoolProtocol runs the versions, remote invalidation,
// CONF_RDMA, RDMA_OPTIONAL and read-chunk reply checks against a
// responder receiving from a shared pool. (testBackchannel checks that
// the forward grant stays where the first reply put it, which a pool's
// growing grant does not.)
func TestSharedPoolProtocol(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T, pairFunc)
	}{
		{"versions", testVersions},
		{"remote-invalidation", testRemoteInvalidation},
		{"reply-too-large", testReplyTooLarge},
		{"conf-rdma", testConfRDMA},
		{"optional", testOptional},
		{"read-chunk-reply", testReadChunkReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forProviders(t, func(t *testing.T, np pairFunc) { tc.f(t, withPool(np, 64)) })
		})
	}
}

// TestSharedPoolBackchannel: backward calls work against a responder
// receiving from a shared pool (their replies arrive through it).
func TestSharedPoolBackchannel(t *testing.T) {
	forProviders(t, func(t *testing.T, np pairFunc) {
		bp := newBackPair(t, withPool(np, 64), &Config{BackwardCredits: 4}, &Config{BackwardCredits: 4}, testServer())
		ctx := ctxT(t)
		if err := bp.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			data := pattern(100+i, byte(i))
			rep, err := bp.backCall(ctx, procEcho, ddpArgs(data))
			if err != nil {
				t.Fatalf("backward echo %d: %v", i, err)
			}
			d := rpc.NewBodyDecoder(rep.Results)
			if got := d.DDPOpaque(1 << 20); string(got) != string(data) {
				t.Fatalf("backward echo %d: %d bytes back, want %d", i, len(got), len(data))
			}
		}
	})
}

// TestSharedPoolLowersGrant: a connection whose calls kept a large grant
// busy, then made one call at a time for a while, is lowered to one
// credit; the receives promised beyond it return to the pool reclaimDelay
// later, not before, and a new burst raises the grant again. On a
// testing/synctest bubble's clock.
func TestSharedPoolLowersGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const depth = 64
		ctx := ctxT(t)
		n := loopback.New()
		l := listenBounded(t, n, "", Bounds{SharedReceives: depth})
		conn, err := Dial(ctx, n, l.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		cli := rpc.NewClient(conn)
		defer cli.Close()
		allotted := func() int {
			l.pool.mu.Lock()
			defer l.pool.mu.Unlock()
			return l.pool.allotted
		}
		burst := func() {
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					if err := cli.Null(ctx, testProg, testVers); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
		for range 5 {
			burst()
		}
		raised := allotted()
		if g := conn.Info().Credits; raised <= 1 || g <= 1 {
			t.Fatalf("grant %d, %d receives promised after bursts of 16 calls: the grant was not raised", g, raised)
		}
		// Calls one at a time, reviewPeriod apart, until a review sees
		// one call at a time: the first after the bursts sees them, or,
		// where the bubble's clock moved on while every goroutine waited
		// during the bursts, the bursts' period is already over.
		for i := 0; conn.Info().Credits != 1; i++ {
			if i == 3 {
				t.Fatalf("grant %d after %d calls made one at a time, %v apart, want 1", conn.Info().Credits, i, reviewPeriod)
			}
			time.Sleep(reviewPeriod)
			if err := cli.Null(ctx, testProg, testVers); err != nil {
				t.Fatal(err)
			}
		}
		if got := allotted(); got <= 1 {
			t.Errorf("%d receives promised right after the grant was lowered: given back before the requester had the reply", got)
		}
		// The timer of an earlier lowering that fires now, too late for
		// this lowering's reset to stop it, gives nothing back either.
		l.pool.mu.Lock()
		var sc *Conn
		for _, c := range l.pool.byRC {
			sc = c
		}
		l.pool.mu.Unlock()
		sc.resp.reclaimCredits()
		if got := allotted(); got <= 1 {
			t.Errorf("%d receives promised after an earlier lowering's reclaim ran right after the grant was lowered again", got)
		}
		time.Sleep(reclaimDelay + time.Millisecond)
		synctest.Wait()
		if got := allotted(); got != 1 {
			t.Errorf("%d receives promised %v after the grant was lowered to 1, want 1", got, reclaimDelay)
		}
		for range 5 {
			burst()
		}
		if got := allotted(); got <= 1 {
			t.Errorf("%d receives promised after more bursts: the grant was not raised again", got)
		}
	})
}

// TestSharedPoolWaitsForDispatcher: the close that closes a shared pool
// returns once the pool's dispatcher has exited: the Listener's Close
// when no connection uses the pool, else the last connection's Close.
func TestSharedPoolWaitsForDispatcher(t *testing.T) {
	gone := func(t *testing.T, pool *sharedPool, closer string) {
		t.Helper()
		select {
		case <-pool.done:
		default:
			t.Errorf("the pool's dispatcher still runs when %s has returned", closer)
		}
	}
	listen := func(t *testing.T, n *loopback.Network) *Listener {
		l, err := Listen(context.Background(), n, "", &Config{Bounds: Bounds{SharedReceives: 16}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("listener", func(t *testing.T) {
		leaktest.Check(t)
		l := listen(t, loopback.New())
		pool := l.pool
		l.Close()
		gone(t, pool, "Listener.Close")
	})
	t.Run("last connection", func(t *testing.T) {
		leaktest.Check(t)
		ctx := ctxT(t)
		n := loopback.New()
		l := listen(t, n)
		pool := l.pool
		accepted := make(chan *Conn, 1)
		go func() {
			c, err := l.Accept(ctx)
			if err != nil {
				t.Error(err)
			}
			accepted <- c
		}()
		cc, err := Dial(ctx, n, l.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sc := <-accepted
		if sc == nil {
			cc.Close()
			l.Close()
			return
		}
		l.Close()
		select {
		case <-pool.done:
			t.Error("the pool closed with its Listener while a connection uses it")
		default:
		}
		cc.Close()
		sc.Close()
		gone(t, pool, "the last connection's Close")
	})
}
