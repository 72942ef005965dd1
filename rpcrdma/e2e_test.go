package rpcrdma

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The test program. Every procedure exercises one data path.
const (
	testProg = 0x20001234
	testVers = 1

	procEcho     = 1 // DDP opaque in, the same DDP opaque out
	procSum      = 2 // DDP opaque in; out: length and CRC32
	procRead     = 3 // count in; out: a DDP opaque of count pattern bytes
	procBig      = 4 // count in; out: a non-DDP opaque of count bytes (reply chunk)
	procEchoFlat = 5 // non-DDP opaque in and out (long call, long reply)
	procMulti    = 6 // three DDP opaques in, the same three out
	procBlock    = 7 // waits for its context
	procSleep    = 8 // sleeps the given milliseconds
)

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) + seed
	}
	return p
}

// readData is what procRead returns: pattern(n, 3) for any n up to 4 MiB,
// made once so the benchmarks measure the transport.
var readData = pattern(4<<20, 3)

func testServer() *rpc.Server {
	srv := rpc.NewServer(nil)
	h := func(f func(d *rpc.BodyDecoder, out *rpc.Body) error) rpc.Handler {
		return func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
			var out rpc.Body
			err := f(c.Decoder(), &out)
			return out, err
		}
	}
	srv.Handle(testProg, testVers, procEcho, h(func(d *rpc.BodyDecoder, out *rpc.Body) error {
		out.AppendDDPOpaque(d.DDPOpaque(64 << 20))
		return nil
	}))
	srv.Handle(testProg, testVers, procSum, h(func(d *rpc.BodyDecoder, out *rpc.Body) error {
		p := d.DDPOpaque(64 << 20)
		out.XDR = xdr.AppendUint32(out.XDR, uint32(len(p)))
		out.XDR = xdr.AppendUint32(out.XDR, crc32.ChecksumIEEE(p))
		return nil
	}))
	srv.Handle(testProg, testVers, procRead, h(func(d *rpc.BodyDecoder, out *rpc.Body) error {
		n := d.Uint32()
		if n > uint32(len(readData)) {
			return rpc.ErrGarbageArgs
		}
		out.XDR = xdr.AppendBool(out.XDR, true)
		out.AppendDDPOpaque(readData[:n])
		out.XDR = xdr.AppendUint32(out.XDR, 0xfeedf00d)
		return nil
	}))
	srv.Handle(testProg, testVers, procBig, h(func(d *rpc.BodyDecoder, out *rpc.Body) error {
		n := d.Uint32()
		out.XDR = xdr.AppendOpaque(out.XDR, pattern(int(n), 5))
		return nil
	}))
	srv.Handle(testProg, testVers, procEchoFlat, h(func(d *rpc.BodyDecoder, out *rpc.Body) error {
		out.XDR = xdr.AppendOpaque(out.XDR, d.Opaque(64<<20))
		return nil
	}))
	srv.Handle(testProg, testVers, procMulti, h(func(d *rpc.BodyDecoder, out *rpc.Body) error {
		for i := 0; i < 3; i++ {
			out.AppendDDPOpaque(d.DDPOpaque(64 << 20))
			out.XDR = xdr.AppendUint32(out.XDR, uint32(i))
			d.Uint32()
		}
		return nil
	}))
	srv.Handle(testProg, testVers, procSleep, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		time.Sleep(time.Duration(c.Decoder().Uint32()) * time.Millisecond)
		return rpc.Body{}, nil
	})
	srv.Handle(testProg, testVers, procBlock, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		<-ctx.Done()
		return rpc.Body{}, ctx.Err()
	})
	return srv
}

