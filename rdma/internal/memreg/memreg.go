// Package memreg is the memory-registration model the software providers
// share: a device-wide STag table, registered regions with their mutable
// state in one atomic word, and the checks a peer's tagged access, a Send
// with Invalidate and a local scatter/gather list go through, in the order
// Linux siw applies them (docs/linux-interop.md section 2).
//
// An STag's 24-bit index names a slot of the Table, shared by all of a
// provider's connections as a device's table is, so that an STag of another
// connection is found and refused as "not associated" rather than unknown.
// Each registration of a slot (register, reregister) advances its 8-bit
// key, and a released index is reused only after ReuseAfter others have
// been released, so a stale STag never matches (RFC 5042).
//
// A Region belongs to one connection, its protection domain, named by
// Owner. Its state is written under the owner's lock and published in an
// atomic word, so that checks made on behalf of another connection can
// read it. Serialising placement against invalidation is the provider's.
package memreg

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// LastIndex is the largest STag index; index 0 is never used.
const LastIndex = 1<<24 - 1

// ReuseAfter is how many released indexes wait before the oldest is
// handed out again.
const ReuseAfter = 64

// State packs a region's mutable state: STag in bits 0-31, access in bits
// 32-39, valid in bit 40, released in bit 41.
type State uint64

// MakeState packs a State.
func MakeState(stag rdma.STag, access rdma.Access, valid, released bool) State {
	s := State(stag) | State(access)<<32
	if valid {
		s |= 1 << 40
	}
	if released {
		s |= 1 << 41
	}
	return s
}

func (s State) STag() rdma.STag     { return rdma.STag(s) }
func (s State) Access() rdma.Access { return rdma.Access(s >> 32) }
func (s State) Valid() bool         { return s&(1<<40) != 0 }
func (s State) Released() bool      { return s&(1<<41) != 0 }

// Region is the provider-independent part of a registered region. A
// provider's MR type embeds it and adds Invalidate, Reregister and
// Release, which need its locks.
type Region struct {
	Owner any    // the connection (protection domain) the region belongs to
	Buf   []byte // the memory
	Base  uint64 // tagged offset of Buf[0]
	Index uint32 // STag index
	state atomic.Uint64
}

// Load returns the region's state.
func (r *Region) Load() State { return State(r.state.Load()) }

// Set stores a new state; the caller holds the owner's lock.
func (r *Region) Set(stag rdma.STag, access rdma.Access, valid, released bool) {
	r.state.Store(uint64(MakeState(stag, access, valid, released)))
}

// SetValid changes only the validity (local invalidation).
func (r *Region) SetValid(valid bool) {
	s := r.Load()
	r.Set(s.STag(), s.Access(), valid, s.Released())
}

// Reg returns r; it lets a provider find the Region of any MR that embeds
// one.
func (r *Region) Reg() *Region { return r }

// The rdma.MR methods that need no provider state.
func (r *Region) Bytes() []byte       { return r.Buf }
func (r *Region) STag() rdma.STag     { return r.Load().STag() }
func (r *Region) TO() uint64          { return r.Base }
func (r *Region) Access() rdma.Access { return r.Load().Access() }
func (r *Region) Valid() bool         { return r.Load().Valid() }

// Table is a provider's STag table. Its methods are safe for concurrent
// use.
type Table struct {
	mu    sync.Mutex
	slots map[uint32]*slot
	free  []uint32 // released indexes, oldest first
	next  uint32   // next never-used index, cycling through [1, LastIndex]
	fresh int      // never-used indexes left
	live  int
	key   func(index uint32) uint8
}

type slot struct {
	r   *Region // nil while free
	key uint8
}

// NewTable returns a table that hands out never-used indexes from first on,
// cyclically, each slot's key starting at key(index).
func NewTable(first uint32, key func(index uint32) uint8) *Table {
	return &Table{slots: make(map[uint32]*slot), next: max(first%(LastIndex+1), 1), fresh: LastIndex, key: key}
}

