package rpcrdma

import (
	"testing"
	"testing/synctest"

	"github.com/go-rpcrdma/rpcrdma/rdma"
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

// TestResponderPumpOnlyWhileQueued checks that a pushing responder runs
// its pump, the side goroutine that delivers what Recv returns, only
// while calls are queued for it: none once a call with a read chunk has
// been answered, and at the end for the error that ends the connection,
// which the rpc.Server's Serve returns.
func TestResponderPumpOnlyWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := ctxT(t)
		p := newPair(t, nil, nil)
		pumping := func() bool {
			r := p.resp.resp
			r.pumpMu.Lock()
			defer r.pumpMu.Unlock()
			return r.pumping
		}
		synctest.Wait()
		if pumping() {
			t.Fatal("a pump runs on a responder that has received nothing")
		}
		data := pattern(64<<10, 2) // beyond the inline size: a read chunk
		for i := range 3 {
			rep, err := p.call(ctx, procSum, ddpArgs(data), nil, 0)
			checkSum(t, rep, err, data)
			synctest.Wait()
			if pumping() {
				t.Fatalf("call %d: the pump still runs once its call has been answered", i)
			}
		}
		if got := p.resp.Stats().ReadChunks; got != 3 {
			t.Fatalf("the responder pulled %d read chunks, want 3: the pump was not used", got)
		}
		p.conn.Close()
		synctest.Wait()
		// pumping stays set once a pump has delivered the final error.
		if !pumping() {
			t.Error("no pump delivered the error that ended the connection")
		}
	})
}
