package rdmatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// listen starts a listener closed at the end of the test.
func listen(t *testing.T, cfg Config) rdma.Listener {
	t.Helper()
	ln, err := cfg.Provider.Listen(Context(t, cfg), cfg.ListenAddr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

type dialResult struct {
	c   rdma.Conn
	err error
}

// dialAsync dials in a goroutine; the result arrives on the channel.
func dialAsync(ctx context.Context, cfg Config, addr string, cc rdma.ConnConfig) <-chan dialResult {
	ch := make(chan dialResult, 1)
	go func() {
		c, err := cfg.Provider.Dial(ctx, addr, cc)
		ch <- dialResult{c, err}
	}()
	return ch
}

func accept(t *testing.T, ctx context.Context, ln rdma.Listener) rdma.ConnRequest {
	t.Helper()
	req, err := ln.Accept(ctx)
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	return req
}

func testConnectPrivateData(t *testing.T, cfg Config) {
	ctx := Context(t, cfg)
	ln := listen(t, cfg)
	if ln.Addr() == nil || ln.Addr().String() == "" {
		t.Fatalf("listener address %v", ln.Addr())
	}
	offer := pattern(cfg.privateData().Dial, 1) // the largest allowed
	answer := []byte("rpcrdma v1 inline 4096")
	dialed := dialAsync(ctx, cfg, ln.Addr().String(), rdma.ConnConfig{PrivateData: offer})
	req := accept(t, ctx, ln)
	wantPrivateData(t, cfg, "request private data", req.PrivateData(), offer)
	if req.RemoteAddr() == nil || req.LocalAddr() == nil {
		t.Fatalf("request addresses %v %v", req.RemoteAddr(), req.LocalAddr())
	}
	b, err := req.Accept(ctx, rdma.ConnConfig{PrivateData: answer})
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer b.Close()
	r := <-dialed
	if r.err != nil {
		t.Fatalf("dial: %v", r.err)
	}
	a := r.c
	defer a.Close()
	wantPrivateData(t, cfg, "initiator's peer private data", a.PeerPrivateData(), answer)
	wantPrivateData(t, cfg, "responder's peer private data", b.PeerPrivateData(), offer)
	if a.RemoteAddr() == nil || a.LocalAddr() == nil || b.RemoteAddr() == nil || b.LocalAddr() == nil {
		t.Fatalf("addresses %v %v %v %v", a.LocalAddr(), a.RemoteAddr(), b.LocalAddr(), b.RemoteAddr())
	}
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("fresh connection errors %v, %v", a.Err(), b.Err())
	}
	if err := req.Reject(nil); err == nil {
		t.Fatalf("Reject after Accept succeeded")
	}
	if _, err := req.Accept(ctx, rdma.ConnConfig{}); err == nil {
		t.Fatalf("second Accept succeeded")
	}
}

func testPrivateDataTooLong(t *testing.T, cfg Config) {
	ctx := Context(t, cfg)
	ln := listen(t, cfg)
	lim := cfg.privateData()
	long := make([]byte, lim.Dial+1)
	if _, err := cfg.Provider.Dial(ctx, ln.Addr().String(), rdma.ConnConfig{PrivateData: long}); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("dial with %d bytes of private data: %v, want ErrInvalid", len(long), err)
	}
	dialed := dialAsync(ctx, cfg, ln.Addr().String(), rdma.ConnConfig{})
	req := accept(t, ctx, ln)
	long = make([]byte, lim.Accept+1)
	if _, err := req.Accept(ctx, rdma.ConnConfig{PrivateData: long}); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("accept with %d bytes of private data: %v, want ErrInvalid", len(long), err)
	}
	long = make([]byte, lim.Reject+1)
	if err := req.Reject(long); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("reject with %d bytes of private data: %v, want ErrInvalid", len(long), err)
	}
	if err := req.Reject(nil); err != nil {
		t.Fatalf("reject: %v", err)
	}
	if r := <-dialed; !errors.Is(r.err, rdma.ErrRejected) {
		t.Fatalf("dial: %v, want ErrRejected", r.err)
	}
}

func testReject(t *testing.T, cfg Config) {
	ctx := Context(t, cfg)
	ln := listen(t, cfg)
	why := []byte("no thanks")
	dialed := dialAsync(ctx, cfg, ln.Addr().String(), rdma.ConnConfig{PrivateData: []byte("hello")})
	req := accept(t, ctx, ln)
	if err := req.Reject(why); err != nil {
		t.Fatalf("reject: %v", err)
	}
	r := <-dialed
	var re *rdma.RejectError
	if !errors.Is(r.err, rdma.ErrRejected) || !errors.As(r.err, &re) {
		t.Fatalf("dial: %v, want a RejectError", r.err)
	}
	wantPrivateData(t, cfg, "reject private data", re.PrivateData, why)
	if err := req.Reject(nil); err == nil {
		t.Fatalf("second Reject succeeded")
	}
	if _, err := req.Accept(ctx, rdma.ConnConfig{}); err == nil {
		t.Fatalf("Accept after Reject succeeded")
	}
}

