package loopback

// Memory registration, on the model of rdma/internal/memreg: the
// Network's STag table is shared by all its connections as a device's is,
// and deterministic (indexes from firstIndex, keys derived from them).
//
// An MR belongs to one Conn, its protection domain. Its mutable state
// (STag, validity, access) is written under that Conn's link mutex, which
// every placement into the MR also holds: once Invalidate returns, nothing
// is placed into the region any more. The state is also published in an
// atomic word so that checks by another connection can read it.

import (
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
)

// firstIndex is the first STag index handed out: deterministic but not
// small, so no upper layer relies on small STags.
const firstIndex = 0x0002a5

// newSTagTable returns the network's deterministic table.
func newSTagTable() *memreg.Table {
	return memreg.NewTable(firstIndex, func(idx uint32) uint8 { return uint8(idx) ^ 0x5a })
}

// mr is a registered region; it implements rdma.MR.
type mr struct {
	memreg.Region // Owner is the *Conn; state stored under its link mutex
	c             *Conn
}

var _ rdma.MR = (*mr)(nil)

func (m *mr) Invalidate() error {
	m.c.l.mu.Lock()
	defer m.c.l.mu.Unlock()
	m.SetValid(false)
	return nil
}

func (m *mr) Reregister(access rdma.Access) (rdma.STag, error) {
	if !access.Valid() {
		return 0, fmt.Errorf("loopback: reregister stag %v: access %v: %w", m.STag(), access, rdma.ErrInvalid)
	}
	m.c.l.mu.Lock()
	defer m.c.l.mu.Unlock()
	if s := m.Load(); s.Released() {
		return 0, fmt.Errorf("loopback: reregister stag %v: region released: %w", s.STag(), rdma.ErrInvalid)
	}
	stag := m.c.n.stags.Rekey(&m.Region)
	m.Set(stag, access, true, false)
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
	m := &mr{Region: memreg.Region{Owner: c, Buf: b}, c: c}
	if _, err := c.n.stags.Add(&m.Region, access); err != nil {
		return nil, fmt.Errorf("loopback: %s %d bytes: %w", verb, len(b), err)
	}
	c.mrs[m] = struct{}{}
	return m, nil
}

// releaseLocked deregisters m; the caller holds c.l.mu.
func (c *Conn) releaseLocked(m *mr) {
	if c.n.stags.Remove(&m.Region) {
		delete(c.mrs, m)
	}
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

// checkRemote checks a peer's access to length bytes at stag/to of c's
// memory (memreg.Table.CheckRemote). The caller holds c.l.mu.
func (c *Conn) checkRemote(what string, stag rdma.STag, to uint64, length int, need rdma.Access, codes *memreg.Codes) ([]byte, rdma.TerminateError, bool) {
	return c.n.stags.CheckRemote(c, what, stag, to, length, need, codes)
}

// invalidateRemote carries out a Send with Invalidate's invalidation on c
// (memreg.Table.InvalidateRemote). The caller holds c.l.mu.
func (c *Conn) invalidateRemote(stag rdma.STag) (rdma.TerminateError, bool) {
	return c.n.stags.InvalidateRemote(c, stag)
}

// checkSGL checks a local scatter/gather list of c and returns its total
// length. The caller holds c.l.mu.
func (c *Conn) checkSGL(sgl []rdma.SGE, need rdma.Access) (int, error) {
	return memreg.CheckSGL(c, sgl, need, MaxSGE)
}

// gather copies the bytes src names into dst.
func gather(dst []byte, src []rdma.SGE) {
	n := 0
	for _, e := range src {
		n += copy(dst[n:], memreg.SGEBytes(e))
	}
}

// scatter copies src into the memory dst names, which must be long enough.
func scatter(dst []rdma.SGE, src []byte) {
	for _, e := range dst {
		if len(src) == 0 {
			return
		}
		src = src[copy(memreg.SGEBytes(e), src):]
	}
}

// copySGL copies the bytes src names into the memory dst names, which must
// be long enough.
func copySGL(dst, src []rdma.SGE) {
	di, doff := 0, 0
	for _, e := range src {
		b := memreg.SGEBytes(e)
		for len(b) > 0 {
			n := copy(memreg.SGEBytes(dst[di])[doff:], b)
			b = b[n:]
			if doff += n; doff == dst[di].Length {
				di, doff = di+1, 0
			}
		}
	}
}
