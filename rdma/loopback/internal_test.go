package loopback

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// TestSTagTable: keys rotate on every registration of an index, released
// indexes are reused only after reuseAfter others, and a table whose
// indexes are all used reuses released ones or fails.
func TestSTagTable(t *testing.T) {
	tab := newSTagTable()
	m := &mr{}
	s1, err := tab.add(m)
	if err != nil {
		t.Fatal(err)
	}
	m.index = s1.Index()
	if s1.Index() != firstIndex {
		t.Fatalf("first STag %v, want index %#x", s1, firstIndex)
	}
	s2 := tab.rekey(m)
	if s2.Index() != s1.Index() || s2.Key() != s1.Key()+1 || tab.lookup(s1.Index()) != m {
		t.Fatalf("rekey %v -> %v", s1, s2)
	}
	tab.remove(m)
	if tab.lookup(s1.Index()) != nil || tab.live != 0 {
		t.Fatalf("lookup after remove: %v, live %d", tab.lookup(s1.Index()), tab.live)
	}
	// The released index comes back only after reuseAfter releases.
	var ms []*mr
	for i := 0; i < reuseAfter; i++ {
		m := &mr{}
		s, _ := tab.add(m)
		if s.Index() == s1.Index() {
			t.Fatalf("index %#x reused after %d registrations", s.Index(), i)
		}
		m.index = s.Index()
		ms = append(ms, m)
	}
	for _, m := range ms {
		tab.remove(m)
	}
	s3, _ := tab.add(&mr{})
	if s3.Index() != s1.Index() || s3.Key() != s2.Key()+1 {
		t.Fatalf("reuse gave %v, want index of %v with key %#x", s3, s2, s2.Key()+1)
	}

	// Exhaustion.
	tab = newSTagTable()
	tab.next = lastIndex
	m = &mr{}
	s, err := tab.add(m)
	if err != nil || s.Index() != lastIndex || tab.next != 0 {
		t.Fatalf("last index: %v, %v, next %#x", s, err, tab.next)
	}
	m.index = s.Index()
	if _, err := tab.add(&mr{}); err == nil {
		t.Fatalf("add with every index in use succeeded")
	}
	tab.remove(m)
	if s, err := tab.add(&mr{}); err != nil || s.Index() != lastIndex {
		t.Fatalf("add after a release: %v, %v", s, err)
	}
}

func TestRing(t *testing.T) {
	r := newRing[int](2)
	*r.push() = 1
	*r.push() = 2
	if !r.full() || *r.front() != 1 || *r.at(1) != 2 {
		t.Fatalf("ring %+v", r)
	}
	defer func() {
		if recover() == nil {
			t.Fatalf("push onto a full ring did not panic")
		}
	}()
	r.push()
}

func TestNegotiate(t *testing.T) {
	for _, c := range []struct {
		init, resp, wantInit, wantResp settings
	}{
		// The responder raises its IRD to the initiator's ORD and lowers
		// its ORD to the initiator's IRD.
		{settings{ird: 4, ord: 8}, settings{ird: 2, ord: 16}, settings{ird: 4, ord: 8}, settings{ird: 8, ord: 4}},
		// The responder cannot go above the maximum; the initiator lowers
		// its ORD.
		{settings{ird: 1, ord: 200}, settings{ird: 1, ord: 1}, settings{ird: 1, ord: MaxReadDepth}, settings{ird: MaxReadDepth, ord: 1}},
		{settings{ird: 16, ord: 16}, settings{ird: 16, ord: 16}, settings{ird: 16, ord: 16}, settings{ird: 16, ord: 16}},
	} {
		gi, gr := negotiate(c.init, c.resp)
		if gi != c.wantInit || gr != c.wantResp {
			t.Errorf("negotiate(%+v, %+v) = %+v, %+v, want %+v, %+v", c.init, c.resp, gi, gr, c.wantInit, c.wantResp)
		}
		if gi.ord > gr.ird || gr.ord > gi.ird {
			t.Errorf("negotiate(%+v, %+v): an ORD exceeds the peer's IRD", c.init, c.resp)
		}
	}
	s, err := newSettings(rdma.ConnConfig{SendQueueDepth: MaxQueueDepth + 1, IRD: 1})
	if err != nil || s.sq != MaxQueueDepth || s.rq != DefaultQueueDepth || s.ird != 1 || s.ord != DefaultReadDepth {
		t.Fatalf("newSettings: %+v, %v", s, err)
	}
}

func TestCopySGL(t *testing.T) {
	src := &mr{buf: []byte("abcdefghij")}
	d1, d2 := &mr{buf: make([]byte, 4)}, &mr{buf: make([]byte, 8)}
	copySGL(
		[]rdma.SGE{{MR: d1, Offset: 1, Length: 3}, {MR: d2, Length: 0}, {MR: d2, Offset: 2, Length: 6}},
		[]rdma.SGE{{MR: src, Length: 2}, {MR: src, Offset: 5, Length: 5}})
	if got := string(d1.buf[1:]) + string(d2.buf[2:]); got != "abfghij\x00\x00" {
		t.Fatalf("copySGL placed %q", got)
	}
}
