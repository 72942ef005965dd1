package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The test program.
const (
	testProg = 0x20000099

	procEcho      = 1  // opaque<> -> the same opaque, both DDP-eligible
	procDelay     = 2  // ms, v -> v, after sleeping ms
	procBlock     = 3  // void -> void, once released or cancelled
	procIncr      = 4  // uint32 -> uint32+1
	procFail      = 5  // SYSTEM_ERR by error
	procPanic     = 6  // SYSTEM_ERR by panic
	procUID       = 7  // AUTH_SYS required -> uid
	procGarbage   = 8  // ErrGarbageArgs returned
	procAcceptErr = 9  // *AcceptError PROG_MISMATCH 5..6 returned
	procBadResult = 10 // invalid result Body -> SYSTEM_ERR
	procArgsItems = 11 // -> number of held-apart argument items
)

// testState lets tests hold and count running handlers.
type testState struct {
	release    chan struct{} // closed to release procBlock handlers
	started    chan struct{} // one token per procBlock handler started
	running    atomic.Int32
	maxRunning atomic.Int32
}

func newTestServer(o *ServerOptions) (*Server, *testState) {
	st := &testState{release: make(chan struct{}), started: make(chan struct{}, 1000)}
	s := NewServer(o)
	s.Handle(testProg, 1, procEcho, func(ctx context.Context, c *Call) (Body, error) {
		d := c.Decoder()
		p := d.DDPOpaque(1 << 20)
		if err := d.Done(); err != nil {
			return Body{}, err
		}
		var res Body
		res.AppendDDPOpaque(p)
		return res, nil
	})
	s.Handle(testProg, 1, procDelay, func(ctx context.Context, c *Call) (Body, error) {
		d := c.Decoder()
		ms, v := d.Uint32(), d.Uint32()
		if err := d.Done(); err != nil {
			return Body{}, err
		}
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return Body{}, ctx.Err()
		}
		return Body{XDR: xdr.AppendUint32(nil, v)}, nil
	})
	s.Handle(testProg, 1, procBlock, func(ctx context.Context, c *Call) (Body, error) {
		n := st.running.Add(1)
		defer st.running.Add(-1)
		for {
			m := st.maxRunning.Load()
			if n <= m || st.maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		st.started <- struct{}{}
		select {
		case <-st.release:
			return Body{}, nil
		case <-ctx.Done():
			return Body{}, ctx.Err()
		}
	})
	s.Handle(testProg, 1, procIncr, func(ctx context.Context, c *Call) (Body, error) {
		d := c.Decoder()
		v := d.Uint32()
		return Body{XDR: xdr.AppendUint32(nil, v+1)}, d.Done()
	})
	s.Handle(testProg, 1, procFail, func(ctx context.Context, c *Call) (Body, error) {
		return Body{}, errors.New("disk on fire")
	})
	s.Handle(testProg, 1, procPanic, func(ctx context.Context, c *Call) (Body, error) {
		panic("handler bug")
	})
	s.Handle(testProg, 1, procUID, RequireAuthSys(func(ctx context.Context, c *Call) (Body, error) {
		return Body{XDR: xdr.AppendUint32(nil, c.AuthSys.UID)}, nil
	}))
	s.Handle(testProg, 1, procGarbage, func(ctx context.Context, c *Call) (Body, error) {
		return Body{}, ErrGarbageArgs
	})
	s.Handle(testProg, 1, procAcceptErr, func(ctx context.Context, c *Call) (Body, error) {
		return Body{}, &AcceptError{Stat: ProgMismatch, Low: 5, High: 6}
	})
	s.Handle(testProg, 1, procBadResult, func(ctx context.Context, c *Call) (Body, error) {
		return Body{Items: []DDPItem{{Offset: 2}}}, nil
	})
	s.Handle(testProg, 1, procArgsItems, func(ctx context.Context, c *Call) (Body, error) {
		d := c.Decoder()
		for d.Len() > 0 && d.Err() == nil {
			d.DDPOpaque(1 << 20)
		}
		return Body{XDR: xdr.AppendUint32(nil, uint32(len(c.Args.Items)))}, d.Done()
	})
	s.Handle(testProg, 2, procEcho, func(ctx context.Context, c *Call) (Body, error) {
		return Body{XDR: c.Args.XDR}, nil
	})
	return s, st
}

// harness is a Client connected to a test Server.
type harness struct {
	srv *Server
	st  *testState
	cli *Client
}

// newPipeHarness serves one net.Pipe connection. Cleanup closes the client
// and shuts the server down, checking that Serve returns.
func newPipeHarness(t *testing.T, o *ServerOptions, so *StreamOptions) *harness {
	c1, c2 := net.Pipe()
	return newHarness(t, o, NewStreamTransport(c1, so), NewStreamTransport(c2, so))
}

func newHarness(t *testing.T, o *ServerOptions, ct, st Transport) *harness {
	srv, state := newTestServer(o)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(st) }()
	h := &harness{srv: srv, st: state, cli: NewClient(ct)}
	t.Cleanup(func() {
		h.cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve = %v", err)
		}
	})
	return h
}

// newTCPHarness serves a loopback TCP listener.
func newTCPHarness(t *testing.T, o *ServerOptions) *harness {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, state := newTestServer(o)
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(l) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr, err := DialTCP(ctx, l.Addr().String(), o.streamOpts())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{srv: srv, st: state, cli: NewClient(tr)}
	t.Cleanup(func() {
		h.cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != ErrServerClosed {
			t.Errorf("ServeListener = %v", err)
		}
	})
	return h
}

func (o *ServerOptions) streamOpts() *StreamOptions {
	if o == nil {
		return nil
	}
	return o.Stream
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) call(ctx context.Context, proc uint32, args Body) (Reply, error) {
	return h.cli.Call(ctx, &Request{Prog: testProg, Vers: 1, Proc: proc, Args: args})
}

func (h *harness) echo(t *testing.T, p []byte, ddp bool) {
	t.Helper()
	var args Body
	if ddp {
		args.AppendDDPOpaque(p)
	} else {
		args.XDR = xdr.AppendOpaque(nil, p)
	}
	rep, err := h.call(ctxTimeout(t, 10*time.Second), procEcho, args)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, len(p))
	d := NewBodyDecoder(rep.Results)
	n := d.DDPOpaqueInto(dst)
	if err := d.Done(); err != nil || !bytes.Equal(dst[:n], p) {
		t.Fatalf("echo of %d bytes: %d bytes back, %v", len(p), n, err)
	}
}

func TestClientServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		mk   func(t *testing.T) *harness
	}{
		{"pipe", func(t *testing.T) *harness { return newPipeHarness(t, nil, nil) }},
		{"pipe-fragments", func(t *testing.T) *harness { return newPipeHarness(t, nil, &StreamOptions{MaxFragment: 1000}) }},
		{"tcp", func(t *testing.T) *harness { return newTCPHarness(t, nil) }},
		{"tcp-fragments", func(t *testing.T) *harness {
			return newTCPHarness(t, &ServerOptions{Stream: &StreamOptions{MaxFragment: 1000}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			h := tc.mk(t)
			ctx := ctxTimeout(t, 10*time.Second)
			if err := h.cli.Null(ctx, testProg, 1); err != nil {
				t.Fatal(err)
			}
			if err := h.cli.Null(ctx, testProg, 2); err != nil {
				t.Fatal(err)
			}
			h.echo(t, []byte("hello"), false)
			h.echo(t, []byte("hello"), true)
			h.echo(t, nil, true)
			h.echo(t, bytes.Repeat([]byte("abc"), 100000), true)

			cred, err := authSysParms.Cred()
			if err != nil {
				t.Fatal(err)
			}
			rep, err := h.cli.Call(ctx, &Request{Prog: testProg, Vers: 1, Proc: procUID, Cred: cred})
			if err != nil {
				t.Fatal(err)
			}
			d := NewBodyDecoder(rep.Results)
			if uid := d.Uint32(); uid != 1000 || d.Done() != nil || rep.Verf.Flavor != AuthNone {
				t.Errorf("uid = %d, verf %v, %v", uid, rep.Verf, d.Err())
			}
		})
	}
}

// TestConcurrentOutOfOrder has many calls in flight at once, answered in
// the reverse order of sending.
func TestConcurrentOutOfOrder(t *testing.T) {
	leaktest.Check(t)
	h := newPipeHarness(t, nil, nil)
	ctx := ctxTimeout(t, 20*time.Second)
	const n = 100
	var mu sync.Mutex
	var order []uint32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			args := Body{XDR: xdr.AppendUint32(xdr.AppendUint32(nil, uint32(2*(n-i))), uint32(i))}
			rep, err := h.call(ctx, procDelay, args)
			if err != nil {
				t.Error(err)
				return
			}
			d := NewBodyDecoder(rep.Results)
			v := d.Uint32()
			if d.Done() != nil || v != uint32(i) {
				t.Errorf("call %d got %d (%v)", i, v, d.Err())
			}
			mu.Lock()
			order = append(order, v)
			mu.Unlock()
		})
		time.Sleep(time.Millisecond / 4)
	}
	wg.Wait()
	inOrder := true
	for i := 1; i < len(order); i++ {
		inOrder = inOrder && order[i] > order[i-1]
	}
	if inOrder {
		t.Error("replies arrived in call order; want them out of order")
	}
	s := h.cli.Stats()
	s.ShortPath = 0 // the first caller, on its own, may receive for all
	if s != (ClientStats{}) {
		t.Errorf("client stats %+v", s)
	}
}

// TestStatusAnswers checks that each status the server answers reaches the
// client as the right typed error.
func TestStatusAnswers(t *testing.T) {
	leaktest.Check(t)
	h := newPipeHarness(t, nil, nil)
	ctx := ctxTimeout(t, 10*time.Second)
	badSys := OpaqueAuth{Flavor: AuthSys, Body: []byte{0, 0, 0, 1}}
	tests := []struct {
		name string
		req  Request
		want error
		msg  string
	}{
		{"prog-unavail", Request{Prog: 7, Vers: 1}, &AcceptError{Stat: ProgUnavail}, "PROG_UNAVAIL"},
		{"prog-mismatch", Request{Prog: testProg, Vers: 9, Proc: 1}, &AcceptError{Stat: ProgMismatch}, ": program 0x20000099 version 9 is not offered; the server has versions 1 to 2 (PROG_MISMATCH)"},
		{"proc-unavail", Request{Prog: testProg, Vers: 2, Proc: 3}, &AcceptError{Stat: ProcUnavail}, "PROC_UNAVAIL"},
		{"garbage-args-auto", Request{Prog: testProg, Vers: 1, Proc: procIncr}, ErrGarbageArgs, "GARBAGE_ARGS"},
		{"garbage-args-trailing", Request{Prog: testProg, Vers: 1, Proc: procIncr, Args: Body{XDR: make([]byte, 8)}}, &AcceptError{Stat: GarbageArgs}, "GARBAGE_ARGS"},
		{"garbage-args-returned", Request{Prog: testProg, Vers: 1, Proc: procGarbage}, ErrGarbageArgs, "GARBAGE_ARGS"},
		{"system-err", Request{Prog: testProg, Vers: 1, Proc: procFail}, &AcceptError{Stat: SystemErr}, "SYSTEM_ERR"},
		{"system-err-panic", Request{Prog: testProg, Vers: 1, Proc: procPanic}, &AcceptError{Stat: SystemErr}, "SYSTEM_ERR"},
		{"system-err-bad-result", Request{Prog: testProg, Vers: 1, Proc: procBadResult}, &AcceptError{Stat: SystemErr}, "SYSTEM_ERR"},
		{"accept-error-returned", Request{Prog: testProg, Vers: 1, Proc: procAcceptErr}, &AcceptError{Stat: ProgMismatch}, "the server has versions 5 to 6 (PROG_MISMATCH)"},
		{"auth-tooweak", Request{Prog: testProg, Vers: 1, Proc: procUID}, AuthTooWeak, "AUTH_ERROR AUTH_TOOWEAK"},
		{"auth-badcred", Request{Prog: testProg, Vers: 1, Proc: procUID, Cred: badSys}, AuthBadCred, "AUTH_ERROR AUTH_BADCRED"},
		{"auth-rejectedcred", Request{Prog: testProg, Vers: 1, Cred: OpaqueAuth{Flavor: AuthDH}}, &RejectError{Stat: AuthError, AuthStat: AuthRejectedCred}, "AUTH_REJECTEDCRED"},
		{"auth-badverf", Request{Prog: testProg, Vers: 1, Verf: OpaqueAuth{Flavor: AuthShort}}, AuthBadVerf, "AUTH_BADVERF"},
	}
	for _, tt := range tests {
		_, err := h.cli.Call(ctx, &tt.req)
		if !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), "rpc: call 0x") || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
		if errors.Is(err, net.ErrClosed) {
			t.Errorf("%s: a per-call error matches net.ErrClosed", tt.name)
		}
	}
	// The connection survived them all.
	h.echo(t, []byte("still here"), true)
	s := h.srv.Stats()
	s.Inline = 0 // the answers without a handler ran inline
	want := ServerStats{Calls: 9, ProgUnavail: 1, ProgMismatch: 2, ProcUnavail: 1, GarbageArgs: 3,
		SystemErr: 3, Panics: 1, AuthError: 4}
	if s != want {
		t.Errorf("server stats\n%+v, want\n%+v", s, want)
	}
}

