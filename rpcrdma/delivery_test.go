package rpcrdma

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// TestFifo checks the queue from the loop to Recv: nothing allocated
// before the first put, first in first out across the ring's wrap and
// growth, and a put beyond its size refused without keeping the value.
func TestFifo(t *testing.T) {
	q := fifo[int]{size: 3}
	if !q.put(-2) || !q.put(-1) {
		t.Fatal("put refused on an empty queue")
	}
	if len(q.ring) != 2 {
		t.Fatalf("ring of %d entries after two puts, want 2", len(q.ring))
	}
	for want := -2; want < 0; want++ {
		if v, ok := q.get(); !ok || v != want {
			t.Fatalf("get = %d, %v, want %d, true", v, ok, want)
		}
	}
	// Growth while the ring has wrapped keeps the order.
	q.put(0)
	q.put(1)
	q.get()
	q.put(2) // wraps to the ring's first entry
	q.put(3) // grows the ring
	for want := 1; want <= 3; want++ {
		if v, ok := q.get(); !ok || v != want {
			t.Fatalf("after growth across the wrap: get = %d, %v, want %d, true", v, ok, want)
		}
	}
	q = fifo[int]{size: 3}
	if _, ok := q.get(); ok {
		t.Fatal("get on an empty queue reported a value")
	}
	if q.ring != nil {
		t.Fatal("the ring was allocated before the first put")
	}
	next, want := 0, 0
	for round := range 5 {
		// One value is left queued from the last round (none at first),
		// so the ring wraps.
		for q.n < 3 {
			if !q.put(next) {
				t.Fatalf("round %d: put %d refused with room left", round, next)
			}
			next++
		}
		if q.put(-1) {
			t.Fatalf("round %d: put beyond the size accepted", round)
		}
		for q.n > 1 {
			v, ok := q.get()
			if !ok || v != want {
				t.Fatalf("round %d: get = %d, %v, want %d, true", round, v, ok, want)
			}
			want++
		}
	}
	if len(q.ring) != 3 {
		t.Errorf("ring of %d entries, want the size, 3", len(q.ring))
	}
}

// TestGrowBatch checks the loop's batch: kept while the provider returns
// fewer than it holds, replaced by a full one once it fills it.
func TestGrowBatch(t *testing.T) {
	cs := make([]rdma.Completion, firstBatch)
	if got := growBatch(cs, firstBatch-1); len(got) != firstBatch {
		t.Errorf("a partly filled batch grew to %d", len(got))
	}
	got := growBatch(cs, firstBatch)
	if len(got) != fullBatch {
		t.Errorf("a filled batch of %d became %d, want %d", firstBatch, len(got), fullBatch)
	}
	if again := growBatch(got, fullBatch); len(again) != fullBatch {
		t.Errorf("a full batch became %d", len(again))
	}
}

// deliveredLog is a deliver function's record of what it was given.
type deliveredLog struct{ got []delivered }

func (l *deliveredLog) deliver(m *rpc.Msg, err error) bool {
	l.got = append(l.got, delivered{m, err})
	return true
}

// TestDeliveryPush checks the one way to the rpc layer: what is handed
// over before Push waits and is delivered first, in order, by Push; what
// comes after goes straight to deliver; the end comes last, and nothing
// is taken after it.
func TestDeliveryPush(t *testing.T) {
	var d delivery
	d.init(4)
	msgs := make([]rpc.Msg, 4)
	callErr := &rpc.CallError{XID: 7, Err: errors.New("failed")}
	if ok, _ := d.hand(&msgs[0], nil); !ok {
		t.Fatal("hand before Push refused with room in the queue")
	}
	if ok, _ := d.hand(nil, callErr); !ok {
		t.Fatal("a call's error handed before Push was refused")
	}
	var l deliveredLog
	d.push(l.deliver)
	if len(l.got) != 2 || l.got[0].m != &msgs[0] || l.got[1].err != callErr {
		t.Fatalf("Push delivered %v, want the queued message, then the call's error", l.got)
	}
	if !d.pushing() {
		t.Fatal("pushing is false after Push")
	}
	if ok, _ := d.hand(&msgs[1], nil); !ok || len(l.got) != 3 || l.got[2].m != &msgs[1] {
		t.Fatalf("after Push, hand delivered %v (ok %v), want the message at once", l.got, ok)
	}
	end := errors.New("connection ended")
	d.end(end)
	if len(l.got) != 4 || l.got[3].m != nil || l.got[3].err != end {
		t.Fatalf("end delivered %v, want the end last", l.got)
	}
	if d.pushing() {
		t.Fatal("pushing is true after the end")
	}
	if ok, full := d.hand(&msgs[2], nil); ok || full {
		t.Fatalf("hand after the end = %v, %v; want refused, not full", ok, full)
	}
	if len(l.got) != 4 {
		t.Fatalf("something was delivered after the end: %v", l.got)
	}
}

// TestDeliveryPushAfterEnd checks a Push that comes after the end: the
// queued messages, then the end, and nothing kept for later.
func TestDeliveryPushAfterEnd(t *testing.T) {
	var d delivery
	d.init(2)
	var m rpc.Msg
	d.hand(&m, nil)
	end := errors.New("ended")
	d.end(end)
	var l deliveredLog
	d.push(l.deliver)
	if len(l.got) != 2 || l.got[0].m != &m || l.got[1].err != end {
		t.Fatalf("Push after the end delivered %v, want the message, then the end", l.got)
	}
	if d.pushing() {
		t.Fatal("a Push after the end is kept")
	}
}