func testDialTimeout(t *testing.T, cfg Config) {
	ctx := Context(t, cfg)
	ln := listen(t, cfg)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := cfg.Provider.Dial(short, ln.Addr().String(), rdma.ConnConfig{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial with nobody accepting: %v, want DeadlineExceeded", err)
	}
	// The request may or may not have reached the listener; if it did,
	// accepting it must fail.
	quick, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if req, err := ln.Accept(quick); err == nil {
		if c, err := req.Accept(ctx, rdma.ConnConfig{}); err == nil {
			// A provider may learn of the initiator's departure only
			// afterwards; the connection must then end.
			defer c.Close()
			if _, err := Drain(t, cfg, c); err == nil {
				t.Fatalf("connection to a departed initiator did not end")
			}
		}
	}
}

func testListenerClose(t *testing.T, cfg Config) {
	ctx := Context(t, cfg)
	ln, err := cfg.Provider.Listen(ctx, cfg.ListenAddr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	accepted := make(chan error, 1)
	go func() {
		_, err := ln.Accept(ctx)
		accepted <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := ln.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-accepted; err == nil || ctx.Err() != nil {
		t.Fatalf("Accept after Close: %v", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := cfg.Provider.Dial(ctx, addr, rdma.ConnConfig{}); err == nil {
		t.Fatalf("dial to a closed listener succeeded")
	}
}

// testPrepare checks that receives posted by Prepare are in place before
// the peer can send: each side sends at once after Dial or Accept.
func testPrepare(t *testing.T, cfg Config) {
	prep := func(c rdma.Conn) error {
		m, err := c.Alloc(64, rdma.AccessLocalWrite)
		if err != nil {
			return err
		}
		t.Cleanup(func() { m.Release() })
		return c.PostRecv(1, []rdma.SGE{Whole(m)})
	}
	a, b := Pair(t, cfg, rdma.ConnConfig{Prepare: prep}, rdma.ConnConfig{Prepare: prep})
	for _, c := range []rdma.Conn{a, b} {
		m := Alloc(t, c, 8, 0)
		Post(t, c, rdma.WorkRequest{ID: 2, Op: rdma.OpSend, Local: []rdma.SGE{Whole(m)}})
	}
	for _, c := range []rdma.Conn{a, b} {
		cs := WaitN(t, cfg, c, 2)
		for _, comp := range cs {
			if comp.Status != rdma.StatusSuccess {
				t.Fatalf("completion %+v", comp)
			}
		}
	}
}

func testPrepareFails(t *testing.T, cfg Config) {
	ctx := Context(t, cfg)
	errPrep := errors.New("prepare failed on purpose")
	fail := func(rdma.Conn) error { return errPrep }

	// Responder: the initiator is rejected.
	ln := listen(t, cfg)
	dialed := dialAsync(ctx, cfg, ln.Addr().String(), rdma.ConnConfig{})
	req := accept(t, ctx, ln)
	if _, err := req.Accept(ctx, rdma.ConnConfig{Prepare: fail}); !errors.Is(err, errPrep) {
		t.Fatalf("accept with failing Prepare: %v", err)
	}
	if r := <-dialed; !errors.Is(r.err, rdma.ErrRejected) {
		t.Fatalf("dial to a responder whose Prepare failed: %v, want ErrRejected", r.err)
	}

	// Initiator: Dial fails and the responder's connection ends.
	dialed = dialAsync(ctx, cfg, ln.Addr().String(), rdma.ConnConfig{Prepare: fail})
	req = accept(t, ctx, ln)
	b, err := req.Accept(ctx, rdma.ConnConfig{})
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer b.Close()
	if r := <-dialed; !errors.Is(r.err, errPrep) {
		t.Fatalf("dial with failing Prepare: %v", r.err)
	}
	if _, err := Drain(t, cfg, b); err == nil {
		t.Fatalf("responder's connection did not end")
	}
}

func testLimits(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	for _, c := range []rdma.Conn{a, b} {
		l := c.Limits()
		if l.SendQueueDepth < 1 || l.RecvQueueDepth < 1 || l.IRD < 1 || l.ORD < 1 || l.MaxSGE < 2 ||
			l.MaxReadSGE < 1 || l.MaxReadSGE > l.MaxSGE || l.MaxMessageSize < 1<<20 {
			t.Fatalf("default limits %+v", l)
		}
	}
	// RFC 6581 section 9.1.
	a, b = Pair(t, cfg,
		rdma.ConnConfig{SendQueueDepth: 7, RecvQueueDepth: 9, IRD: 4, ORD: 8},
		rdma.ConnConfig{SendQueueDepth: 5, RecvQueueDepth: 3, IRD: 2, ORD: 16})
	la, lb := a.Limits(), b.Limits()
	if la.SendQueueDepth != 7 || la.RecvQueueDepth != 9 || lb.SendQueueDepth != 5 || lb.RecvQueueDepth != 3 {
		t.Fatalf("queue depths %+v %+v, want 7/9 and 5/3", la, lb)
	}
	if lb.IRD != 8 || lb.ORD != 4 || la.ORD != 8 || la.IRD != 4 {
		t.Fatalf("negotiated initiator IRD/ORD %d/%d responder %d/%d, want 4/8 and 8/4", la.IRD, la.ORD, lb.IRD, lb.ORD)
	}
}

// testClose: the closing side and the peer both flush everything, their
// waiters return, and later posts fail.
func testClose(t *testing.T, cfg Config) { closeCase(t, cfg, false) }

// testPeerClose is testClose with the responder closing.
func testPeerClose(t *testing.T, cfg Config) { closeCase(t, cfg, true) }

func closeCase(t *testing.T, cfg Config, responderCloses bool) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	closer, peer := a, b
	if responderCloses {
		closer, peer = b, a
	}
	for _, c := range []rdma.Conn{a, b} {
		m := Alloc(t, c, 64, rdma.AccessLocalWrite)
		for id := uint64(1); id <= 3; id++ {
			PostRecv(t, c, id, rdma.SGE{MR: m, Offset: int(id) * 8, Length: 8})
		}
	}
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout())
		defer cancel()
		var cs [8]rdma.Completion
		_, err := peer.Wait(ctx, cs[:]) // returns with flushed receives
		waited <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := closer.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("peer's Wait during Close: %v", err)
	}
	cc, cerr := Drain(t, cfg, closer)
	pc, perr := Drain(t, cfg, peer)
	if !errors.Is(cerr, rdma.ErrClosed) {
		t.Fatalf("closing side's error %v, want ErrClosed", cerr)
	}
	if !errors.Is(perr, rdma.ErrDisconnected) {
		t.Fatalf("peer's error %v, want ErrDisconnected", perr)
	}
	if len(cc) != 3 {
		t.Fatalf("closing side's completions %+v, want 3 flushed receives", cc)
	}
	for i, c := range cc {
		Want(t, c, uint64(i+1), rdma.OpRecv, rdma.StatusFlushed, 0)
	}
	for _, c := range pc {
		if c.Status != rdma.StatusFlushed {
			t.Fatalf("peer completion %+v, want flushed", c)
		}
	}
	for _, c := range []rdma.Conn{a, b} {
		if err := c.PostRecv(9, nil); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("PostRecv after the end: %v", err)
		}
		if err := c.PostSend(&rdma.WorkRequest{ID: 9, Op: rdma.OpSend}); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("PostSend after the end: %v", err)
		}
	}
	if _, err := closer.Alloc(8, 0); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
	if _, err := closer.Register(make([]byte, 8), 0); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Register after Close: %v", err)
	}
}

