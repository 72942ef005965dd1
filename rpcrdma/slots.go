package rpcrdma

import (
	"context"
	"sync"
)

// tokenStack holds n tokens, the integers 0 to n-1, each naming a
// resource (a send slot, a send-queue entry): whoever holds a token owns
// what it names. It hands out the token given back last, so that one call
// at a time reuses one send buffer, which is still in the CPU's cache,
// where taking slots in turn would touch each of the connection's buffers
// once per round of them, long after it left the cache. A taker that
// finds none waits, in arrival order, and put hands a token straight to
// the first waiter.
//
// It is a mutex and a slice rather than a channel of tokens: taking and
// giving back then cost a lock each, a fraction of a channel operation,
// and a small call takes and gives back two tokens on each side.
type tokenStack struct {
	mu      sync.Mutex
	free    []int
	n       int
	waiting []chan int // takers waiting, first come first
	spare   []chan int // waiting channels to reuse, each empty
}

func newTokenStack(n int) *tokenStack {
	s := &tokenStack{free: make([]int, n), n: n}
	for i := range n {
		s.free[i] = n - 1 - i // 0 on top
	}
	return s
}

// tryTake takes a token if one is free now.
func (s *tokenStack) tryTake() (int, bool) {
	s.mu.Lock()
	i, ok := s.popLocked()
	s.mu.Unlock()
	return i, ok
}

func (s *tokenStack) popLocked() (int, bool) {
	if len(s.free) == 0 {
		return 0, false
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return i, true
}

// take takes a token, waiting until one is given back, ctx ends (ctx's
// error) or done is closed (ended's error).
func (s *tokenStack) take(ctx context.Context, done <-chan struct{}, ended func() error) (int, error) {
	s.mu.Lock()
	if i, ok := s.popLocked(); ok {
		s.mu.Unlock()
		return i, nil
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	var ch chan int
	if k := len(s.spare); k > 0 {
		ch, s.spare = s.spare[k-1], s.spare[:k-1]
	} else {
		ch = make(chan int, 1)
	}
	s.waiting = append(s.waiting, ch)
	s.mu.Unlock()
	var err error
	select {
	case i := <-ch:
		s.recycle(ch)
		return i, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-done:
		err = ended()
	}
	s.mu.Lock()
	for k, w := range s.waiting {
		if w == ch {
			s.waiting = append(s.waiting[:k], s.waiting[k+1:]...)
			s.spare = append(s.spare, ch)
			s.mu.Unlock()
			return 0, err
		}
	}
	s.mu.Unlock()
	// put handed this taker a token meanwhile: pass it on.
	s.put(<-ch)
	s.recycle(ch)
	return 0, err
}

func (s *tokenStack) recycle(ch chan int) {
	s.mu.Lock()
	s.spare = append(s.spare, ch)
	s.mu.Unlock()
}

// put gives token i back: to the first waiting taker, if any.
func (s *tokenStack) put(i int) {
	s.mu.Lock()
	if len(s.waiting) > 0 {
		ch := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.mu.Unlock()
		ch <- i
		return
	}
	s.free = append(s.free, i)
	s.mu.Unlock()
}

// available returns the number of free tokens, for tests.
func (s *tokenStack) available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.free)
}
