package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCreditWindowStartsAtOne(t *testing.T) {
	w := newCreditWindow(8)
	if err := w.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := w.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second call before any grant: err = %v, want deadline (one credit until the first reply)", err)
	}
	if g, n := w.state(); g != 1 || n != 1 {
		t.Fatalf("state = %d/%d", g, n)
	}
}

func TestCreditWindowClamp(t *testing.T) {
	w := newCreditWindow(4)
	if g, err := w.update(0); g != 1 || !errors.Is(err, errZeroGrant) {
		t.Fatalf("zero grant: %d, %v; want 1 and errZeroGrant", g, err)
	}
	if g, err := w.update(1000); g != 4 || err != nil {
		t.Fatalf("large grant: %d, %v; want clamp to 4", g, err)
	}
	if g, _ := w.update(3); g != 3 {
		t.Fatalf("lower grant: %d", g)
	}
	if w := newCreditWindow(0); w.max != 1 {
		t.Fatalf("capacity 0 gives max %d", w.max)
	}
}

// TestCreditWindowPeak: takePeak reports the most calls in flight at
// once in its period, even when they have all been answered since, and a
// new period starts from those still in flight.
func TestCreditWindowPeak(t *testing.T) {
	w := newCreditWindow(8)
	w.update(8)
	for range 3 {
		if err := w.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	w.release()
	w.release()
	if p := w.takePeak(); p != 3 {
		t.Fatalf("peak after 3 in flight, 2 answered: %d, want 3", p)
	}
	if p := w.takePeak(); p != 1 {
		t.Fatalf("peak of a period with 1 in flight throughout: %d, want 1", p)
	}
	w.release()
	if p := w.takePeak(); p != 1 {
		t.Fatalf("peak of a period that began with 1 in flight: %d, want 1", p)
	}
	if p := w.takePeak(); p != 0 {
		t.Fatalf("peak of an idle period: %d, want 0", p)
	}
}

func TestCreditWindowNeverExceedsGrant(t *testing.T) {
	w := newCreditWindow(16)
	w.update(3)
	var cur, peak atomic.Int32
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			n := cur.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			cur.Add(-1)
			w.release()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p < 1 {
		t.Fatalf("peak in flight %d with grant 3", p)
	}
}

func TestCreditWindowGrantRaiseWakes(t *testing.T) {
	w := newCreditWindow(8)
	w.acquire(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.acquire(context.Background()) }()
	select {
	case <-done:
		t.Fatal("acquired beyond the grant")
	case <-time.After(10 * time.Millisecond):
	}
	w.update(2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("raising the grant did not wake the waiter")
	}
}

func TestCreditWindowClose(t *testing.T) {
	w := newCreditWindow(1)
	w.acquire(context.Background())
	errClosed := errors.New("closed")
	done := make(chan error, 1)
	go func() { done <- w.acquire(context.Background()) }()
	w.close(errClosed)
	w.close(errors.New("second close is ignored"))
	select {
	case err := <-done:
		if err != errClosed {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close did not wake the waiter")
	}
	if err := w.acquire(context.Background()); err != errClosed {
		t.Fatalf("acquire after close: %v", err)
	}
}

func TestCreditWindowDoubleRelease(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on a release without acquire")
		}
	}()
	newCreditWindow(1).release()
}

func TestGrantPolicy(t *testing.T) {
	tests := []struct {
		p    GrantPolicy
		want uint32
	}{
		{GrantPolicy{}, DefaultCredits},
		{GrantPolicy{Max: 32}, 32},
		{GrantPolicy{Max: 1}, 1},
	}
	for _, tt := range tests {
		if got := tt.p.Grant(); got != tt.want {
			t.Errorf("%+v.Grant() = %d, want %d", tt.p, got, tt.want)
		}
	}
}

func TestCreditCounts(t *testing.T) {
	if n := requesterRecvs(8, 3); n != 8+1+3 {
		t.Errorf("requesterRecvs(8, 3) = %d, want 12", n)
	}
	if n := responderRecvs(128, 0, false); n != 130 {
		t.Errorf("responderRecvs(128, 0, false) = %d, want 130", n)
	}
	if n := responderRecvs(128, 2, true); n != sharedGrantCap+2+2 {
		t.Errorf("responderRecvs(128, 2, true) = %d, want %d", n, sharedGrantCap+4)
	}
	for _, tt := range []struct {
		asked       uint32
		recvs, back int
		want        uint32
	}{
		{8, 12, 3, 8},
		{8, 6, 0, 5}, // fewer receives than asked for: clamped
		{0, 6, 0, 1}, // never below one
		{8, 1, 3, 1},
	} {
		if got := callCapacity(tt.asked, tt.recvs, tt.back); got != tt.want {
			t.Errorf("callCapacity(%d, %d, %d) = %d, want %d", tt.asked, tt.recvs, tt.back, got, tt.want)
		}
	}
	for _, tt := range []struct {
		p           GrantPolicy
		recvs, back int
		want        uint32
	}{
		{GrantPolicy{Max: 16}, 23, 5, 16},
		{GrantPolicy{}, 64, 5, 57}, // at the provider's depth: the receives bound it
		{GrantPolicy{}, 2, 0, 1},   // never zero (RFC 8166 Section 3.3.1)
	} {
		if got := fixedGrant(tt.p, tt.recvs, tt.back); got != tt.want {
			t.Errorf("fixedGrant(%+v, %d, %d) = %d, want %d", tt.p, tt.recvs, tt.back, got, tt.want)
		}
	}
}