func testCloseIdempotent(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	for i := 0; i < 3; i++ {
		if err := a.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	select {
	case <-a.Done():
	default:
		t.Fatalf("Done not closed after Close")
	}
	if !errors.Is(a.Err(), rdma.ErrClosed) {
		t.Fatalf("Err after Close: %v", a.Err())
	}
	if _, err := Drain(t, cfg, b); !errors.Is(err, rdma.ErrDisconnected) {
		t.Fatalf("peer: %v", err)
	}
	if err := b.Close(); err != nil || !errors.Is(b.Err(), rdma.ErrDisconnected) {
		t.Fatalf("peer close: %v, Err %v", err, b.Err())
	}
}

func testWaitContext(t *testing.T, cfg Config) {
	a, _ := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var cs [1]rdma.Completion
	if n, err := a.Wait(ctx, cs[:]); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with nothing outstanding: %d, %v", n, err)
	}
	if n := a.Poll(cs[:]); n != 0 {
		t.Fatalf("Poll: %d", n)
	}
	if a.Err() != nil {
		t.Fatalf("connection ended: %v", a.Err())
	}
	wantPrivateData(t, cfg, "peer private data", a.PeerPrivateData(), nil)
}

// testWaitConcurrent: several Waits in progress at once on one
// connection, each for one completion, all return, one per message that
// arrives while they wait, and together they see every receive once; and
// a Wait that gives up first (its context ends) leaves none of the others
// stranded. A provider may let one Wait sleep for the others, as the verbs
// provider does on its completion channel: this is what catches one that
// leaves the others asleep once that one has gone.
func testWaitConcurrent(t *testing.T, cfg Config) {
	const waiters = 4
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{RecvQueueDepth: waiters})
	dst := Alloc(t, b, waiters*16, rdma.AccessLocalWrite)
	src := Alloc(t, a, 16, 0)
	for i := range waiters {
		PostRecv(t, b, uint64(i), rdma.SGE{MR: dst, Offset: i * 16, Length: 16})
	}
	// The first Wait, alone, gives up after a moment.
	quitter := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var cs [1]rdma.Completion
		_, err := b.Wait(ctx, cs[:])
		quitter <- err
	}()
	time.Sleep(10 * time.Millisecond) // let it block first
	got := make(chan rdma.Completion, waiters)
	errs := make(chan error, waiters)
	ctx := Context(t, cfg)
	for range waiters {
		go func() {
			var cs [1]rdma.Completion
			n, err := b.Wait(ctx, cs[:])
			if err != nil || n != 1 {
				errs <- fmt.Errorf("wait: %d completions, %v", n, err)
				return
			}
			got <- cs[0]
		}()
	}
	if err := <-quitter; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the Wait that gives up: %v", err)
	}
	for i := range waiters {
		Post(t, a, rdma.WorkRequest{ID: uint64(i), Op: rdma.OpSend, Local: []rdma.SGE{Whole(src)}})
		time.Sleep(time.Millisecond) // one at a time, so that waiters take turns
	}
	seen := map[uint64]bool{}
	for range waiters {
		select {
		case c := <-got:
			if c.Op != rdma.OpRecv || c.Status != rdma.StatusSuccess || seen[c.ID] {
				t.Fatalf("completion %+v (seen before: %v)", c, seen[c.ID])
			}
			seen[c.ID] = true
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatalf("%d of %d Waits still waiting with every message delivered", waiters-len(seen), waiters)
		}
	}
	WaitN(t, cfg, a, waiters)
}

