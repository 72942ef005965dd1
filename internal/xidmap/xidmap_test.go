package xidmap

import (
	"math/rand/v2"
	"testing"
)

// TestAgainstMap runs random operations on a Map and on a Go map side by
// side and compares every answer, so the entry held beside the map and
// the map itself never disagree with one map's behaviour.
func TestAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m Map[int]
	want := map[uint32]int{}
	for i := range 20000 {
		xid := uint32(r.IntN(6))
		switch op := r.IntN(10); {
		case op < 4:
			m.Put(xid, i)
			want[xid] = i
		case op < 6:
			m.Delete(xid)
			delete(want, xid)
		case op < 7:
			v, ok := m.Take(xid)
			if w, wok := want[xid]; v != w || ok != wok {
				t.Fatalf("step %d: Take(%d) = %d, %v; want %d, %v", i, xid, v, ok, w, wok)
			}
			delete(want, xid)
		case op < 8 && i%97 == 0:
			m.Clear()
			clear(want)
		case op < 9:
			// Delete during All, as callers that fail every call do.
			for k := range m.All() {
				if k%2 == 0 {
					m.Delete(k)
					delete(want, k)
				}
			}
		}
		v, ok := m.Get(xid)
		if w, wok := want[xid]; v != w || ok != wok {
			t.Fatalf("step %d: Get(%d) = %d, %v; want %d, %v", i, xid, v, ok, w, wok)
		}
		if m.Len() != len(want) {
			t.Fatalf("step %d: Len %d, want %d", i, m.Len(), len(want))
		}
		seen := map[uint32]int{}
		for k, v := range m.All() {
			if _, dup := seen[k]; dup {
				t.Fatalf("step %d: All yields %d twice", i, k)
			}
			seen[k] = v
		}
		if len(seen) != len(want) {
			t.Fatalf("step %d: All yields %d entries, want %d", i, len(seen), len(want))
		}
		for k, w := range want {
			if seen[k] != w {
				t.Fatalf("step %d: All yields %d for %d, want %d", i, seen[k], k, w)
			}
		}
	}
}

// TestFrontOnlyWhenEmpty: the entry beside the map is used only when the
// Map is empty, so a second call goes in the map, and the first is still
// found after the second is deleted.
func TestFrontOnlyWhenEmpty(t *testing.T) {
	var m Map[string]
	m.Put(1, "a")
	m.Put(2, "b")
	if !m.has || m.key != 1 || len(m.m) != 1 {
		t.Fatalf("front %v %d, map %d entries", m.has, m.key, len(m.m))
	}
	m.Delete(2)
	if v, ok := m.Get(1); !ok || v != "a" {
		t.Errorf("Get(1) = %q, %v", v, ok)
	}
	m.Delete(1)
	if m.Len() != 0 || m.has {
		t.Errorf("not empty after deleting both: %d", m.Len())
	}
}

func BenchmarkPutGetDelete(b *testing.B) {
	var m Map[*int]
	v := new(int)
	var xid uint32
	for b.Loop() {
		xid++
		m.Put(xid, v)
		m.Get(xid)
		m.Delete(xid)
	}
}
