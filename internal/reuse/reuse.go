// Package reuse keeps a connection's scratch objects for reuse.
package reuse

import (
	"sync"
	"sync/atomic"
)

// Spare holds one *T for reuse in front of a sync.Pool shared by every
// connection. A connection making one call at a time gets back the object
// it gave back last, at the cost of an atomic swap, without the Pool's
// per-processor lookup (a NULL round trip took and gave back six pooled
// objects); and the object stays with the connection, in the cache of
// whichever CPU runs the connection next, where a Pool hands out the one
// on the list of the processor the goroutine happens to run on. Concurrent
// calls beyond the first use the Pool. The zero value is empty and ready.
type Spare[T any] struct {
	p atomic.Pointer[T]
}

// Get returns the spare object if there is one, else one from pool, else
// a new one.
func (s *Spare[T]) Get(pool *sync.Pool) *T {
	if x := s.p.Swap(nil); x != nil {
		return x
	}
	if x, _ := pool.Get().(*T); x != nil {
		return x
	}
	return new(T)
}

// Put gives x back: as the spare if there is none, else to pool. The
// caller has reset what x must not keep.
func (s *Spare[T]) Put(x *T, pool *sync.Pool) {
	if !s.p.CompareAndSwap(nil, x) {
		pool.Put(x)
	}
}
