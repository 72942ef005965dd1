package iwarp

// Memory registration, on the model of rdma/internal/memreg: the
// Provider's STag table is shared by all its connections as an RNIC's is.
// Indexes are handed out cyclically from a random starting point and each
// slot's key starts at a random value, so STags are sparse and a stale one
// never matches (RFC 5042).
//
// An MR belongs to one Conn, its protection domain. Its mutable state
// (STag, validity, access) is written under that Conn's mutex and
// published in an atomic word, so checks made by another connection's
// reader can read it. The reader places payload into memory without the
// mutex but under Conn.placeMu, after checking the MR under the mutex;
// Invalidate and Release wait for that placement, so once they return
// nothing more is placed into the region.

import (
	"math/rand/v2"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
)

// newSTagTable returns the provider's table: never-used indexes from a
// random point, each slot's key starting at a random value.
func newSTagTable() *memreg.Table {
	return memreg.NewTable(1+rand.Uint32N(memreg.LastIndex), func(uint32) uint8 { return uint8(rand.Uint32()) })
}

// mr is a registered region; it implements rdma.MR.
type mr struct {
	memreg.Region // Owner is the *Conn; state stored under its mu
	c             *Conn
}

var _ rdma.MR = (*mr)(nil)

// Invalidate makes the STag invalid at once and waits until no payload is
// being placed into the region. As on an RNIC, a tagged FPDU for it that
// arrives afterwards is refused with a Terminate, even one the peer sent
// before: a Write's completion at the peer says its source may be reused,
// not that it was placed here. A consumer learns that a peer's Writes into
// a region are placed from a message the peer sent after them (RFC 5040
// section 5.5), as RPC-over-RDMA's replies follow their chunks.
func (m *mr) Invalidate() error {
	m.c.regs.Invalidate(&m.Region)
	m.c.waitPlacement(&m.Region)
	return nil
}

// Reregister gives the region a new key and access, valid again.
func (m *mr) Reregister(access rdma.Access) (rdma.STag, error) {
	return m.c.regs.Reregister(&m.Region, access)
}

// Release deregisters the region at once, like Invalidate, and waits until
// no payload is being placed into it.
func (m *mr) Release() error {
	m.c.regs.Release(&m.Region)
	m.c.waitPlacement(&m.Region)
	return nil
}

// newDomain returns c's registrations.
func (c *Conn) newDomain() memreg.Domain {
	return memreg.NewDomain(memreg.DomainConfig{Name: "iwarp", Table: c.p.stags, Mu: &c.mu,
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

// Alloc returns size bytes of zeroed memory registered with access. Go
// memory does not move, so the region is an ordinary slice.
func (c *Conn) Alloc(size int, access rdma.Access) (rdma.MR, error) {
	return c.regs.Alloc(size, access)
}

// Register registers b with access; b is used in place.
func (c *Conn) Register(b []byte, access rdma.Access) (rdma.MR, error) {
	return c.regs.Register(b, access)
}

// waitPlacement returns once the reader is not placing payload into r,
// which the caller has just made invalid under c.mu: at once when it places
// into another region or none (no placement into r can start now), else
// when the FPDU being placed has been read. A peer that stalls in the
// middle of that FPDU for longer than the handshake timeout loses the
// connection (ErrConnectionLost), which ends the read.
func (c *Conn) waitPlacement(r *memreg.Region) {
	if p := c.placing.Load(); p != r && p != placingSeveral {
		return
	}
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

// checkRemote checks a peer's access to length bytes at stag/to of c's
// memory (memreg.Table.CheckRemote). The caller holds c.mu.
func (c *Conn) checkRemote(what string, stag rdma.STag, to uint64, length int, need rdma.Access, codes *memreg.Codes) ([]byte, rdma.TerminateError, bool) {
	return c.p.stags.CheckRemote(c, what, stag, to, length, need, codes)
}

// invalidateRemote carries out a Send with Invalidate's invalidation on
// c (memreg.Table.InvalidateRemote). The caller holds c.mu.
func (c *Conn) invalidateRemote(stag rdma.STag) (rdma.TerminateError, bool) {
	return c.p.stags.InvalidateRemote(c, stag)
}

// checkSGL checks a local scatter/gather list of c and returns its total
// length. The caller holds c.mu.
func (c *Conn) checkSGL(sgl []rdma.SGE, need rdma.Access) (int, error) {
	return memreg.CheckSGL(c, sgl, need, MaxSGE)
}

// sglOK reports whether every MR of a checked SGL is still valid with
// need; unlike checkSGL it does not allocate. The caller holds c.mu.
func sglOK(sgl []rdma.SGE, need rdma.Access) bool {
	for _, e := range sgl {
		s := memreg.RegionOf(e.MR).Load()
		if s.Released() || !s.Valid() || !s.Access().Has(need) {
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
		b := memreg.SGEBytes(cur.sgl[cur.i])[cur.off:]
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

// placingSeveral stands for a destination spanning several regions.
var placingSeveral = new(memreg.Region)

// sglRegion returns the one region sgl names, placingSeveral if it names
// several, nil if none.
func sglRegion(sgl []rdma.SGE) *memreg.Region {
	var r *memreg.Region
	for _, e := range sgl {
		switch er := memreg.RegionOf(e.MR); {
		case r == nil:
			r = er
		case er != r:
			return placingSeveral
		}
	}
	return r
}