// rawHarness is a test server reached through a bare StreamTransport, to
// send what a Client would not.
func rawHarness(t *testing.T) (*StreamTransport, *Server) {
	c1, c2 := net.Pipe()
	srv, _ := newTestServer(nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(NewStreamTransport(c2, nil)) }()
	raw := NewStreamTransport(c1, nil)
	t.Cleanup(func() {
		raw.Close()
		if err := <-served; !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve = %v", err)
		}
	})
	return raw, srv
}

func TestRawAnswers(t *testing.T) {
	leaktest.Check(t)
	raw, srv := rawHarness(t)
	ctx := ctxTimeout(t, 10*time.Second)
	exchange := func(send string, wantReply string) {
		t.Helper()
		if err := raw.Send(ctx, &Msg{Body: Body{XDR: unhex(t, send)}}); err != nil {
			t.Fatal(err)
		}
		m, err := raw.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if want := unhex(t, wantReply); !bytes.Equal(m.XDR, want) {
			t.Errorf("sent %s\ngot  %x\nwant %x", send, m.XDR, want)
		}
	}
	// rpcvers 3: RPC_MISMATCH 2..2, even though nothing follows rpcvers.
	exchange("00000011 00000000 00000003", "00000011 00000001 00000001 00000000 00000002 00000002")
	// Messages that are not calls, and fragments of calls, are dropped:
	// the next answer is to the NULL call after them.
	for _, junk := range []string{"", "000000", "00000012 00000001 00000000", "00000013 00000002", "00000014 00000000 00000002 00000001"} {
		if err := raw.Send(ctx, &Msg{Body: Body{XDR: unhex(t, junk)}}); err != nil {
			t.Fatal(err)
		}
	}
	const null = "00000015 00000000 00000002 20000099 00000001 00000000"
	exchange(null+" 00000000 00000000 00000000 00000000", "00000015 00000001 00000000 00000000 00000000 00000000")
	// A credential or verifier that cannot be decoded.
	exchange(null+" 00000001 00000008 00000000", "00000015 00000001 00000001 00000001 00000001")
	exchange(null+" 00000000 00000000 00000000 00000190", "00000015 00000001 00000001 00000001 00000003")
	// Drops happen in their own goroutines, maybe after later answers.
	for deadline := time.Now().Add(5 * time.Second); srv.Stats().Dropped != 5 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if s := srv.Stats(); s.Dropped != 5 || s.RPCMismatch != 1 || s.AuthError != 2 || s.Calls != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestClientDrops feeds a Client replies it cannot use.
func TestClientDrops(t *testing.T) {
	leaktest.Check(t)
	c1, c2 := net.Pipe()
	cli := NewClient(NewStreamTransport(c1, nil))
	peer := NewStreamTransport(c2, nil)
	defer peer.Close()
	defer cli.Close()
	ctx := ctxTimeout(t, 10*time.Second)

	type result struct {
		rep Reply
		err error
	}
	call := func() (uint32, chan result) {
		done := make(chan result, 1)
		go func() {
			rep, err := cli.Call(ctx, &Request{Prog: 1, Vers: 1})
			done <- result{rep, err}
		}()
		m, err := peer.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var h CallHeader
		d := xdr.NewDecoder(m.XDR)
		if err := h.Decode(&d); err != nil || d.Done() != nil {
			t.Fatalf("call: %v", err)
		}
		return h.XID, done
	}
	send := func(b []byte) {
		if err := peer.Send(ctx, &Msg{Body: Body{XDR: b}}); err != nil {
			t.Fatal(err)
		}
	}
	xid, done := call()
	send(xdr.AppendUint32(nil, 1))                                             // too short
	send(append(xdr.AppendUint32(nil, xid), 0, 0, 0, 0))                       // a CALL
	send((&ReplyHeader{XID: xid + 1, Stat: MsgAccepted}).Append(nil))          // unknown xid
	send(append(xdr.AppendUint32(nil, xid), unhex(t, "00000001 00000007")...)) // bad reply_stat
	r := <-done
	if be, ok := errors.AsType[*BadReplyError](r.err); !ok || !errors.Is(r.err, ErrDiscriminant) || be.Call.XID != xid ||
		!strings.Contains(r.err.Error(), "malformed reply") {
		t.Errorf("malformed reply: %v", r.err)
	}
	// A well-formed reply with results.
	xid, done = call()
	send(append((&ReplyHeader{XID: xid, Stat: MsgAccepted, Verf: OpaqueAuth{Flavor: AuthShort, Body: []byte{9, 9, 9, 9}}}).Append(nil), 1, 2, 3, 4))
	r = <-done
	if r.err != nil || r.rep.XID != xid || !bytes.Equal(r.rep.Results.XDR, []byte{1, 2, 3, 4}) || r.rep.Verf.Flavor != AuthShort {
		t.Errorf("reply %+v, %v", r.rep, r.err)
	}
	// RPC_MISMATCH reaches the caller as a *RejectError.
	xid, done = call()
	send((&ReplyHeader{XID: xid, Stat: MsgDenied, RejectStat: RPCMismatch, Low: 2, High: 2}).Append(nil))
	r = <-done
	if !errors.Is(r.err, &RejectError{Stat: RPCMismatch}) || !strings.HasSuffix(r.err.Error(), "RPC_MISMATCH (versions 2 to 2)") {
		t.Errorf("RPC_MISMATCH: %v", r.err)
	}
	want := ClientStats{UnknownXID: 1, NotReply: 1, Short: 1, BadReply: 1}
	s := cli.Stats()
	s.ShortPath = 0 // callers receive replies on their own goroutine
	if s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
}

// cancelRecorder wraps a Transport and records CancelCall.
type cancelRecorder struct {
	Transport
	mu       sync.Mutex
	canceled []uint32
}

func (c *cancelRecorder) CancelCall(xid uint32) {
	c.mu.Lock()
	c.canceled = append(c.canceled, xid)
	c.mu.Unlock()
}

func TestCancelAndDeadline(t *testing.T) {
	leaktest.Check(t)
	c1, c2 := net.Pipe()
	rec := &cancelRecorder{Transport: NewStreamTransport(c1, nil)}
	h := newHarness(t, nil, rec, NewStreamTransport(c2, nil))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := h.call(ctx, procBlock, Body{}); done <- err }()
	<-h.st.started
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("cancelled call: %v", err)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer dcancel()
	if _, err := h.call(dctx, procBlock, Body{}); err != context.DeadlineExceeded {
		t.Errorf("call past its deadline: %v", err)
	}
	<-h.st.started

	// An already-cancelled context does not send.
	if _, err := h.call(ctx, procEcho, Body{}); err != context.Canceled {
		t.Errorf("call with a done context: %v", err)
	}

	rec.mu.Lock()
	if len(rec.canceled) != 2 {
		t.Errorf("CancelCall got %v, want two xids", rec.canceled)
	}
	rec.mu.Unlock()

	// The late replies are dropped and counted.
	close(h.st.release)
	deadline := time.Now().Add(5 * time.Second)
	for h.cli.Stats().UnknownXID != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := h.cli.Stats(); s.UnknownXID != 2 || s.Abandoned != 2 {
		t.Errorf("stats %+v", s)
	}
	h.echo(t, []byte("after"), false)
}

