package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// procHeld records its call's xid, then answers v+1 for its uint32 v
// once the test releases it (or ends the handler's connection).
const procHeld = 1

// redialNet is a server reached by dialing: each dial makes a memPair
// and serves its far side with srv. Tests cut connections, hold dials
// and make them fail.
type redialNet struct {
	t       *testing.T
	srv     *Server
	xids    chan uint32   // procHeld's xids, as the server receives them
	release chan struct{} // closed to let procHeld answer

	mu      sync.Mutex
	servers []*memTransport // the far side of each dial, in order
	clients []*memTransport
	gate    chan struct{} // if not nil, dials wait for it
	dialErr error         // if not nil, dials fail with it
	dials   int
	served  sync.WaitGroup
}

func newRedialNet(t *testing.T) *redialNet {
	n := &redialNet{t: t, srv: NewServer(nil), xids: make(chan uint32, 100), release: make(chan struct{})}
	n.srv.Handle(testProg, 1, procHeld, func(ctx context.Context, c *Call) (Body, error) {
		d := c.Decoder()
		v := d.Uint32()
		if err := d.Done(); err != nil {
			return Body{}, err
		}
		n.xids <- c.Header.XID
		select {
		case <-n.release:
			return Body{XDR: xdr.AppendUint32(nil, v+1)}, nil
		case <-ctx.Done():
			return Body{}, ctx.Err()
		}
	})
	t.Cleanup(func() {
		n.srv.Close()
		n.served.Wait()
	})
	return n
}

func (n *redialNet) dial(ctx context.Context) (Transport, error) {
	n.mu.Lock()
	gate, err := n.gate, n.dialErr
	n.dials++
	n.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	ct, st := memPair()
	n.mu.Lock()
	n.servers = append(n.servers, st)
	n.clients = append(n.clients, ct)
	n.mu.Unlock()
	n.served.Go(func() { n.srv.Serve(st) })
	return ct, nil
}

// cut ends connection i (0 for the first dial) from the server's side.
func (n *redialNet) cut(i int) {
	n.mu.Lock()
	st := n.servers[i]
	n.mu.Unlock()
	st.Close()
}

func (n *redialNet) conns() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.servers)
}

// waitConns waits until k connections have been dialed.
func (n *redialNet) waitConns(k int) {
	n.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.conns() < k {
		if time.Now().After(deadline) {
			n.t.Fatalf("%d connections dialed, want %d", n.conns(), k)
		}
		time.Sleep(time.Millisecond)
	}
}

// takeXIDs receives k xids from procHeld handlers.
func (n *redialNet) takeXIDs(k int) []uint32 {
	n.t.Helper()
	var got []uint32
	timeout := time.After(5 * time.Second)
	for len(got) < k {
		select {
		case x := <-n.xids:
			got = append(got, x)
		case <-timeout:
			n.t.Fatalf("%d calls reached the server, want %d", len(got), k)
		}
	}
	slices.Sort(got)
	return got
}

func (n *redialNet) client(cfg ReconnectConfig) *Client {
	n.t.Helper()
	cfg.Dial = n.dial
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = time.Millisecond
	}
	c, err := DialClient(ctxTimeout(n.t, 5*time.Second), cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { c.Close() })
	return c
}

// held makes a procHeld call with v and checks its answer.
func held(ctx context.Context, c *Client, v uint32) error {
	r, err := c.Call(ctx, &Request{Prog: testProg, Vers: 1, Proc: procHeld, Args: Body{XDR: xdr.AppendUint32(nil, v)}})
	if err != nil {
		return err
	}
	d := xdr.NewDecoder(r.Results.XDR)
	if got := d.Uint32(); d.Err() != nil || got != v+1 {
		return fmt.Errorf("call %d answered %d (%v)", v, got, d.Err())
	}
	return nil
}

// startHeld starts k procHeld calls and returns their outcomes' channel.
func startHeld(ctx context.Context, c *Client, k int) chan error {
	errs := make(chan error, k)
	for i := range k {
		go func() { errs <- held(ctx, c, uint32(i)) }()
	}
	return errs
}

