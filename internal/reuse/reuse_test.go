package reuse

import (
	"sync"
	"testing"
)

// TestSpare: the object given back last comes back first; a second one
// given back meanwhile goes to the pool, and an empty Spare and pool make
// a new one.
func TestSpare(t *testing.T) {
	var pool sync.Pool
	var s Spare[int]
	a := s.Get(&pool)
	b := s.Get(&pool)
	if a == b {
		t.Fatal("two Gets returned one object")
	}
	s.Put(a, &pool)
	s.Put(b, &pool) // the spare is taken: b goes to the pool
	if got := s.Get(&pool); got != a {
		t.Error("Get did not return the spare")
	}
	// The pool may drop what it holds (it does under the race
	// detector), so b may or may not come back; a new object must.
	if got := s.Get(&pool); got == nil || got == a {
		t.Errorf("Get with the spare taken returned %p", got)
	}
}
