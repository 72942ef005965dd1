package memreg

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

func TestTable(t *testing.T) {
	tab := NewTable(LastIndex, func(uint32) uint8 { return 7 }) // wraps to 1
	rs := make([]*Region, ReuseAfter+2)
	seen := map[rdma.STag]bool{}
	for i := range rs {
		rs[i] = &Region{}
		s, err := tab.Add(rs[i], rdma.AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		if seen[s] || s.Index() == 0 || rs[i].Index != s.Index() || rs[i].STag() != s || rs[i].TO() != uint64(s.Index())<<32 || !rs[i].Valid() {
			t.Fatalf("stag %v reused, index 0 or region not set: %+v", s, rs[i])
		}
		if s.Key() != 8 {
			t.Fatalf("key %d, want the start key advanced once", s.Key())
		}
		seen[s] = true
	}
	if rs[0].Index != LastIndex || rs[1].Index != 1 {
		t.Errorf("indexes %#x %#x, want the table to wrap to 1", rs[0].Index, rs[1].Index)
	}
	if tab.Lookup(rs[1].Index) != rs[1] || tab.Live() != len(rs) {
		t.Fatal("lookup or live count")
	}
	old := rs[1].STag()
	if s := tab.Rekey(rs[1]); s == old || s.Index() != old.Index() {
		t.Fatalf("rekey %v from %v", s, old)
	}
	for _, r := range rs {
		if !tab.Remove(r) || tab.Remove(r) {
			t.Fatal("Remove must work once")
		}
	}
	if tab.Live() != 0 || tab.Lookup(rs[1].Index) != nil || !rs[1].Load().Released() {
		t.Errorf("%d live after removing all", tab.Live())
	}
	// With ReuseAfter indexes released, the oldest is reused with a new key.
	s, _ := tab.Add(&Region{}, 0)
	if s.Index() != rs[0].Index || seen[s] {
		t.Errorf("reused %v", s)
	}
	tab.fresh, tab.free = 0, nil
	if _, err := tab.Add(&Region{}, 0); err == nil {
		t.Errorf("full table accepted a registration")
	}
}

type owner struct{ name string }

func TestCheckRemoteOrder(t *testing.T) {
	tab := NewTable(100, func(uint32) uint8 { return 0 })
	a, b := &owner{"a"}, &owner{"b"}
	r := &Region{Owner: a, Buf: make([]byte, 100)}
	stag, _ := tab.Add(r, rdma.AccessRemoteWrite)
	other := &Region{Owner: b, Buf: make([]byte, 10)}
	ostag, _ := tab.Add(other, rdma.AccessRemoteWrite)
	c := &WriteCodes
	tests := []struct {
		name   string
		stag   rdma.STag
		to     uint64
		length int
		need   rdma.Access
		want   rdma.TerminateError
		detail string
	}{
		{"unknown index", rdma.MakeSTag(5000, 1), r.Base, 1, rdma.AccessRemoteWrite, c.Invalid, "no such stag"},
		{"stale key", stag + 1, r.Base, 1, rdma.AccessRemoteWrite, c.Invalid, "stale key"},
		{"another connection", ostag, other.Base, 1, rdma.AccessRemoteWrite, c.NotAssociated, "another connection"},
		{"rights", stag, r.Base, 1, rdma.AccessRemoteRead, c.Rights, "access"},
		{"below base", stag, r.Base - 1, 1, rdma.AccessRemoteWrite, c.Bounds, "below region base"},
		{"beyond end", stag, r.Base + 90, 11, rdma.AccessRemoteWrite, c.Bounds, "beyond region length"},
	}
	for _, tt := range tests {
		_, te, ok := tab.CheckRemote(a, "remote write", tt.stag, tt.to, tt.length, tt.need, c)
		if ok || !errors.Is(te, tt.want) || !strings.Contains(te.Detail, tt.detail) {
			t.Errorf("%s: %v %v, want %v (%s)", tt.name, ok, te, tt.want, tt.detail)
		}
	}
	b2, _, ok := tab.CheckRemote(a, "remote write", stag, r.Base+90, 10, rdma.AccessRemoteWrite, c)
	if !ok || &b2[0] != &r.Buf[90] || len(b2) != 10 {
		t.Fatal("in-bounds access refused")
	}
	r.SetValid(false)
	if _, te, ok := tab.CheckRemote(a, "remote write", stag, r.Base, 1, rdma.AccessRemoteWrite, c); ok || !strings.Contains(te.Detail, "invalidated") {
		t.Fatal("invalidated stag accepted")
	}
}

func TestInvalidateRemote(t *testing.T) {
	tab := NewTable(100, func(uint32) uint8 { return 0 })
	a, b := &owner{"a"}, &owner{"b"}
	r := &Region{Owner: a, Buf: make([]byte, 8)}
	stag, _ := tab.Add(r, rdma.AccessRemoteRead)
	local := &Region{Owner: a, Buf: make([]byte, 8)}
	lstag, _ := tab.Add(local, rdma.AccessLocalWrite)
	for _, tt := range []struct {
		owner any
		stag  rdma.STag
		want  string
	}{
		{a, stag + 1, "no such stag"},
		{b, stag, "another connection"},
		{a, lstag, "not exposed"},
	} {
		if te, ok := tab.InvalidateRemote(tt.owner, tt.stag); ok || !strings.Contains(te.Detail, tt.want) {
			t.Errorf("%v: %v %v, want %q", tt.stag, ok, te, tt.want)
		}
	}
	if _, ok := tab.InvalidateRemote(a, stag); !ok || r.Valid() {
		t.Fatal("valid invalidation refused or not applied")
	}
}

type fakeMR struct{ Region }

func (*fakeMR) Invalidate() error                         { return nil }
func (*fakeMR) Reregister(rdma.Access) (rdma.STag, error) { return 0, nil }
func (*fakeMR) Release() error                            { return nil }

func TestCheckSGL(t *testing.T) {
	tab := NewTable(100, func(uint32) uint8 { return 0 })
	a, b := &owner{"a"}, &owner{"b"}
	m := &fakeMR{Region{Owner: a, Buf: make([]byte, 16)}}
	tab.Add(&m.Region, rdma.AccessLocalWrite)
	foreign := &fakeMR{Region{Owner: b, Buf: make([]byte, 16)}}
	tab.Add(&foreign.Region, rdma.AccessLocalWrite)
	n, err := CheckSGL(a, []rdma.SGE{{MR: m, Offset: 2, Length: 4}, {MR: m, Offset: 8, Length: 8}}, rdma.AccessLocalWrite, 4)
	if err != nil || n != 12 {
		t.Fatalf("%d %v", n, err)
	}
	if got := SGEBytes(rdma.SGE{MR: m, Offset: 2, Length: 4}); &got[0] != &m.Buf[2] || len(got) != 4 {
		t.Fatal("SGEBytes")
	}
	for _, tt := range []struct {
		sgl  []rdma.SGE
		need rdma.Access
		want string
	}{
		{make([]rdma.SGE, 5), 0, "more than 4"},
		{[]rdma.SGE{{MR: foreign, Length: 1}}, 0, "not registered on this connection"},
		{[]rdma.SGE{{MR: m, Offset: 10, Length: 7}}, 0, "beyond region length"},
		{[]rdma.SGE{{MR: m, Offset: -1, Length: 1}}, 0, "beyond region length"},
		{[]rdma.SGE{{MR: m, Length: 1}}, rdma.AccessRemoteRead, "needs"},
	} {
		if _, err := CheckSGL(a, tt.sgl, tt.need, 4); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.sgl, err, tt.want)
		}
	}
	m.SetValid(false)
	if _, err := CheckSGL(a, []rdma.SGE{{MR: m, Length: 1}}, 0, 4); err == nil || !strings.Contains(err.Error(), "invalidated") {
		t.Fatal(err)
	}
	tab.Remove(&m.Region)
	if _, err := CheckSGL(a, []rdma.SGE{{MR: m, Length: 1}}, 0, 4); err == nil || !strings.Contains(err.Error(), "released") {
		t.Fatal(err)
	}
	if RegionOf(nil) != nil {
		t.Fatal("RegionOf(nil)")
	}
}

