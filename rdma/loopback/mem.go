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

// Invalidate makes the region invalid; once it returns, nothing is
// placed into it.
func (m *mr) Invalidate() error {
	m.c.regs.Invalidate(&m.Region)
	return nil
}

// Reregister gives the region a new key and access, valid again.
func (m *mr) Reregister(access rdma.Access) (rdma.STag, error) {
	return m.c.regs.Reregister(&m.Region, access)
}

// Release deregisters the region.
func (m *mr) Release() error {
	m.c.regs.Release(&m.Region)
	return nil
}

// newDomain returns c's registrations.
func (c *Conn) newDomain() memreg.Domain {
	return memreg.NewDomain(memreg.DomainConfig{Name: "loopback", Table: c.n.stags, Mu: &c.l.mu,
		Dead: func() error {
			if c.state == stateDead {
				return c.err
			}
			return nil
		},
		NewMR: func(b []byte) (rdma.MR, *memreg.Region) {
			m := &mr{Region: memreg.Region{Owner: c, Buf: b}, c: c}
			return m, &m.Region
		}})
}

// Alloc returns size bytes of zeroed memory registered with access.
func (c *Conn) Alloc(size int, access rdma.Access) (rdma.MR, error) {
	return c.regs.Alloc(size, access)
}

// Register registers b with access. Loopback memory does not move, so b is
// used as it is.
func (c *Conn) Register(b []byte, access rdma.Access) (rdma.MR, error) {
	return c.regs.Register(b, access)
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
