package loopback

// Memory registration.
//
// An STag's 24-bit index names a slot in the Network's table, shared by all
// its connections as a device's table is, so that an STag of another
// connection is found and refused as "not associated" rather than unknown.
// Each registration of a slot (Alloc, Register, Reregister) advances the
// slot's 8-bit key, and a released index is reused only after reuseAfter
// others have been released, so stale STags do not match.
//
// An MR belongs to one Conn, its protection domain. Its mutable state
// (STag, validity, access) is written under that Conn's link mutex, which
// every placement into the MR also holds: once Invalidate returns, nothing
// is placed into the region any more. The state is also published in an
// atomic word so that checks by another connection can read it.

import (
	"fmt"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

const (
	firstIndex = 0x0002a5 // deterministic but not small, so no ULP relies on small STags
	lastIndex  = 1<<24 - 1
	reuseAfter = 64
)

type stagTable struct {
	slots map[uint32]*slot
	free  []uint32 // released indexes, oldest first
	next  uint32   // next never-used index; 0 once all were used
	live  int
}

type slot struct {
	mr  *mr // nil while free
	key uint8
}

func newSTagTable() stagTable {
	return stagTable{slots: make(map[uint32]*slot), next: firstIndex}
}

// add gives m an index and a fresh key.
func (t *stagTable) add(m *mr) (rdma.STag, error) {
	var idx uint32
	switch {
	case len(t.free) > 0 && (len(t.free) >= reuseAfter || t.next == 0):
		idx = t.free[0]
		t.free = t.free[1:]
	case t.next != 0:
		idx = t.next
		t.next++
		if t.next > lastIndex {
			t.next = 0
		}
		t.slots[idx] = &slot{key: uint8(idx) ^ 0x5a}
	default:
		return 0, fmt.Errorf("all %d STag indexes are in use", lastIndex)
	}
	s := t.slots[idx]
	s.mr = m
	s.key++
	t.live++
	return rdma.MakeSTag(idx, s.key), nil
}

// rekey advances the key of m's slot.
func (t *stagTable) rekey(m *mr) rdma.STag {
	s := t.slots[m.index]
	s.key++
	return rdma.MakeSTag(m.index, s.key)
}

func (t *stagTable) remove(m *mr) {
	t.slots[m.index].mr = nil
	t.free = append(t.free, m.index)
	t.live--
}

func (t *stagTable) lookup(idx uint32) *mr {
	if s := t.slots[idx]; s != nil {
		return s.mr
	}
	return nil
}

// mrState packs an MR's mutable state: STag in bits 0-31, access in bits
// 32-39, valid in bit 40, released in bit 41.
type mrState uint64

func makeMRState(stag rdma.STag, access rdma.Access, valid, released bool) mrState {
	s := mrState(stag) | mrState(access)<<32
	if valid {
		s |= 1 << 40
	}
	if released {
		s |= 1 << 41
	}
	return s
}

func (s mrState) stag() rdma.STag     { return rdma.STag(s) }
func (s mrState) access() rdma.Access { return rdma.Access(s >> 32) }
func (s mrState) valid() bool         { return s&(1<<40) != 0 }
func (s mrState) released() bool      { return s&(1<<41) != 0 }

// mr is a registered region; it implements rdma.MR.
type mr struct {
	c     *Conn
	buf   []byte
	to    uint64
	index uint32
	state atomic.Uint64 // mrState; stored under c.l.mu
}

var _ rdma.MR = (*mr)(nil)

func (m *mr) load() mrState { return mrState(m.state.Load()) }

// set stores a new state; the caller holds m.c.l.mu.
func (m *mr) set(stag rdma.STag, access rdma.Access, valid, released bool) {
	m.state.Store(uint64(makeMRState(stag, access, valid, released)))
}

func (m *mr) Bytes() []byte       { return m.buf }
func (m *mr) STag() rdma.STag     { return m.load().stag() }
func (m *mr) TO() uint64          { return m.to }
func (m *mr) Access() rdma.Access { return m.load().access() }
func (m *mr) Valid() bool         { return m.load().valid() }

func (m *mr) Invalidate() error {
	m.c.l.mu.Lock()
	defer m.c.l.mu.Unlock()
	s := m.load()
	m.set(s.stag(), s.access(), false, s.released())
	return nil
}

func (m *mr) Reregister(access rdma.Access) (rdma.STag, error) {
	if !access.Valid() {
		return 0, fmt.Errorf("loopback: reregister stag %v: access %v: %w", m.STag(), access, rdma.ErrInvalid)
	}
	m.c.l.mu.Lock()
	defer m.c.l.mu.Unlock()
	s := m.load()
	if s.released() {
		return 0, fmt.Errorf("loopback: reregister stag %v: region released: %w", s.stag(), rdma.ErrInvalid)
	}
	m.c.n.mu.Lock()
	stag := m.c.n.stags.rekey(m)
	m.c.n.mu.Unlock()
	m.set(stag, access, true, false)
	return stag, nil
}

func (m *mr) Release() error {
	m.c.l.mu.Lock()
	defer m.c.l.mu.Unlock()
	m.c.releaseLocked(m)
	return nil
}

// register adds a region on c; verb ("alloc", "register") names the call
// in errors. The caller must not hold c.l.mu.
func (c *Conn) register(b []byte, access rdma.Access, verb string) (rdma.MR, error) {
	if !access.Valid() {
		return nil, fmt.Errorf("loopback: %s %d bytes: access %v: %w", verb, len(b), access, rdma.ErrInvalid)
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.state == stateDead {
		return nil, fmt.Errorf("loopback: %s %d bytes: %w", verb, len(b), c.err)
	}
	m := &mr{c: c, buf: b}
	c.n.mu.Lock()
	stag, err := c.n.stags.add(m)
	c.n.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("loopback: %s %d bytes: %w", verb, len(b), err)
	}
	m.index = stag.Index()
	// A base TO that is far from zero and distinct per index: a peer that
	// assumes zero-based offsets fails at once.
	m.to = uint64(m.index) << 32
	m.set(stag, access, true, false)
	c.mrs[m] = struct{}{}
	return m, nil
}

// releaseLocked deregisters m; the caller holds c.l.mu.
func (c *Conn) releaseLocked(m *mr) {
	s := m.load()
	if s.released() {
		return
	}
	m.set(s.stag(), s.access(), false, true)
	c.n.mu.Lock()
	c.n.stags.remove(m)
	c.n.mu.Unlock()
	delete(c.mrs, m)
}

// Alloc returns size bytes of zeroed memory registered with access.
func (c *Conn) Alloc(size int, access rdma.Access) (rdma.MR, error) {
	if size < 0 {
		return nil, fmt.Errorf("loopback: alloc %d bytes: %w", size, rdma.ErrInvalid)
	}
	return c.register(make([]byte, size), access, "alloc")
}

// Register registers b with access. Loopback memory does not move, so b is
// used as it is.
func (c *Conn) Register(b []byte, access rdma.Access) (rdma.MR, error) {
	return c.register(b, access, "register")
}

// accessCodes are the Terminates for each failed check of a tagged access.
type accessCodes struct {
	invalid, notAssociated, rights, bounds rdma.TerminateError
}

var (
	// Inbound RDMA Write: DDP tagged buffer codes (RFC 5041 section 7.2),
	// but RDMAP's access rights violation, which DDP has no code for.
	writeCodes = accessCodes{
		invalid:       rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedInvalidSTag},
		notAssociated: rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedSTagNotAssociated},
		rights:        rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeAccessRights},
		bounds:        rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedBaseBounds},
	}
	// RDMA Read source: RDMAP remote protection codes (RFC 5040 section 7.1).
	readCodes = accessCodes{
		invalid:       rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeInvalidSTag},
		notAssociated: rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeSTagNotAssociated},
		rights:        rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeAccessRights},
		bounds:        rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeBaseBounds},
	}
)

