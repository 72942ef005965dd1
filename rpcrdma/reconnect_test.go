package rpcrdma

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The gated procedures: each announces its call's xid, waits for the
// test to open the gate (or for its connection to end), then does what
// procSum and procRead do.
const (
	procGatedSum  = 20
	procGatedRead = 21
)

// served serves srv with Serve and remembers the connections it
// accepts (Config.ConnState), for a test to cut.
type served struct {
	l   *Listener
	srv *rpc.Server

	mu    sync.Mutex
	conns []*Conn
	wg    sync.WaitGroup // Serve, and the connections not closed
}

// serve listens on p at addr and serves srv there until the test ends
// (stop).
func serve(t *testing.T, p rdma.Provider, addr string, cfg *Config, srv *rpc.Server) *served {
	t.Helper()
	var lcfg Config
	if cfg != nil {
		lcfg = *cfg
	}
	s := &served{srv: srv}
	lcfg.ConnState = s.state
	l, err := Listen(context.Background(), p, addr, &lcfg)
	if err != nil {
		t.Fatal(err)
	}
	s.l = l
	s.wg.Go(func() { Serve(context.Background(), l, srv) })
	t.Cleanup(s.stop)
	return s
}

// state is the Listener's Config.ConnState.
func (s *served) state(c *Conn, st ConnState) {
	switch st {
	case StateEstablished:
		s.wg.Add(1)
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
	case StateClosed:
		s.mu.Lock()
		established := slices.Contains(s.conns, c)
		s.mu.Unlock()
		if established {
			s.wg.Done()
		}
	}
}

// addr is the address to dial.
func (s *served) addr() string { return s.l.Addr().String() }

// last returns the connection accepted last, or nil.
func (s *served) last() *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) == 0 {
		return nil
	}
	return s.conns[len(s.conns)-1]
}

// accepted returns how many connections were accepted.
func (s *served) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// cut closes every connection accepted so far.
func (s *served) cut() {
	s.mu.Lock()
	conns := slices.Clone(s.conns)
	s.mu.Unlock()
	for _, c := range conns { // Close reports StateClosed, which takes s.mu
		c.Close()
	}
}

// stop closes the listener, the server and the connections, and waits
// for the serving to end.
func (s *served) stop() {
	s.l.Close()
	s.srv.Close()
	s.cut()
	s.wg.Wait()
}

// gatedServer serves every connection a listener accepts, and lets a test
// hold the gated procedures and cut the connections.
type gatedServer struct {
	*served
	arrived chan uint32   // xids of gated calls, as their handlers start
	open    chan struct{} // closed to let the gated calls through
}

func newGatedServer(t *testing.T, p rdma.Provider, addr string, cfg *Config) *gatedServer {
	t.Helper()
	g := &gatedServer{arrived: make(chan uint32, 64), open: make(chan struct{})}
	srv := testServer()
	gate := func(ctx context.Context, c *rpc.Call) error {
		g.arrived <- c.Header.XID
		select {
		case <-g.open:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	srv.Handle(testProg, testVers, procGatedSum, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		d := c.Decoder()
		p := d.DDPOpaque(64 << 20)
		if err := d.Done(); err != nil {
			return rpc.Body{}, err
		}
		if err := gate(ctx, c); err != nil {
			return rpc.Body{}, err
		}
		out := xdr.AppendUint32(nil, uint32(len(p)))
		return rpc.Body{XDR: xdr.AppendUint32(out, crc32.ChecksumIEEE(p))}, nil
	})
	srv.Handle(testProg, testVers, procGatedRead, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		d := c.Decoder()
		n := d.Uint32()
		if err := d.Done(); err != nil || n > uint32(len(readData)) {
			return rpc.Body{}, rpc.ErrGarbageArgs
		}
		if err := gate(ctx, c); err != nil {
			return rpc.Body{}, err
		}
		var out rpc.Body
		out.XDR = xdr.AppendBool(out.XDR, true)
		out.AppendDDPOpaque(readData[:n])
		out.XDR = xdr.AppendUint32(out.XDR, 0xfeedf00d)
		return out, nil
	})
	g.served = serve(t, p, addr, cfg, srv)
	return g
}