// TestReconnectResends cuts a connection with calls in flight: the Client
// dials another and sends the calls again there, with the same xids, and
// they complete.
func TestReconnectResends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newRedialNet(t)
		c := n.client(ReconnectConfig{})
		errs := startHeld(ctxTimeout(t, 10*time.Second), c, 3)
		first := n.takeXIDs(3)
		n.cut(0)
		n.waitConns(2)
		if again := n.takeXIDs(3); !slices.Equal(again, first) {
			t.Errorf("xids resent %x, want %x", again, first)
		}
		close(n.release)
		for range 3 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if err := held(ctxTimeout(t, 5*time.Second), c, 7); err != nil {
			t.Errorf("call on the new connection: %v", err)
		}
		st := c.Stats()
		if st.Reconnects != 1 || st.Retransmits != 3 || st.DialErrors != 0 {
			t.Errorf("stats %+v, want 1 reconnect and 3 retransmits", st)
		}
	})
}

// TestReconnectWaits checks that calls made while the Client has no
// connection wait for the next one, and that a waiting call's context
// still bounds it.
func TestReconnectWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newRedialNet(t)
		close(n.release)
		c := n.client(ReconnectConfig{})
		gate := make(chan struct{})
		n.mu.Lock()
		n.gate = gate
		n.mu.Unlock()
		n.cut(0)

		short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if err := held(short, c, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call bounded by its context while reconnecting: %v", err)
		}
		errs := startHeld(ctxTimeout(t, 5*time.Second), c, 2)
		select {
		case err := <-errs:
			t.Fatalf("call returned before a connection was made: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		close(gate)
		for range 2 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if st := c.Stats(); st.Reconnects != 1 || st.Retransmits != 0 || st.Abandoned != 1 {
			t.Errorf("stats %+v, want 1 reconnect, 0 retransmits, 1 abandoned", st)
		}
	})
}

// TestReconnectGivesUp makes every dial after the first fail: after
// Attempts of them, pending and later calls fail with a *ConnError that
// names the dial's error.
func TestReconnectGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newRedialNet(t)
		c := n.client(ReconnectConfig{Attempts: 3})
		errs := startHeld(ctxTimeout(t, 5*time.Second), c, 2)
		n.takeXIDs(2)
		refused := errors.New("connection refused (test)")
		n.mu.Lock()
		n.dialErr = refused
		n.mu.Unlock()
		n.cut(0)
		for range 2 {
			err := <-errs
			if _, ok := errors.AsType[*ConnError](err); !ok || !errors.Is(err, refused) || !errors.Is(err, net.ErrClosed) {
				t.Errorf("pending call after giving up: %v", err)
			}
		}
		if err := held(ctxTimeout(t, 5*time.Second), c, 1); !errors.Is(err, refused) {
			t.Errorf("later call: %v", err)
		}
		n.mu.Lock()
		dials := n.dials
		n.mu.Unlock()
		if st := c.Stats(); dials != 4 || st.DialErrors != 3 || st.Reconnects != 0 {
			t.Errorf("%d dials, stats %+v; want 4 dials and 3 errors", dials, st)
		}
	})
}

// TestReconnectFailPending checks FailPending: the calls in flight fail
// with the connection, and the Client carries on with a new one.
func TestReconnectFailPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newRedialNet(t)
		c := n.client(ReconnectConfig{FailPending: true})
		errs := startHeld(ctxTimeout(t, 5*time.Second), c, 2)
		n.takeXIDs(2)
		n.cut(0)
		for range 2 {
			if err := <-errs; !errors.Is(err, net.ErrClosed) {
				t.Errorf("call in flight on the lost connection: %v", err)
			}
		}
		close(n.release)
		if err := held(ctxTimeout(t, 5*time.Second), c, 3); err != nil {
			t.Errorf("call after the loss: %v", err)
		}
		if st := c.Stats(); st.Reconnects != 1 || st.Retransmits != 0 {
			t.Errorf("stats %+v, want 1 reconnect and no retransmits", st)
		}
	})
}

