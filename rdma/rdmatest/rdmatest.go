// Package rdmatest is the conformance suite that every rdma provider runs,
// in the manner of x/net/nettest:
//
//	func TestConformance(t *testing.T) {
//		rdmatest.TestProvider(t, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0"})
//	}
//
// It checks what package rdma documents: connection setup with private
// data and rejects, Send/Receive matching and ordering, RDMA Write and Read
// of every size with scatter/gather, the STag checks and their order,
// invalidation (local and remote) and re-registration, queue and IRD/ORD
// limits, fatal errors ending both sides with everything flushed, and
// Close; and, for a provider that offers them, shared receive queues. Every
// case is bounded in time and leak-checked.
//
// Where the RFCs and Linux siw choose differently (the DDP code for a
// too-long Send, the code for a missing RDMA Write right), either is
// accepted. A Send or Write the peer refuses may complete with StatusSuccess
// at the sender if the provider completes Sends when they are handed to the
// wire (iwarp); otherwise it must carry TerminateError.Status.
//
// The helpers (Pair, CheckGoroutines, Drain and the rest) are exported for
// providers' own tests and for the transport's.
package rdmatest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// Config describes the provider under test.
type Config struct {
	// Provider is the provider under test. All cases share it.
	Provider rdma.Provider

	// ListenAddr is what cases pass to Listen: "127.0.0.1:0" for a TCP
	// provider, "" for loopback.
	ListenAddr string

	// Timeout bounds each case; zero means 5 seconds.
	Timeout time.Duration

	// NoTerminate is set for providers that learn of fatal errors from
	// work completion statuses and the connection manager, not from an
	// RDMAP Terminate (verbs: an InfiniBand or RoCE responder that refuses
	// an access only NAKs it, and rdma-core does not surface iWARP
	// Terminates). A connection-ending error then need only match
	// net.ErrClosed on each side, the failed work request may complete
	// with any error status, flushed included (or success, for a Send or
	// Write), and every
	// other work request still completes flushed.
	NoTerminate bool

	// NoSolicitedFlag is set for providers whose receive completions do
	// not say whether the Send carried the Solicited Event flag (struct
	// ibv_wc has no such bit).
	NoSolicitedFlag bool

	// RekeyAnyIndex is set for providers whose Reregister may give the
	// region a new index, not only a new key (verbs re-registers with
	// ibv_reg_mr and the device picks the rkey).
	RekeyAnyIndex bool

	// Direct makes the cases wait through rdma.DirectIO, where the
	// provider's connections offer it with rdma.WaitInterrupter: every
	// Wait on a connection from Pair is a direct section of its own
	// (BeginDirect, WaitDirect, EndDirect), so that the provider's socket
	// work runs on the waiting goroutine while the cases wait, and on the
	// provider's own goroutines in between.
	Direct bool

	// Skip names cases that the device under test is known to fail, each
	// with the reason, which the skip reports. It is for devices whose
	// behaviour the provider cannot change (a kernel's software RNIC),
	// never for the provider's own gaps.
	Skip map[string]string
}

// privateData returns the provider's private data limits.
func (cfg Config) privateData() rdma.PrivateDataLimits {
	return rdma.PrivateDataLimitsOf(cfg.Provider)
}

// wantPrivateData checks received private data against what was sent,
// allowing the zero padding of providers that report it.
func wantPrivateData(t testing.TB, cfg Config, what string, got, want []byte) {
	t.Helper()
	if cfg.privateData().Padded && len(got) > len(want) {
		wantZero(t, what+" padding", got[len(want):])
		got = got[:len(want)]
	}
	wantBytes(t, what, got, want)
}

func (cfg Config) timeout() time.Duration {
	if cfg.Timeout > 0 {
		return cfg.Timeout
	}
	return 5 * time.Second
}

