package rpcrdma

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// TestFifo checks the queue from the loop to Recv: nothing allocated
// before the first put, first in first out across the ring's wrap, and
// a put beyond its size refused without keeping the value.
func TestFifo(t *testing.T) {
	q := fifo[int]{size: 3}
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