// TestReconnectCancel checks that a call abandoned after it was sent
// again is reported to the transport it was last sent on, not the lost one.
func TestReconnectCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newRedialNet(t)
		c := n.client(ReconnectConfig{})
		ctx, cancel := context.WithCancel(context.Background())
		errs := startHeld(ctx, c, 1)
		xid := n.takeXIDs(1)[0]
		n.cut(0)
		n.takeXIDs(1)
		cancel()
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("abandoned call: %v", err)
		}
		n.mu.Lock()
		old, cur := n.clients[0], n.clients[1]
		n.mu.Unlock()
		old.mu.Lock()
		oldCanceled := slices.Clone(old.canceled)
		old.mu.Unlock()
		cur.mu.Lock()
		curCanceled := slices.Clone(cur.canceled)
		cur.mu.Unlock()
		if len(oldCanceled) != 0 || !slices.Equal(curCanceled, []uint32{xid}) {
			t.Errorf("CancelCall on the lost transport %x, on the current one %x; want only %x on the current", oldCanceled, curCanceled, xid)
		}
		close(n.release)
	})
}

// TestReconnectClose closes the Client while it waits between dials and
// while a dial is in progress: Close returns at once, and the calls
// waiting fail with net.ErrClosed.
func TestReconnectClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		gate bool // the dial hangs, rather than failing
	}{{"backing-off", false}, {"dialing", true}} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			n := newRedialNet(t)
			c := n.client(ReconnectConfig{MinBackoff: time.Hour})
			errs := startHeld(context.Background(), c, 1)
			n.takeXIDs(1)
			n.mu.Lock()
			if tc.gate {
				n.gate = make(chan struct{})
			} else {
				n.dialErr = errors.New("refused")
			}
			n.mu.Unlock()
			n.cut(0)
			// Wait for the first redial to start.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				n.mu.Lock()
				dials := n.dials
				n.mu.Unlock()
				if dials == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no redial")
				}
			}
			start := time.Now()
			c.Close()
			if d := time.Since(start); d > time.Second {
				t.Errorf("Close took %v", d)
			}
			if err := <-errs; !errors.Is(err, net.ErrClosed) {
				t.Errorf("waiting call after Close: %v", err)
			}
			if err := held(context.Background(), c, 1); !errors.Is(err, net.ErrClosed) {
				t.Errorf("call after Close: %v", err)
			}
		})
	}
}

// TestReconnectReplyTimeout: a server that takes calls and never answers
// has its connection ended after ReplyTimeout, and the calls go again on
// the next connection.
func TestReconnectReplyTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newRedialNet(t)
		c := n.client(ReconnectConfig{ReplyTimeout: 40 * time.Millisecond})
		// Idle, with nothing waiting: the connection stays.
		time.Sleep(100 * time.Millisecond)
		if n.conns() != 1 {
			t.Fatalf("%d connections after an idle spell, want 1", n.conns())
		}
		errs := startHeld(ctxTimeout(t, 5*time.Second), c, 2)
		first := n.takeXIDs(2)
		if again := n.takeXIDs(2); !slices.Equal(again, first) {
			t.Errorf("xids resent %x, want %x", again, first)
		}
		close(n.release)
		for range 2 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if st := c.Stats(); st.Timeouts < 1 || st.Reconnects < 1 {
			t.Errorf("stats %+v, want a timeout and a reconnect", st)
		}
	})
}

// TestReconnectStream runs DialClient over TCP record marking: the server
// drops every connection it has accepted, and the calls in flight complete
// on the next.
func TestReconnectStream(t *testing.T) {
	leaktest.Check(t)
	srv, st := newTestServer(nil)
	c, tl := serveReconnecting(t, srv)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := c.Call(ctxTimeout(t, 10*time.Second), &Request{Prog: testProg, Vers: 1, Proc: procBlock})
			errs <- err
		}()
	}
	for range 4 {
		<-st.started
	}
	tl.dropAll()
	for range 4 {
		<-st.started // the same calls, on the new connection
	}
	close(st.release)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if st := c.Stats(); st.Reconnects != 1 || st.Retransmits != 4 {
		t.Errorf("stats %+v, want 1 reconnect and 4 retransmits", st)
	}
}

