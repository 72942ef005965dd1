package rpc

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

func smallReply(s string) *Msg { return &Msg{Body: Body{XDR: []byte(s)}} }

func TestReplyCacheLRU(t *testing.T) {
	rc := newReplyCache(2, 100)
	k := func(xid uint32) cacheKey { return cacheKey{xid: xid} }
	for _, x := range []uint32{1, 2, 3} {
		e, first := rc.begin(k(x))
		if !first {
			t.Fatalf("xid %d: seen before", x)
		}
		rc.finish(e, smallReply("reply"))
	}
	// 1 is the least recent of three, with room for two.
	if _, first := rc.begin(k(1)); !first {
		t.Error("xid 1 kept beyond the cache's size")
	}
	e, first := rc.begin(k(2))
	if first || string(e.reply.XDR) != "reply" {
		t.Fatalf("xid 2: first %v, reply %q", first, e.reply.XDR)
	}
	// 2 was used last, so adding 4 drops 3, not 2. (1 is running.)
	e4, _ := rc.begin(k(4))
	rc.finish(e4, smallReply("four"))
	if _, first := rc.begin(k(2)); first {
		t.Error("xid 2, used most recently, was dropped")
	}
	if _, first := rc.begin(k(3)); !first {
		t.Error("xid 3, the least recent, was kept")
	}
	if rc.n != 2 {
		t.Errorf("%d replies kept, want 2", rc.n)
	}
}

func TestReplyCacheLarge(t *testing.T) {
	rc := newReplyCache(10, 8)
	big := &Msg{Body: Body{XDR: []byte("head"), Items: []DDPItem{{Offset: 4, Data: []byte("0123456789")}}}}

	// Nobody waits: not kept, not even copied.
	e, _ := rc.begin(cacheKey{xid: 1})
	rc.finish(e, big)
	if e.reply.XDR != nil {
		t.Error("a reply too large to keep, with nobody waiting, was copied")
	}
	if _, first := rc.begin(cacheKey{xid: 1}); !first {
		t.Error("a reply too large to keep was kept")
	}

	// A duplicate waits: it gets a copy, and the entry is forgotten.
	e, _ = rc.begin(cacheKey{xid: 2})
	dup, first := rc.begin(cacheKey{xid: 2})
	if first || dup != e {
		t.Fatal("the duplicate did not find the running call")
	}
	rc.finish(e, big)
	<-dup.done
	if string(dup.reply.XDR) != "head" || len(dup.reply.Items) != 1 || string(dup.reply.Items[0].Data) != "0123456789" {
		t.Errorf("waiting duplicate got %+v", dup.reply)
	}
	big.Items[0].Data[0] = 'X'
	if dup.reply.Items[0].Data[0] != '0' {
		t.Error("the cached reply shares memory with the handler's")
	}
	if _, first := rc.begin(cacheKey{xid: 2}); !first {
		t.Error("a reply too large to keep was kept after a duplicate took it")
	}

	// Abandoned: the duplicate finds nothing to replay.
	e, _ = rc.begin(cacheKey{xid: 3})
	dup, _ = rc.begin(cacheKey{xid: 3})
	rc.abandon(e)
	<-dup.done
	if dup.reply.XDR != nil {
		t.Error("an abandoned call left a reply")
	}
	if _, first := rc.begin(cacheKey{xid: 3}); !first {
		t.Error("an abandoned call stayed in the cache")
	}
}