// TestDeliveryRecv checks Recv over the same queue: messages before the
// end come first, every Recv after returns the end, and one waiting when
// the end comes returns.
func TestDeliveryRecv(t *testing.T) {
	var d delivery
	d.init(2)
	var a, b rpc.Msg
	d.hand(&a, nil)
	d.hand(&b, nil)
	if ok, full := d.hand(&rpc.Msg{}, nil); ok || !full {
		t.Fatalf("hand into a full queue = %v, %v; want refused and full", ok, full)
	}
	end := errors.New("ended")
	d.end(end)
	for i, want := range []*rpc.Msg{&a, &b} {
		if m, err := d.recv(); m != want || err != nil {
			t.Fatalf("Recv %d = %p, %v; want %p, nil", i, m, err, want)
		}
	}
	for i := range 2 {
		if m, err := d.recv(); m != nil || err != end {
			t.Fatalf("Recv %d after the queue = %v, %v; want the end", i, m, err)
		}
	}

	var w delivery
	w.init(2)
	got := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := w.recv()
			got <- err
		}()
	}
	w.end(end)
	for range 2 {
		select {
		case err := <-got:
			if err != end {
				t.Fatalf("a waiting Recv returned %v, want the end", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a Recv waiting when the end came did not return")
		}
	}
}

// TestDeliveryRelease checks that what is queued when Close comes is
// given back, and only once the end has come.
func TestDeliveryRelease(t *testing.T) {
	var d delivery
	d.init(2)
	released := 0
	m := &rpc.Msg{Release: func() { released++ }}
	d.hand(m, nil)
	d.release()
	if released != 0 {
		t.Fatal("release gave back a message before the end")
	}
	d.end(errors.New("ended"))
	d.release()
	if released != 1 {
		t.Fatalf("release gave back %d messages, want 1", released)
	}
	if _, err := d.recv(); err == nil {
		t.Fatal("Recv returned a message that was given back")
	}
}

// TestResponderCallsBeforePush: a call that arrives before the
// rpc.Server pushes, by each way a call is prepared (inline on the loop, a
// read chunk pulled for it, a long call's position-zero chunk pulled from
// a side goroutine), waits prepared in the delivery's queue, and Serve's
// Push delivers it; nothing stays registered. (A requester has one credit
// until its first reply, so each case is one call on a connection of its
// own.)
func TestResponderCallsBeforePush(t *testing.T) {
	leaktest.Check(t)
	inline, chunk, long := pattern(100, 1), pattern(64<<10, 2), pattern(9000, 9)
	tests := []struct {
		name             string
		req              rpc.Request
		check            func(rpc.Reply, error) error
		chunks, longCall uint64
	}{
		{"inline", rpc.Request{Proc: procSum, Args: ddpArgs(inline)}, func(rep rpc.Reply, err error) error { return sumErr(rep, err, inline) }, 0, 0},
		{"read-chunk", rpc.Request{Proc: procSum, Args: ddpArgs(chunk)}, func(rep rpc.Reply, err error) error { return sumErr(rep, err, chunk) }, 1, 0},
		{"long-call", rpc.Request{Proc: procEchoFlat, Args: rpc.Body{XDR: xdr.AppendOpaque(nil, long)}, MaxReply: 9100}, func(rep rpc.Reply, err error) error {
			if err != nil {
				return err
			}
			d := rpc.NewBodyDecoder(rep.Results)
			if got := d.Opaque(1 << 20); !bytes.Equal(got, long) || d.Done() != nil {
				return fmt.Errorf("long call echoed %d bytes (%v)", len(got), d.Err())
			}
			return nil
		}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			net := loopback.New()
			conn, resp := dialAccept(t, net, "", nil, nil)
			cli := rpc.NewClient(conn)
			srv := testServer()
			served := make(chan struct{})
			t.Cleanup(func() {
				cli.Close()
				conn.Close()
				resp.Close()
				srv.Close()
				<-served
				waitFor(t, "registrations to be released", func() bool { return net.Registered() == 0 })
			})
			errs := make(chan error, 1)
			go func() {
				req := tc.req
				req.Prog, req.Vers = testProg, testVers
				errs <- tc.check(cli.Call(ctx, &req))
			}()
			waitFor(t, "the call to be prepared", func() bool { return resp.Stats().CallsPending == 1 })
			if s := resp.Stats(); s.ReadChunks != tc.chunks+tc.longCall || s.LongCalls != tc.longCall {
				t.Errorf("before Push: %d read chunks and %d long calls pulled, want %d and %d", s.ReadChunks, s.LongCalls, tc.chunks+tc.longCall, tc.longCall)
			}
			go func() { srv.Serve(resp); close(served) }()
			if err := <-errs; err != nil {
				t.Error(err)
			}
		})
	}
}

// sumErr is checkSum's verdict as an error, for a goroutine.
func sumErr(rep rpc.Reply, err error, data []byte) error {
	if err != nil {
		return err
	}
	d := rpc.NewBodyDecoder(rep.Results)
	n, sum := d.Uint32(), d.Uint32()
	if err := d.Done(); err != nil || n != uint32(len(data)) || sum != crc32.ChecksumIEEE(data) {
		return fmt.Errorf("server saw %d bytes crc %08x (%v), sent %d crc %08x", n, sum, err, len(data), crc32.ChecksumIEEE(data))
	}
	return nil
}