// waitServerCalls waits, for at most ten seconds, until srv has started
// n calls in their handlers (rpc.ServerStats.Calls counts a call as its
// handler starts).
func waitServerCalls(t *testing.T, srv *rpc.Server, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().Calls < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls started in their handlers within 10 s, want %d", srv.Stats().Calls, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pair is a requester and a responder connected through a provider.
type pair struct {
	cli  *rpc.Client
	conn *Conn // requester
	srv  *rpc.Server
	resp *Conn
	net  interface{ Registered() int } // the provider's live registrations
}

// pairFunc makes a requester/responder pair over one provider.
type pairFunc func(t *testing.T, ccfg, scfg *Config) *pair

// forProviders runs f over the strict in-process provider and over the
// software iWARP on loopback TCP.
func forProviders(t *testing.T, f func(*testing.T, pairFunc)) {
	t.Run("loopback", func(t *testing.T) { f(t, newPair) })
	t.Run("iwarp", func(t *testing.T) {
		f(t, func(t *testing.T, ccfg, scfg *Config) *pair {
			return newPairOver(t, newIWARP(t), "127.0.0.1:0", ccfg, scfg)
		})
	})
}

func newPair(t *testing.T, ccfg, scfg *Config) *pair {
	t.Helper()
	return newPairOver(t, loopback.New(), "", ccfg, scfg)
}

// dialAccept listens on p at addr, dials it and returns both ends, the
// listener closed.
func dialAccept(t testing.TB, p rdma.Provider, addr string, ccfg, scfg *Config) (conn, resp *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Listen(ctx, p, addr, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := acceptOne(t, ctx, l)
	conn, err = Dial(ctx, p, l.Addr().String(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn, accepted()
}

// acceptOne accepts one connection on l in the background; the function
// it returns waits for it, and ends the test if Accept failed.
func acceptOne(t testing.TB, ctx context.Context, l *Listener) func() *Conn {
	accepted := make(chan *Conn, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	return func() *Conn {
		c := <-accepted
		if c == nil {
			t.FailNow()
		}
		return c
	}
}

func newPairOver(t testing.TB, p rdma.Provider, addr string, ccfg, scfg *Config) *pair {
	t.Helper()
	conn, resp := dialAccept(t, p, addr, ccfg, scfg)
	pr := &pair{conn: conn, resp: resp, srv: testServer()}
	pr.net, _ = p.(interface{ Registered() int })
	served := make(chan struct{})
	go func() { pr.srv.Serve(resp); close(served) }()
	pr.cli = rpc.NewClient(conn)
	t.Cleanup(func() {
		pr.cli.Close()
		conn.Close()
		resp.Close()
		pr.srv.Close()
		<-served
		if pr.net != nil {
			deadline := time.Now().Add(5 * time.Second)
			for pr.net.Registered() != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := pr.net.Registered(); n != 0 {
				t.Errorf("%d memory registrations left after close", n)
			}
		}
	})
	return pr
}

func newIWARP(t testing.TB) rdma.Provider {
	t.Helper()
	p, err := iwarp.New(iwarp.Options{FirstSendDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (p *pair) call(ctx context.Context, proc uint32, args rpc.Body, bufs [][]byte, maxReply int) (rpc.Reply, error) {
	return p.cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: proc, Args: args, ResultBufs: bufs, MaxReply: maxReply})
}

func ddpArgs(ps ...[]byte) rpc.Body {
	var b rpc.Body
	for i, p := range ps {
		b.AppendDDPOpaque(p)
		b.XDR = xdr.AppendUint32(b.XDR, uint32(i))
	}
	return b
}

func u32Args(n int) rpc.Body { return rpc.Body{XDR: xdr.AppendUint32(nil, uint32(n))} }

// TestDataPaths runs one call per data path and checks the bytes and the
// path taken (by the connections' counters).
func testDataPaths(t *testing.T, np pairFunc) {
	type want struct{ inline, readChunks, writeChunks, replyChunks, longCalls uint64 }
	tests := []struct {
		name  string
		cfg   *Config
		check func(t *testing.T, p *pair)
		want  want // requester-side counters
	}{
		{"inline-small-ddp-item", nil, func(t *testing.T, p *pair) {
			data := pattern(100, 1)
			rep, err := p.call(ctxT(t), procSum, ddpArgs(data), nil, 0)
			checkSum(t, rep, err, data)
		}, want{inline: 1}},
		{"read-chunk-one", nil, func(t *testing.T, p *pair) {
			data := pattern(64<<10, 2)
			rep, err := p.call(ctxT(t), procSum, ddpArgs(data), nil, 0)
			checkSum(t, rep, err, data)
		}, want{inline: 1, readChunks: 1}},
		{"read-chunk-odd-length", nil, func(t *testing.T, p *pair) {
			data := pattern(5001, 3)
			rep, err := p.call(ctxT(t), procSum, ddpArgs(data), nil, 0)
			checkSum(t, rep, err, data)
		}, want{inline: 1, readChunks: 1}},
		{"read-chunks-several", nil, func(t *testing.T, p *pair) {
			a, b, c := pattern(3000, 1), pattern(1025, 2), pattern(8191, 3)
			bufs := [][]byte{make([]byte, 3000), make([]byte, 1025), make([]byte, 8191)}
			rep, err := p.call(ctxT(t), procMulti, ddpArgs(a, b, c), bufs, 0)
			if err != nil {
				t.Fatal(err)
			}
			d := rpc.NewBodyDecoder(rep.Results)
			for i, want := range [][]byte{a, b, c} {
				n := d.DDPOpaqueInto(bufs[i])
				if !bytes.Equal(bufs[i][:n], want) || d.Uint32() != uint32(i) {
					t.Fatalf("result %d wrong (%v)", i, d.Err())
				}
			}
			if err := d.Done(); err != nil {
				t.Fatal(err)
			}
		}, want{inline: 1, readChunks: 3, writeChunks: 3}},
		{"write-chunk-exact", nil, func(t *testing.T, p *pair) { readInto(t, p, 100000, 100000) }, want{inline: 1, writeChunks: 1}},
		{"write-chunk-partly-filled", nil, func(t *testing.T, p *pair) { readInto(t, p, 777, 100000) }, want{inline: 1, writeChunks: 1}},
		{"write-chunk-unused", nil, func(t *testing.T, p *pair) { readInto(t, p, 0, 4096) }, want{inline: 1, writeChunks: 1}},
		{"reply-chunk", nil, func(t *testing.T, p *pair) {
			rep, err := p.call(ctxT(t), procBig, u32Args(20000), nil, 20100)
			if err != nil {
				t.Fatal(err)
			}
			d := rpc.NewBodyDecoder(rep.Results)
			if got := d.Opaque(1 << 20); !bytes.Equal(got, pattern(20000, 5)) || d.Done() != nil {
				t.Fatalf("reply chunk result wrong: %d bytes, %v", len(got), d.Err())
			}
		}, want{inline: 1, replyChunks: 1}},
		{"write-list-and-reply-chunk", nil, func(t *testing.T, p *pair) {
			a, b, c := pattern(3000, 1), pattern(1025, 2), pattern(8191, 3)
			bufs := [][]byte{make([]byte, 3000)} // one write chunk; the rest go in the reply chunk
			rep, err := p.call(ctxT(t), procMulti, ddpArgs(a, b, c), bufs, 16384)
			if err != nil {
				t.Fatal(err)
			}
			d := rpc.NewBodyDecoder(rep.Results)
			for i, want := range [][]byte{a, b, c} {
				if got := d.DDPOpaque(1 << 20); !bytes.Equal(got, want) || d.Uint32() != uint32(i) {
					t.Fatalf("result %d wrong (%v)", i, d.Err())
				}
			}
			if d.Done() != nil || !bytes.Equal(bufs[0], a) {
				t.Fatal("write chunk not filled", d.Err())
			}
		}, want{inline: 1, readChunks: 3, writeChunks: 1, replyChunks: 1}},
		{"long-call", nil, func(t *testing.T, p *pair) {
			data := pattern(9000, 9)
			args := rpc.Body{XDR: xdr.AppendOpaque(nil, data)}
			rep, err := p.call(ctxT(t), procEchoFlat, args, nil, 9100)
			if err != nil {
				t.Fatal(err)
			}
			d := rpc.NewBodyDecoder(rep.Results)
			if got := d.Opaque(1 << 20); !bytes.Equal(got, data) || d.Done() != nil {
				t.Fatal("long call echo wrong", d.Err())
			}
		}, want{longCalls: 1, replyChunks: 1}},
		{"long-call-and-data-chunk", nil, func(t *testing.T, p *pair) {
			// Two DDP items around a large inline opaque: the reduced
			// call still exceeds the inline threshold, so it travels in
			// a position-zero chunk beside two data chunks.
			data := pattern(70001, 4)
			rep, err := p.call(ctxT(t), procMulti, longMulti(data), nil, 200000)
			if err != nil {
				t.Fatal(err)
			}
			d := rpc.NewBodyDecoder(rep.Results)
			for i, want := range [][]byte{data, pattern(6000, 1), data} {
				if got := d.DDPOpaque(1 << 20); !bytes.Equal(got, want) || d.Uint32() != uint32(i) {
					t.Fatalf("result %d wrong (%v)", i, d.Err())
				}
			}
			if err := d.Done(); err != nil {
				t.Fatal(err)
			}
		}, want{longCalls: 1, readChunks: 2, replyChunks: 1}},
		{"read-chunk-several-segments", nil, func(t *testing.T, p *pair) {
			setCut(t, p.conn, chunkCut{seg: 4096})
			data := pattern(20001, 6) // five segments, the last odd
			rep, err := p.call(ctxT(t), procSum, ddpArgs(data), nil, 0)
			checkSum(t, rep, err, data)
		}, want{inline: 1, readChunks: 1}},
		{"read-chunk-with-pad", nil, func(t *testing.T, p *pair) {
			setCut(t, p.conn, chunkCut{pad: true}) // an RFC 5666 requester
			data := pattern(5001, 7)
			rep, err := p.call(ctxT(t), procSum, ddpArgs(data, pattern(3, 1)), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			d := rpc.NewBodyDecoder(rep.Results)
			if n := d.Uint32(); n != 5001 {
				t.Fatalf("server saw %d bytes: the pad must not count", n)
			}
		}, want{inline: 1, readChunks: 1}},
		{"write-chunk-several-segments", nil, func(t *testing.T, p *pair) {
			setCut(t, p.conn, chunkCut{seg: 1500})
			readInto(t, p, 7000, 9000)
		}, want{inline: 1, writeChunks: 1}},
		{"ddp-threshold-all-chunks", &Config{DDPThreshold: -1}, func(t *testing.T, p *pair) {
			data := pattern(3, 1)
			rep, err := p.call(ctxT(t), procSum, ddpArgs(data), nil, 0)
			checkSum(t, rep, err, data)
		}, want{inline: 1, readChunks: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := np(t, tt.cfg, nil)
			cbase, sbase := p.conn.Stats().Registered, p.resp.Stats().Registered
			tt.check(t, p)
			s := p.conn.Stats()
			if s.Registered != cbase || s.CallsPending != 0 {
				t.Errorf("requester: %d bytes registered after the call (%d before), %d calls pending", s.Registered, cbase, s.CallsPending)
			}
			// The responder releases a reply's registrations when its
			// Send completes, which may be just after the requester has
			// the reply.
			deadline := time.Now().Add(5 * time.Second)
			for p.resp.Stats().Registered != sbase && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if r := p.resp.Stats(); r.Registered != sbase || r.CallsPending != 0 {
				t.Errorf("responder: %d bytes registered after the call (%d before), %d calls pending", r.Registered, sbase, r.CallsPending)
			}
			if s.ReadChunks > 0 && s.ReadChunkBytes == 0 || s.ReplyChunks > 0 && s.ReplyChunkBytes == 0 || s.InlineBytes == 0 {
				t.Errorf("byte counters not kept: %+v", s)
			}
			got := want{s.Inline, s.ReadChunks, s.WriteChunks, s.ReplyChunks, s.LongCalls}
			if got != tt.want {
				t.Errorf("requester counters %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDataPaths(t *testing.T) { forProviders(t, testDataPaths) }

// longMulti builds procMulti arguments whose middle item is a large inline
// opaque, so the call needs both a position-zero chunk and data chunks.
func longMulti(data []byte) rpc.Body {
	var b rpc.Body
	b.AppendDDPOpaque(data)
	b.XDR = xdr.AppendUint32(b.XDR, 0)
	b.XDR = xdr.AppendOpaque(b.XDR, pattern(6000, 1))
	b.XDR = xdr.AppendUint32(b.XDR, 1)
	b.AppendDDPOpaque(data)
	b.XDR = xdr.AppendUint32(b.XDR, 2)
	return b
}

func checkSum(t *testing.T, rep rpc.Reply, err error, data []byte) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	d := rpc.NewBodyDecoder(rep.Results)
	n, sum := d.Uint32(), d.Uint32()
	if err := d.Done(); err != nil || n != uint32(len(data)) || sum != crc32.ChecksumIEEE(data) {
		t.Fatalf("server saw %d bytes crc %08x (%v), sent %d crc %08x", n, sum, err, len(data), crc32.ChecksumIEEE(data))
	}
}

// readInto reads n bytes into a write chunk of size bytes and checks that
// they landed in place and that nothing beyond them (no XDR pad) was
// written.
func readInto(t *testing.T, p *pair, n, size int) {
	t.Helper()
	buf := bytes.Repeat([]byte{0xee}, size)
	rep, err := p.call(ctxT(t), procRead, u32Args(n), [][]byte{buf}, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := rpc.NewBodyDecoder(rep.Results)
	if !d.Bool() {
		t.Fatal("bad result")
	}
	got := d.DDPOpaqueInto(buf)
	if got != n || !bytes.Equal(buf[:n], pattern(n, 3)) {
		t.Fatalf("read %d bytes, want %d", got, n)
	}
	if d.Uint32() != 0xfeedf00d || d.Done() != nil {
		t.Fatalf("trailer wrong: %v", d.Err())
	}
	if n > 0 && len(rep.Results.Items) != 1 {
		t.Fatalf("result not placed directly: %d items", len(rep.Results.Items))
	}
	for i := n; i < size; i++ {
		if buf[i] != 0xee {
			t.Fatalf("byte %d beyond the result was written (XDR pad written into a write chunk?)", i)
		}
	}
}

// TestCredits runs more concurrent callers than credits and checks that
// the requester never exceeds the grant and every call completes.
func testCredits(t *testing.T, np pairFunc) {
	p := np(t, &Config{Credits: 64}, &Config{Grant: GrantPolicy{Max: 4}})
	ctx := ctxT(t)
	if err := p.cli.Null(ctx, testProg, testVers); err != nil {
		t.Fatal(err)
	}
	if g, _ := p.conn.req.credits.state(); g != 4 {
		t.Fatalf("grant %d after the first reply, want 4", g)
	}
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		go func() {
			data := pattern(2000+i, byte(i))
			rep, err := p.call(ctx, procSum, ddpArgs(data), nil, 0)
			if err == nil {
				d := rpc.NewBodyDecoder(rep.Results)
				if d.Uint32() != uint32(len(data)) || d.Uint32() != crc32.ChecksumIEEE(data) {
					err = fmt.Errorf("call %d: wrong result", i)
				}
			}
			errs <- err
		}()
	}
	for i := 0; i < 40; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, inFlight := p.conn.req.credits.state(); inFlight != 0 {
		t.Fatalf("%d credits still held", inFlight)
	}
}

func TestCredits(t *testing.T) { forProviders(t, testCredits) }

// TestCreditWaitRespectsContext blocks every credit and checks that a
// caller waiting for one gives up with its context.
func TestCreditWaitRespectsContext(t *testing.T) {
	p := newPair(t, nil, &Config{Grant: GrantPolicy{Max: 1}})
	ctx := ctxT(t)
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := p.call(bctx, procBlock, rpc.Body{}, nil, 0)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, n := p.conn.req.credits.state(); n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	short, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if err := p.cli.Null(short, testProg, testVers); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a credit: %v", err)
	}
	cancel()
	<-done
}

// TestVersions covers Version Two negotiation and fallback.
func testVersions(t *testing.T, np pairFunc) {
	v1, v2, both := []wire.Version{1}, []wire.Version{2}, []wire.Version{1, 2}
	tests := []struct {
		name       string
		cli, srv   []wire.Version
		want       wire.Version
		fallbacks  uint64
		errVersErr bool
	}{
		{"v2-to-v2", both, both, 2, 0, false},
		{"v2-falls-back-to-v1", both, v1, 1, 1, false},
		{"v1-to-v2-capable", v1, both, 1, 0, false},
		{"v2-only-to-v1-only", v2, v1, 2, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := np(t, &Config{Versions: tt.cli}, &Config{Versions: tt.srv})
			data := pattern(50000, 1)
			rep, err := p.call(ctxT(t), procSum, ddpArgs(data), nil, 0)
			if tt.errVersErr {
				var re *RemoteError
				if !errors.As(err, &re) || re.Code != wire.ErrVers || re.Low != 1 || re.High != 1 {
					t.Fatalf("err = %v, want ERR_VERS 1..1", err)
				}
				if errors.Is(err, net.ErrClosed) {
					t.Fatal("ERR_VERS must fail the call, not the connection")
				}
				return
			}
			checkSum(t, rep, err, data)
			if v := p.conn.Info().Version; v != tt.want {
				t.Errorf("version %d, want %d", v, tt.want)
			}
			// The responder reports the version its calls came in.
			if v := p.resp.Info().Version; v != tt.want {
				t.Errorf("responder's version %d, want %d", v, tt.want)
			}
			if f := p.conn.Stats().VersionFallback; f != tt.fallbacks {
				t.Errorf("fallbacks %d, want %d", f, tt.fallbacks)
			}
			// And the connection keeps working.
			rep, err = p.call(ctxT(t), procSum, ddpArgs(data[:10]), nil, 0)
			checkSum(t, rep, err, data[:10])
		})
	}
}

func TestVersions(t *testing.T) { forProviders(t, testVersions) }

// TestRemoteInvalidation checks that replies use Send With Invalidate
// exactly when the requester allows it and the call named one STag.
func testRemoteInvalidation(t *testing.T, np pairFunc) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled=%v", off), func(t *testing.T) {
			p := np(t, &Config{NoRemoteInvalidation: off}, nil)
			readInto(t, p, 5000, 8192) // one write chunk: one STag
			want := uint64(1)
			if off {
				want = 0
			}
			if got := p.conn.Stats().RemoteInvalid; got != want {
				t.Fatalf("remote invalidations %d, want %d", got, want)
			}
			// Two STags: never invalidate remotely.
			a := pattern(3000, 1)
			bufs := [][]byte{make([]byte, 3000), make([]byte, 3000), make([]byte, 3000)}
			if _, err := p.call(ctxT(t), procMulti, ddpArgs(a, a, a), bufs, 0); err != nil {
				t.Fatal(err)
			}
			if got := p.conn.Stats().RemoteInvalid; got != want {
				t.Fatalf("remote invalidations %d after a call with several STags, want %d", got, want)
			}
		})
	}
}

func TestRemoteInvalidation(t *testing.T) { forProviders(t, testRemoteInvalidation) }

// TestReplyTooLarge: a reply that fits neither inline nor a reply chunk is
// answered with ERR_CHUNK, failing the call and not the connection.
func testReplyTooLarge(t *testing.T, np pairFunc) {
	var logs lockedBuffer
	p := np(t, nil, &Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, err := p.call(ctxT(t), procBig, u32Args(20000), nil, 0)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != wire.ErrChunk {
		t.Fatalf("err = %v, want ERR_CHUNK", err)
	}
	// The requester names the knob, the responder logs the sizes.
	if !strings.Contains(err.Error(), "no reply chunk (set rpc.Request.MaxReply") {
		t.Errorf("ERR_CHUNK error does not point at MaxReply: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, "answering ERR_CHUNK") || !strings.Contains(l, "fit neither inline") {
		t.Errorf("responder did not log why it answered ERR_CHUNK; log:\n%s", l)
	}
	if err := p.cli.Null(ctxT(t), testProg, testVers); err != nil {
		t.Fatalf("connection unusable after ERR_CHUNK: %v", err)
	}

	// A result larger than the one write chunk offered: ERR_CHUNK, and
	// although the call named exactly one STag and the requester accepts
	// Send With Invalidate, an RDMA_ERROR never invalidates remotely.
	_, err = p.call(ctxT(t), procRead, u32Args(5000), [][]byte{make([]byte, 4096)}, 0)
	if !errors.As(err, &re) || re.Code != wire.ErrChunk {
		t.Fatalf("result beyond the write chunk: err = %v, want ERR_CHUNK", err)
	}
	if !strings.Contains(err.Error(), "write chunks of 4096 bytes") || !strings.Contains(err.Error(), "ResultBufs") {
		t.Errorf("ERR_CHUNK error does not point at ResultBufs: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, "exceeds write chunk 0 of 4096 bytes") {
		t.Errorf("responder did not log the result's size; log:\n%s", l)
	}
	if n := p.conn.Stats().RemoteInvalid; n != 0 {
		t.Fatalf("RDMA_ERROR sent with Invalidate (%d STags invalidated remotely)", n)
	}
	if n := p.resp.Stats().ErrorsSent[wire.ErrChunk]; n != 2 {
		t.Fatalf("responder sent %d ERR_CHUNK, want 2", n)
	}
}

func TestReplyTooLarge(t *testing.T) { forProviders(t, testReplyTooLarge) }

// lockedBuffer is a bytes.Buffer for a logger that other goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCancelInvalidates abandons a call with a write chunk and checks that
// its registrations go at once while its credit stays until the reply.
func testCancelInvalidates(t *testing.T, np pairFunc) {
	p := np(t, nil, nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	before := p.net.Registered()
	go func() {
		_, err := p.call(ctx, procBlock, rpc.Body{}, [][]byte{make([]byte, 4096)}, 0)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for p.net.Registered() == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if got := p.net.Registered(); got != before {
		t.Fatalf("%d registrations after cancel, want %d", got, before)
	}
	if _, n := p.conn.req.credits.state(); n != 1 {
		t.Fatalf("cancelled call holds %d credits, want 1 until its reply", n)
	}
}

func TestCancelInvalidates(t *testing.T) { forProviders(t, testCancelInvalidates) }

// TestCloseFailsCalls closes the requester under a blocked call.
func TestCloseFailsCalls(t *testing.T) {
	p := newPair(t, nil, nil)
	done := make(chan error, 1)
	go func() {
		_, err := p.call(ctxT(t), procBlock, rpc.Body{}, nil, 0)
		done <- err
	}()
	waitServerCalls(t, p.srv, 1) // the call is in its handler
	p.conn.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("call cut by Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call not failed by Close")
	}
}

// TestConfRDMA calls the Connection Configuration Protocol, which every
// responder serves whatever its rpc.Server handles.
func testConfRDMA(t *testing.T, np pairFunc) {
	p := np(t, nil, &Config{InlineRecv: 8192})
	ctx := ctxT(t)
	cr, err := QueryConfig(ctx, p.cli, wire.ConfigReq{MaxCallSendSize: 4096, MaxReplySendSize: 4096, MaxRDMARead: 8})
	if err != nil {
		t.Fatal(err)
	}
	if cr.MaxCallSendSize != 8192 || cr.MaxRDMARead == 0 || cr.Align != 0 {
		t.Fatalf("CONF_RDMA answered %v", cr)
	}
	if err := p.cli.Null(ctx, wire.ConfigProgram, wire.ConfigVersion); err != nil {
		t.Fatalf("NULL to program 100417: %v", err)
	}
	_, err = p.cli.Call(ctx, &rpc.Request{Prog: wire.ConfigProgram, Vers: 2, Proc: 1})
	var ae *rpc.AcceptError
	if !errors.As(err, &ae) || ae.Stat != rpc.ProgMismatch || ae.Low != 1 || ae.High != 1 {
		t.Fatalf("version 2: %v, want PROG_MISMATCH 1..1", err)
	}
	_, err = p.cli.Call(ctx, &rpc.Request{Prog: wire.ConfigProgram, Vers: 1, Proc: 9})
	if !errors.As(err, &ae) || ae.Stat != rpc.ProcUnavail {
		t.Fatalf("procedure 9: %v, want PROC_UNAVAIL", err)
	}
	_, err = p.cli.Call(ctx, &rpc.Request{Prog: wire.ConfigProgram, Vers: 1, Proc: 1, Args: rpc.Body{XDR: []byte{0, 0, 0, 1}}})
	if !errors.As(err, &ae) || ae.Stat != rpc.GarbageArgs {
		t.Fatalf("short arguments: %v, want GARBAGE_ARGS", err)
	}
}

func TestConfRDMA(t *testing.T) { forProviders(t, testConfRDMA) }

// TestOptional sends Version Two RDMA_OPTIONAL messages: a registered
// opttype reaches its handler, an unknown one is answered
// RDMA_ERR_INVAL_OPTION, and Version One refuses to send them.
func testOptional(t *testing.T, np pairFunc) {
	got := make(chan string, 1)
	scfg := &Config{Options: map[uint32]OptionHandler{
		42: func(c *Conn, info, payload []byte) error { got <- string(info) + "|" + string(payload); return nil },
	}}
	p := np(t, &Config{Versions: []wire.Version{1, 2}}, scfg)
	ctx := ctxT(t)
	if err := p.cli.Null(ctx, testProg, testVers); err != nil { // settles version 2
		t.Fatal(err)
	}
	if err := p.conn.SendOptional(ctx, 7, 42, []byte("info"), []byte("payload")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "info|payload" {
			t.Fatalf("handler got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler not called")
	}
	if err := p.conn.SendOptional(ctx, 8, 43, nil, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.conn.Stats().ErrorsReceived[wire.ErrInvalOption] == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := p.conn.Stats().ErrorsReceived[wire.ErrInvalOption]; n != 1 {
		t.Fatalf("RDMA_ERR_INVAL_OPTION received %d times, want 1", n)
	}
	if err := p.cli.Null(ctx, testProg, testVers); err != nil {
		t.Fatalf("connection unusable after INVAL_OPTION: %v", err)
	}

	v1 := np(t, nil, nil)
	if err := v1.conn.SendOptional(ctx, 1, 42, nil, nil); err == nil {
		t.Fatal("RDMA_OPTIONAL sent in Version One")
	}
}

func TestOptional(t *testing.T) { forProviders(t, testOptional) }

// TestReadChunkReply: with both sides opted in, a reply that fits neither
// inline nor a reply chunk comes back as an RFC 5666 read-chunk reply,
// which the requester pulls and acknowledges with RDMA_DONE, after which
// the responder releases it.
func testReadChunkReply(t *testing.T, np pairFunc) {
	p := np(t, &Config{ReadChunkReplies: true}, &Config{ReadChunkReplies: true})
	base := p.resp.Stats().Registered
	rep, err := p.call(ctxT(t), procBig, u32Args(20000), nil, 0) // no reply chunk offered
	if err != nil {
		t.Fatal(err)
	}
	d := rpc.NewBodyDecoder(rep.Results)
	if got := d.Opaque(1 << 20); !bytes.Equal(got, pattern(20000, 5)) || d.Done() != nil {
		t.Fatalf("read-chunk reply wrong: %d bytes, %v", len(got), d.Err())
	}
	if n := p.conn.Stats().ReadReplies; n != 1 {
		t.Fatalf("requester pulled %d read-chunk replies", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.resp.Stats().Registered != base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := p.resp.Stats().Registered; got != base {
		t.Fatalf("responder still holds %d bytes after RDMA_DONE", got-base)
	}

	// The DONE timeout releases a reply the requester never acknowledges.
	q := np(t, nil, &Config{ReadChunkReplies: true, DoneTimeout: 50 * time.Millisecond})
	qbase := q.resp.Stats().Registered
	if _, err := q.call(ctxT(t), procBig, u32Args(20000), nil, 0); !errors.Is(err, ErrBadReply) {
		t.Fatalf("requester not opted in: %v, want ErrBadReply", err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for q.resp.Stats().Registered != qbase && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := q.resp.Stats().Registered; got != qbase {
		t.Fatalf("read-chunk reply still registered after the DONE timeout (%d bytes)", got-qbase)
	}
}

func TestReadChunkReply(t *testing.T) { forProviders(t, testReadChunkReply) }

// TestShutdownCompletesCalls shuts the server down while calls are in
// flight over the software iWARP: every call gets its reply before the
// connection closes.
func TestShutdownCompletesCalls(t *testing.T) {
	p := newPairOver(t, newIWARP(t), "127.0.0.1:0", nil, nil)
	ctx := ctxT(t)
	if err := p.cli.Null(ctx, testProg, testVers); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := p.call(ctx, procSleep, u32Args(300), nil, 0)
			errs <- err
		}()
	}
	waitServerCalls(t, p.srv, 1+n) // the NULL call, then every call in its handler
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("call lost in shutdown: %v", err)
		}
	}
	if t.Failed() {
		t.Logf("requester %+v", p.conn.Stats())
		t.Logf("responder %+v err %v", p.resp.Stats(), p.resp.Err())
		t.Logf("server %+v", p.srv.Stats())
	}
}

// TestGrantWithinReceives: a responder never grants more credits than it
// has receives posted for (less two for messages outside the credit count),
// even when its policy asks for more than the provider's queues hold.
func TestGrantWithinReceives(t *testing.T) {
	scfg := &Config{Grant: GrantPolicy{Max: 20000}, InlineRecv: 1024, InlineSend: 1024}
	p := newPair(t, &Config{InlineRecv: 1024, InlineSend: 1024}, scfg)
	if err := p.cli.Null(ctxT(t), testProg, testVers); err != nil {
		t.Fatal(err)
	}
	posted := p.resp.recvSlots
	if g := p.resp.Info().Credits; posted != loopback.MaxQueueDepth || g != uint32(posted-2) {
		t.Fatalf("granted %d with %d receives posted (provider maximum %d)", g, posted, loopback.MaxQueueDepth)
	}
	if g, _ := p.conn.req.credits.state(); g > uint32(p.conn.recvSlots-1) {
		t.Fatalf("requester accepted a grant of %d with %d receives for replies", g, p.conn.recvSlots)
	}
}
