package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// incr calls procIncr with v and checks the answer.
func (h *harness) incr(ctx context.Context, v uint32) error {
	rep, err := h.call(ctx, procIncr, Body{XDR: xdr.AppendUint32(nil, v)})
	if err != nil {
		return err
	}
	d := NewBodyDecoder(rep.Results)
	if got := d.Uint32(); d.Done() != nil || got != v+1 {
		return errors.New("wrong answer")
	}
	return nil
}

// TestShortPathSwitching runs phases of one caller and of many, over TCP,
// so the receive turn passes between callers and the Client's reader
// both ways while calls are in flight: every call gets its own answer,
// both paths are taken, and nothing is left running.
func TestShortPathSwitching(t *testing.T) {
	leaktest.Check(t)
	h := newTCPHarness(t, nil)
	h.srv.HandleShort(testProg, 1, procIncr, func(ctx context.Context, c *Call) (Body, error) {
		d := c.Decoder()
		v := d.Uint32()
		return Body{XDR: xdr.AppendUint32(nil, v+1)}, d.Done()
	})
	ctx := ctxTimeout(t, 30*time.Second)
	for phase := range 6 {
		n := 1
		if phase%2 == 1 {
			n = 8
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for w := range n {
			wg.Go(func() {
				for i := range 200 {
					if err := h.incr(ctx, uint32(phase<<20|w<<12|i)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("phase %d (%d callers): %v", phase, n, err)
		}
	}
	cs, ss := h.cli.Stats(), h.srv.Stats()
	total := uint64(3*200 + 3*8*200)
	if cs.ShortPath < 600 || cs.ShortPath >= total {
		t.Errorf("%d of %d calls took the short path, want at least the 600 made one at a time and not all", cs.ShortPath, total)
	}
	// The server runs a short call inline when nothing else runs and no
	// next call has arrived behind it: the calls made one at a time, and
	// not all of those made eight at a time. Not every call made one at a
	// time: a worker that has sent its reply may not yet have counted
	// itself out when the next call arrives, which then goes to a worker
	// too; on a loaded machine (CI runs packages side by side) a tenth of
	// them did. Half is far more than chance and still fails if the short
	// path is never taken.
	if ss.Inline < 300 || ss.Inline >= total {
		t.Errorf("the server ran %d of %d short calls inline, want at least half the 600 made one at a time and not all", ss.Inline, total)
	}
}

// TestServerInlineOnlyShort: a procedure registered with Handle never
// runs inline, nor any call on a Server with a reply cache; a later
// Handle undoes HandleShort.
func TestServerInlineOnlyShort(t *testing.T) {
	h := newTCPHarness(t, nil)
	ctx := ctxTimeout(t, 10*time.Second)
	if err := h.incr(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := h.srv.Stats().Inline; n != 0 {
		t.Errorf("%d calls of an ordinary handler ran inline", n)
	}
	h.srv.HandleShort(testProg, 1, procIncr, func(ctx context.Context, c *Call) (Body, error) {
		return Body{XDR: xdr.AppendUint32(nil, c.Decoder().Uint32()+1)}, nil
	})
	// The worker that ran the first call may still count it in flight
	// after its reply has arrived: a short call then goes to a worker.
	waitWorkersIdle(t)
	if err := h.incr(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := h.srv.Stats().Inline; n != 1 {
		t.Errorf("a short handler's call: %d inline, want 1", n)
	}
	// With another call running, a short one goes to a worker.
	blocked := make(chan error, 1)
	go func() { _, err := h.call(ctx, procBlock, Body{}); blocked <- err }()
	<-h.st.started
	if err := h.incr(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := h.srv.Stats().Inline; n != 1 {
		t.Errorf("a short call while another ran: %d inline, want still 1", n)
	}
	close(h.st.release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	h.srv.Handle(testProg, 1, procIncr, func(ctx context.Context, c *Call) (Body, error) {
		return Body{XDR: xdr.AppendUint32(nil, c.Decoder().Uint32()+1)}, nil
	})
	waitWorkersIdle(t) // as above: with a call in flight, none is inline
	if err := h.incr(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := h.srv.Stats().Inline; n != 1 {
		t.Errorf("after Handle again: %d inline, want still 1", n)
	}

	hc := newTCPHarness(t, &ServerOptions{ReplyCache: 16})
	hc.srv.HandleShort(testProg, 1, procIncr, func(ctx context.Context, c *Call) (Body, error) {
		return Body{XDR: xdr.AppendUint32(nil, c.Decoder().Uint32()+1)}, nil
	})
	if err := hc.incr(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := hc.srv.Stats().Inline; n != 0 {
		t.Errorf("with a reply cache, %d calls ran inline", n)
	}
}

// rawServer accepts one TCP connection and gives the test its far end,
// to answer calls by hand.
func rawServer(t *testing.T) (addr string, conn <-chan net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			ch <- c
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l.Addr().String(), ch
}

// readCallXID reads one record from c and returns its xid.
func readCallXID(t *testing.T, rr *RecordReader) uint32 {
	t.Helper()
	rec, err := rr.ReadRecord(nil)
	if err != nil || len(rec) < 4 {
		t.Fatalf("reading a call: %v", err)
	}
	return binary.BigEndian.Uint32(rec)
}

// replyRecord is a record-marked successful reply to xid with results v.
func replyRecord(xid, v uint32) []byte {
	rh := ReplyHeader{XID: xid, Stat: MsgAccepted, AcceptStat: Success}
	body := xdr.AppendUint32(rh.Append(nil), v)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))|lastFragment), body...)
}

// TestShortPathCancelMidRecord: a caller whose context ends while it
// receives, with part of a record read, gives up its call; the record's
// rest, read by whoever receives next, completes it intact.
func TestShortPathCancelMidRecord(t *testing.T) {
	leaktest.Check(t)
	addr, conns := rawServer(t)
	tr, err := DialTCP(ctxTimeout(t, 5*time.Second), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(tr)
	defer cli.Close()
	srv := <-conns
	rr := NewRecordReader(srv, 0, 0)

	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctx1, &Request{Prog: testProg, Vers: 1, Proc: procIncr})
		done1 <- err
	}()
	xid1 := readCallXID(t, rr)
	// Half of a reply to a call the client has not made yet: the xid
	// the Client will give its next call.
	xid2 := xid1 + 1
	rec := replyRecord(xid2, 42)
	half := len(rec) / 2
	if _, err := srv.Write(rec[:half]); err != nil {
		t.Fatal(err)
	}
	// Let the caller read the half, then cancel it.
	time.Sleep(20 * time.Millisecond)
	cancel1()
	if err := <-done1; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	done2 := make(chan error, 1)
	var rep Reply
	go func() {
		var err error
		rep, err = cli.Call(ctxTimeout(t, 5*time.Second), &Request{Prog: testProg, Vers: 1, Proc: procIncr})
		done2 <- err
	}()
	if got := readCallXID(t, rr); got != xid2 {
		t.Fatalf("second call's xid %#x, want %#x", got, xid2)
	}
	if _, err := srv.Write(rec[half:]); err != nil {
		t.Fatal(err)
	}
	if err := <-done2; err != nil {
		t.Fatalf("second call: %v", err)
	}
	d := NewBodyDecoder(rep.Results)
	if v := d.Uint32(); v != 42 || d.Done() != nil {
		t.Errorf("second call's results %d, want 42 (the record resumed)", v)
	}
	if st := cli.Stats(); st.Abandoned != 1 {
		t.Errorf("Abandoned = %d, want 1", st.Abandoned)
	}
}

// TestRecvResumes: recv interrupted inside a header and
// inside a fragment returns ctx's error each time and then the whole
// record; an error other than ctx's ends the transport.
func TestRecvResumes(t *testing.T) {
	c1, c2 := net.Pipe()
	tr := NewStreamTransport(c1, nil)
	defer tr.Close()
	body := []byte("0123456789abcdef")
	rec := binary.BigEndian.AppendUint32(nil, 6) // a first fragment of 6
	rec = append(rec, body[:6]...)
	rec = binary.BigEndian.AppendUint32(rec, uint32(len(body)-6)|lastFragment)
	rec = append(rec, body[6:]...)
	go func() {
		// Piece by piece: 2 header bytes, the rest and 3 bytes, ...
		for _, n := range []int{2, 5, 4, 3, len(rec) - 14} {
			c2.Write(rec[:n])
			rec = rec[n:]
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var got *Msg
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Millisecond)
		m, err := tr.recv(ctx)
		cancel()
		if err == nil {
			got = m
			break
		}
		if err != context.DeadlineExceeded {
			t.Fatalf("recv: %v", err)
		}
	}
	if got == nil || string(got.XDR) != string(body) {
		t.Fatalf("record %v, want %q", got, body)
	}
	c2.Close()
	if _, err := tr.recv(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("after the peer closed: %v", err)
	}
}

// TestShortPathConnError: the peer closing while a caller receives fails
// that call and the Client with a *ConnError; Close returns with nothing
// left running.
func TestShortPathConnError(t *testing.T) {
	leaktest.Check(t)
	addr, conns := rawServer(t)
	tr, err := DialTCP(ctxTimeout(t, 5*time.Second), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(tr)
	defer cli.Close()
	srv := <-conns
	done := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctxTimeout(t, 5*time.Second), &Request{Prog: testProg, Vers: 1, Proc: procIncr})
		done <- err
	}()
	readCallXID(t, NewRecordReader(srv, 0, 0))
	srv.Close()
	err = <-done
	if _, ok := errors.AsType[*ConnError](err); !ok || !errors.Is(err, io.EOF) {
		t.Fatalf("call when the peer closed: %v", err)
	}
	if _, err := cli.Call(ctxTimeout(t, 5*time.Second), &Request{Prog: testProg, Vers: 1, Proc: procIncr}); !errors.Is(err, io.EOF) {
		t.Errorf("next call: %v", err)
	}
}

// TestShortPathReconnect: a DialClient over TCP whose connection the
// server drops, while idle and while a caller receives, sends the calls
// again on its next connection.
func TestShortPathReconnect(t *testing.T) {
	leaktest.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := newTestServer(nil)
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(l) }()
	defer func() {
		srv.Close()
		<-served
	}()
	var mu sync.Mutex
	var conns []*StreamTransport
	cli, err := DialClient(ctxTimeout(t, 5*time.Second), ReconnectConfig{
		MinBackoff: time.Millisecond,
		Dial: func(ctx context.Context) (Transport, error) {
			tr, err := DialTCP(ctx, l.Addr().String(), nil)
			if err == nil {
				mu.Lock()
				conns = append(conns, tr)
				mu.Unlock()
			}
			return tr, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	h := &harness{srv: srv, cli: cli}
	ctx := ctxTimeout(t, 20*time.Second)
	drop := func() {
		mu.Lock()
		c := conns[len(conns)-1]
		mu.Unlock()
		c.conn.(*net.TCPConn).SetLinger(0)
		c.conn.Close() // under the transport: its next read fails
	}
	if err := h.incr(ctx, 1); err != nil {
		t.Fatal(err)
	}
	drop() // idle: the next call finds out
	if err := h.incr(ctx, 2); err != nil {
		t.Fatalf("call after an idle drop: %v", err)
	}
	// While a caller receives: a slow call, dropped under it.
	done := make(chan error, 1)
	go func() {
		rep, err := h.call(ctx, procDelay, Body{XDR: xdr.AppendUint32(xdr.AppendUint32(nil, 50), 7)})
		if err == nil {
			d := NewBodyDecoder(rep.Results)
			if d.Uint32() != 7 {
				err = errors.New("wrong answer")
			}
		}
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	drop()
	if err := <-done; err != nil {
		t.Fatalf("call dropped while its caller received: %v", err)
	}
	for i := range 50 {
		if err := h.incr(ctx, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	st := cli.Stats()
	if st.Reconnects < 2 || st.Retransmits < 1 || st.ShortPath == 0 {
		t.Errorf("stats %+v: want 2 reconnects, a retransmit and short-path calls", st)
	}
}

// TestShortPathReplyTimeout: a DialClient over TCP whose server takes a
// call and never answers closes the connection under the caller that is
// receiving (ReconnectConfig.ReplyTimeout), and the call goes again on
// the next connection, where it is answered.
func TestShortPathReplyTimeout(t *testing.T) {
	leaktest.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := newTestServer(nil)
	var wg sync.WaitGroup
	defer func() {
		l.Close()
		srv.Close()
		wg.Wait()
	}()
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if n == 0 {
				// The first connection swallows what it gets.
				wg.Go(func() { io.Copy(io.Discard, c); c.Close() })
				continue
			}
			wg.Go(func() { srv.Serve(NewStreamTransport(c, nil)) })
		}
	})
	cli, err := DialClient(ctxTimeout(t, 5*time.Second), ReconnectConfig{
		MinBackoff:   time.Millisecond,
		ReplyTimeout: 40 * time.Millisecond,
		Dial: func(ctx context.Context) (Transport, error) {
			return DialTCP(ctx, l.Addr().String(), nil)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	h := &harness{srv: srv, cli: cli}
	if err := h.incr(ctxTimeout(t, 10*time.Second), 41); err != nil {
		t.Fatalf("call whose first connection never answered: %v", err)
	}
	if st := cli.Stats(); st.Timeouts < 1 || st.Retransmits < 1 {
		t.Errorf("stats %+v: want a timeout and a retransmit", st)
	}
}

// TestShortPathNotOnPusher: a Pusher that is not a DirectPusher is pushed
// once and never receives on a caller's goroutine.
func TestShortPathNotOnPusher(t *testing.T) {
	leaktest.Check(t)
	a, b := memPair()
	pa := &pushTransport{memTransport: a, t: t, ended: make(chan struct{})}
	h := newHarness(t, nil, pa, b)
	ctx := ctxTimeout(t, 10*time.Second)
	for range 20 {
		if err := h.cli.Null(ctx, testProg, 1); err != nil {
			t.Fatal(err)
		}
	}
	if st := h.cli.Stats(); st.ShortPath != 0 || pa.pushed.Load() != 1 {
		t.Errorf("ShortPath %d, Push called %d times: want 0 and 1", st.ShortPath, pa.pushed.Load())
	}
}

// TestStreamReaderParks: on a StreamTransport, calls made one at a time
// are read by their callers (the short path) while the transport's reader
// stays parked between them, and a reply the reader delivers before its
// caller looks (the reader still had the turn when the call was sent) is
// not waited for again: each of these calls has no deadline, so a caller
// that read for a reply already delivered would hang, and the watchdog
// fails the test.
func TestStreamReaderParks(t *testing.T) {
	leaktest.Check(t)
	c1, c2 := net.Pipe()
	tr := NewStreamTransport(c1, nil)
	cli := NewClient(tr)
	defer cli.Close()
	peer := NewStreamTransport(c2, nil)
	defer peer.Close()
	go func() {
		// Answers each call with a bare accepted reply.
		for {
			m, err := peer.Recv()
			if err != nil {
				return
			}
			xid, _, _ := PeekHeader(m.XDR)
			rh := ReplyHeader{XID: xid, Stat: MsgAccepted, AcceptStat: Success}
			if peer.Send(context.Background(), &Msg{Body: Body{XDR: rh.Append(nil)}}) != nil {
				return
			}
		}
	}()
	const calls = 500
	done := make(chan error, 1)
	go func() {
		for range calls {
			if _, err := cli.Call(context.Background(), &Request{Prog: 1, Vers: 1}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("calls made one at a time did not finish: a caller waits for a reply already delivered")
	}
	tr.push.mu.Lock()
	turn, want := tr.push.turn, tr.push.want
	tr.push.mu.Unlock()
	if turn || want {
		t.Errorf("with no call in flight the reader has the turn (%v) or is to take it (%v): want it parked", turn, want)
	}
	if st := cli.Stats(); st.ShortPath < calls/2 {
		t.Errorf("%d of %d calls made one at a time took the short path", st.ShortPath, calls)
	}
}