// testWaitEnd: with nothing posted, every Wait in progress without a
// deadline returns once the connection ends, whether the peer or this side
// ends it, with the connection's error.
func testWaitEnd(t *testing.T, cfg Config) {
	for _, local := range []bool{false, true} {
		a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
		const waiters = 3
		errs := make(chan error, waiters)
		for range waiters {
			go func() {
				var cs [1]rdma.Completion
				n, err := a.Wait(context.Background(), cs[:])
				if n != 0 {
					err = fmt.Errorf("%d completions with nothing posted", n)
				}
				errs <- err
			}()
		}
		time.Sleep(10 * time.Millisecond) // let them block
		ender, want := b, rdma.ErrDisconnected
		if local {
			ender, want = a, rdma.ErrClosed
		}
		if err := ender.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		timeout := time.After(cfg.timeout())
		for i := range waiters {
			select {
			case err := <-errs:
				if !errors.Is(err, want) {
					t.Fatalf("local close %v: waiter %d returned %v, want %v", local, i, err, want)
				}
			case <-timeout:
				t.Fatalf("local close %v: %d of %d waiters still in Wait after the end", local, waiters-i, waiters)
			}
		}
		a.Close()
	}
}

// testAllocAfterClose: memory from Alloc stays safe to touch after Release
// and after Close (rdma.Conn.Alloc), so a goroutine that fills a buffer
// while another ends the connection does not fault. A provider that frees
// the memory (unmaps it, say) fails here with a fault, not an error.
func testAllocAfterClose(t *testing.T, cfg Config) {
	a, _ := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	var mrs []rdma.MR
	for _, n := range []int{0, 1, 4096, 1 << 16} {
		mrs = append(mrs, Alloc(t, a, n, rdma.AccessLocalWrite|rdma.AccessRemoteWrite))
	}
	if err := mrs[2].Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	fill(mrs[2].Bytes(), 1)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, m := range mrs {
		b := m.Bytes()
		fill(b, byte(i))
		wantBytes(t, "memory written after Close", b, pattern(len(b), byte(i)))
		if m.Valid() {
			t.Errorf("region %d still valid after Close", i)
		}
	}
}
