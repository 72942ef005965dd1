// Package xidmap holds the calls in flight on a connection by transaction
// ID (RFC 5531 section 9: a reply is matched to its call by xid alone).
package xidmap

import "iter"

// Map maps xids to V. Most connections carry one call at a time, so the
// entry put while the Map is empty is held beside a Go map, where
// putting, finding and deleting it cost a comparison rather than a hash
// and a probe of the map's group (about a hundred instructions each, and
// a NULL round trip did nine). Further entries go in the map. The zero
// value is an empty Map ready to use; it is not safe for concurrent use.
type Map[V any] struct {
	key uint32
	val V
	has bool // key and val hold an entry
	m   map[uint32]V
}

// Get returns the value for xid, and whether there is one.
func (t *Map[V]) Get(xid uint32) (V, bool) {
	if t.has && t.key == xid {
		return t.val, true
	}
	if len(t.m) == 0 {
		var zero V
		return zero, false
	}
	v, ok := t.m[xid]
	return v, ok
}

// Put sets the value for xid.
func (t *Map[V]) Put(xid uint32, v V) {
	switch {
	case t.has && t.key == xid:
		t.val = v
		return
	case !t.has && len(t.m) == 0:
		t.key, t.val, t.has = xid, v, true
		return
	}
	if t.m == nil {
		t.m = make(map[uint32]V)
	}
	t.m[xid] = v
}

// Delete removes xid's entry, if any.
func (t *Map[V]) Delete(xid uint32) {
	if t.has && t.key == xid {
		var zero V
		t.val, t.has = zero, false
		return
	}
	if len(t.m) > 0 {
		delete(t.m, xid)
	}
}

// Take removes xid's entry, if any, and returns its value and whether
// there was one.
func (t *Map[V]) Take(xid uint32) (V, bool) {
	if t.has && t.key == xid {
		v := t.val
		var zero V
		t.val, t.has = zero, false
		return v, true
	}
	v, ok := t.m[xid]
	if ok {
		delete(t.m, xid)
	}
	return v, ok
}

// Len returns the number of entries.
func (t *Map[V]) Len() int {
	n := len(t.m)
	if t.has {
		n++
	}
	return n
}

// All yields every entry, in no particular order. The loop's body may
// delete entries, as in a range over a Go map.
func (t *Map[V]) All() iter.Seq2[uint32, V] {
	return func(yield func(uint32, V) bool) {
		if t.has && !yield(t.key, t.val) {
			return
		}
		for k, v := range t.m {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Clear removes every entry.
func (t *Map[V]) Clear() {
	var zero V
	t.val, t.has = zero, false
	clear(t.m)
}