// Add registers r: it sets r.Index and r.Base (a tagged-offset base far
// from zero and distinct per index, so a peer that assumes zero-based
// offsets fails at once) and stores r's first state. It returns the STag.
func (t *Table) Add(r *Region, access rdma.Access) (rdma.STag, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var idx uint32
	switch {
	case len(t.free) > 0 && (len(t.free) >= ReuseAfter || t.fresh == 0):
		idx = t.free[0]
		t.free = t.free[1:]
	case t.fresh > 0:
		idx = t.next
		t.next = t.next%LastIndex + 1
		t.fresh--
		t.slots[idx] = &slot{key: t.key(idx)}
	default:
		return 0, fmt.Errorf("all %d STag indexes are in use", LastIndex)
	}
	s := t.slots[idx]
	s.r = r
	s.key++
	t.live++
	stag := rdma.MakeSTag(idx, s.key)
	r.Index, r.Base = idx, uint64(idx)<<32
	r.Set(stag, access, true, false)
	return stag, nil
}

// Rekey advances the key of r's slot and returns the new STag.
func (t *Table) Rekey(r *Region) rdma.STag {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[r.Index]
	s.key++
	return rdma.MakeSTag(r.Index, s.key)
}

// Remove marks r released and frees its slot; it does nothing if r is
// already released. The caller holds the owner's lock.
func (t *Table) Remove(r *Region) bool {
	s := r.Load()
	if s.Released() {
		return false
	}
	r.Set(s.STag(), s.Access(), false, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slots[r.Index].r = nil
	t.free = append(t.free, r.Index)
	t.live--
	return true
}

// Lookup returns the region registered at index idx, or nil.
func (t *Table) Lookup(idx uint32) *Region {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.slots[idx]; s != nil {
		return s.r
	}
	return nil
}

// Live returns the number of registered regions.
func (t *Table) Live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}

// Codes are the Terminates for each failed check of a tagged access.
type Codes struct {
	Invalid, NotAssociated, Rights, Bounds rdma.TerminateError
}

var (
	// WriteCodes are an inbound RDMA Write's: DDP tagged buffer codes
	// (RFC 5041 section 7.2), but RDMAP's access rights violation, which
	// DDP has no code for.
	WriteCodes = Codes{
		Invalid:       rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedInvalidSTag},
		NotAssociated: rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedSTagNotAssociated},
		Rights:        rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeAccessRights},
		Bounds:        rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedBaseBounds},
	}
	// ReadCodes are an RDMA Read source's: RDMAP remote protection codes
	// (RFC 5040 section 7.1). Unlike siw, the remote-read right is
	// enforced.
	ReadCodes = Codes{
		Invalid:       rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeInvalidSTag},
		NotAssociated: rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeSTagNotAssociated},
		Rights:        rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeAccessRights},
		Bounds:        rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeBaseBounds},
	}
)

// CheckRemote checks a peer's access ("remote write", "remote read") to
// length bytes at stag/to of owner's memory in siw's order: known index,
// key and validity, protection domain, rights, bounds. It returns the
// bytes, or the Terminate for the first failed check. It does not allocate
// unless the check fails.
func (t *Table) CheckRemote(owner any, what string, stag rdma.STag, to uint64, length int, need rdma.Access, codes *Codes) ([]byte, rdma.TerminateError, bool) {
	fail := func(te rdma.TerminateError, format string, args ...any) ([]byte, rdma.TerminateError, bool) {
		te.Detail = fmt.Sprintf("%s to stag %v TO %#x: ", what, stag, to) + fmt.Sprintf(format, args...)
		return nil, te, false
	}
	r := t.Lookup(stag.Index())
	if r == nil {
		return fail(codes.Invalid, "no such stag")
	}
	s := r.Load()
	size := uint64(len(r.Buf))
	switch {
	case s.STag() != stag:
		return fail(codes.Invalid, "stale key")
	case !s.Valid():
		return fail(codes.Invalid, "stag invalidated")
	case r.Owner != owner:
		return fail(codes.NotAssociated, "stag of another connection")
	case !s.Access().Has(need):
		return fail(codes.Rights, "stag has access %v", s.Access())
	case to < r.Base:
		return fail(codes.Bounds, "below region base TO %#x", r.Base)
	case to-r.Base > size || uint64(length) > size-(to-r.Base):
		return fail(codes.Bounds, "offset %d length %d beyond region length %d", to-r.Base, length, size)
	}
	off := int(to - r.Base)
	return r.Buf[off : off+length], rdma.TerminateError{}, true
}

