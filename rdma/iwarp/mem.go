package iwarp

// Memory registration.
//
// An STag's 24-bit index names a slot in the Provider's table, shared by all
// its connections as an RNIC's table is, so that an STag of another
// connection is found and refused as "not associated" rather than unknown
// (siw's PD check, notes/iwarp-wire.md 5.4). Indexes are handed out
// cyclically from a random starting point and each slot's 8-bit key starts
// at a random value and advances on every registration of the slot (Alloc,
// Register, Reregister); a released index is reused only after reuseAfter
// others have been released. So STags are sparse and a stale one never
// matches (RFC 5042, notes 5.6).
//
// An MR belongs to one Conn, its protection domain. Its mutable state
// (STag, validity, access) is written under that Conn's mutex and
// published in an atomic word, so checks made by another connection's
// reader can read it. The reader places payload into memory without the
// mutex but under Conn.placeMu, after checking the MR under the mutex;
// Invalidate and Release wait for that placement, so once they return
// nothing more is placed into the region.

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

const (
	lastIndex  = 1<<24 - 1
	reuseAfter = 64
)

type stagTable struct {
	mu    sync.Mutex
	slots map[uint32]*slot
	free  []uint32 // released indexes, oldest first
	next  uint32   // next never-used index, cycling through [1, lastIndex]
	fresh int      // never-used indexes left
	live  int
}

type slot struct {
	mr  *mr // nil while free
	key uint8
}

func newSTagTable() stagTable {
	return stagTable{
		slots: make(map[uint32]*slot),
		next:  1 + rand.Uint32N(lastIndex),
		fresh: lastIndex,
	}
}

// add gives m an index and a fresh key. The caller holds t.mu.
func (t *stagTable) add(m *mr) (rdma.STag, error) {
	var idx uint32
	switch {
	case len(t.free) > 0 && (len(t.free) >= reuseAfter || t.fresh == 0):
		idx = t.free[0]
		t.free = t.free[1:]
	case t.fresh > 0:
		idx = t.next
		t.next = t.next%lastIndex + 1
		t.fresh--
		t.slots[idx] = &slot{key: uint8(rand.Uint32())}
	default:
		return 0, fmt.Errorf("all %d STag indexes are in use", lastIndex)
	}
	s := t.slots[idx]
	s.mr = m
	s.key++
	t.live++
	return rdma.MakeSTag(idx, s.key), nil
}

// rekey advances the key of m's slot. The caller holds t.mu.
func (t *stagTable) rekey(m *mr) rdma.STag {
	s := t.slots[m.index]
	s.key++
	return rdma.MakeSTag(m.index, s.key)
}

// remove frees m's slot. The caller holds t.mu.
func (t *stagTable) remove(m *mr) {
	t.slots[m.index].mr = nil
	t.free = append(t.free, m.index)
	t.live--
}

// lookup returns the MR registered at index idx, or nil.
func (t *stagTable) lookup(idx uint32) *mr {
	t.mu.Lock()
	defer t.mu.Unlock()
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
	state atomic.Uint64 // mrState; stored under c.mu
}

var _ rdma.MR = (*mr)(nil)

func (m *mr) load() mrState { return mrState(m.state.Load()) }

// set stores a new state; the caller holds m.c.mu.
func (m *mr) set(stag rdma.STag, access rdma.Access, valid, released bool) {
	m.state.Store(uint64(makeMRState(stag, access, valid, released)))
}

func (m *mr) Bytes() []byte       { return m.buf }
func (m *mr) STag() rdma.STag     { return m.load().stag() }
func (m *mr) TO() uint64          { return m.to }
func (m *mr) Access() rdma.Access { return m.load().access() }
func (m *mr) Valid() bool         { return m.load().valid() }

// Invalidate makes the STag invalid and waits until no payload is being
// placed into the region. Data that had already arrived on the socket is
// placed first (see waitArrived).
func (m *mr) Invalidate() error {
	m.c.waitArrived()
	m.c.mu.Lock()
	s := m.load()
	m.set(s.stag(), s.access(), false, s.released())
	m.c.mu.Unlock()
	m.c.waitPlacement()
	return nil
}

