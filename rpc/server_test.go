package rpc

import (
	"bytes"
	"context"
	"errors"
	"log"
	"log/slog"
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

var discardLogger = slog.New(slog.DiscardHandler)

// sendLog is a transport that records the header of every reply the
// server tries to send, whether or not the transport can still carry it.
type sendLog struct {
	Transport
	mu      sync.Mutex
	replies []ReplyHeader
}

func (r *sendLog) Send(ctx context.Context, m *Msg) error {
	var rh ReplyHeader
	d := xdr.NewDecoder(m.XDR)
	if rh.Decode(&d) == nil {
		r.mu.Lock()
		r.replies = append(r.replies, rh)
		r.mu.Unlock()
	}
	return r.Transport.Send(ctx, m)
}

// TestCloseWithholdsCancelledFailure is the race of a server restart
// under a client that reconnects: Close cancels a handler's ctx, the
// handler returns an error, and its SYSTEM_ERR must not reach the
// client, which would take it as the call's answer instead of sending
// the call again on its next connection. The handler returns only once
// Close has cancelled it, so the order is fixed, not a matter of timing.
func TestCloseWithholdsCancelledFailure(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	rec := &sendLog{Transport: b}
	srv := NewServer(&ServerOptions{Logger: discardLogger})
	started, returned := make(chan struct{}), make(chan struct{})
	srv.Handle(testProg, 1, 1, func(ctx context.Context, c *Call) (Body, error) {
		defer close(returned)
		close(started)
		select {
		case <-ctx.Done():
			return Body{}, errors.New("woken by Close")
		case <-time.After(10 * time.Second):
			return Body{}, errors.New("Close did not cancel the handler")
		}
	})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(rec) }()
	cli := NewClient(a)
	defer cli.Close()
	called := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctxTimeout(t, 10*time.Second), &Request{Prog: testProg, Vers: 1, Proc: 1})
		called <- err
	}()
	<-started
	srv.Close()
	<-returned
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve = %v, want ErrServerClosed", err)
	}
	// Serve has waited for the worker: whatever it sent is recorded.
	rec.mu.Lock()
	replies := rec.replies
	rec.mu.Unlock()
	for _, rh := range replies {
		t.Errorf("reply sent for a call cancelled by Close: %v", &rh)
	}
	if err := <-called; !errors.Is(err, net.ErrClosed) {
		t.Errorf("call cut by Close: %v, want net.ErrClosed (to be sent again)", err)
	}
	if n := srv.Stats().Dropped; n != 1 {
		t.Errorf("Dropped = %d, want the withheld call", n)
	}
}

// pushSink is a Pusher whose deliver function the test calls itself, and
// which counts the replies sent.
type pushSink struct {
	t       *testing.T
	deliver chan func(*Msg, error) bool
	sent    atomic.Int32
}

func (p *pushSink) Send(ctx context.Context, m *Msg) error { p.sent.Add(1); return nil }
func (p *pushSink) Close() error                           { return nil }
func (p *pushSink) Push(deliver func(*Msg, error) bool)    { p.deliver <- deliver }
func (p *pushSink) Recv() (*Msg, error) {
	p.t.Error("Recv called on a Pusher")
	return nil, &ConnError{Err: net.ErrClosed}
}

func callMsg(xid, proc uint32) *Msg {
	h := CallHeader{XID: xid, RPCVers: RPCVersion, Prog: testProg, Vers: 1, Proc: proc}
	return &Msg{Body: Body{XDR: h.Append(nil)}}
}

