package nfs

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestSlotTableSequence(t *testing.T) {
	tb := newSlotTable(2)
	ctx := context.Background()
	a, _ := tb.acquire(ctx)
	b, _ := tb.acquire(ctx)
	if a.id != 0 || a.seq != 1 || b.id != 1 || b.seq != 1 || a.highest != 1 {
		t.Fatalf("first slots %+v %+v", a, b)
	}
	tb.release(a, slotDone, 1, 1, true)
	if a2, _ := tb.acquire(ctx); a2.id != 0 || a2.seq != 2 {
		t.Errorf("after a reply, slot 0 sends %+v, want seq 2", a2)
	} else {
		// The SEQUENCE was refused before the server took its ID: the
		// next request sends the same one.
		tb.release(a2, slotNotSeen, 1, 1, true)
	}
	if a3, _ := tb.acquire(ctx); a3.seq != 2 {
		t.Errorf("after NFS4ERR_SEQ_MISORDERED-like refusal, seq %d, want 2", a3.seq)
	} else {
		tb.release(a3, slotInterrupted, 0, 0, false)
	}
	// After an interruption the next request sends one more; if the
	// server says misordered, it never saw the interrupted one, and
	// the request goes again with that ID, once.
	a4, _ := tb.acquire(ctx)
	if a4.seq != 3 {
		t.Fatalf("after an interruption, seq %d, want 3", a4.seq)
	}
	a5, ok := tb.misordered(a4)
	if !ok || a5.seq != 2 {
		t.Fatalf("misordered after an interruption: %+v %v", a5, ok)
	}
	if _, ok := tb.misordered(a5); ok {
		t.Error("a second misordered was retried")
	}
	tb.release(a5, slotDone, 1, 1, true)
	if a6, _ := tb.acquire(ctx); a6.seq != 3 {
		t.Errorf("seq %d after the retried request, want 3", a6.seq)
	}
}

// TestSlotTableTarget: the table hands out slots up to the server's
// target only, and a waiter wakes when one is freed.
func TestSlotTableTarget(t *testing.T) {
	tb := newSlotTable(4)
	ctx := context.Background()
	a, _ := tb.acquire(ctx)
	tb.release(a, slotDone, 3, 0, true) // the server wants one slot
	if n, hi := tb.size(); n != 4 || hi != 0 {
		t.Fatalf("size %d %d", n, hi)
	}
	a, _ = tb.acquire(ctx)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := tb.acquire(short); err == nil {
		t.Fatal("a second slot was handed out above the target")
	}
	var wg sync.WaitGroup
	got := make(chan slot, 3)
	for range 3 {
		wg.Go(func() {
			s, err := tb.acquire(ctx)
			if err == nil {
				got <- s
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	tb.release(a, slotDone, 3, 3, true) // grows back to 4
	wg.Wait()
	close(got)
	seen := map[uint32]bool{}
	for s := range got {
		if seen[s.id] || s.id > 3 {
			t.Errorf("slot %d handed out twice or out of range", s.id)
		}
		seen[s.id] = true
	}
	if len(seen) != 3 {
		t.Errorf("%d waiters got a slot, want 3", len(seen))
	}
	// A target above the table is clamped to it.
	tb2 := newSlotTable(2)
	s, _ := tb2.acquire(ctx)
	tb2.release(s, slotDone, 100, 100, true)
	if _, hi := tb2.size(); hi != 1 {
		t.Errorf("target %d, want 1", hi)
	}
}

// TestSlotTableAllocs: taking and freeing a slot that no request waits
// for allocates nothing.
func TestSlotTableAllocs(t *testing.T) {
	tb := newSlotTable(4)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		sl, err := tb.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tb.release(sl, slotDone, 3, 3, true)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per acquire and release", allocs)
	}
}
