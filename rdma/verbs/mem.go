//go:build linux && cgo && verbs

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// mr is a region registered with ibv_reg_mr; it implements rdma.MR. Its
// fields are guarded by the Conn's mu.
type mr struct {
	c        *Conn
	buf      []byte // what Bytes returns
	mem      []byte // the registered memory: buf, or a page for an empty buf
	mapped   bool   // mem is an anonymous mapping the provider owns (Register of an empty b)
	pinner   runtime.Pinner
	pinned   bool
	addr     uint64 // address of mem[0]: the TO
	mr       *C.struct_ibv_mr
	lkey     C.uint32_t
	flags    C.int // the ibv_access_flags mr was registered with
	sink     *C.struct_ibv_mr
	stag     rdma.STag
	access   rdma.Access
	valid    bool
	released bool
}

var _ rdma.MR = (*mr)(nil)

// verbsAccess maps the model's rights to ibv_access_flags. Verbs requires
// local write with remote write (ibv_reg_mr(3)); local rights are checked
// by the provider against the model's rights, not by the device.
func verbsAccess(a rdma.Access) C.int {
	var f C.int
	if a.Has(rdma.AccessLocalWrite) {
		f |= C.IBV_ACCESS_LOCAL_WRITE
	}
	if a.Has(rdma.AccessRemoteRead) {
		f |= C.IBV_ACCESS_REMOTE_READ
	}
	if a.Has(rdma.AccessRemoteWrite) {
		f |= C.IBV_ACCESS_REMOTE_WRITE | C.IBV_ACCESS_LOCAL_WRITE
	}
	return f
}

// Alloc returns size bytes of zeroed Go memory, pinned (runtime.Pinner)
// while registered, registered with access. Go's collector never moves it
// and frees it only when nothing refers to it, so a slice of it stays
// memory-safe after Release or Close, as rdma.Conn.Alloc requires: a
// caller that writes a buffer while another goroutine closes the
// connection writes memory no device can reach any more, where C memory
// freed at Close (an anonymous mapping unmapped, say) would be a fault.
func (c *Conn) Alloc(size int, access rdma.Access) (rdma.MR, error) {
	if size < 0 || !access.Valid() {
		return nil, fmt.Errorf("verbs: alloc %d bytes, access %v: %w", size, access, rdma.ErrInvalid)
	}
	mem := make([]byte, max(size, 1))
	m := &mr{c: c, buf: mem[:size], mem: mem, pinned: true}
	m.pinner.Pin(&mem[0])
	if err := c.register(m, access, "alloc"); err != nil {
		m.free()
		return nil, err
	}
	return m, nil
}

// Register registers b in place with access; b is pinned (runtime.Pinner)
// until Release or Close. An empty b registers a private page instead,
// which no SGE or remote access can reach.
func (c *Conn) Register(b []byte, access rdma.Access) (rdma.MR, error) {
	if !access.Valid() {
		return nil, fmt.Errorf("verbs: register %d bytes, access %v: %w", len(b), access, rdma.ErrInvalid)
	}
	m := &mr{c: c, buf: b, mem: b}
	if len(b) == 0 {
		mem, err := syscall.Mmap(-1, 0, 1, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return nil, fmt.Errorf("verbs: register 0 bytes: mmap: %w", err)
		}
		m.mem, m.mapped = mem, true
	} else {
		m.pinner.Pin(&b[0])
		m.pinned = true
	}
	if err := c.register(m, access, "register"); err != nil {
		m.free()
		return nil, err
	}
	return m, nil
}

func (c *Conn) register(m *mr, access rdma.Access, verb string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.closed {
		err := c.err
		if err == nil {
			err = rdma.ErrClosed
		}
		return fmt.Errorf("verbs: %s %d bytes: %w", verb, len(m.buf), err)
	}
	m.addr = uint64(uintptr(unsafe.Pointer(&m.mem[0])))
	if err := m.regLocked(access); err != nil {
		return fmt.Errorf("verbs: %s %d bytes: %w", verb, len(m.buf), err)
	}
	c.mrs[m] = struct{}{}
	return nil
}

// regLocked registers m.mem with access. The caller holds c.mu.
func (m *mr) regLocked(access rdma.Access) error {
	var out *C.struct_ibv_mr
	if rc := C.shim_reg_mr(m.c.pd, unsafe.Pointer(&m.mem[0]), C.size_t(len(m.mem)), verbsAccess(access), &out); rc < 0 {
		return fmt.Errorf("ibv_reg_mr: %w (is ulimit -l large enough?)", errnoErr(rc))
	}
	m.c.p.res.mrs.Add(1)
	m.mr, m.lkey, m.flags = out, out.lkey, verbsAccess(access)
	m.stag, m.access, m.valid = rdma.STag(out.rkey), access, true
	return nil
}

// sinkFlags are the ibv_access_flags of a Read sink's registration on an
// iWARP device.
const sinkFlags = C.IBV_ACCESS_LOCAL_WRITE | C.IBV_ACCESS_REMOTE_WRITE