// TestProvider runs the conformance suite. Cases run one after another
// (not in parallel), each with a goroutine leak check.
func TestProvider(t *testing.T, cfg Config) {
	cases := []struct {
		name string
		fn   func(*testing.T, Config)
	}{
		{"ConnectPrivateData", testConnectPrivateData},
		{"PrivateDataTooLong", testPrivateDataTooLong},
		{"Reject", testReject},
		{"DialTimeout", testDialTimeout},
		{"ListenerClose", testListenerClose},
		{"Prepare", testPrepare},
		{"PrepareFails", testPrepareFails},
		{"Limits", testLimits},
		{"SendRecvOrder", testSendRecvOrder},
		{"SendVariants", testSendVariants},
		{"SendScatterGather", testSendScatterGather},
		{"SendConcurrent", testSendConcurrent},
		{"SendTooSmall", testSendTooSmall},
		{"SendNoRecv", testSendNoRecv},
		{"WriteReadSizes", testWriteReadSizes},
		{"WriteReadScatterGather", testWriteReadScatterGather},
		{"WriteThenSend", testWriteThenSend},
		{"ZeroLengthUnchecked", testZeroLengthUnchecked},
		{"WriteBounds", testWriteBounds},
		{"ReadBounds", testReadBounds},
		{"WriteRights", testWriteRights},
		{"ReadRights", testReadRights},
		{"WriteInvalidSTag", testWriteInvalidSTag},
		{"ReadInvalidSTag", testReadInvalidSTag},
		{"ReleasedSTag", testReleasedSTag},
		{"ForeignSTag", testForeignSTag},
		{"LocalInvalidate", testLocalInvalidate},
		{"RemoteInvalidate", testRemoteInvalidate},
		{"RemoteInvalidateRefused", testRemoteInvalidateRefused},
		{"RemoteInvalidateUnsupported", testRemoteInvalidateUnsupported},
		{"Reregister", testReregister},
		{"LocalChecks", testLocalChecks},
		{"QueueDepth", testQueueDepth},
		{"ORD", testORD},
		{"Close", testClose},
		{"PeerClose", testPeerClose},
		{"CloseIdempotent", testCloseIdempotent},
		{"AllocAfterClose", testAllocAfterClose},
		{"WaitContext", testWaitContext},
		{"WaitEnd", testWaitEnd},
		{"WaitConcurrent", testWaitConcurrent},
		{"WaitInterrupt", testWaitInterrupt},
		{"WaitInterruptEnd", testWaitInterruptEnd},
		{"SharedRecv", testSharedRecv},
		{"SharedRecvEmpty", testSharedRecvEmpty},
		{"SharedRecvTooLong", testSharedRecvTooLong},
		{"SharedRecvLimit", testSharedRecvLimit},
		{"SharedRecvClose", testSharedRecvClose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := cfg.Skip[c.name]; ok {
				t.Skip(why)
			}
			CheckGoroutines(t)
			c.fn(t, cfg)
		})
	}
}

// Context returns a context that ends after cfg's case timeout or with t.
func Context(t testing.TB, cfg Config) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), cfg.timeout())
	t.Cleanup(cancel)
	return ctx
}

// Pair connects an initiator configured with a to a responder configured
// with b through a fresh listener, and closes both at the end of the test.
func Pair(t testing.TB, cfg Config, a, b rdma.ConnConfig) (initiator, responder rdma.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cfg.timeout())
	defer cancel()
	ln, err := cfg.Provider.Listen(ctx, cfg.ListenAddr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	type result struct {
		c   rdma.Conn
		err error
	}
	accepted := make(chan result, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			accepted <- result{nil, err}
			return
		}
		c, err := req.Accept(ctx, b)
		accepted <- result{c, err}
	}()
	ca, err := cfg.Provider.Dial(ctx, ln.Addr().String(), a)
	if err != nil {
		cancel()
		<-accepted
		t.Fatalf("dial: %v", err)
	}
	r := <-accepted
	if r.err != nil {
		ca.Close()
		t.Fatalf("accept: %v", r.err)
	}
	t.Cleanup(func() {
		ca.Close()
		r.c.Close()
	})
	if cfg.Direct {
		return direct(ca), direct(r.c)
	}
	return ca, r.c
}