func TestReplyCacheKey(t *testing.T) {
	rc := newReplyCache(1, 1)
	args := bytes.Repeat([]byte{7}, 300)
	base := func() *Call {
		return &Call{
			Header: CallHeader{XID: 9, Prog: 100003, Vers: 3, Proc: 7, Cred: OpaqueAuth{Flavor: AuthSys, Body: []byte("cred")}},
			Args:   Body{XDR: bytes.Clone(args), Items: []DDPItem{{Offset: 8, Data: make([]byte, 1000)}}},
		}
	}
	client := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 700}
	want := rc.key(base(), client)
	same := []struct {
		name string
		addr net.Addr
		mod  func(*Call)
	}{
		{"another port (a new connection)", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1023}, nil},
		{"a byte past the checksummed length", client, func(c *Call) { c.Args.XDR[checksumLen] = 1 }},
		{"other item data of the same length", client, func(c *Call) { c.Args.Items[0].Data[0] = 1 }},
	}
	for _, tc := range same {
		c := base()
		if tc.mod != nil {
			tc.mod(c)
		}
		if rc.key(c, tc.addr) != want {
			t.Errorf("%s: a different key", tc.name)
		}
	}
	differ := []struct {
		name string
		addr net.Addr
		mod  func(*Call)
	}{
		{"xid", client, func(c *Call) { c.Header.XID++ }},
		{"program", client, func(c *Call) { c.Header.Prog++ }},
		{"version", client, func(c *Call) { c.Header.Vers++ }},
		{"procedure", client, func(c *Call) { c.Header.Proc++ }},
		{"credential", client, func(c *Call) { c.Header.Cred.Body = []byte("creD") }},
		{"flavor", client, func(c *Call) { c.Header.Cred.Flavor = AuthNone }},
		{"argument byte", client, func(c *Call) { c.Args.XDR[0] = 1 }},
		{"argument length", client, func(c *Call) { c.Args.XDR = c.Args.XDR[:299] }},
		{"item length", client, func(c *Call) { c.Args.Items[0].Data = c.Args.Items[0].Data[:999] }},
		{"item offset", client, func(c *Call) { c.Args.Items[0].Offset = 12 }},
		{"client", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 700}, nil},
	}
	for _, tc := range differ {
		c := base()
		if tc.mod != nil {
			tc.mod(c)
		}
		if rc.key(c, tc.addr) == want {
			t.Errorf("another %s: the same key", tc.name)
		}
	}
}

// procCount counts its runs and answers the count, after waiting for
// the test when a gate is set.
const procCount = 30

type counted struct {
	runs atomic.Uint32
	ran  chan struct{} // a token per run started
	gate chan struct{} // if not nil, runs wait for it to close
}

func countingServer(o *ServerOptions) (*Server, *counted) {
	s := NewServer(o)
	cn := &counted{ran: make(chan struct{}, 100)}
	s.Handle(testProg, 1, procCount, func(ctx context.Context, c *Call) (Body, error) {
		n := cn.runs.Add(1)
		cn.ran <- struct{}{}
		if cn.gate != nil {
			<-cn.gate
		}
		return Body{XDR: xdr.AppendUint32(nil, n)}, nil
	})
	return s, cn
}

// rawCall sends a procCount call with xid and arg on t.
func rawCall(t *testing.T, tr Transport, xid, arg uint32) {
	t.Helper()
	h := CallHeader{XID: xid, RPCVers: RPCVersion, Prog: testProg, Vers: 1, Proc: procCount}
	if err := tr.Send(context.Background(), &Msg{Body: Body{XDR: xdr.AppendUint32(h.Append(nil), arg)}}); err != nil {
		t.Fatal(err)
	}
}

// recvCount receives a reply and returns its xid and count.
func recvCount(t *testing.T, tr Transport) (xid, n uint32) {
	t.Helper()
	m, err := tr.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var rh ReplyHeader
	d := xdr.NewDecoder(m.XDR)
	if err := rh.Decode(&d); err != nil || rh.AcceptStat != Success {
		t.Fatalf("reply %+v %v", rh, err)
	}
	return rh.XID, d.Uint32()
}

// TestServerReplyCache sends calls again on the same and on another
// transport: with the cache on, a copy of a call gets the first run's
// reply, whether it came after the run or during it.
func TestServerReplyCache(t *testing.T) {
	leaktest.Check(t)
	srv, cn := countingServer(&ServerOptions{ReplyCache: 16})
	defer srv.Close()
	serve := func() *memTransport {
		ct, st := memPair()
		go srv.Serve(st)
		return ct
	}
	a, b := serve(), serve()

	rawCall(t, a, 100, 1)
	if _, n := recvCount(t, a); n != 1 {
		t.Fatalf("first run answered %d", n)
	}
	rawCall(t, b, 100, 1) // the same call again, on another connection
	if xid, n := recvCount(t, b); xid != 100 || n != 1 {
		t.Errorf("the copy was answered xid %d count %d, want the first reply (xid 100, count 1)", xid, n)
	}
	rawCall(t, b, 100, 2) // same xid, other arguments: another call
	if _, n := recvCount(t, b); n != 2 {
		t.Errorf("a call with other arguments answered %d, want a second run", n)
	}
	rawCall(t, b, 101, 1) // another xid
	if _, n := recvCount(t, b); n != 3 {
		t.Errorf("a call with another xid answered %d, want a third run", n)
	}

	// A copy arriving while the first still runs waits for it.
	cn.gate = make(chan struct{})
	rawCall(t, a, 200, 1)
	<-cn.ran
	<-cn.ran
	<-cn.ran
	<-cn.ran // the fourth run, held
	rawCall(t, b, 200, 1)
	deadline := time.Now().Add(5 * time.Second)
	for srv.cache.waiting() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(cn.gate)
	_, na := recvCount(t, a)
	_, nb := recvCount(t, b)
	if na != 4 || nb != 4 {
		t.Errorf("running call and its copy answered %d and %d, want 4 both", na, nb)
	}
	if r := cn.runs.Load(); r != 4 {
		t.Errorf("%d runs, want 4", r)
	}
	if st := srv.Stats(); st.CacheReplays != 2 || st.CacheWaits != 1 || st.Calls != 4 {
		t.Errorf("stats %+v, want 2 replays (1 waited) and 4 calls run", st)
	}
	a.Close()
	b.Close()
}