// Reregister gives the region a new key and access, valid again.
func (m *mr) Reregister(access rdma.Access) (rdma.STag, error) {
	if !access.Valid() {
		return 0, fmt.Errorf("iwarp: reregister stag %v: access %v: %w", m.STag(), access, rdma.ErrInvalid)
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	s := m.load()
	if s.released() {
		return 0, fmt.Errorf("iwarp: reregister stag %v: region released: %w", s.stag(), rdma.ErrInvalid)
	}
	t := &m.c.p.stags
	t.mu.Lock()
	stag := t.rekey(m)
	t.mu.Unlock()
	m.set(stag, access, true, false)
	return stag, nil
}

// Release deregisters the region and waits until no payload is being
// placed into it.
func (m *mr) Release() error {
	m.c.waitArrived()
	m.c.mu.Lock()
	m.c.releaseLocked(m)
	m.c.mu.Unlock()
	m.c.waitPlacement()
	return nil
}

// register adds a region on c; verb ("alloc", "register") names the call
// in errors. The caller must not hold c.mu.
func (c *Conn) register(b []byte, access rdma.Access, verb string) (rdma.MR, error) {
	if !access.Valid() {
		return nil, fmt.Errorf("iwarp: %s %d bytes: access %v: %w", verb, len(b), access, rdma.ErrInvalid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateDead {
		return nil, fmt.Errorf("iwarp: %s %d bytes: %w", verb, len(b), c.err)
	}
	m := &mr{c: c, buf: b}
	t := &c.p.stags
	t.mu.Lock()
	stag, err := t.add(m)
	t.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("iwarp: %s %d bytes: %w", verb, len(b), err)
	}
	m.index = stag.Index()
	// A base TO far from zero and distinct per index: a peer that assumes
	// zero-based offsets fails at once (siw advertises addresses too).
	m.to = uint64(m.index) << 32
	m.set(stag, access, true, false)
	c.mrs[m] = struct{}{}
	return m, nil
}

// releaseLocked deregisters m; the caller holds c.mu.
func (c *Conn) releaseLocked(m *mr) {
	s := m.load()
	if s.released() {
		return
	}
	m.set(s.stag(), s.access(), false, true)
	t := &c.p.stags
	t.mu.Lock()
	t.remove(m)
	t.mu.Unlock()
	delete(c.mrs, m)
}

// Alloc returns size bytes of zeroed memory registered with access. Go
// memory does not move, so the region is an ordinary slice.
func (c *Conn) Alloc(size int, access rdma.Access) (rdma.MR, error) {
	if size < 0 {
		return nil, fmt.Errorf("iwarp: alloc %d bytes: %w", size, rdma.ErrInvalid)
	}
	if !access.Valid() {
		return nil, fmt.Errorf("iwarp: alloc %d bytes: access %v: %w", size, access, rdma.ErrInvalid)
	}
	return c.register(make([]byte, size), access, "alloc")
}

// Register registers b with access; b is used in place.
func (c *Conn) Register(b []byte, access rdma.Access) (rdma.MR, error) {
	return c.register(b, access, "register")
}

// arrivalWait bounds how long waitArrived waits for the reader.
const arrivalWait = time.Second

// waitArrived waits, for at most arrivalWait, until the reader has handled
// every FPDU whose bytes had reached this host when it was called: the
// bytes read from the socket plus those it still holds (SIOCINQ). A peer's
// RDMA Write completes when handed to TCP, so a peer that has seen its
// Write complete and then asks us to invalidate the region must find the
// Write placed, not refused, as it would be on an RNIC, which places what
// it has received before it executes a later local invalidate. An FPDU that
// has only partly arrived is not waited for beyond the bound.
func (c *Conn) waitArrived() {
	c.mu.Lock()
	up := c.state == stateUp
	c.mu.Unlock()
	if !up {
		return
	}
	// The reader moves bytes from the socket (SIOCINQ) to cr.n while we
	// look; a read between the two loads would count its bytes twice and
	// set a target never reached. Take a snapshot with no read in it.
	var target uint64
	for tries := 0; ; tries++ {
		before := c.cr.n.Load()
		inq, ok := tcpInq(c.raw)
		if !ok {
			return
		}
		if c.cr.n.Load() == before {
			target = before + uint64(inq)
			break
		}
		if tries == 100 {
			return // the reader is busy reading: it is making progress
		}
	}
	deadline := time.Now().Add(arrivalWait)
	for c.rxDone.Load() < target && time.Now().Before(deadline) {
		select {
		case <-c.done:
			return
		default:
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// waitPlacement returns once the reader is not placing payload: at once
// when it is idle, else when the FPDU being placed has been read. A peer
// that stalls in the middle of that FPDU for longer than the handshake
// timeout loses the connection (ErrConnectionLost), which ends the read.
func (c *Conn) waitPlacement() {
	if c.placeMu.TryLock() {
		c.placeMu.Unlock()
		return
	}
	deadline := time.Now().Add(c.p.opts.HandshakeTimeout)
	for !c.placeMu.TryLock() {
		if time.Now().After(deadline) {
			c.mu.Lock()
			c.endLocked(rdma.ErrConnectionLost, nil)
			c.mu.Unlock()
			c.placeMu.Lock() // the read deadline is now: the reader lets go at once
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	c.placeMu.Unlock()
}

// accessCodes are the Terminate causes for each failed check of a tagged
// access.
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
	// RDMA Read source: RDMAP remote protection codes (RFC 5040 section
	// 7.1). Unlike siw, the remote-read right is enforced.
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
// caller holds c.mu. It does not allocate unless the check fails.
func (c *Conn) checkRemote(what string, stag rdma.STag, to uint64, length int, need rdma.Access, codes *accessCodes) ([]byte, rdma.TerminateError, bool) {
	fail := func(te rdma.TerminateError, format string, args ...any) ([]byte, rdma.TerminateError, bool) {
		te.Detail = fmt.Sprintf("%s to stag %v TO %#x: ", what, stag, to) + fmt.Sprintf(format, args...)
		return nil, te, false
	}
	m := c.p.stags.lookup(stag.Index())
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
// caller holds c.mu.
func (c *Conn) invalidateRemote(stag rdma.STag) (rdma.TerminateError, bool) {
	m := c.p.stags.lookup(stag.Index())
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
// The caller holds c.mu.
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

// sglOK reports whether every MR of a checked SGL is still valid with
// need; unlike checkSGL it does not allocate. The caller holds c.mu.
func sglOK(sgl []rdma.SGE, need rdma.Access) bool {
	for _, e := range sgl {
		s := e.MR.(*mr).load()
		if s.released() || !s.valid() || !s.access().Has(need) {
			return false
		}
	}
	return true
}

// cursor walks a checked scatter/gather list, or one plain slice, handing
// out contiguous pieces in order.
type cursor struct {
	sgl []rdma.SGE
	one []byte // used when sgl is nil
	i   int    // SGE index
	off int    // offset within sgl[i], or within one
}

func sgeBytes(e rdma.SGE) []byte { return e.MR.(*mr).buf[e.Offset : e.Offset+e.Length] }

// next returns the next piece of at most n bytes (n > 0), or nil at the end.
func (cur *cursor) next(n int) []byte {
	if cur.sgl == nil {
		p := cur.one[cur.off:]
		p = p[:min(n, len(p))]
		cur.off += len(p)
		if len(p) == 0 {
			return nil
		}
		return p
	}
	for cur.i < len(cur.sgl) {
		b := sgeBytes(cur.sgl[cur.i])[cur.off:]
		if len(b) == 0 {
			cur.i, cur.off = cur.i+1, 0
			continue
		}
		b = b[:min(n, len(b))]
		cur.off += len(b)
		return b
	}
	return nil
}