// directConn is a connection whose Wait is a direct section of its own
// (Config.Direct).
type directConn struct {
	rdma.DirectIO
	wi rdma.WaitInterrupter
}

func (d directConn) Wait(ctx context.Context, cs []rdma.Completion) (int, error) {
	d.BeginDirect()
	defer d.EndDirect()
	return d.WaitDirect(ctx, cs)
}

func (d directConn) InterruptWait() { d.wi.InterruptWait() }

// unwrap returns the provider's connection behind c, which may be a
// Config.Direct wrapper: the one a completion names.
func unwrap(c rdma.Conn) rdma.Conn {
	if d, ok := c.(directConn); ok {
		return d.DirectIO
	}
	return c
}

// direct wraps c for Config.Direct, if it offers direct I/O.
func direct(c rdma.Conn) rdma.Conn {
	d, ok := c.(rdma.DirectIO)
	wi, ok2 := c.(rdma.WaitInterrupter)
	if !ok || !ok2 {
		return c
	}
	return directConn{d, wi}
}

// Alloc allocates size bytes on c with access, released at the end of the
// test.
func Alloc(t testing.TB, c rdma.Conn, size int, access rdma.Access) rdma.MR {
	t.Helper()
	m, err := c.Alloc(size, access)
	if err != nil {
		t.Fatalf("alloc %d bytes %v: %v", size, access, err)
	}
	t.Cleanup(func() { m.Release() })
	return m
}

// Whole returns an SGE covering m.
func Whole(m rdma.MR) rdma.SGE { return rdma.SGE{MR: m, Length: len(m.Bytes())} }

// PostRecv posts a receive of the SGEs and fails the test on error.
func PostRecv(t testing.TB, c rdma.Conn, id uint64, sgl ...rdma.SGE) {
	t.Helper()
	if err := c.PostRecv(id, sgl); err != nil {
		t.Fatalf("post recv %d: %v", id, err)
	}
}

// Post posts wr and fails the test on error.
func Post(t testing.TB, c rdma.Conn, wr rdma.WorkRequest) {
	t.Helper()
	if err := c.PostSend(&wr); err != nil {
		t.Fatalf("post %v %d: %v", wr.Op, wr.ID, err)
	}
}

// WaitN waits for exactly n completions on c.
func WaitN(t testing.TB, cfg Config, c rdma.Conn, n int) []rdma.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cfg.timeout())
	defer cancel()
	out := make([]rdma.Completion, 0, n)
	buf := make([]rdma.Completion, n)
	for len(out) < n {
		k, err := c.Wait(ctx, buf[:n-len(out)])
		if err != nil {
			t.Fatalf("wait for %d completions after %v: %v", n, out, err)
		}
		out = append(out, buf[:k]...)
	}
	return out
}

// Want checks a completion's ID, op, status and length (-1: any length).
func Want(t testing.TB, got rdma.Completion, id uint64, op rdma.Op, st rdma.Status, length int) {
	t.Helper()
	if got.ID != id || got.Op != op || got.Status != st || (length >= 0 && got.Len != length) {
		t.Fatalf("completion %+v (%v, %v), want id %d %v %v len %d", got, got.Op, got.Status, id, op, st, length)
	}
}

// Drain waits until c has ended and returns every completion left and the
// error Wait ended with, which must be c.Err() and match net.ErrClosed.
func Drain(t testing.TB, cfg Config, c rdma.Conn) ([]rdma.Completion, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cfg.timeout())
	defer cancel()
	var out []rdma.Completion
	buf := make([]rdma.Completion, 16)
	for {
		n, err := c.Wait(ctx, buf)
		out = append(out, buf[:n]...)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			t.Fatalf("connection did not end within %v; completions so far %+v", cfg.timeout(), out)
		}
		select {
		case <-c.Done():
		default:
			t.Fatalf("Wait returned %v but Done is not closed", err)
		}
		if cerr := c.Err(); cerr != err {
			t.Fatalf("Wait returned %v, Err returns %v", err, cerr)
		}
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("end error %v does not match net.ErrClosed", err)
		}
		return out, err
	}
}