// TestServerNoReplyCache: without the cache, a copy runs again.
func TestServerNoReplyCache(t *testing.T) {
	leaktest.Check(t)
	srv, _ := countingServer(nil)
	defer srv.Close()
	ct, st := memPair()
	go srv.Serve(st)
	defer ct.Close()
	rawCall(t, ct, 100, 1)
	recvCount(t, ct)
	rawCall(t, ct, 100, 1)
	if _, n := recvCount(t, ct); n != 2 {
		t.Errorf("copy answered %d, want a second run", n)
	}
}

// TestServerReplyCacheFor: calls ReplyCacheFor leaves out run again.
func TestServerReplyCacheFor(t *testing.T) {
	leaktest.Check(t)
	for _, cached := range []bool{false, true} {
		srv, _ := countingServer(&ServerOptions{ReplyCache: 16, ReplyCacheFor: func(prog, vers, proc uint32) bool {
			return cached && prog == testProg && proc == procCount
		}})
		ct, st := memPair()
		go srv.Serve(st)
		rawCall(t, ct, 100, 1)
		recvCount(t, ct)
		rawCall(t, ct, 100, 1)
		want := uint32(2)
		if cached {
			want = 1
		}
		if _, n := recvCount(t, ct); n != want {
			t.Errorf("cached %v: copy answered %d, want %d", cached, n, want)
		}
		ct.Close()
		srv.Close()
	}
}

// TestReplyCacheExactlyOnce runs a non-idempotent procedure whose reply
// is lost with its connection: the client sends the call again on a new
// connection, and the server, with its cache on, answers with the first
// run's reply instead of running it twice. Without the cache it runs
// twice: what the cache is for.
func TestReplyCacheExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int
		runs  uint32
	}{{"cache", 16, 1}, {"no-cache", 0, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			srv, cn := countingServer(&ServerOptions{ReplyCache: tc.cache})
			cn.gate = make(chan struct{})
			cli, tl := serveReconnecting(t, srv)
			type result struct {
				n   uint32
				err error
			}
			done := make(chan result, 1)
			go func() {
				r, err := cli.Call(ctxTimeout(t, 10*time.Second), &Request{Prog: testProg, Vers: 1, Proc: procCount, Args: Body{XDR: xdr.AppendUint32(nil, 5)}})
				if err != nil {
					done <- result{err: err}
					return
				}
				d := xdr.NewDecoder(r.Results.XDR)
				done <- result{n: d.Uint32()}
			}()
			<-cn.ran
			tl.dropAll() // the reply will have nowhere to go
			if tc.cache == 0 {
				close(cn.gate) // the copy runs beside the first
			} else {
				// Let the first run end after its connection did.
				time.Sleep(20 * time.Millisecond)
				close(cn.gate)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if runs := cn.runs.Load(); runs != tc.runs || r.n != tc.runs {
				t.Errorf("%d runs, reply says %d; want %d", runs, r.n, tc.runs)
			}
			if st := cli.Stats(); st.Retransmits != 1 {
				t.Errorf("client stats %+v, want the call sent again", st)
			}
		})
	}
}