func TestClientClose(t *testing.T) {
	leaktest.Check(t)
	h := newPipeHarness(t, nil, nil)
	done := make(chan error)
	go func() { _, err := h.call(context.Background(), procBlock, Body{}); done <- err }()
	<-h.st.started
	h.cli.Close()
	err := <-done
	if ce, ok := errors.AsType[*ConnError](err); !ok || !errors.Is(err, net.ErrClosed) || ce.Error() != "rpc: connection closed" {
		t.Errorf("pending call after Close: %v", err)
	}
	if _, err := h.call(context.Background(), procEcho, Body{}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("call after Close: %v", err)
	}
	if err := h.cli.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	close(h.st.release)
}

func TestTransportFailure(t *testing.T) {
	leaktest.Check(t)
	h := newPipeHarness(t, nil, nil)
	done := make(chan error)
	go func() { _, err := h.call(context.Background(), procBlock, Body{}); done <- err }()
	<-h.st.started
	h.srv.Close() // the server side goes away
	err := <-done
	if !errors.Is(err, net.ErrClosed) || !errors.Is(err, io.EOF) || !strings.HasPrefix(err.Error(), "rpc: connection failed: ") {
		t.Errorf("pending call after the peer closed: %v", err)
	}
	if _, err := h.call(context.Background(), procEcho, Body{}); !errors.Is(err, io.EOF) {
		t.Errorf("call after failure: %v", err)
	}
}

func TestClientRejectsLongAuth(t *testing.T) {
	leaktest.Check(t)
	h := newPipeHarness(t, nil, nil)
	_, err := h.cli.Call(context.Background(), &Request{Prog: testProg, Vers: 1, Cred: OpaqueAuth{Flavor: AuthSys, Body: make([]byte, 401)}})
	if err == nil || errors.Is(err, net.ErrClosed) {
		t.Errorf("credential of 401 bytes: %v", err)
	}
	// A transport refusing one message fails that call only.
	var args Body
	args.Items = []DDPItem{{Offset: 2}}
	if _, err := h.call(context.Background(), procEcho, args); !errors.Is(err, ErrDDPItem) {
		t.Errorf("invalid args: %v", err)
	}
	h.echo(t, []byte("ok"), false)
}

func TestMaxInFlight(t *testing.T) {
	leaktest.Check(t)
	checkMaxInFlight(t, newPipeHarness(t, &ServerOptions{MaxInFlight: 2}, nil))
}

// checkMaxInFlight makes six calls that block until released on a server
// with MaxInFlight 2: two run at once, the other four wait for a slot,
// and all complete once released.
func checkMaxInFlight(t *testing.T, h *harness) {
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, err := h.call(ctxTimeout(t, 10*time.Second), procBlock, Body{}); err != nil {
				t.Error(err)
			}
		})
	}
	<-h.st.started
	<-h.st.started
	time.Sleep(20 * time.Millisecond)
	if n := h.st.running.Load(); n != 2 {
		t.Errorf("%d handlers running, want 2", n)
	}
	close(h.st.release)
	wg.Wait()
	if m := h.st.maxRunning.Load(); m != 2 {
		t.Errorf("at most %d handlers ran at once, want 2", m)
	}
}

func TestShutdownGraceful(t *testing.T) {
	leaktest.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, st := newTestServer(nil)
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(l) }()
	ctx := ctxTimeout(t, 10*time.Second)
	tr, err := DialTCP(ctx, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(tr)
	defer cli.Close()
	// A second, idle connection is closed at once.
	tr2, err := DialTCP(ctx, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cli2 := NewClient(tr2)
	defer cli2.Close()
	if err := cli2.Null(ctx, testProg, 1); err != nil {
		t.Fatal(err)
	}

	done := make(chan error)
	go func() { _, err := cli.Call(ctx, &Request{Prog: testProg, Vers: 1, Proc: procBlock}); done <- err }()
	<-st.started
	shut := make(chan error)
	go func() { shut <- srv.Shutdown(ctx) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a call in progress", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := cli2.Null(ctx, testProg, 1); !errors.Is(err, net.ErrClosed) {
		t.Errorf("idle connection during Shutdown: %v", err)
	}
	close(st.release)
	if err := <-done; err != nil {
		t.Errorf("call in progress during Shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != ErrServerClosed {
		t.Errorf("ServeListener: %v", err)
	}
	if err := srv.Serve(NewStreamTransport(nopConn(t), nil)); err != ErrServerClosed {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	if err := srv.ServeListener(l); err != ErrServerClosed {
		t.Errorf("ServeListener after Shutdown: %v", err)
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// nopConn returns one end of a pipe whose other end is closed at cleanup.
func nopConn(t *testing.T) net.Conn {
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c2.Close() })
	return c1
}

func TestShutdownTimeout(t *testing.T) {
	leaktest.Check(t)
	h := newPipeHarness(t, nil, nil)
	done := make(chan error)
	go func() { _, err := h.call(context.Background(), procBlock, Body{}); done <- err }()
	<-h.st.started
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != context.DeadlineExceeded {
		t.Errorf("Shutdown = %v", err)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("call cut by Shutdown: %v", err)
	}
}

func TestServerMaxRecord(t *testing.T) {
	leaktest.Check(t)
	h := newTCPHarness(t, &ServerOptions{Stream: &StreamOptions{MaxRecord: 1024}})
	h.echo(t, make([]byte, 900), false)
	_, err := h.call(ctxTimeout(t, 10*time.Second), procEcho, Body{XDR: xdr.AppendOpaque(nil, make([]byte, 2000))})
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("call over the server's record limit: %v", err)
	}
}

// TestServerHugeClaim sends a fragment header claiming 2 GiB: the server
// closes the connection without reading further.
func TestServerHugeClaim(t *testing.T) {
	leaktest.Check(t)
	c1, c2 := net.Pipe()
	srv, _ := newTestServer(nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(NewStreamTransport(c2, nil)) }()
	defer c1.Close()
	if _, err := c1.Write(unhex(t, "ffffffff")); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("Serve = %v", err)
	}
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c1.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after the claim: %v, want io.EOF", err)
	}
}

