package loopback

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
)

// TestSTagTable: the network's table is deterministic (the rest of the
// table's behaviour is tested in rdma/internal/memreg).
func TestSTagTable(t *testing.T) {
	tab := newSTagTable()
	s1, err := tab.Add(&memreg.Region{}, rdma.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	key := uint8(firstIndex&0xff) ^ 0x5a
	key++ // advanced by the registration
	if s1.Index() != firstIndex || s1.Key() != key {
		t.Fatalf("first STag %v, want index %#x key %#x", s1, firstIndex, key)
	}
	if s2, _ := newSTagTable().Add(&memreg.Region{}, 0); s2 != s1 {
		t.Fatalf("tables differ: %v, %v", s1, s2)
	}
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
	s, err := New().newSettings(rdma.ConnConfig{SendQueueDepth: MaxQueueDepth + 1, IRD: 1})
	if err != nil || s.sq != MaxQueueDepth || s.rq != DefaultQueueDepth || s.ird != 1 || s.ord != DefaultReadDepth {
		t.Fatalf("newSettings: %+v, %v", s, err)
	}
}

func TestCopySGL(t *testing.T) {
	region := func(b []byte) *mr { return &mr{Region: memreg.Region{Buf: b}} }
	src := region([]byte("abcdefghij"))
	d1, d2 := region(make([]byte, 4)), region(make([]byte, 8))
	copySGL(
		[]rdma.SGE{{MR: d1, Offset: 1, Length: 3}, {MR: d2, Length: 0}, {MR: d2, Offset: 2, Length: 6}},
		[]rdma.SGE{{MR: src, Length: 2}, {MR: src, Offset: 5, Length: 5}})
	if got := string(d1.Buf[1:]) + string(d2.Buf[2:]); got != "abfghij\x00\x00" {
		t.Fatalf("copySGL placed %q", got)
	}
}
