package rpcrdma

import "sync"

// slotStack holds the free send slots and hands out the one freed last.
// One call at a time then reuses one send buffer, which is still in the
// CPU's cache, where taking slots in turn would touch each of the
// connection's buffers once per round of them, long after it left the
// cache. avail holds a token per free slot, so a taker can wait for one
// with a select; a slot is pushed before its token is sent, so whoever
// holds a token finds a slot to pop.
type slotStack struct {
	avail chan struct{}
	mu    sync.Mutex
	free  []int
}

func newSlotStack(n int) *slotStack {
	s := &slotStack{avail: make(chan struct{}, n), free: make([]int, 0, n)}
	for i := n - 1; i >= 0; i-- {
		s.put(i)
	}
	return s
}

// put frees slot i.
func (s *slotStack) put(i int) {
	s.mu.Lock()
	s.free = append(s.free, i)
	s.mu.Unlock()
	s.avail <- struct{}{}
}

// pop takes the slot freed last; the caller has taken a token from avail.
func (s *slotStack) pop() int {
	s.mu.Lock()
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.mu.Unlock()
	return i
}