func TestCustomAuth(t *testing.T) {
	leaktest.Check(t)
	o := &ServerOptions{Auth: func(ctx context.Context, c *Call) (OpaqueAuth, error) {
		switch c.Header.Cred.Flavor {
		case AuthShort:
			c.AuthInfo = "short"
			return OpaqueAuth{Flavor: AuthShort, Body: []byte("vrf!")}, nil
		case AuthDH:
			return OpaqueAuth{}, errors.New("no DH here")
		}
		return OpaqueAuth{}, AuthOK // not a refusal: AUTH_FAILED
	}}
	h := newPipeHarness(t, o, nil)
	ctx := ctxTimeout(t, 10*time.Second)
	rep, err := h.cli.Call(ctx, &Request{Prog: testProg, Vers: 1, Cred: OpaqueAuth{Flavor: AuthShort}})
	if err != nil || rep.Verf.Flavor != AuthShort || string(rep.Verf.Body) != "vrf!" {
		t.Errorf("verifier %v, %v", rep.Verf, err)
	}
	for _, f := range []AuthFlavor{AuthDH, AuthNone} {
		if _, err := h.cli.Call(ctx, &Request{Prog: testProg, Vers: 1, Cred: OpaqueAuth{Flavor: f}}); !errors.Is(err, AuthFailed) {
			t.Errorf("%v: %v", f, err)
		}
	}
}

func TestErrorMatching(t *testing.T) {
	id := CallID{XID: 0x1a2b, Prog: 100003, Vers: 3, Proc: 6}
	ae := &AcceptError{Call: id, Stat: ProgMismatch, Low: 2, High: 4}
	if got := ae.Error(); got != "rpc: call 0x1a2b: program 100003 version 3 is not offered; the server has versions 2 to 4 (PROG_MISMATCH)" {
		t.Errorf("AcceptError = %q", got)
	}
	if errors.Is(ae, ErrGarbageArgs) || errors.Is(ae, &AcceptError{Stat: SystemErr}) || errors.Is(ae, AuthTooWeak) {
		t.Error("AcceptError matches too much")
	}
	re := &RejectError{Call: id, Stat: AuthError, AuthStat: AuthTooWeak}
	if !errors.Is(re, AuthTooWeak) || errors.Is(re, AuthBadCred) || !errors.Is(re, &RejectError{Stat: AuthError, AuthStat: AuthTooWeak}) ||
		errors.Is(re, &RejectError{Stat: AuthError, AuthStat: AuthBadCred}) || errors.Is(re, &RejectError{Stat: RPCMismatch}) || errors.Is(re, ErrGarbageArgs) {
		t.Error("RejectError matching")
	}
	if AuthTooWeak.Error() != "rpc: authentication failed: AUTH_TOOWEAK" {
		t.Errorf("AuthStat error %q", AuthTooWeak.Error())
	}
	ce := &ConnError{}
	if !errors.Is(ce, net.ErrClosed) || ce.Error() != "rpc: connection closed" {
		t.Errorf("zero ConnError: %v", ce)
	}
	if connError(ce) != error(ce) {
		t.Error("connError rewrapped a *ConnError")
	}
}

// memTransport is one end of an in-memory Transport pair that keeps held-apart
// items apart, as an RPC-over-RDMA transport does: data items are copied
// directly into the peer's memory, and a reply's items land in the
// ResultBufs of its call.
type memTransport struct {
	in, out chan *Msg
	done    chan struct{} // closed when either end closes
	once    *sync.Once

	mu       sync.Mutex
	results  map[uint32][][]byte // ResultBufs of calls sent, by xid
	canceled []uint32
	release  func() // if set, the Release of every message Recv returns
}

func memPair() (*memTransport, *memTransport) {
	ab, ba := make(chan *Msg), make(chan *Msg)
	done, once := make(chan struct{}), new(sync.Once)
	return &memTransport{in: ba, out: ab, done: done, once: once, results: map[uint32][][]byte{}},
		&memTransport{in: ab, out: ba, done: done, once: once, results: map[uint32][][]byte{}}
}

func (t *memTransport) Send(ctx context.Context, m *Msg) error {
	if err := m.Validate(); err != nil {
		return err
	}
	cp := &Msg{Body: Body{XDR: bytes.Clone(m.XDR)}}
	for _, it := range m.Items {
		cp.Items = append(cp.Items, DDPItem{Offset: it.Offset, Data: bytes.Clone(it.Data)})
	}
	if xid, mt, ok := PeekHeader(m.XDR); ok && mt == MsgCall && m.ResultBufs != nil {
		t.mu.Lock()
		t.results[xid] = m.ResultBufs
		t.mu.Unlock()
	}
	select {
	case t.out <- cp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.done:
		return &ConnError{Err: net.ErrClosed}
	}
}

func (t *memTransport) Recv() (*Msg, error) {
	select {
	case m := <-t.in:
		if xid, mt, ok := PeekHeader(m.XDR); ok && mt == MsgReply {
			t.mu.Lock()
			bufs := t.results[xid]
			delete(t.results, xid)
			t.mu.Unlock()
			for i := range m.Items {
				if i < len(bufs) && len(bufs[i]) >= len(m.Items[i].Data) {
					n := copy(bufs[i], m.Items[i].Data)
					m.Items[i].Data = bufs[i][:n]
				}
			}
		}
		m.Release = t.release
		return m, nil
	case <-t.done:
		return nil, &ConnError{Err: net.ErrClosed}
	}
}