// TestPushedCallsWaitWithoutGoroutines: calls a Pusher delivers past
// MaxInFlight wait for a slot in a queue, not each on a goroutine, and
// all of them run once the slots free up.
func TestPushedCallsWaitWithoutGoroutines(t *testing.T) {
	leaktest.Check(t)
	const maxInFlight, calls = 2, 200
	srv, st := newTestServer(&ServerOptions{MaxInFlight: maxInFlight, Logger: discardLogger})
	p := &pushSink{t: t, deliver: make(chan func(*Msg, error) bool, 1)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(p) }()
	var deliver func(*Msg, error) bool
	select {
	case deliver = <-p.deliver:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not call Push")
	}
	base := runtime.NumGoroutine()
	for i := range calls {
		deliver(callMsg(uint32(i+1), procBlock), nil)
	}
	for range maxInFlight {
		select {
		case <-st.started:
		case <-time.After(10 * time.Second):
			t.Fatal("handlers did not start")
		}
	}
	// The workers, and a goroutine or two of the runtime's.
	if extra := runtime.NumGoroutine() - base; extra > maxInFlight+2 {
		t.Errorf("%d goroutines more with %d calls delivered at MaxInFlight %d", extra, calls, maxInFlight)
	}
	if n := st.maxRunning.Load(); n > maxInFlight {
		t.Errorf("%d handlers ran at once, MaxInFlight %d", n, maxInFlight)
	}
	close(st.release)
	deadline := time.Now().Add(10 * time.Second)
	for p.sent.Load() < calls && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := p.sent.Load(); n != calls {
		t.Errorf("%d replies sent, want %d", n, calls)
	}
	deliver(nil, &ConnError{Err: net.ErrClosed})
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve = %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestDefaultLoggerReportsFailures: with no Logger, a handler's error and
// its panic, with the stack, reach slog.Default, as net/http logs a
// handler's panic, rather than vanishing into a SYSTEM_ERR.
func TestDefaultLoggerReportsFailures(t *testing.T) {
	var buf syncBuffer
	prev, prevOut, prevFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() {
		slog.SetDefault(prev)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	})
	a, b := memPair()
	h := newHarness(t, nil, a, b)
	ctx := ctxTimeout(t, 10*time.Second)
	for _, proc := range []uint32{procFail, procPanic} {
		_, err := h.call(ctx, proc, Body{})
		if ae, ok := errors.AsType[*AcceptError](err); !ok || ae.Stat != SystemErr {
			t.Fatalf("proc %d: %v, want SYSTEM_ERR", proc, err)
		}
	}
	out := buf.String()
	for _, want := range []string{
		"level=WARN", "handler failed", "disk on fire",
		"level=ERROR", "handler panicked", "handler bug", "newTestServer.func",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("default log lacks %q:\n%s", want, out)
		}
	}
}

// sentCount is a transport that counts the replies whose Send returned.
type sentCount struct {
	Transport
	n atomic.Int32
}

func (s *sentCount) Send(ctx context.Context, m *Msg) error {
	err := s.Transport.Send(ctx, m)
	s.n.Add(1)
	return err
}

// TestAfterReply: a handler's Call.AfterReply runs once per call, with the
// handler's results, only after the transport's Send of the reply has
// returned; and also for a handler that failed.
func TestAfterReply(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	tr := &sentCount{Transport: b}
	srv := NewServer(&ServerOptions{Logger: discardLogger})
	type after struct {
		res  Body
		sent int32
	}
	afters := make(chan after, 4)
	hook := func(res Body) { afters <- after{res, tr.n.Load()} }
	srv.Handle(testProg, 1, 1, func(ctx context.Context, c *Call) (Body, error) {
		c.AfterReply = hook
		var res Body
		res.AppendDDPOpaque([]byte("results"))
		return res, nil
	})
	srv.Handle(testProg, 1, 2, func(ctx context.Context, c *Call) (Body, error) {
		c.AfterReply = hook
		return Body{}, errors.New("failed")
	})
	go srv.Serve(tr)
	defer srv.Close()
	cli := NewClient(a)
	defer cli.Close()
	for proc, sent := range []int32{1, 2} {
		cli.Call(ctxTimeout(t, 10*time.Second), &Request{Prog: testProg, Vers: 1, Proc: uint32(proc + 1)})
		select {
		case got := <-afters:
			if got.sent != sent {
				t.Errorf("proc %d: AfterReply ran with %d replies sent, want %d", proc+1, got.sent, sent)
			}
			if proc == 0 && (len(got.res.Items) != 1 || string(got.res.Items[0].Data) != "results") {
				t.Errorf("AfterReply got %+v, not the handler's results", got.res)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("proc %d: AfterReply not called", proc+1)
		}
	}
	if len(afters) != 0 {
		t.Errorf("AfterReply called more than once per call")
	}
}

// TestHandleNil: registering a nil handler panics, with Handle and with
// HandleShort, and leaves the procedure unregistered.
func TestHandleNil(t *testing.T) {
	s := NewServer(nil)
	for name, reg := range map[string]func(){
		"Handle":      func() { s.Handle(1, 1, 1, nil) },
		"HandleShort": func() { s.HandleShort(1, 1, 1, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(nil) did not panic", name)
				}
			}()
			reg()
		}()
	}
	if h, stat, _, _ := s.lookup(&CallHeader{Prog: 1, Vers: 1, Proc: 1}); h != nil || stat != ProgUnavail {
		t.Errorf("after the panics: handler %v, %v; want none, PROG_UNAVAIL", h != nil, stat)
	}
}
