package iwarp

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// directPair connects two conns of p.
//
// A reader goroutine parked for a direct owner stays parked for a minute
// after a section, not directIdle, so that a test that parks it
// (parkReader) finds it still parked on a slow machine; a test of the
// idle path itself sets directIdle back (keepParked).
func directPair(t *testing.T) (a, b *Conn) {
	t.Helper()
	p := newProvider(t, Options{})
	ca, cb := rdmatest.Pair(t, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0"}, rdma.ConnConfig{}, rdma.ConnConfig{})
	a, b = ca.(*Conn), cb.(*Conn)
	keepParked(a, time.Minute)
	keepParked(b, time.Minute)
	return a, b
}

// keepParked sets how long c's reader goroutine stays parked after a
// direct section.
func keepParked(c *Conn, d time.Duration) {
	c.mu.Lock()
	c.dir.idleAfter = d
	c.mu.Unlock()
}

// waitFor polls cond every millisecond for at most 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *Conn) dirState() directState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dir
}

// TestDirectPingPong: in a direct section, a Send posted with
// PostSendDirect waits for the owner's WaitDirect, which transmits it,
// and the owner reads the replies itself once the reader goroutine has
// given the receive role up.
func TestDirectPingPong(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	a, b := directPair(t)
	am := rdmatest.Alloc(t, a, 128, rdma.AccessLocalWrite)
	bm := rdmatest.Alloc(t, b, 128, rdma.AccessLocalWrite)
	ctx := rdmatest.Context(t, rdmatest.Config{})
	cs := make([]rdma.Completion, 4)
	a.BeginDirect()
	defer a.EndDirect()
	const rounds = 50
	for i := range rounds {
		rdmatest.PostRecv(t, a, uint64(100+i), rdma.SGE{MR: am, Offset: 64, Length: 64})
		rdmatest.PostRecv(t, b, uint64(200+i), rdma.SGE{MR: bm, Length: 64})
		am.Bytes()[0] = byte(i)
		if err := a.PostSendDirect(&rdma.WorkRequest{ID: uint64(i), Op: rdma.OpSend, Local: []rdma.SGE{{MR: am, Length: 8}}}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			a.mu.Lock()
			next, tail, deferred := a.sqNext, a.q.SQ.Tail, a.dir.deferred
			a.mu.Unlock()
			if next == tail || !deferred {
				t.Fatalf("PostSendDirect in a section: the writer took it (sq next %d, tail %d, deferred %v)", next, tail, deferred)
			}
		}
		var got []rdma.Completion
		for len(got) < 2 {
			n, err := a.WaitDirect(ctx, cs)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			got = append(got, cs[:n]...)
			if len(got) == 1 && got[0].Op == rdma.OpSend {
				// b echoes once it has the message.
				bc := rdmatest.WaitN(t, rdmatest.Config{}, b, 1)
				rdmatest.Want(t, bc[0], uint64(200+i), rdma.OpRecv, rdma.StatusSuccess, 8)
				if bm.Bytes()[0] != byte(i) {
					t.Fatalf("round %d: b received %d", i, bm.Bytes()[0])
				}
				rdmatest.Post(t, b, rdma.WorkRequest{ID: uint64(300 + i), Op: rdma.OpSend, Local: []rdma.SGE{{MR: bm, Length: 8}}})
				rdmatest.WaitN(t, rdmatest.Config{}, b, 1)
			}
		}
		rdmatest.Want(t, got[0], uint64(i), rdma.OpSend, rdma.StatusSuccess, 8)
		rdmatest.Want(t, got[1], uint64(100+i), rdma.OpRecv, rdma.StatusSuccess, 8)
		if am.Bytes()[64] != byte(i) {
			t.Fatalf("round %d: a received %d back", i, am.Bytes()[64])
		}
	}
	if r := a.DirectReads(); r < rounds/2 {
		t.Errorf("the owner read %d FPDUs of %d", r, rounds)
	}
}

// parkReader has c's reader goroutine give the receive role up: in a
// section, it does at the first FPDU boundary after one arrives.
func parkReader(t *testing.T, c, peer *Conn) {
	t.Helper()
	m := rdmatest.Alloc(t, c, 8, rdma.AccessLocalWrite)
	pm := rdmatest.Alloc(t, peer, 8, rdma.AccessLocalWrite)
	// c sends first: a responder sends nothing before the initiator has
	// (MPA fencing).
	rdmatest.PostRecv(t, peer, 902, rdmatest.Whole(pm))
	rdmatest.Post(t, c, rdma.WorkRequest{ID: 903, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(m)}})
	rdmatest.WaitN(t, rdmatest.Config{}, c, 1)
	rdmatest.WaitN(t, rdmatest.Config{}, peer, 1)
	rdmatest.PostRecv(t, c, 900, rdmatest.Whole(m))
	c.BeginDirect()
	rdmatest.Post(t, peer, rdma.WorkRequest{ID: 901, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(pm)}})
	cs := make([]rdma.Completion, 1)
	if n, err := c.WaitDirect(rdmatest.Context(t, rdmatest.Config{}), cs); n != 1 || err != nil {
		t.Fatalf("WaitDirect: %d %v", n, err)
	}
	// Parked while the section is open: no idle timer runs until it ends.
	waitFor(t, "the reader goroutine parks", func() bool { return c.dirState().parked })
	c.EndDirect()
	rdmatest.WaitN(t, rdmatest.Config{}, peer, 1)
}