// checkRemote checks a peer's access ("remote write", "remote read") to
// length bytes at stag/to of c's memory in siw's order (notes/iwarp-wire.md
// 5.4): known index, key and validity, protection domain, rights, bounds.
// It returns the bytes, or the Terminate for the first failed check. The
// caller holds c.l.mu.
func (c *Conn) checkRemote(what string, stag rdma.STag, to uint64, length int, need rdma.Access, codes *accessCodes) ([]byte, rdma.TerminateError, bool) {
	fail := func(te rdma.TerminateError, format string, args ...any) ([]byte, rdma.TerminateError, bool) {
		te.Detail = fmt.Sprintf("%s to stag %v TO %#x: ", what, stag, to) + fmt.Sprintf(format, args...)
		return nil, te, false
	}
	c.n.mu.Lock()
	m := c.n.stags.lookup(stag.Index())
	c.n.mu.Unlock()
	if m == nil {
		return fail(codes.invalid, "no such stag")
	}
	s := m.load()
	size := uint64(len(m.buf))
	switch {
	case s.stag() != stag:
		return fail(codes.invalid, "stale key")
	case !s.valid():
		return fail(codes.invalid, "stag invalidated")
	case m.c != c:
		return fail(codes.notAssociated, "stag of another connection")
	case !s.access().Has(need):
		return fail(codes.rights, "stag has access %v", s.access())
	case to < m.to:
		return fail(codes.bounds, "below region base TO %#x", m.to)
	case to-m.to > size || uint64(length) > size-(to-m.to):
		return fail(codes.bounds, "offset %d length %d beyond region length %d", to-m.to, length, size)
	}
	off := int(to - m.to)
	return m.buf[off : off+length], rdma.TerminateError{}, true
}