// TestDomain: a domain registers regions in its table under the owner's
// lock, refuses a bad access or a dead owner, keeps a released region
// released, and releases every region it holds at once.
func TestDomain(t *testing.T) {
	tab := NewTable(1, func(uint32) uint8 { return 0 })
	var mu sync.Mutex
	var dead error
	var rs []*Region
	d := NewDomain(DomainConfig{Name: "test", Table: tab, Mu: &mu,
		Dead: func() error { return dead },
		NewMR: func(b []byte) (rdma.MR, *Region) {
			m := &testMR{Region{Owner: &mu, Buf: b}}
			rs = append(rs, &m.Region)
			return m, &m.Region
		}})
	for range 2 {
		if _, err := d.Alloc(8, rdma.AccessRemoteWrite); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := d.Register(make([]byte, 4), rdma.AccessLocalWrite); err != nil || len(m.Bytes()) != 4 {
		t.Fatal(m, err)
	}
	if _, err := d.Alloc(-1, rdma.AccessLocalWrite); !errors.Is(err, rdma.ErrInvalid) || !strings.HasPrefix(err.Error(), "test: alloc -1 bytes: ") {
		t.Errorf("negative size: %v", err)
	}
	if _, err := d.Register(nil, 0xff); !errors.Is(err, rdma.ErrInvalid) || !strings.HasPrefix(err.Error(), "test: register 0 bytes: access") {
		t.Errorf("bad access: %v", err)
	}
	dead = errors.New("ended")
	if _, err := d.Alloc(8, rdma.AccessLocalWrite); !errors.Is(err, dead) {
		t.Errorf("dead owner: %v", err)
	}
	if len(rs) != 3 || tab.Live() != 3 {
		t.Fatalf("%d regions made, %d live; want 3", len(rs), tab.Live())
	}
	d.Invalidate(rs[0])
	old := rs[0].STag()
	if s, err := d.Reregister(rs[0], rdma.AccessRemoteRead); err != nil || s == old || !rs[0].Valid() || rs[0].Access() != rdma.AccessRemoteRead {
		t.Errorf("reregister: %v %v, valid %v", s, err, rs[0].Valid())
	}
	d.Release(rs[1])
	if _, err := d.Reregister(rs[1], rdma.AccessRemoteRead); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("reregister released: %v", err)
	}
	mu.Lock()
	d.ReleaseAllLocked()
	mu.Unlock()
	if tab.Live() != 0 || !rs[2].Load().Released() {
		t.Errorf("%d regions live after ReleaseAllLocked", tab.Live())
	}
}

// testMR is an MR made by TestDomain's owner.
type testMR struct{ Region }

func (*testMR) Invalidate() error                         { return nil }
func (*testMR) Reregister(rdma.Access) (rdma.STag, error) { return 0, nil }
func (*testMR) Release() error                            { return nil }