// waitArrivals returns the xids of the next n gated calls to start.
func (g *gatedServer) waitArrivals(t *testing.T, n int) map[uint32]bool {
	t.Helper()
	xids := map[uint32]bool{}
	timeout := time.After(10 * time.Second)
	for len(xids) < n {
		select {
		case x := <-g.arrived:
			xids[x] = true
		case <-timeout:
			t.Fatalf("%d gated calls started, want %d", len(xids), n)
		}
	}
	return xids
}

// TestReconnect cuts the connection while calls of every kind are held by
// the server: inline, with a read chunk, with a write chunk. The client
// dials a new connection, the calls go again with their xids and fresh
// registrations, and each completes with the right bytes in place.
func TestReconnect(t *testing.T) {
	forListeners(t, func(t *testing.T, p rdma.Provider, addr string) {
		g := newGatedServer(t, p, addr, nil)
		cli, err := DialClient(ctxT(t), p, g.addr(), nil, &rpc.ReconnectConfig{MinBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}

		big, small := pattern(1<<20, 9), pattern(100, 4)
		buf := bytes.Repeat([]byte{0xee}, 1<<20+8)
		type outcome struct {
			what string
			rep  rpc.Reply
			err  error
		}
		done := make(chan outcome, 3)
		call := func(what string, proc uint32, args rpc.Body, bufs [][]byte) {
			rep, err := cli.Call(ctxT(t), &rpc.Request{Prog: testProg, Vers: testVers, Proc: proc, Args: args, ResultBufs: bufs})
			done <- outcome{what, rep, err}
		}
		// A connection starts at one credit; the first reply grants more.
		if err := cli.Null(ctxT(t), testProg, testVers); err != nil {
			t.Fatal(err)
		}
		go call("read chunk", procGatedSum, ddpOne(big), nil)
		go call("inline", procGatedSum, ddpOne(small), nil)
		go call("write chunk", procGatedRead, u32Args(1<<20), [][]byte{buf})
		first := g.waitArrivals(t, 3)
		g.cut()
		// The new connection starts at one credit again, so one call
		// goes first, and the others once its reply has come.
		again := g.waitArrivals(t, 1)
		select {
		case x := <-g.arrived:
			t.Fatalf("call %08x reached the server beside the first on the new connection: it did not start at one credit (RFC 8166 section 4.3)", x)
		case <-time.After(30 * time.Millisecond):
		}
		close(g.open)
		for x := range g.waitArrivals(t, 2) {
			again[x] = true
		}
		for x := range first {
			if !again[x] {
				t.Errorf("xid %08x not sent again (again: %v)", x, again)
			}
		}
		for range 3 {
			o := <-done
			if o.err != nil {
				t.Fatalf("%s: %v", o.what, o.err)
			}
			d := rpc.NewBodyDecoder(o.rep.Results)
			switch o.what {
			case "write chunk":
				if !d.Bool() || d.DDPOpaqueInto(buf) != 1<<20 || !bytes.Equal(buf[:1<<20], readData[:1<<20]) || d.Uint32() != 0xfeedf00d {
					t.Errorf("write chunk: wrong result (%v)", d.Err())
				}
				if len(o.rep.Results.Items) != 1 {
					t.Errorf("write chunk: result not placed directly (%d items)", len(o.rep.Results.Items))
				}
			default:
				data := big
				if o.what == "inline" {
					data = small
				}
				if n, sum := d.Uint32(), d.Uint32(); d.Err() != nil || n != uint32(len(data)) || sum != crc32.ChecksumIEEE(data) {
					t.Errorf("%s: server saw %d bytes crc %08x (%v)", o.what, n, sum, d.Err())
				}
			}
		}
		if st := cli.Stats(); st.Reconnects != 1 || st.Retransmits != 3 {
			t.Errorf("stats %+v, want 1 reconnect and 3 retransmits", st)
		}
		cli.Close()
		g.stop()
		if r, ok := p.(interface{ Registered() int }); ok {
			deadline := time.Now().Add(5 * time.Second)
			for r.Registered() != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := r.Registered(); n != 0 {
				t.Errorf("%d memory registrations left after close", n)
			}
		}
	})
}

// TestReconnectServerRestart stops the server while a call waits on it and
// starts it again on the same address: the client redials, backing off,
// until the new server answers the call.
func TestReconnectServerRestart(t *testing.T) {
	p := newIWARP(t)
	g := newGatedServer(t, p, "127.0.0.1:0", nil)
	addr := g.addr()
	cli, err := DialClient(ctxT(t), p, addr, nil, &rpc.ReconnectConfig{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	done := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctxT(t), &rpc.Request{Prog: testProg, Vers: testVers, Proc: procGatedSum, Args: ddpOne(pattern(5000, 1))})
		done <- err
	}()
	g.waitArrivals(t, 1)
	g.stop()
	// Start the new server only once the client has been refused twice,
	// however long that takes on a loaded machine.
	for deadline := time.Now().Add(10 * time.Second); cli.Stats().DialErrors < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: no second refused dial within 10 s", cli.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	g2 := newGatedServer(t, p, addr, nil)
	close(g2.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := cli.Stats(); st.Reconnects != 1 || st.Retransmits != 1 || st.DialErrors < 2 {
		t.Errorf("stats %+v, want 1 reconnect, 1 retransmit, refused dials", st)
	}
}

// TestDialClientRefusesDial checks that DialClient does not take a Dial
// of the caller's, and returns the first dial's error.
func TestDialClientRefusesDial(t *testing.T) {
	p := newIWARP(t)
	rc := &rpc.ReconnectConfig{Dial: func(context.Context) (rpc.Transport, error) { return nil, nil }}
	if _, err := DialClient(ctxT(t), p, "127.0.0.1:1", nil, rc); err == nil {
		t.Error("DialClient accepted a Dial")
	}
	_, err := DialClient(ctxT(t), p, "127.0.0.1:1", nil, nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("first dial to a closed port: %v", err)
	}
}

// forListeners runs f with each provider and an address to listen on:
// the strict in-process provider, in a testing/synctest bubble so that
// backoffs and timeouts run on the bubble's clock, and the software iWARP
// on loopback TCP, which cannot (its goroutines wait on the network,
// which a bubble does not count as blocked).
func forListeners(t *testing.T, f func(t *testing.T, p rdma.Provider, addr string)) {
	t.Run("loopback", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { f(t, loopback.New(), "") })
	})
	t.Run("iwarp", func(t *testing.T) { f(t, newIWARP(t), "127.0.0.1:0") })
}

