package rpcrdma

import (
	"context"
	"errors"
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
		p         GrantPolicy
		requested uint32
		want      uint32
	}{
		{GrantPolicy{}, 0, DefaultCredits},
		{GrantPolicy{}, 1000, DefaultCredits},
		{GrantPolicy{Max: 32}, 5, 32},
		{GrantPolicy{Max: 32, Echo: true}, 5, 5},
		{GrantPolicy{Max: 32, Echo: true}, 0, 1},
		{GrantPolicy{Max: 32, Echo: true}, 64, 32},
		{GrantPolicy{Echo: true}, 1 << 31, DefaultCredits},
	}
	for _, tt := range tests {
		if got := tt.p.Grant(tt.requested); got != tt.want {
			t.Errorf("%+v.Grant(%d) = %d, want %d", tt.p, tt.requested, got, tt.want)
		}
	}
}