// readLkeyLocked returns the lkey with which m may be the destination of an
// RDMA Read. The caller holds c.mu and has checked that m is valid and has
// AccessLocalWrite.
//
// On iWARP a Read Request carries the sink's STag to the peer (RFC 5040
// Section 4.4), whose RDMA Read Responses are tagged DDP messages placed
// through it like RDMA Writes (RFC 5041, tagged buffer model). Hardware RNICs (cxgb4,
// irdma) check remote write on that STag, so the kernel's rdma_rw and
// perftest register a Read's destination with IBV_ACCESS_REMOTE_WRITE on
// iWARP. That right lets the peer that learned the STag, or anyone who
// guesses it on this connection's protection domain, write the memory
// with RDMA Write, not only with the Read Responses it was asked for
// (RFC 5042's security considerations on exposed tagged buffers, RFC 5040
// Section 8). So the right is not given to the region itself, nor on
// InfiniBand and RoCE, whose Read responses need no remote access: on
// iWARP, the first Read into a region without AccessRemoteWrite registers
// the same memory a second time with local and remote write, and only
// Read work requests use that registration. Its STag reaches only the
// peer of this connection (each Conn has its own protection domain), the
// peer the Read already trusts with the region's contents, and it goes
// away with the region's own registration (Invalidate, Reregister,
// Release, Close). Siw checks no right on a Read Response's sink.
func (m *mr) readLkeyLocked() (C.uint32_t, error) {
	if !m.c.dev.iwarp || m.access.Has(rdma.AccessRemoteWrite) {
		return m.lkey, nil
	}
	if m.sink == nil {
		var out *C.struct_ibv_mr
		if rc := C.shim_reg_mr(m.c.pd, unsafe.Pointer(&m.mem[0]), C.size_t(len(m.mem)), sinkFlags, &out); rc < 0 {
			return 0, fmt.Errorf("ibv_reg_mr for a Read sink: %w (is ulimit -l large enough?)", errnoErr(rc))
		}
		m.c.p.res.mrs.Add(1)
		m.sink = out
	}
	return m.sink.lkey, nil
}

// deregLocked deregisters m. The caller holds c.mu.
func (m *mr) deregLocked() {
	if m.sink != nil {
		C.ibv_dereg_mr(m.sink)
		m.sink = nil
		m.c.p.res.mrs.Add(-1)
	}
	if m.mr != nil {
		C.ibv_dereg_mr(m.mr)
		m.mr = nil
		m.c.p.res.mrs.Add(-1)
	}
	m.valid = false
}

func (m *mr) free() {
	if m.mapped {
		syscall.Munmap(m.mem)
		m.mapped = false
	}
	if m.pinned {
		m.pinner.Unpin()
		m.pinned = false
	}
	m.mem = nil
}

// releaseLocked deregisters and frees m. The caller holds c.mu.
func (m *mr) releaseLocked() {
	if m.released {
		return
	}
	m.deregLocked()
	m.released = true
	m.free()
	delete(m.c.mrs, m)
}

// Bytes returns the region's memory.
func (m *mr) Bytes() []byte { return m.buf }

// STag returns the current rkey.
func (m *mr) STag() rdma.STag {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.stag
}

// TO returns the region's address, which ibv_reg_mr uses as its tagged
// offset (I/O virtual address).
func (m *mr) TO() uint64 { return m.addr }

// Access returns the current access rights.
func (m *mr) Access() rdma.Access {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.access
}

// Valid reports whether the rkey is registered.
func (m *mr) Valid() bool {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.valid
}

// Invalidate deregisters the region (ibv_dereg_mr): verbs has no local
// invalidation of an ibv_reg_mr region, and deregistration kills the key
// at once, as the model asks. Reregister registers it again.
func (m *mr) Invalidate() error {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.deregLocked()
	return nil
}

// Reregister registers the same memory again (deregistering it first if
// it is registered) with access: a new rkey, the same TO. The device
// chooses the new rkey; its index may differ from the old one's.
func (m *mr) Reregister(access rdma.Access) (rdma.STag, error) {
	if !access.Valid() {
		return 0, fmt.Errorf("verbs: reregister %v: access %v: %w", m.STag(), access, rdma.ErrInvalid)
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if m.released || m.c.closed {
		return 0, fmt.Errorf("verbs: reregister %v: region released: %w", m.stag, rdma.ErrInvalid)
	}
	old := m.stag
	m.deregLocked()
	if err := m.regLocked(access); err != nil {
		return 0, fmt.Errorf("verbs: reregister %v: %w", old, err)
	}
	return m.stag, nil
}

// Release deregisters the region, unpins a registered buffer and unmaps
// allocated memory. It is idempotent.
func (m *mr) Release() error {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.releaseLocked()
	return nil
}

// remoteInvalidatedLocked records that the peer invalidated stag (a Send
// with Invalidate the device carried out). The caller holds c.mu.
func (c *Conn) remoteInvalidatedLocked(stag rdma.STag) {
	for m := range c.mrs {
		if m.valid && m.stag == stag {
			m.deregLocked()
		}
	}
}

// regAccess returns the ibv_access_flags of m's registration and of its
// Read-sink registration (0 if it has none), for tests.
func (m *mr) regAccess() (region, sink int) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if m.sink != nil {
		sink = sinkFlags
	}
	return int(m.flags), sink
}

// The ibv_access_flags bits, for tests (a test file cannot use cgo).
const (
	accessLocalWrite  = C.IBV_ACCESS_LOCAL_WRITE
	accessRemoteWrite = C.IBV_ACCESS_REMOTE_WRITE
	accessRemoteRead  = C.IBV_ACCESS_REMOTE_READ
)
