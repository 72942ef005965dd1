package rpcrdma

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Tests of the requester's short path (short.go).

// iwarpPair makes a pair over the software iWARP on loopback TCP, where
// a reply takes long enough to arrive that a caller always takes the
// turn first (on the in-process provider the loop may deliver a reply
// before it has handed the turn over).
func iwarpPair(t *testing.T, ccfg, scfg *Config) *pair {
	t.Helper()
	return newPairOver(t, newIWARP(t), "127.0.0.1:0", ccfg, scfg)
}

// turnHeld reports whether a caller has the requester's turn.
func turnHeld(c *Conn) bool {
	c.short.mu.Lock()
	defer c.short.mu.Unlock()
	return c.short.caller
}

// waitTurnHeld waits, for at most ten seconds, until a caller has c's
// turn.
func waitTurnHeld(t *testing.T, c *Conn) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !turnHeld(c); {
		if time.Now().After(deadline) {
			t.Fatal("no caller took the turn within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// testShortPathTaken: calls made one at a time are delivered on their
// callers' goroutines, and counted (with wantAll, most of them);
// calls many at a time still complete.
func testShortPathTaken(t *testing.T, np pairFunc, wantAll bool) {
	p := np(t, nil, nil)
	ctx := ctxT(t)
	const calls = 50
	for range calls {
		if err := p.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
	}
	st := p.cli.Stats()
	// A caller that asks the loop for the turn may find the reply
	// delivered before the loop hands it over; that happens to the first
	// call, and to one after which the turn went back to the loop (the
	// Send's completion came after the reply). Otherwise the turn is free
	// between calls and each caller takes it at once.
	if wantAll && st.ShortPath < calls/2 || st.ShortPath == 0 {
		t.Fatalf("%d of %d calls made one at a time took the short path", st.ShortPath, calls)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		data := pattern(100+i, byte(i))
		wg.Go(func() {
			for range 20 {
				rep, err := p.call(ctx, procEcho, ddpArgs(data), nil, 0)
				if err != nil {
					t.Errorf("echo %d: %v", i, err)
					return
				}
				d := rpc.NewBodyDecoder(rep.Results)
				if got := d.DDPOpaque(1 << 20); !bytes.Equal(got, data) {
					t.Errorf("echo %d: got %d bytes, want %d", i, len(got), len(data))
					return
				}
			}
		})
	}
	wg.Wait()
	if p.conn.Err() != nil {
		t.Fatalf("connection ended: %v", p.conn.Err())
	}
}

func TestShortPathTaken(t *testing.T) {
	t.Run("loopback", func(t *testing.T) { testShortPathTaken(t, newPair, false) })
	t.Run("iwarp", func(t *testing.T) { testShortPathTaken(t, iwarpPair, true) })
}

// TestShortPathDirect: over the software iWARP, calls made one at a time
// run the provider's socket work on the goroutines that wait
// (rdma.DirectIO): the caller reads its reply off the socket itself, and
// the responder's loop the call.
func TestShortPathDirect(t *testing.T) {
	p := iwarpPair(t, nil, nil)
	ctx := ctxT(t)
	const calls = 50
	for range calls {
		if err := p.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*Conn{p.conn, p.resp} {
		// The first messages reach the provider's reader goroutine,
		// which gives the socket up at the next message boundary.
		if n := c.rc.(*iwarp.Conn).DirectReads(); n < calls/2 {
			t.Errorf("%v: %d of %d messages read by the goroutine waiting for them", c.rc, n, calls)
		}
	}
}

// TestShortPathDirectPull: a call with a 1 MiB read chunk, made one at a
// time after calls that ran direct, has its Read Responses read by the
// provider's receive goroutine, not by the responder's loop: the loop
// waits once with its direct section closed after such a call arrives
// (waitTurn). With two cores, the bulk data read on the loop's goroutine
// made the call slower (docs/performance.md, "Direct I/O").
func TestShortPathDirectPull(t *testing.T) {
	p := iwarpPair(t, nil, nil)
	ctx := ctxT(t)
	for range 20 {
		if err := p.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
	}
	rc := p.resp.rc.(*iwarp.Conn)
	if rc.DirectReads() == 0 {
		t.Fatal("no message read by the responder's loop after 20 calls made one at a time")
	}
	args := ddpArgs(pattern(1<<20, 3))
	const calls = 10
	before := rc.DirectReads()
	for range calls {
		if _, err := p.call(ctx, procSum, args, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Each call is one Send the loop may read itself; its Read
	// Responses are many FPDUs of at most MULPDU bytes each.
	if n := rc.DirectReads() - before; n > 2*calls {
		t.Errorf("the responder's loop read %d FPDUs over %d calls with a 1 MiB read chunk, want at most %d: it read the Read Responses", n, calls, 2*calls)
	}
}

// TestShortPathContext: a caller whose context ends while it has the
// turn gives it back; the late reply is dropped by the loop, and the
// connection carries on, its next calls taking the short path again.
func TestShortPathContext(t *testing.T) {
	forProviders(t, func(t *testing.T, np pairFunc) {
		p := np(t, &Config{AbandonTimeout: time.Minute}, nil)
		ctx := ctxT(t)
		if err := p.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := p.call(short, procSleep, u32Args(200), nil, 0)
			done <- err
		}()
		waitServerCalls(t, p.srv, 2)
		waitTurnHeld(t, p.conn)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("call whose context ended: %v, want context.Canceled", err)
		}
		// The late reply comes with nobody waiting for it: whoever
		// has the turn drops it.
		for deadline := time.Now().Add(10 * time.Second); p.conn.Stats().Dropped == 0; {
			if time.Now().After(deadline) {
				t.Fatal("the late reply was not dropped within 10 s")
			}
			time.Sleep(time.Millisecond)
		}
		before := p.cli.Stats().ShortPath
		for range 10 {
			if err := p.cli.Null(ctx, testProg, testVers); err != nil {
				t.Fatalf("call after the abandoned one: %v", err)
			}
		}
		if p.conn.Err() != nil {
			t.Fatalf("connection ended: %v", p.conn.Err())
		}
		if p.cli.Stats().ShortPath == before {
			t.Error("no call took the short path after the abandoned one")
		}
	})
}

// TestShortPathConnEnds: when the connection ends while a caller has the
// turn, that call and every other outstanding fail with a connection
// error, and so do later calls.
func TestShortPathConnEnds(t *testing.T) {
	forProviders(t, func(t *testing.T, np pairFunc) {
		p := np(t, nil, nil)
		ctx := ctxT(t)
		if err := p.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 3)
		go func() {
			_, err := p.call(ctx, procBlock, rpc.Body{}, nil, 0)
			errs <- err
		}()
		waitServerCalls(t, p.srv, 2)
		waitTurnHeld(t, p.conn)
		for range 2 { // more calls, waiting the general way
			go func() {
				_, err := p.call(ctx, procBlock, rpc.Body{}, nil, 0)
				errs <- err
			}()
		}
		waitServerCalls(t, p.srv, 4)
		if !turnHeld(p.conn) {
			t.Fatal("the first caller gave the turn up")
		}
		p.resp.Close() // the peer goes away
		for i := range 3 {
			if err := <-errs; !errors.Is(err, net.ErrClosed) {
				t.Errorf("call %d: %v, want a connection error", i, err)
			}
		}
		if err := p.cli.Null(ctx, testProg, testVers); !errors.Is(err, net.ErrClosed) {
			t.Errorf("call after the end: %v, want a connection error", err)
		}
	})
}

// TestShortPathBackchannel: a backward call (RFC 8167) arriving while
// the forward caller has the turn is received and answered, and the
// forward call then completes on the short path.
func TestShortPathBackchannel(t *testing.T) {
	const procBack = 100 // calls the requester back with its argument, returns what came back
	forProviders(t, func(t *testing.T, np pairFunc) {
		bp := newBackPair(t, np, &Config{BackwardCredits: 2}, &Config{BackwardCredits: 2}, testServer())
		bp.srv.Handle(testProg, testVers, procBack, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
			data := c.Decoder().Opaque(1 << 10)
			if !turnHeld(bp.conn) {
				return rpc.Body{}, errors.New("the forward caller does not have the turn")
			}
			rep, err := bp.backCall(ctx, procEchoFlat, rpc.Body{XDR: xdr.AppendOpaque(nil, data)})
			if err != nil {
				return rpc.Body{}, err
			}
			d := rpc.NewBodyDecoder(rep.Results)
			return rpc.Body{XDR: xdr.AppendOpaque(nil, d.Opaque(1<<10))}, nil
		})
		ctx := ctxT(t)
		if err := bp.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
		before := bp.cli.Stats().ShortPath
		const calls = 10
		for i := range calls {
			data := pattern(50+i, byte(i))
			var rep rpc.Reply
			var err error
			// Wait until this caller has the turn before the handler
			// makes its backward call: retry a call that found the
			// loop still handing over.
			for try := 0; ; try++ {
				rep, err = bp.cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procBack, Args: rpc.Body{XDR: xdr.AppendOpaque(nil, data)}})
				var ae *rpc.AcceptError
				if try < 100 && errors.As(err, &ae) {
					time.Sleep(time.Millisecond)
					continue
				}
				break
			}
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			d := rpc.NewBodyDecoder(rep.Results)
			if got := d.Opaque(1 << 10); !bytes.Equal(got, data) {
				t.Fatalf("call %d: %d bytes back, want %d", i, len(got), len(data))
			}
		}
		if n := bp.cli.Stats().ShortPath - before; n < calls {
			t.Errorf("%d of %d calls took the short path", n, calls)
		}
		if st := bp.conn.Stats(); st.BackwardCalls < calls {
			t.Errorf("%d backward calls received, want %d", st.BackwardCalls, calls)
		}
	})
}