func (t *memTransport) Close() error {
	t.once.Do(func() { close(t.done) })
	return nil
}

func (t *memTransport) CancelCall(xid uint32) {
	t.mu.Lock()
	t.canceled = append(t.canceled, xid)
	delete(t.results, xid)
	t.mu.Unlock()
}

// TestDDPTransport runs the Client and Server over a transport that keeps
// data items apart and places results into the caller's buffers.
func TestDDPTransport(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	h := newHarness(t, nil, a, b)
	ctx := ctxTimeout(t, 10*time.Second)

	// Held-apart arguments reach the handler as items.
	var args Body
	args.AppendDDPOpaque([]byte("one"))
	args.XDR = xdr.AppendOpaque(args.XDR, []byte("inline"))
	args.AppendDDPOpaque([]byte("three"))
	rep, err := h.call(ctx, procArgsItems, args)
	if err != nil {
		t.Fatal(err)
	}
	d := NewBodyDecoder(rep.Results)
	if n := d.Uint32(); n != 2 || d.Done() != nil {
		t.Errorf("handler saw %d items (%v)", n, d.Err())
	}

	// A held-apart result lands in the caller's buffer, and decoding it
	// there copies nothing.
	payload := bytes.Repeat([]byte("xyz"), 1000)
	args = Body{}
	args.AppendDDPOpaque(payload)
	buf := make([]byte, 4096)
	rep, err = h.cli.Call(ctx, &Request{Prog: testProg, Vers: 1, Proc: procEcho, Args: args, ResultBufs: [][]byte{buf}, MaxReply: 8192})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results.Items) != 1 || &rep.Results.Items[0].Data[0] != &buf[0] {
		t.Fatalf("result not placed: %+v", rep.Results.Items)
	}
	d = NewBodyDecoder(rep.Results)
	if n := d.DDPOpaqueInto(buf); n != len(payload) || !bytes.Equal(buf[:n], payload) || d.Done() != nil {
		t.Errorf("placed result: %d bytes, %v", n, d.Err())
	}

	// Abandoned calls are reported to the transport.
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-h.st.started; cancel() }()
	if _, err := h.cli.Call(cctx, &Request{Prog: testProg, Vers: 1, Proc: procBlock, ResultBufs: [][]byte{buf}}); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
	a.mu.Lock()
	if len(a.canceled) != 1 || len(a.results) != 0 {
		t.Errorf("canceled %v, results %v", a.canceled, a.results)
	}
	a.mu.Unlock()
	close(h.st.release)
}

// TestBadReplyItems checks a reply whose held-apart item overlaps the reply
// header.
func TestBadReplyItems(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	cli := NewClient(a)
	defer cli.Close()
	done := make(chan error, 1)
	go func() { _, err := cli.Call(context.Background(), &Request{Prog: 1, Vers: 1}); done <- err }()
	m, err := b.Recv()
	if err != nil {
		t.Fatal(err)
	}
	xid, _, _ := PeekHeader(m.XDR)
	rep := &Msg{Body: Body{XDR: (&ReplyHeader{XID: xid, Stat: MsgAccepted}).Append(nil)}}
	rep.Items = []DDPItem{{Offset: 4, Data: make([]byte, 1)}}
	b.out <- rep
	if err := <-done; !errors.Is(err, ErrDDPItem) {
		t.Errorf("reply with an item in its header: %v", err)
	}
}

// TestCloseWhileFull closes a server whose serving loop waits for a free
// call slot.
func TestCloseWhileFull(t *testing.T) {
	leaktest.Check(t)
	h := newPipeHarness(t, &ServerOptions{MaxInFlight: 1}, nil)
	running, waiting := make(chan error, 1), make(chan error, 1)
	go func() { _, err := h.call(context.Background(), procBlock, Body{}); running <- err }()
	<-h.st.started
	go func() { _, err := h.call(context.Background(), procBlock, Body{}); waiting <- err }()
	time.Sleep(20 * time.Millisecond) // the second call waits for the slot
	h.srv.Close()
	// The running handler sees its context cancelled; its failure is
	// not answered.
	if err := <-running; !errors.Is(err, net.ErrClosed) {
		t.Errorf("running call cut by Close: %v", err)
	}
	if err := <-waiting; !errors.Is(err, net.ErrClosed) {
		t.Errorf("waiting call cut by Close: %v", err)
	}
}

func TestXIDSkipsPending(t *testing.T) {
	leaktest.Check(t)
	a, _ := memPair()
	c := NewClient(a)
	defer c.Close()
	c.mu.Lock()
	c.xid = 41
	c.pending.Put(42, &pendingCall{})
	got := c.nextXID()
	c.pending.Delete(42)
	c.mu.Unlock()
	if got != 43 {
		t.Errorf("nextXID = %d, want 43 (42 is pending)", got)
	}
}

// callErrTransport answers every call with a CallError, as an RPC-over-RDMA
// transport does when the responder returns RDMA_ERROR.
type callErrTransport struct {
	xids   chan uint32
	closed chan struct{}
	once   sync.Once
}

var errTransportRefused = errors.New("refused by the transport")

func (t *callErrTransport) Send(ctx context.Context, m *Msg) error {
	xid, _, _ := PeekHeader(m.XDR)
	t.xids <- xid
	return nil
}

func (t *callErrTransport) Recv() (*Msg, error) {
	select {
	case xid := <-t.xids:
		return nil, &CallError{XID: xid, Err: errTransportRefused}
	case <-t.closed:
		return nil, &ConnError{Err: net.ErrClosed}
	}
}

func (t *callErrTransport) Close() error {
	t.once.Do(func() { close(t.closed) })
	return nil
}