// blockedReading starts c's WaitDirect in a section and returns once it
// blocks in a read; the result arrives on the channel.
func blockedReading(t *testing.T, ctx context.Context, c *Conn) chan error {
	t.Helper()
	c.BeginDirect()
	done := make(chan error, 1)
	go func() {
		n, err := c.WaitDirect(ctx, make([]rdma.Completion, 4))
		if err == nil && n != 0 {
			err = errors.New("completions returned")
		}
		done <- err
	}()
	waitFor(t, "the owner blocks in a read", func() bool { return c.dirState().reading })
	return done
}

// TestDirectInterrupt: InterruptWait and the end of ctx end an owner's
// blocking read, and the connection carries on.
func TestDirectInterrupt(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	a, b := directPair(t)
	parkReader(t, a, b)
	done := blockedReading(t, context.Background(), a)
	a.InterruptWait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interrupted WaitDirect: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("InterruptWait did not end WaitDirect")
	}
	a.EndDirect()

	ctx, cancel := context.WithCancel(context.Background())
	done = blockedReading(t, ctx, a)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitDirect after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not end WaitDirect")
	}
	a.EndDirect()

	// The read deadlines are gone: a message still arrives whole.
	am := rdmatest.Alloc(t, a, 64, rdma.AccessLocalWrite)
	bm := rdmatest.Alloc(t, b, 64, 0)
	rdmatest.PostRecv(t, a, 1, rdmatest.Whole(am))
	rdmatest.Post(t, b, rdma.WorkRequest{ID: 2, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(bm)}})
	a.BeginDirect()
	defer a.EndDirect()
	cs := make([]rdma.Completion, 1)
	if n, err := a.WaitDirect(rdmatest.Context(t, rdmatest.Config{}), cs); n != 1 || err != nil {
		t.Fatalf("WaitDirect: %d %v", n, err)
	}
	rdmatest.Want(t, cs[0], 1, rdma.OpRecv, rdma.StatusSuccess, 64)
}

// TestDirectOtherPoster: a Send that another goroutine posts while the
// owner blocks in a read goes out through the writer, and its completion
// ends the owner's read.
func TestDirectOtherPoster(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	a, b := directPair(t)
	am := rdmatest.Alloc(t, a, 64, 0)
	bm := rdmatest.Alloc(t, b, 64, rdma.AccessLocalWrite)
	parkReader(t, a, b)
	rdmatest.PostRecv(t, b, 1, rdmatest.Whole(bm))
	a.BeginDirect()
	defer a.EndDirect()
	got := make(chan rdma.Completion, 1)
	go func() {
		cs := make([]rdma.Completion, 1)
		n, err := a.WaitDirect(rdmatest.Context(t, rdmatest.Config{}), cs)
		if n != 1 || err != nil {
			t.Errorf("WaitDirect: %d completions, %v", n, err)
		}
		got <- cs[0]
	}()
	waitFor(t, "the owner blocks in a read", func() bool { return a.dirState().reading })
	rdmatest.Post(t, a, rdma.WorkRequest{ID: 7, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(am)}})
	select {
	case c := <-got:
		rdmatest.Want(t, c, 7, rdma.OpSend, rdma.StatusSuccess, 64)
	case <-time.After(5 * time.Second):
		t.Fatal("the Send's completion did not reach the owner")
	}
	rdmatest.Want(t, rdmatest.WaitN(t, rdmatest.Config{}, b, 1)[0], 1, rdma.OpRecv, rdma.StatusSuccess, 64)
}

// TestDirectIdleNoticesEnd: after a section, with nobody waiting, the
// reader goroutine takes the receive role back and notices the peer's
// close.
func TestDirectIdleNoticesEnd(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	a, b := directPair(t)
	keepParked(a, directIdle)
	parkReader(t, a, b)
	b.Close()
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the peer's close was not noticed")
	}
	if err := a.Err(); !errors.Is(err, rdma.ErrDisconnected) {
		t.Errorf("ended with %v, want ErrDisconnected", err)
	}
}