// TestGrantStateRaise: a grant doubles while calls keep it busy and the
// requester asks for more, up to what it asks, the policy and
// sharedGrantCap.
func TestGrantStateRaise(t *testing.T) {
	var g grantState
	g.cur.Store(sharedFirstGrant)
	if _, ok := g.raiseTo(0, 64, &GrantPolicy{}); ok {
		t.Error("raised with no call unanswered")
	}
	if _, ok := g.raiseTo(1, 1, &GrantPolicy{}); ok {
		t.Error("raised beyond what the requester asked for")
	}
	var seen []uint32
	for {
		want, ok := g.raiseTo(int(g.load()), 64, &GrantPolicy{})
		if !ok {
			break
		}
		g.cur.Store(want)
		seen = append(seen, want)
	}
	if fmt.Sprint(seen) != "[2 4 8 16 32]" {
		t.Errorf("grants %v, want doubling to sharedGrantCap", seen)
	}
	g.cur.Store(4)
	if want, ok := g.raiseTo(4, 6, &GrantPolicy{}); !ok || want != 6 {
		t.Errorf("raiseTo asked for 6 from 4 = %d, %v; want 6", want, ok)
	}
	if want, ok := g.raiseTo(4, 64, &GrantPolicy{Max: 5}); !ok || want != 5 {
		t.Errorf("raiseTo under Max 5 from 4 = %d, %v; want 5", want, ok)
	}
}

// TestGrantStateReview: a reply that leaves no call unanswered, a
// reviewPeriod after the last review, lowers the grant to the most calls
// unanswered at once since; the receives stay promised for reclaimDelay.
func TestGrantStateReview(t *testing.T) {
	var g grantState
	g.cur.Store(16)
	t0 := time.Unix(1000, 0)
	now := t0
	clock := func() time.Time { return now }
	g.busy(3)
	if got, lowered := g.review(2, clock); got != 16 || lowered {
		t.Fatalf("review with calls unanswered = %d, %v; want 16, false", got, lowered)
	}
	if got, lowered := g.review(0, clock); got != 16 || lowered {
		t.Fatalf("first review = %d, %v; want 16, false (the first period starts)", got, lowered)
	}
	now = t0.Add(reviewPeriod / 2)
	if got, lowered := g.review(0, clock); got != 16 || lowered {
		t.Fatalf("review within the period = %d, %v; want 16, false", got, lowered)
	}
	now = t0.Add(reviewPeriod)
	if got, lowered := g.review(0, clock); got != 3 || !lowered {
		t.Fatalf("review after the period = %d, %v; want 3, true", got, lowered)
	}
	if g.load() != 3 || g.bound() != 16 {
		t.Errorf("grant %d, bound %d; want 3 and 16 until settled", g.load(), g.bound())
	}
	if n := g.mostUnanswered(true, 0, 0); n != 16+2 {
		t.Errorf("mostUnanswered with a shared pool = %d, want the unsettled 16 and 2", n)
	}
	if n := g.mostUnanswered(false, 130, 2); n != 128 {
		t.Errorf("mostUnanswered without = %d, want the receives for calls, 128", n)
	}
	if d := g.settle(now.Add(reclaimDelay / 4)); d != reclaimDelay*3/4 {
		t.Errorf("settle a quarter of reclaimDelay after = %v, want %v", d, reclaimDelay*3/4)
	}
	if d := g.settle(now.Add(reclaimDelay)); d != 0 || g.bound() != 3 {
		t.Errorf("settle after reclaimDelay = %v, bound %d; want 0 and 3", d, g.bound())
	}
	// No call since: the next review lowers to one, never zero.
	now = now.Add(reviewPeriod)
	if got, lowered := g.review(0, clock); got != 1 || !lowered {
		t.Errorf("review of an idle connection = %d, %v; want 1, true", got, lowered)
	}
}