// forListenersWallClock is forListeners with the in-process provider on
// the wall clock, for a test whose goroutines never all block at once: a
// bubble's clock would not move.
func forListenersWallClock(t *testing.T, f func(t *testing.T, p rdma.Provider, addr string)) {
	t.Run("loopback", func(t *testing.T) { f(t, loopback.New(), "") })
	t.Run("iwarp", func(t *testing.T) { f(t, newIWARP(t), "127.0.0.1:0") })
}

// ddpOne is a DDP-eligible opaque alone.
func ddpOne(p []byte) rpc.Body {
	var b rpc.Body
	b.AppendDDPOpaque(p)
	return b
}

// TestReconnectReplyCache: the server runs a call, and its connection is
// cut before the reply leaves. The client sends the call again on a new
// connection; the server's reply cache answers it with the first run's
// reply, whose data item lands in the new call's write chunk, and the
// handler does not run twice.
func TestReconnectReplyCache(t *testing.T) {
	forListeners(t, func(t *testing.T, p rdma.Provider, addr string) {
		srv := rpc.NewServer(&rpc.ServerOptions{ReplyCache: 8})
		var runs atomic.Uint32
		ran, gate := make(chan struct{}, 4), make(chan struct{})
		item := pattern(2000, 6)
		srv.Handle(testProg, testVers, procGatedRead, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
			n := runs.Add(1)
			ran <- struct{}{}
			<-gate // even after the connection ends
			var out rpc.Body
			out.XDR = xdr.AppendUint32(out.XDR, n)
			out.AppendDDPOpaque(item)
			return out, nil
		})
		s := serve(t, p, addr, nil, srv)
		cli, err := DialClient(ctxT(t), p, s.addr(), nil, &rpc.ReconnectConfig{MinBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		buf := make([]byte, 4096)
		type result struct {
			rep rpc.Reply
			err error
		}
		done := make(chan result, 1)
		go func() {
			rep, err := cli.Call(ctxT(t), &rpc.Request{Prog: testProg, Vers: testVers, Proc: procGatedRead, ResultBufs: [][]byte{buf}})
			done <- result{rep, err}
		}()
		<-ran
		s.cut()
		time.Sleep(20 * time.Millisecond)
		close(gate)
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		d := rpc.NewBodyDecoder(r.rep.Results)
		n := d.Uint32()
		got := d.DDPOpaqueInto(buf)
		if d.Err() != nil || n != 1 || got != len(item) || !bytes.Equal(buf[:got], item) {
			t.Fatalf("reply: run %d, %d bytes placed, equal %v, %v", n, got, bytes.Equal(buf[:got], item), d.Err())
		}
		if len(r.rep.Results.Items) != 1 {
			t.Errorf("the replayed result was not placed in the write chunk (%d items)", len(r.rep.Results.Items))
		}
		if rn, st := runs.Load(), srv.Stats(); rn != 1 || st.CacheReplays != 1 {
			t.Errorf("%d runs, server stats %+v; want one run and one replay", rn, st)
		}
	})
}

// TestReconnectChaos makes concurrent calls with a read chunk and a write
// chunk each while connections are cut at random, from the server's side,
// without warning: every call completes with its own bytes in place, and,
// with the server's reply cache on, each ran exactly once.
//
// Its callers call without pause while the cutter sleeps between cuts, so
// it runs on the wall clock (forListenersWallClock).
func TestReconnectChaos(t *testing.T) {
	forListenersWallClock(t, func(t *testing.T, p rdma.Provider, addr string) {
		const procChaos = 22
		srv := rpc.NewServer(&rpc.ServerOptions{ReplyCache: 4096})
		var mu sync.Mutex
		runs := map[uint32]int{}
		srv.Handle(testProg, testVers, procChaos, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
			d := c.Decoder()
			id := d.Uint32()
			data := d.DDPOpaque(1 << 20)
			if err := d.Done(); err != nil {
				return rpc.Body{}, err
			}
			mu.Lock()
			runs[id]++
			mu.Unlock()
			var out rpc.Body
			out.XDR = xdr.AppendUint32(out.XDR, id)
			out.AppendDDPOpaque(data[:512]) // back through the write chunk
			return out, nil
		})
		s := serve(t, p, addr, nil, srv)
		// Cuts every few milliseconds can end a new connection before
		// any reply came back, which a Client counts as the peer
		// hanging up, and by default gives up after 5 in a row; a
		// client that expects cuts like these allows more attempts.
		cli, err := DialClient(ctxT(t), p, s.addr(), nil, &rpc.ReconnectConfig{MinBackoff: time.Millisecond, Attempts: 1000})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()

		// The callers call until the cutter has made its cuts, each
		// waiting a few milliseconds for the previous one to settle.
		const callers, cuts = 8, 20
		stop := make(chan struct{})
		var next atomic.Uint32
		errs := make(chan error, callers)
		var calls sync.WaitGroup
		for g := range callers {
			calls.Go(func() {
				data := pattern(8<<10, byte(g)) // over the DDP threshold: a read chunk
				buf := make([]byte, 512)
				for {
					select {
					case <-stop:
						return
					default:
					}
					id := next.Add(1) - 1
					var args rpc.Body
					args.XDR = xdr.AppendUint32(args.XDR, id)
					args.AppendDDPOpaque(data)
					clear(buf)
					rep, err := cli.Call(ctxT(t), &rpc.Request{Prog: testProg, Vers: testVers, Proc: procChaos, Args: args, ResultBufs: [][]byte{buf}})
					if err != nil {
						errs <- fmt.Errorf("call %d: %w", id, err)
						return
					}
					d := rpc.NewBodyDecoder(rep.Results)
					if got, n := d.Uint32(), d.DDPOpaqueInto(buf); d.Err() != nil || got != id || n != 512 || !bytes.Equal(buf, data[:512]) {
						errs <- fmt.Errorf("call %d: answer for %d, %d bytes placed, equal %v, %v", id, got, n, bytes.Equal(buf, data[:512]), d.Err())
						return
					}
				}
			})
		}
		for cut := range cuts {
			time.Sleep(time.Duration(2+cut%5) * time.Millisecond)
			if c := s.last(); c != nil {
				c.RDMA().Close() // no warning
			}
		}
		close(stop)
		calls.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for id := range next.Load() {
			if runs[id] != 1 {
				t.Errorf("call %d ran %d times", id, runs[id])
			}
		}
		st := cli.Stats()
		t.Logf("%d calls over %d connections; client %+v; server replays %d", next.Load(), s.accepted(), st, srv.Stats().CacheReplays)
		if st.Retransmits == 0 {
			t.Error("no call was sent again: the cuts missed every call")
		}
	})
}