// WantTerminate checks that err is a TerminateError equal to one of wants,
// received (remote) or sent.
func WantTerminate(t testing.TB, err error, remote bool, wants ...rdma.TerminateError) rdma.TerminateError {
	t.Helper()
	var te rdma.TerminateError
	if !errors.As(err, &te) {
		t.Fatalf("error %v is not a TerminateError; want one of %v", err, wants)
	}
	if te.Remote != remote {
		t.Fatalf("%v: Remote is %v, want %v", err, te.Remote, remote)
	}
	if !slices.ContainsFunc(wants, func(w rdma.TerminateError) bool { return errors.Is(err, w) }) {
		t.Fatalf("terminate %v, want one of %v", te, wants)
	}
	return te
}

// fatal is a fatal error seen from both sides.
type fatal struct {
	detector, other rdma.Conn
	wants           []rdma.TerminateError
}

// check drains both sides and checks their errors. The work request that
// caused the error at other is failedID; it must complete with the status
// of the Terminate or, for Sends and Writes, success. Every other
// completion must be StatusFlushed unless listed in done. It returns the
// detector's completions.
func (f fatal) check(t testing.TB, cfg Config, failedID uint64, done ...uint64) []rdma.Completion {
	t.Helper()
	oc, oerr := Drain(t, cfg, f.other)
	dc, derr := Drain(t, cfg, f.detector)
	if cfg.NoTerminate {
		return f.checkLoose(t, oc, dc, failedID, done...)
	}
	te := WantTerminate(t, oerr, true, f.wants...)
	WantTerminate(t, derr, false, te)
	seen := false
	for _, c := range oc {
		switch {
		case c.ID == failedID && c.Op != rdma.OpRecv:
			seen = true
			ok := c.Status == te.Status() || (c.Op != rdma.OpRead && c.Status == rdma.StatusSuccess)
			if !ok {
				t.Errorf("failed work request %d completed %v, want %v", c.ID, c.Status, te.Status())
			}
		case slices.Contains(done, c.ID):
		case c.Status != rdma.StatusFlushed:
			t.Errorf("outstanding work request %d (%v) completed %v, want flushed", c.ID, c.Op, c.Status)
		}
	}
	if !seen {
		t.Errorf("no completion for the failed work request %d among %+v", failedID, oc)
	}
	return dc
}

// checkLoose is check for a provider with Config.NoTerminate: both sides
// have ended (Drain checked net.ErrClosed); the failed work request
// completed with an error (flushed too: Linux siw flushes the work request
// a Terminate refused), or success if it is not a Read; everything else is
// flushed. The detector's completions are returned.
func (f fatal) checkLoose(t testing.TB, oc, dc []rdma.Completion, failedID uint64, done ...uint64) []rdma.Completion {
	t.Helper()
	seen := false
	for _, c := range oc {
		switch {
		case c.ID == failedID && c.Op != rdma.OpRecv:
			seen = true
			if c.Op == rdma.OpRead && c.Status == rdma.StatusSuccess {
				t.Errorf("failed work request %d completed %v, want an error", c.ID, c.Status)
			}
		case slices.Contains(done, c.ID):
		case c.Status != rdma.StatusFlushed:
			t.Errorf("outstanding work request %d (%v) completed %v, want flushed", c.ID, c.Op, c.Status)
		}
	}
	if !seen {
		t.Errorf("no completion for the failed work request %d among %+v", failedID, oc)
	}
	return dc
}

// fill writes a pattern that depends on seed into b.
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) + seed
	}
}

// pattern returns n bytes of fill's pattern.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

func wantBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes differ from the %d expected at offset %d", what, len(got), len(want), i)
	}
}

func wantZero(t testing.TB, what string, b []byte) {
	t.Helper()
	for i, v := range b {
		if v != 0 {
			t.Fatalf("%s: byte %d is %#x, want 0", what, i, v)
		}
	}
}