func TestTransportCallError(t *testing.T) {
	leaktest.Check(t)
	tr := &callErrTransport{xids: make(chan uint32, 4), closed: make(chan struct{})}
	cli := NewClient(tr)
	defer cli.Close()
	ctx := ctxTimeout(t, 5*time.Second)
	for i := 0; i < 3; i++ {
		_, err := cli.Call(ctx, &Request{Prog: 1, Vers: 1})
		if !errors.Is(err, errTransportRefused) {
			t.Fatalf("call %d: %v, want the transport's per-call error", i, err)
		}
		if errors.Is(err, net.ErrClosed) {
			t.Fatalf("per-call error looks like a connection error: %v", err)
		}
	}
	// An unknown xid is counted and dropped.
	tr.xids <- 12345
	deadline := time.Now().Add(5 * time.Second)
	for cli.Stats().UnknownXID == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if cli.Stats().UnknownXID != 1 {
		t.Fatalf("stats %+v", cli.Stats())
	}
	if e := (&CallError{XID: 1, Err: errTransportRefused}); e.Error() != errTransportRefused.Error() {
		t.Fatal(e.Error())
	}
}

// releaseTransport is a memTransport whose received calls carry a Release
// hook, as RPC-over-RDMA's pooled buffers do.
type releaseTransport struct {
	*memTransport
	released chan uint32
}

func (t *releaseTransport) Recv() (*Msg, error) {
	m, err := t.memTransport.Recv()
	if err == nil {
		xid, _, _ := PeekHeader(m.XDR)
		m.Release = func() { t.released <- xid }
	}
	return m, err
}