// TestShortPathOneCredit: with one credit, callers racing for it never
// leave one holding the turn while it waits for the credit (which only
// the reply it would process frees): every call completes.
func TestShortPathOneCredit(t *testing.T) {
	forProviders(t, func(t *testing.T, np pairFunc) {
		p := np(t, nil, &Config{Grant: GrantPolicy{Max: 1}})
		ctx := ctxT(t)
		if err := p.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
		if g, _ := p.conn.req.credits.state(); g != 1 {
			t.Fatalf("grant %d, want 1", g)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					if err := p.cli.Null(ctx, testProg, testVers); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		t.Logf("short path: %d of %d", p.cli.Stats().ShortPath, 8*50+1)
	})
}

// TestDirectCall: the caller of a call goes direct only when the
// responder pulls nothing of it (directCall), and a 1 MiB read-chunk
// call made one at a time leaves the requester's side to the provider's
// goroutines: the Read Requests and the reply are not read by the caller.
func TestDirectCall(t *testing.T) {
	p := iwarpPair(t, nil, nil)
	c := p.conn
	limit := c.negV[c.role.version()].sendLimit
	th := c.cfg.ddpThreshold()
	for _, tc := range []struct {
		name string
		m    rpc.Msg
		want bool
	}{
		{"no items", rpc.Msg{Body: rpc.Body{XDR: make([]byte, 40)}}, true},
		{"item under the threshold", rpc.Msg{Body: rpc.Body{XDR: make([]byte, 44), Items: []rpc.DDPItem{{Offset: 44, Data: make([]byte, th-1)}}}}, true},
		{"item at the threshold", rpc.Msg{Body: rpc.Body{XDR: make([]byte, 44), Items: []rpc.DDPItem{{Offset: 44, Data: make([]byte, th)}}}}, false},
		{"longer than the inline limit", rpc.Msg{Body: rpc.Body{XDR: make([]byte, limit+4)}}, false},
	} {
		if got := c.req.directCall(&tc.m); got != tc.want {
			t.Errorf("%s: directCall %v, want %v", tc.name, got, tc.want)
		}
	}

	ctx := ctxT(t)
	for range 20 {
		if err := p.cli.Null(ctx, testProg, testVers); err != nil {
			t.Fatal(err)
		}
	}
	rc := c.rc.(*iwarp.Conn)
	if rc.DirectReads() == 0 {
		t.Fatal("no reply read by its caller after 20 calls made one at a time")
	}
	args := ddpArgs(pattern(1<<20, 5))
	const calls = 10
	before := rc.DirectReads()
	for range calls {
		if _, err := p.call(ctx, procSum, args, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := rc.DirectReads() - before; n > calls/2 {
		t.Errorf("the requester's callers read %d FPDUs over %d calls with a 1 MiB read chunk, want at most %d", n, calls, calls/2)
	}
}
