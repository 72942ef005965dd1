package rpcrdma

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestTokenStackLIFO: the token given back last is the next one out, and
// the tokens start 0 on top.
func TestTokenStackLIFO(t *testing.T) {
	s := newTokenStack(3)
	for want := range 3 {
		if i, ok := s.tryTake(); !ok || i != want {
			t.Fatalf("take %d: got %d, %v", want, i, ok)
		}
	}
	if _, ok := s.tryTake(); ok {
		t.Fatal("took a fourth token of three")
	}
	s.put(1)
	s.put(2)
	if i, _ := s.tryTake(); i != 2 {
		t.Errorf("took %d, want 2 (given back last)", i)
	}
}

// TestTokenStackWaiters: takers that wait get tokens in arrival order,
// each from the put that frees it.
func TestTokenStackWaiters(t *testing.T) {
	s := newTokenStack(1)
	s.tryTake()
	got := make(chan [2]int, 3)
	for k := range 3 {
		go func() {
			i, err := s.take(context.Background(), nil, nil)
			if err != nil {
				t.Error(err)
			}
			got <- [2]int{k, i}
		}()
		waitWaiting(t, s, k+1)
	}
	for k := range 3 {
		s.put(10 + k)
		if g := <-got; g != [2]int{k, 10 + k} {
			t.Errorf("put %d reached taker %d with %d, want taker %d", 10+k, g[0], g[1], k)
		}
	}
	if n := s.available(); n != 0 {
		t.Errorf("%d tokens free, want 0: each went to a waiter", n)
	}
}

func waitWaiting(t *testing.T, s *tokenStack, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		k := len(s.waiting)
		s.mu.Unlock()
		if k == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d takers waiting, want %d", k, n)
		}
	}
}

// TestTokenStackGiveUp: a taker whose ctx ends, or whose done closes,
// returns that error and keeps nothing, including when a put hands it a
// token as it gives up: that token goes on, to the next waiter or back
// to the stack.
func TestTokenStackGiveUp(t *testing.T) {
	s := newTokenStack(1)
	s.tryTake()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.take(ctx, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("take with an ended ctx: %v", err)
	}
	done := make(chan struct{})
	close(done)
	errEnd := errors.New("ended")
	if _, err := s.take(context.Background(), done, func() error { return errEnd }); err != errEnd {
		t.Errorf("take after done: %v, want the ended error", err)
	}
	// Race a put against giving up, many times: no token may be lost.
	for range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i, err := s.take(ctx, nil, nil); err == nil {
				s.put(i)
			}
		}()
		waitWaiting(t, s, 1)
		go cancel()
		s.put(0)
		wg.Wait()
		if i, ok := s.tryTake(); !ok || i != 0 {
			t.Fatalf("token lost: %d, %v", i, ok)
		}
		s.mu.Lock()
		n := len(s.waiting)
		s.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d takers still listed", n)
		}
	}
}