// TestClientReleasesReplies: the Client gives every reply back to its
// transport once done with it, whatever became of it: results taken, an
// error answer, or a late reply to an abandoned call. Each exactly once.
func TestClientReleasesReplies(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	rt := &releaseTransport{memTransport: a, released: make(chan uint32, 8)}
	h := newHarness(t, nil, rt, b)
	next := func(what string) {
		t.Helper()
		select {
		case <-rt.released:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: reply not released", what)
		}
	}
	ctx := ctxTimeout(t, 5*time.Second)
	rep, err := h.call(ctx, procEcho, Body{XDR: xdr.AppendOpaque(nil, []byte("kept"))})
	if err != nil {
		t.Fatal(err)
	}
	next("results")
	d := NewBodyDecoder(rep.Results)
	if p := d.DDPOpaque(16); string(p) != "kept" {
		t.Fatalf("results after release: %q", p)
	}
	if _, err := h.call(ctx, 99, Body{}); err == nil {
		t.Fatalf("unknown procedure: %v", err)
	}
	next("error answer")
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := h.call(short, procBlock, Body{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned call: %v", err)
	}
	close(h.st.release) // its reply now comes late
	next("late reply")
	select {
	case xid := <-rt.released:
		t.Fatalf("reply %#x released twice", xid)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestServerReleasesMessages: the Server gives a call's memory back after
// the handler returned and the reply went out.
func TestServerReleasesMessages(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	rt := &releaseTransport{memTransport: b, released: make(chan uint32, 4)}
	h := newHarness(t, nil, a, rt)
	ctx := ctxTimeout(t, 5*time.Second)
	if _, err := h.call(ctx, procEcho, Body{XDR: xdr.AppendOpaque(nil, []byte("x"))}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rt.released:
	case <-time.After(5 * time.Second):
		t.Fatal("message not released")
	}
}

// goid returns the calling goroutine's number, from its stack header.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// countWorkers counts the goroutines running Server.worker.
func countWorkers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "rpc.(*Server).worker(")
}

// waitWorkersIdle waits until every goroutine running Server.worker waits
// for its next call, for at most ten seconds.
func waitWorkersIdle(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; {
		busy := 0
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			// A waiting worker is parked receiving in worker itself
			// (tracebacks leave out the runtime's frames).
			lines := strings.SplitN(g, "\n", 3)
			if strings.Contains(g, "rpc.(*Server).worker(") &&
				(len(lines) < 2 || !strings.Contains(lines[0], "[chan receive") || !strings.Contains(lines[1], "rpc.(*Server).worker(")) {
				busy++
			}
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still busy after 10 s", busy)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServerWorkers: a transport's calls run on workers that wait for the
// next call when done: calls made one after another run on a few
// goroutines, and a second burst of MaxInFlight calls runs on the workers
// the first one started.
func TestServerWorkers(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	const maxInFlight = 24
	s := NewServer(&ServerOptions{MaxInFlight: maxInFlight})
	var mu sync.Mutex
	ids := map[string]int{}
	s.Handle(testProg, 1, 1, func(ctx context.Context, c *Call) (Body, error) {
		mu.Lock()
		ids[goid()]++
		mu.Unlock()
		return Body{}, nil
	})
	block := make(chan struct{})
	var running atomic.Int32
	s.Handle(testProg, 1, 2, func(ctx context.Context, c *Call) (Body, error) {
		mu.Lock()
		ids[goid()]++
		mu.Unlock()
		running.Add(1)
		<-block
		return Body{}, nil
	})
	served := make(chan error, 1)
	go func() { served <- s.Serve(b) }()
	cl := NewClient(a)
	ctx := ctxTimeout(t, 10*time.Second)
	for range 50 {
		if _, err := cl.Call(ctx, &Request{Prog: testProg, Vers: 1, Proc: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// The next call may arrive before the worker that answered the last
	// one is back waiting, and start another: a few, not one per call.
	if len(ids) > 4 {
		t.Errorf("50 calls in a row ran on %d goroutines, want at most 4", len(ids))
	}

	burst := func() {
		block = make(chan struct{})
		running.Store(0)
		var wg sync.WaitGroup
		for range maxInFlight {
			wg.Go(func() {
				if _, err := cl.Call(ctx, &Request{Prog: testProg, Vers: 1, Proc: 2}); err != nil {
					t.Error(err)
				}
			})
		}
		for deadline := time.Now().Add(5 * time.Second); running.Load() < maxInFlight; {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d calls running", running.Load(), maxInFlight)
			}
			time.Sleep(time.Millisecond)
		}
		if n := countWorkers(); n < maxInFlight {
			t.Errorf("%d workers for %d calls in flight", n, maxInFlight)
		}
		close(block)
		wg.Wait()
	}
	burst()
	mu.Lock()
	first := len(ids)
	mu.Unlock()
	waitWorkersIdle(t)
	burst()
	mu.Lock()
	again := len(ids) - first
	mu.Unlock()
	// A worker still on its way back when the second burst starts may
	// be replaced: a few new goroutines, not one per call.
	if again > 4 {
		t.Errorf("a second burst of %d calls started %d new workers, want at most 4", maxInFlight, again)
	}
	if n := countWorkers(); n > maxInFlight+4 {
		t.Errorf("%d workers after two bursts of %d calls", n, maxInFlight)
	}
	cl.Close()
	if err := <-served; err == nil {
		t.Error("Serve returned nil after the transport closed")
	}
	if n := countWorkers(); n != 0 {
		t.Errorf("%d workers still running after Serve returned", n)
	}
}

// pushTransport is a memTransport that delivers through Pusher: a goroutine
// of its own reads and calls deliver, and Recv must not be called.
type pushTransport struct {
	*memTransport
	t         *testing.T
	pushed    atomic.Int32
	delivered atomic.Int32 // messages deliver has returned from
	ended     chan struct{}
}

func (p *pushTransport) Recv() (*Msg, error) {
	p.t.Error("Recv called on a Pusher the Client pushed")
	return nil, &ConnError{Err: net.ErrClosed}
}

func (p *pushTransport) Push(deliver func(*Msg, error) bool) {
	if p.pushed.Add(1) != 1 {
		p.t.Error("Push called twice")
	}
	go func() {
		defer close(p.ended)
		for {
			m, err := p.memTransport.Recv()
			deliver(m, err)
			if err != nil {
				return
			}
			p.delivered.Add(1)
		}
	}()
}

// TestClientOverPusher: a Client on a Pusher transport gets its replies
// through deliver, and the transport's end fails calls and lets Close
// return.
func TestClientOverPusher(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	pa := &pushTransport{memTransport: a, t: t, ended: make(chan struct{})}
	h := newHarness(t, nil, pa, b)
	ctx := ctxTimeout(t, 10*time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := h.cli.Null(ctx, testProg, 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if pa.pushed.Load() != 1 {
		t.Fatalf("Push called %d times", pa.pushed.Load())
	}
	b.Close() // the transport ends: the final error reaches the Client
	<-pa.ended
	if err := h.cli.Null(ctx, testProg, 1); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("call after the transport ended: %v", err)
	}
	done := make(chan struct{})
	go func() { h.cli.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the transport ended")
	}
}

// TestServerOverPusher: a Server on a Pusher transport has the calls
// delivered to it, never calls Recv, holds MaxInFlight with the calls over
// it waiting for a slot, and ends when the transport does.
func TestServerOverPusher(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	pb := &pushTransport{memTransport: b, t: t, ended: make(chan struct{})}
	h := newHarness(t, &ServerOptions{MaxInFlight: 2}, a, pb)
	h.echo(t, []byte("pushed"), false)
	checkMaxInFlight(t, h)
	if pb.pushed.Load() != 1 {
		t.Fatalf("Push called %d times", pb.pushed.Load())
	}
}

// TestCloseWhileFullPushed closes a server whose Pusher transport has
// delivered a call that waits for a free slot: both calls fail, and the
// waiting one is dropped rather than run.
func TestCloseWhileFullPushed(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	var released atomic.Int32
	b.release = func() { released.Add(1) }
	pb := &pushTransport{memTransport: b, t: t, ended: make(chan struct{})}
	h := newHarness(t, &ServerOptions{MaxInFlight: 1}, a, pb)
	running, waiting := make(chan error, 1), make(chan error, 1)
	go func() { _, err := h.call(context.Background(), procBlock, Body{}); running <- err }()
	<-h.st.started
	go func() { _, err := h.call(context.Background(), procBlock, Body{}); waiting <- err }()
	// The second call waits for the slot once delivered.
	for deadline := time.Now().Add(10 * time.Second); pb.delivered.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls delivered, want 2", pb.delivered.Load())
		}
		time.Sleep(time.Millisecond)
	}
	h.srv.Close()
	// The running handler sees its context cancelled; its SYSTEM_ERR
	// reply may still get out before the transport closes.
	var ae *AcceptError
	if err := <-running; !errors.Is(err, net.ErrClosed) && !(errors.As(err, &ae) && ae.Stat == SystemErr) {
		t.Errorf("running call cut by Close: %v", err)
	}
	if err := <-waiting; !errors.Is(err, net.ErrClosed) {
		t.Errorf("waiting call cut by Close: %v", err)
	}
	<-pb.ended
	time.Sleep(20 * time.Millisecond) // a waiting call, wrongly run, starts
	select {
	case <-h.st.started:
		t.Error("the call waiting for a slot ran after Close")
	default:
	}
	if n := h.srv.Stats().Dropped; n != 2 {
		t.Errorf("%d calls dropped, want the one waiting and the one Close cancelled", n)
	}
	// Both calls go back to the transport, the dropped one too.
	deadline := time.Now().Add(5 * time.Second)
	for released.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := released.Load(); n != 2 {
		t.Errorf("%d calls released to the transport, want 2", n)
	}
}

// failOnce is a transport whose first Recv fails one message, as an
// RPC-over-RDMA transport does with a *CallError, before carrying on.
type failOnce struct {
	*memTransport
	first chan error // holds the *CallError until the first Recv
}

func (f *failOnce) Recv() (*Msg, error) {
	select {
	case err := <-f.first:
		return nil, err
	default:
		return f.memTransport.Recv()
	}
}

// pushRecv turns a transport into a Pusher that delivers what its Recv
// returns, going on past a *CallError as Pusher says.
type pushRecv struct{ Transport }

func (p pushRecv) Push(deliver func(*Msg, error) bool) {
	go func() {
		for {
			m, err := p.Transport.Recv()
			deliver(m, err)
			if _, ok := errors.AsType[*CallError](err); err != nil && !ok {
				return
			}
		}
	}()
}

// TestServerCallError: a *CallError from the server's transport fails one
// message only (Transport.Recv); the Server counts it dropped and goes on
// serving, whether it receives or is pushed to.
func TestServerCallError(t *testing.T) {
	for _, pushed := range []bool{false, true} {
		t.Run(map[bool]string{false: "recv", true: "pushed"}[pushed], func(t *testing.T) {
			leaktest.Check(t)
			a, b := memPair()
			f := &failOnce{memTransport: b, first: make(chan error, 1)}
			f.first <- &CallError{XID: 7, Err: errTransportRefused}
			var st Transport = f
			if pushed {
				st = pushRecv{f}
			}
			h := newHarness(t, nil, a, st)
			if err := h.cli.Null(ctxTimeout(t, 10*time.Second), testProg, 1); err != nil {
				t.Fatalf("NULL after the transport failed one message: %v", err)
			}
			if n := h.srv.Stats().Dropped; n != 1 {
				t.Errorf("%d messages dropped, want the one the transport failed", n)
			}
		})
	}
}