// serveReconnecting serves srv on a loopback TCP listener and returns a
// DialClient Client of it, and the listener, whose connections the test
// may drop. Cleanup closes the Client and the server, checking that
// ServeListener returns as it should.
func serveReconnecting(t *testing.T, srv *Server) (*Client, *trackingListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := &trackingListener{Listener: l}
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(tl) }()
	c, err := DialClient(ctxTimeout(t, 5*time.Second), ReconnectConfig{
		Dial: func(ctx context.Context) (Transport, error) {
			t, err := DialTCP(ctx, l.Addr().String(), nil)
			if err != nil {
				return nil, err // not a nil *StreamTransport in an interface
			}
			return t, nil
		},
		MinBackoff: time.Millisecond,
	})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.Close()
		if err := <-served; err != ErrServerClosed {
			t.Errorf("ServeListener = %v", err)
		}
	})
	return c, tl
}

// trackingListener remembers the connections it accepted.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// TestReconnectDialNil checks that a Dial returning neither a transport
// nor an error is a failed dial, not a crash.
func TestReconnectDialNil(t *testing.T) {
	_, err := DialClient(context.Background(), ReconnectConfig{Dial: func(context.Context) (Transport, error) { return nil, nil }})
	if err == nil {
		t.Fatal("DialClient succeeded with no transport")
	}
	if _, err := DialClient(context.Background(), ReconnectConfig{}); err == nil {
		t.Fatal("DialClient succeeded with no Dial")
	}
}

// TestReconnectNoReplyBacksOff: a server that accepts and drops every
// connection before answering anything is not redialed in a tight loop.
func TestReconnectNoReplyBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			dials []time.Time
		)
		dial := func(ctx context.Context) (Transport, error) {
			mu.Lock()
			dials = append(dials, time.Now())
			mu.Unlock()
			a, b := memPair()
			b.Close() // the server hangs up at once
			return a, nil
		}
		c, err := DialClient(context.Background(), ReconnectConfig{Dial: dial, MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		const want = 5
		for deadline := time.Now().Add(10 * time.Second); ; {
			mu.Lock()
			n := len(dials)
			mu.Unlock()
			if n >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d dials in 10 s, want %d", n, want)
			}
			time.Sleep(time.Millisecond)
		}
		// A redial may go at once, then waits 10-20, 20-40, 20-40 ms...: from
		// the third dial on, none follows the one before within 10 ms. (A
		// loaded machine only makes the gaps longer.)
		mu.Lock()
		defer mu.Unlock()
		for i := 3; i < want; i++ {
			if gap := dials[i].Sub(dials[i-1]); gap < 10*time.Millisecond {
				t.Errorf("dial %d came %v after the one before, want at least 10ms", i+1, gap)
			}
		}
	})
}

func TestBackoff(t *testing.T) {
	r := 0.0
	b := backoff{min: 10 * time.Millisecond, max: 70 * time.Millisecond, rand: func() float64 { return r }}
	var got []time.Duration
	for range 6 {
		got = append(got, b.wait())
	}
	want := []time.Duration{0, 5, 10, 20, 35, 35}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Errorf("waits with the least jitter %v, want %v", got, want)
	}
	r = 0.999999
	if w := b.wait(); w < 69*time.Millisecond || w > 70*time.Millisecond {
		t.Errorf("wait with the most jitter %v, want just under the 70ms ceiling", w)
	}
	b.reset()
	if w0, w1 := b.wait(), b.wait(); w0 != 0 || w1 < 9*time.Millisecond || w1 > 10*time.Millisecond {
		t.Errorf("after reset: %v then %v, want 0 then the minimum", w0, w1)
	}
}

func TestSilence(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var s silence
	for _, step := range []struct {
		ms       int
		received uint64
		waiting  bool
		want     time.Duration
	}{
		{0, 0, false, 0},                         // idle
		{100, 0, true, 0},                        // a call starts waiting
		{150, 0, true, 50 * time.Millisecond},    // nothing received
		{200, 1, true, 0},                        // a reply came: the silence starts again
		{260, 1, true, 60 * time.Millisecond},    //
		{300, 1, false, 0},                       // nothing waits
		{400, 1, true, 0},                        // waiting again, counted afresh
		{410, 1, true, 10 * time.Millisecond},    //
		{500, 1, true, 100 * time.Millisecond},   //
		{900, 1, true, 500 * time.Millisecond},   //
		{900, 9, false, 0},                       //
		{1e4, 9, true, 0},                        //
		{1e4 + 1, 9, true, 1 * time.Millisecond}, //
	} {
		if got := s.observe(at(step.ms), step.received, step.waiting); got != step.want {
			t.Errorf("at %d ms (received %d, waiting %v): silence %v, want %v", step.ms, step.received, step.waiting, got, step.want)
		}
	}
}