// TestDirectReadLeftToReader: an owner whose RDMA Read is outstanding
// when its wait begins leaves the Read Responses, bulk data, to the
// reader goroutine, which takes them in better on two cores: the owner
// reads none of their FPDUs, and the data arrives whole.
func TestDirectReadLeftToReader(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	a, b := directPair(t)
	const n = 1 << 20
	src := rdmatest.Alloc(t, b, n, rdma.AccessRemoteRead)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 7)
	}
	sink := rdmatest.Alloc(t, a, n, rdma.AccessLocalWrite)
	// With the reader goroutine parked, the owner holds the socket
	// when its wait begins.
	parkReader(t, a, b)
	a.BeginDirect()
	defer a.EndDirect()
	before := a.DirectReads()
	wr := &rdma.WorkRequest{ID: 1, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: src.STag(), RemoteTO: src.TO()}
	if err := a.PostSendDirect(wr); err != nil {
		t.Fatal(err)
	}
	cs := make([]rdma.Completion, 4)
	k, err := a.WaitDirect(rdmatest.Context(t, rdmatest.Config{}), cs)
	if err != nil || k != 1 {
		t.Fatalf("WaitDirect: %d completions, %v", k, err)
	}
	rdmatest.Want(t, cs[0], 1, rdma.OpRead, rdma.StatusSuccess, n)
	for i, v := range sink.Bytes() {
		if v != byte(i*7) {
			t.Fatalf("byte %d read as %d, want %d", i, v, byte(i*7))
		}
	}
	if r := a.DirectReads() - before; r != 0 {
		t.Errorf("the owner read %d FPDUs of the Read Responses itself", r)
	}
}

// TestDirectReadPostedDuringWait: an RDMA Read that another goroutine
// posts while the owner is already blocked reading the socket (rpcrdma
// posts a call's Reads from a side goroutine) also leaves its Read
// Responses to the reader goroutine: the owner reads at most the FPDU it
// was in when the Read was posted, and the data arrives whole.
func TestDirectReadPostedDuringWait(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	a, b := directPair(t)
	const n = 1 << 20
	src := rdmatest.Alloc(t, b, n, rdma.AccessRemoteRead)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 5)
	}
	sink := rdmatest.Alloc(t, a, n, rdma.AccessLocalWrite)
	parkReader(t, a, b)
	a.BeginDirect()
	defer a.EndDirect()
	before := a.DirectReads()
	got := make(chan rdma.Completion, 1)
	go func() {
		cs := make([]rdma.Completion, 1)
		k, err := a.WaitDirect(rdmatest.Context(t, rdmatest.Config{}), cs)
		if k != 1 || err != nil {
			t.Errorf("WaitDirect: %d completions, %v", k, err)
		}
		got <- cs[0]
	}()
	waitFor(t, "the owner blocks in a read", func() bool { return a.dirState().reading })
	rdmatest.Post(t, a, rdma.WorkRequest{ID: 3, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: src.STag(), RemoteTO: src.TO()})
	select {
	case c := <-got:
		rdmatest.Want(t, c, 3, rdma.OpRead, rdma.StatusSuccess, n)
	case <-time.After(10 * time.Second):
		t.Fatal("the Read's completion did not reach the owner")
	}
	for i, v := range sink.Bytes() {
		if v != byte(i*5) {
			t.Fatalf("byte %d read as %d, want %d", i, v, byte(i*5))
		}
	}
	if r := a.DirectReads() - before; r > 1 {
		t.Errorf("the owner read %d FPDUs of the Read Responses itself, want at most the one it was in when the Read was posted", r)
	}
}