// InvalidateRemote carries out the invalidation a Send with Invalidate
// asks of owner (RFC 5040 section 7.2): the full STag must be known, belong
// to owner and have been exposed for remote access. The caller holds the
// owner's lock.
func (t *Table) InvalidateRemote(owner any, stag rdma.STag) (rdma.TerminateError, bool) {
	r := t.Lookup(stag.Index())
	var s State
	if r != nil {
		s = r.Load()
	}
	te := rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeCannotInvalidate}
	switch {
	case r == nil || s.STag() != stag:
		te.Type, te.Detail = rdma.TypeRemoteOperation, "no such stag"
	case r.Owner != owner:
		te.Detail = "stag of another connection"
	case s.Access()&(rdma.AccessRemoteRead|rdma.AccessRemoteWrite) == 0:
		te.Detail = "stag not exposed for remote access"
	default:
		r.SetValid(false)
		return rdma.TerminateError{}, true
	}
	te.Detail = fmt.Sprintf("send with invalidate of stag %v: %s", stag, te.Detail)
	return te, false
}

// RegionOf returns the Region of an MR made by a provider that embeds one,
// or nil.
func RegionOf(m rdma.MR) *Region {
	if x, ok := m.(interface{ Reg() *Region }); ok {
		return x.Reg()
	}
	return nil
}

// CheckSGL checks a local scatter/gather list of owner: at most maxSGE
// elements, each MR owner's, valid and with need, each SGE inside its
// region. It returns the total length.
func CheckSGL(owner any, sgl []rdma.SGE, need rdma.Access, maxSGE int) (int, error) {
	if len(sgl) > maxSGE {
		return 0, fmt.Errorf("%d SGEs, more than %d", len(sgl), maxSGE)
	}
	total := 0
	for i, e := range sgl {
		r := RegionOf(e.MR)
		if r == nil || r.Owner != owner {
			return 0, fmt.Errorf("sge %d: MR %T is not registered on this connection", i, e.MR)
		}
		s := r.Load()
		switch {
		case s.Released():
			return 0, fmt.Errorf("sge %d: stag %v released", i, s.STag())
		case !s.Valid():
			return 0, fmt.Errorf("sge %d: stag %v invalidated", i, s.STag())
		case !s.Access().Has(need):
			return 0, fmt.Errorf("sge %d: stag %v has access %v, needs %v", i, s.STag(), s.Access(), need)
		case e.Offset < 0 || e.Length < 0 || e.Offset > len(r.Buf) || e.Length > len(r.Buf)-e.Offset:
			return 0, fmt.Errorf("sge %d: offset %d length %d beyond region length %d of stag %v",
				i, e.Offset, e.Length, len(r.Buf), s.STag())
		}
		total += e.Length
	}
	return total, nil
}

// SGEBytes returns the memory a checked SGE names.
func SGEBytes(e rdma.SGE) []byte {
	return RegionOf(e.MR).Buf[e.Offset : e.Offset+e.Length]
}

// slotSGEs is the scatter/gather list capacity each queue slot starts
// with, so that posting allocates nothing from the first lap on.
const slotSGEs = 2

// PresizeSGLs gives every queue slot's SGL a capacity of slotSGEs, carved
// from one array; longer lists get their own array the first time.
func PresizeSGLs[T any](slots []T, sgl func(*T) *[]rdma.SGE) {
	arr := make([]rdma.SGE, len(slots)*slotSGEs)
	for i := range slots {
		*sgl(&slots[i]) = arr[i*slotSGEs : i*slotSGEs : (i+1)*slotSGEs]
	}
}