// sendBroken is a transport whose Sends fail as if its connection were
// gone, while its receiving side has not noticed.
type sendBroken struct{ *memTransport }

func (t sendBroken) Send(ctx context.Context, m *Msg) error {
	return &ConnError{Err: fmt.Errorf("write: %w", net.ErrClosed)}
}

// TestReconnectSendFails: a Send failing with the connection ends that
// connection, even if its receiving side has not heard, and the call
// goes on the next.
func TestReconnectSendFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newRedialNet(t)
		close(n.release)
		first := true
		c, err := DialClient(ctxTimeout(t, 5*time.Second), ReconnectConfig{
			Dial: func(ctx context.Context) (Transport, error) {
				tr, err := n.dial(ctx)
				if first {
					first = false
					return sendBroken{tr.(*memTransport)}, err
				}
				return tr, err
			},
			MinBackoff: time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := held(ctxTimeout(t, 5*time.Second), c, 1); err != nil {
			t.Error(err)
		}
		if st := c.Stats(); st.Reconnects != 1 || st.Retransmits != 1 {
			t.Errorf("stats %+v, want 1 reconnect and 1 retransmit", st)
		}
	})
}

// TestReconnectTinyReplyTimeout: a ReplyTimeout too small to divide into
// ticks still works, rather than panicking in time.NewTicker.
func TestReconnectTinyReplyTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newRedialNet(t)
		close(n.release)
		c := n.client(ReconnectConfig{ReplyTimeout: 3})
		if err := held(ctxTimeout(t, 5*time.Second), c, 1); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReconnectIdle: with IdleTimeout, a connection with no call for that
// long is closed and not redialed until a call needs one; a connection
// with a call waiting, or with calls coming, stays.
//
// It runs in a testing/synctest bubble, on the bubble's clock: the
// Client samples idleness on a ticker, and calls come every 10 ms against
// an IdleTimeout of 250 ms, so no stall of the machine can close the busy
// connection.
func TestReconnectIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 250 * time.Millisecond
		n := newRedialNet(t)
		c := n.client(ReconnectConfig{IdleTimeout: idle})
		ctx := ctxTimeout(t, 10*time.Second)

		// A call waiting longer than IdleTimeout keeps the connection.
		errs := startHeld(ctx, c, 1)
		n.takeXIDs(1)
		time.Sleep(2 * idle)
		close(n.release)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		// So do calls every 10 ms, for several IdleTimeouts.
		for end := time.Now().Add(3 * idle); time.Now().Before(end); {
			if err := held(ctx, c, 1); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if st := c.Stats(); st.IdleCloses != 0 || n.conns() != 1 {
			t.Fatalf("a busy connection was closed: stats %+v, %d connections", st, n.conns())
		}

		// A loss, with calls waiting for the next connection: their demand
		// for one must not outlive it.
		gate := make(chan struct{})
		n.mu.Lock()
		n.gate = gate
		n.mu.Unlock()
		n.cut(0)
		errs = startHeld(ctx, c, 2)
		time.Sleep(10 * time.Millisecond)
		close(gate)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}

		// Idle: closed, and not dialed again by itself.
		deadline := time.Now().Add(5 * time.Second)
		for c.Stats().IdleCloses == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		n.mu.Lock()
		second := n.servers[1]
		n.mu.Unlock()
		select {
		case <-second.done:
		case <-time.After(5 * time.Second):
			t.Fatal("the idle connection was not closed")
		}
		time.Sleep(idle / 2)
		if n.conns() != 2 {
			t.Fatalf("%d connections: the client dialed with no call to make", n.conns())
		}
		// A call dials again.
		if err := held(ctx, c, 3); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); n.conns() != 3 || st.IdleCloses != 1 || st.Reconnects != 2 {
			t.Errorf("after the idle close: %d connections, stats %+v", n.conns(), st)
		}
	})
}