// invalidateRemote carries out the invalidation a Send with Invalidate
// asks of c (RFC 5040 section 7.2, notes/iwarp-wire.md 5.5): the full STag
// must be known, belong to c and have been exposed for remote access. The
// caller holds c.l.mu.
func (c *Conn) invalidateRemote(stag rdma.STag) (rdma.TerminateError, bool) {
	c.n.mu.Lock()
	m := c.n.stags.lookup(stag.Index())
	c.n.mu.Unlock()
	var s mrState
	if m != nil {
		s = m.load()
	}
	te := rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeCannotInvalidate}
	switch {
	case m == nil || s.stag() != stag:
		te.Type, te.Detail = rdma.TypeRemoteOperation, "no such stag"
	case m.c != c:
		te.Detail = "stag of another connection"
	case s.access()&(rdma.AccessRemoteRead|rdma.AccessRemoteWrite) == 0:
		te.Detail = "stag not exposed for remote access"
	default:
		m.set(s.stag(), s.access(), false, s.released())
		return rdma.TerminateError{}, true
	}
	te.Detail = fmt.Sprintf("send with invalidate of stag %v: %s", stag, te.Detail)
	return te, false
}

// checkSGL checks a local scatter/gather list of c: each MR is c's, valid
// and has need, and each SGE lies inside it. It returns the total length.
// The caller holds c.l.mu.
func (c *Conn) checkSGL(sgl []rdma.SGE, need rdma.Access) (int, error) {
	if len(sgl) > MaxSGE {
		return 0, fmt.Errorf("%d SGEs, more than %d", len(sgl), MaxSGE)
	}
	total := 0
	for i, e := range sgl {
		m, ok := e.MR.(*mr)
		if !ok || m.c != c {
			return 0, fmt.Errorf("sge %d: MR %T is not registered on this connection", i, e.MR)
		}
		s := m.load()
		switch {
		case s.released():
			return 0, fmt.Errorf("sge %d: stag %v released", i, s.stag())
		case !s.valid():
			return 0, fmt.Errorf("sge %d: stag %v invalidated", i, s.stag())
		case !s.access().Has(need):
			return 0, fmt.Errorf("sge %d: stag %v has access %v, needs %v", i, s.stag(), s.access(), need)
		case e.Offset < 0 || e.Length < 0 || e.Offset > len(m.buf) || e.Length > len(m.buf)-e.Offset:
			return 0, fmt.Errorf("sge %d: offset %d length %d beyond region length %d of stag %v",
				i, e.Offset, e.Length, len(m.buf), s.stag())
		}
		total += e.Length
	}
	return total, nil
}

func sgeBytes(e rdma.SGE) []byte {
	return e.MR.(*mr).buf[e.Offset : e.Offset+e.Length]
}

// gather copies the bytes src names into dst.
func gather(dst []byte, src []rdma.SGE) {
	n := 0
	for _, e := range src {
		n += copy(dst[n:], sgeBytes(e))
	}
}

// scatter copies src into the memory dst names, which must be long enough.
func scatter(dst []rdma.SGE, src []byte) {
	for _, e := range dst {
		if len(src) == 0 {
			return
		}
		src = src[copy(sgeBytes(e), src):]
	}
}

// copySGL copies the bytes src names into the memory dst names, which must
// be long enough.
func copySGL(dst, src []rdma.SGE) {
	di, doff := 0, 0
	for _, e := range src {
		b := sgeBytes(e)
		for len(b) > 0 {
			n := copy(sgeBytes(dst[di])[doff:], b)
			b = b[n:]
			if doff += n; doff == dst[di].Length {
				di, doff = di+1, 0
			}
		}
	}
}