// TestReplyCacheConnectionFailure: a handler that fails because its
// connection did (its context ended) leaves nothing in the cache, so the
// copy of its call sent on a new connection runs, and succeeds.
func TestReplyCacheConnectionFailure(t *testing.T) {
	leaktest.Check(t)
	srv := NewServer(&ServerOptions{ReplyCache: 16})
	var runs atomic.Uint32
	started := make(chan struct{}, 2)
	srv.Handle(testProg, 1, procCount, func(ctx context.Context, c *Call) (Body, error) {
		n := runs.Add(1)
		started <- struct{}{}
		if n == 1 {
			<-ctx.Done()
			return Body{}, ctx.Err()
		}
		return Body{XDR: xdr.AppendUint32(nil, n)}, nil
	})
	cli, tl := serveReconnecting(t, srv)
	done := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctxTimeout(t, 10*time.Second), &Request{Prog: testProg, Vers: 1, Proc: procCount, Args: Body{XDR: xdr.AppendUint32(nil, 5)}})
		done <- err
	}()
	<-started
	tl.dropAll()
	if err := <-done; err != nil {
		t.Fatalf("the copy of a call whose first run failed with its connection: %v", err)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}
}

// TestReconnectChaos makes many concurrent calls while connections are
// cut at random: every call completes with its own answer, and, with the
// reply cache on, each ran exactly once on the server however often it
// was sent.
func TestReconnectChaos(t *testing.T) {
	leaktest.Check(t)
	n := newRedialNet(t)
	n.srv = NewServer(&ServerOptions{ReplyCache: 4096})
	var mu sync.Mutex
	runs := map[uint32]int{}
	n.srv.Handle(testProg, 1, procHeld, func(ctx context.Context, c *Call) (Body, error) {
		d := c.Decoder()
		v := d.Uint32()
		if err := d.Done(); err != nil {
			return Body{}, err
		}
		mu.Lock()
		runs[v]++
		mu.Unlock()
		time.Sleep(time.Duration(v%3) * 100 * time.Microsecond)
		return Body{XDR: xdr.AppendUint32(nil, v+1)}, nil
	})
	c := n.client(ReconnectConfig{})
	// The callers call until the cutter has made its cuts, each waiting a
	// few milliseconds for the previous one to settle.
	const callers, cuts = 16, 20
	ctx := ctxTimeout(t, 60*time.Second)
	stop := make(chan struct{})
	var next atomic.Uint32
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := held(ctx, c, next.Add(1)-1); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for cut := range cuts {
		time.Sleep(time.Duration(2+cut%5) * time.Millisecond)
		n.mu.Lock()
		last := len(n.servers) - 1
		n.mu.Unlock()
		n.cut(last)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for v := range next.Load() {
		if runs[v] != 1 {
			t.Errorf("call %d ran %d times", v, runs[v])
		}
	}
	st := c.Stats()
	t.Logf("%d calls over %d connections, client %+v, server %+v", next.Load(), n.conns(), st, n.srv.Stats())
	if st.Retransmits == 0 {
		t.Error("no call was sent again: the cuts missed every call")
	}
}

// waiting returns how many copies of running calls wait for them.
func (rc *replyCache) waiting() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, e := range rc.entries {
		if !e.kept {
			n += e.waiters
		}
	}
	return n
}

// TestReplyCacheWaiterGone: a copy waiting for its first run is dropped
// when its own transport ends, and counts as neither a replay nor a wait;
// the first run still answers on its transport.
func TestReplyCacheWaiterGone(t *testing.T) {
	leaktest.Check(t)
	srv, cn := countingServer(&ServerOptions{ReplyCache: 16})
	defer srv.Close()
	cn.gate = make(chan struct{})
	a, sa := memPair()
	b, sb := memPair()
	go srv.Serve(sa)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sb) }()
	rawCall(t, a, 300, 1)
	<-cn.ran
	rawCall(t, b, 300, 1)
	deadline := time.Now().Add(5 * time.Second)
	for srv.cache.waiting() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.Close()
	<-served
	close(cn.gate)
	if _, n := recvCount(t, a); n != 1 {
		t.Errorf("first run answered %d", n)
	}
	if st := srv.Stats(); st.CacheReplays != 0 || st.CacheWaits != 0 || st.Dropped != 1 || cn.runs.Load() != 1 {
		t.Errorf("stats %+v, %d runs; want the copy dropped, one run", st, cn.runs.Load())
	}
	a.Close()
}