// TestDirectWaitDeadlineStands: the read deadline a wait under a ctx
// that can end arms stands for the waits after it, instead of being set
// and cleared around each, and a read that is not such a wait clears it
// first: the reader goroutine's, once the section has ended, is not cut
// off by it long after it passed.
func TestDirectWaitDeadlineStands(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	a, b := directPair(t)
	keepParked(a, directIdle) // the reader goroutine reads again after directIdle
	parkReader(t, a, b)
	am := rdmatest.Alloc(t, a, 64, rdma.AccessLocalWrite)
	bm := rdmatest.Alloc(t, b, 64, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	armed := func() time.Time {
		a.rxMu.Lock()
		defer a.rxMu.Unlock()
		return a.rx.dl
	}
	cs := make([]rdma.Completion, 1)
	a.BeginDirect()
	var first time.Time
	for i := range 5 {
		rdmatest.PostRecv(t, a, uint64(i), rdmatest.Whole(am))
		done := make(chan error, 1)
		go func() {
			n, err := a.WaitDirect(ctx, cs)
			if err == nil && n != 1 {
				err = errors.New("no completion")
			}
			done <- err
		}()
		waitFor(t, "the owner waits at an FPDU boundary", func() bool { return a.dirState().reading })
		rdmatest.Post(t, b, rdma.WorkRequest{ID: uint64(i), Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(bm)}})
		if err := <-done; err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		rdmatest.WaitN(t, rdmatest.Config{}, b, 1)
		dl := armed()
		if i == 0 {
			first = dl
			if dl.IsZero() {
				t.Fatal("no read deadline armed for a wait under a ctx with a deadline")
			}
			if time.Until(dl) > ctxPoll {
				t.Fatalf("read deadline %v away, more than ctxPoll (%v)", time.Until(dl), ctxPoll)
			}
		} else if !dl.Equal(first) && time.Now().Before(first) {
			t.Fatalf("round %d: the deadline moved from %v to %v before it passed", i, first, dl)
		}
	}
	a.EndDirect()
	// Well past the deadline, and past directIdle, after which the
	// reader goroutine reads again: a message still arrives.
	time.Sleep(time.Until(first) + directIdle + 20*time.Millisecond)
	rdmatest.PostRecv(t, a, 9, rdmatest.Whole(am))
	rdmatest.Post(t, b, rdma.WorkRequest{ID: 9, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(bm)}})
	rdmatest.Want(t, rdmatest.WaitN(t, rdmatest.Config{}, a, 1)[0], 9, rdma.OpRecv, rdma.StatusSuccess, 64)
	if err := a.Err(); err != nil {
		t.Fatalf("connection ended: %v", err)
	}
}

// TestDirectDeadlineMidFPDU: an FPDU whose first bytes end the owner's
// wait and whose rest comes after the wait's read deadline has passed is
// read whole: the deadline ends only the wait at the boundary.
func TestDirectDeadlineMidFPDU(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p := newProvider(t, Options{})
	r, c, _ := connectRaw(t, p, true, false, rdma.ConnConfig{})
	m := rdmatest.Alloc(t, c, 64, rdma.AccessLocalWrite)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := make([]rdma.Completion, 1)
	c.BeginDirect()
	defer c.EndDirect()
	// A first message, after which the reader goroutine parks.
	rdmatest.PostRecv(t, c, 1, rdmatest.Whole(m))
	r.send([]byte("first"))
	if n, err := c.WaitDirect(ctx, cs); n != 1 || err != nil {
		t.Fatalf("WaitDirect: %d %v", n, err)
	}
	waitFor(t, "the reader goroutine parks", func() bool { return c.dirState().parked })

	rdmatest.PostRecv(t, c, 2, rdmatest.Whole(m))
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.WaitDirect(ctx, cs)
		done <- result{n, err}
	}()
	waitFor(t, "the owner waits at an FPDU boundary", func() bool { return c.dirState().reading })
	seg := ddp.Segment{Header: ddp.Untagged(ddp.OpSend, true, ddp.QNSend, r.nextMSN(0), 0), Payload: []byte("second")}
	fpdu := mpa.AppendFPDU(nil, false, seg.Append(nil))
	r.write(fpdu[:4])
	time.Sleep(ctxPoll + 20*time.Millisecond)
	r.write(fpdu[4:])
	select {
	case res := <-done:
		if res.n != 1 || res.err != nil {
			t.Fatalf("WaitDirect: %d %v", res.n, res.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the FPDU was not read")
	}
	rdmatest.Want(t, cs[0], 2, rdma.OpRecv, rdma.StatusSuccess, 6)
	if got := string(m.Bytes()[:6]); got != "second" {
		t.Errorf("received %q", got)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("connection ended: %v", err)
	}
}

// TestDropWaitDeadlineAfterEnd: once the connection has ended, clearing
// a wait's read deadline before another read (dropWaitDeadline) leaves
// the deadline endLocked set, which is what makes every read of the
// dead connection return; clearing it would leave the next read of a
// silent peer blocked for good.
func TestDropWaitDeadlineAfterEnd(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	a, b := directPair(t)
	parkReader(t, a, b)
	a.rxMu.Lock()
	a.rx.dl = time.Now().Add(time.Hour) // as a wait under a ctx leaves it
	a.mu.Lock()
	a.endLocked(errors.New("ended by the test"), nil)
	a.mu.Unlock()
	a.dropWaitDeadline()
	read := make(chan error, 1)
	go func() {
		_, err := a.nc.Read(make([]byte, 1))
		read <- err
	}()
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read after the end: %v, want the end's deadline", err)
		}
	case <-time.After(5 * time.Second):
		a.nc.Close() // frees the read
		<-read
		t.Error("a read of the ended connection blocked: its deadline was cleared")
	}
	a.rxMu.Unlock()
}
