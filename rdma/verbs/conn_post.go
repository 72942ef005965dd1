//go:build linux && cgo && verbs

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// checkSGL checks sgl against c and need, fills c.sge, and returns its
// total length; read says sgl is an RDMA Read's sink (see readLkeyLocked).
// The caller holds mu.
func (c *Conn) checkSGL(sgl []rdma.SGE, need rdma.Access, maxSGE int, read bool) (int, error) {
	if len(sgl) > maxSGE {
		return 0, fmt.Errorf("%d SGEs, more than %d: %w", len(sgl), maxSGE, rdma.ErrInvalid)
	}
	// c.sge is C memory of at least maxSGE entries, filled from Go: a
	// cgo call per SGE would cost more than the post.
	sges := unsafe.Slice(c.sge, len(sgl))
	total := 0
	for i, e := range sgl {
		m, ok := e.MR.(*mr)
		if !ok || m == nil || m.c != c {
			return 0, fmt.Errorf("SGE %d: not a region of this connection: %w", i, rdma.ErrInvalid)
		}
		if !m.valid || m.released {
			return 0, fmt.Errorf("SGE %d: region %v is not valid: %w", i, m.stag, rdma.ErrInvalid)
		}
		if !m.access.Has(need) {
			return 0, fmt.Errorf("SGE %d: region %v has %v, needs %v: %w", i, m.stag, m.access, need, rdma.ErrInvalid)
		}
		if e.Offset < 0 || e.Length < 0 || e.Offset > len(m.buf)-e.Length {
			return 0, fmt.Errorf("SGE %d: %d bytes at offset %d outside region %v of %d bytes: %w", i, e.Length, e.Offset, m.stag, len(m.buf), rdma.ErrInvalid)
		}
		lkey := m.lkey
		if read {
			k, err := m.readLkeyLocked()
			if err != nil {
				return 0, fmt.Errorf("SGE %d: region %v: %w", i, m.stag, err)
			}
			lkey = k
		}
		s := &sges[i]
		s.addr, s.length, s.lkey = C.uint64_t(m.addr+uint64(e.Offset)), C.uint32_t(e.Length), lkey
		total += e.Length
	}
	return total, nil
}

// PostRecv posts a receive.
func (c *Conn) PostRecv(id uint64, sgl []rdma.SGE) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.srq != nil {
		return fmt.Errorf("verbs: post receive %d: the connection takes its receives from a shared receive queue: %w", id, rdma.ErrInvalid)
	}
	if c.rqOut >= c.lim.RecvQueueDepth {
		return fmt.Errorf("verbs: post receive %d: %d outstanding: %w", id, c.rqOut, rdma.ErrQueueFull)
	}
	if _, err := c.checkSGL(sgl, rdma.AccessLocalWrite, c.lim.MaxSGE, false); err != nil {
		return fmt.Errorf("verbs: post receive %d: %w", id, err)
	}
	c.seq++
	if rc := C.shim_post_recv(c.qp, C.uint64_t(c.seq), c.sge, C.int(len(sgl))); rc < 0 {
		return fmt.Errorf("verbs: post receive %d: ibv_post_recv: %v: %w", id, errnoErr(rc), rdma.ErrInvalid)
	}
	c.rq = append(c.rq, pending{seq: c.seq, id: id, op: rdma.OpRecv})
	c.rqOut++
	return nil
}

// PostSend posts a Send, RDMA Write or RDMA Read. Send-queue work posted
// before the connection is established (from Prepare) is held and posted
// when it is.
func (c *Conn) PostSend(wr *rdma.WorkRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if !wr.Op.IsSend() && wr.Op != rdma.OpWrite && wr.Op != rdma.OpRead {
		return fmt.Errorf("verbs: post %v %d: not a send-queue op: %w", wr.Op, wr.ID, rdma.ErrInvalid)
	}
	if c.sqOut >= c.lim.SendQueueDepth {
		return fmt.Errorf("verbs: post %v %d: %d outstanding: %w", wr.Op, wr.ID, c.sqOut, rdma.ErrQueueFull)
	}
	if wr.Op == rdma.OpRead && c.readsOut >= c.lim.ORD {
		return fmt.Errorf("verbs: post %v %d: ORD %d reached: %w", wr.Op, wr.ID, c.lim.ORD, rdma.ErrQueueFull)
	}
	need, maxSGE := rdma.Access(0), c.lim.MaxSGE
	if wr.Op == rdma.OpRead {
		need, maxSGE = rdma.AccessLocalWrite, c.lim.MaxReadSGE
	}
	n, err := c.checkSGL(wr.Local, need, maxSGE, wr.Op == rdma.OpRead)
	if err != nil {
		return fmt.Errorf("verbs: post %v %d: %w", wr.Op, wr.ID, err)
	}
	if n > c.lim.MaxMessageSize {
		return fmt.Errorf("verbs: post %v %d: %d bytes, more than %d: %w", wr.Op, wr.ID, n, c.lim.MaxMessageSize, rdma.ErrInvalid)
	}
	if !c.started {
		d := *wr
		d.Local = append([]rdma.SGE(nil), wr.Local...)
		c.deferred = append(c.deferred, d)
		c.sqOut++
		if wr.Op == rdma.OpRead {
			c.readsOut++
		}
		return nil
	}
	if err := c.postSendLocked(wr, n); err != nil {
		return err
	}
	c.sqOut++
	if wr.Op == rdma.OpRead {
		c.readsOut++
	}
	return nil
}

// postSendLocked posts a work request of length bytes whose SGL checkSGL
// has just checked and put in c.sge. The caller holds mu.
func (c *Conn) postSendLocked(wr *rdma.WorkRequest, length int) error {
	var opcode, flags C.int
	switch wr.Op {
	case rdma.OpSend, rdma.OpSendSE:
		opcode = C.IBV_WR_SEND
	case rdma.OpSendInvalidate, rdma.OpSendSEInvalidate:
		opcode = C.IBV_WR_SEND_WITH_INV
	case rdma.OpWrite:
		opcode = C.IBV_WR_RDMA_WRITE
	case rdma.OpRead:
		opcode = C.IBV_WR_RDMA_READ
	}
	if wr.Op.Solicited() {
		flags |= C.IBV_SEND_SOLICITED
	}
	c.seq++
	rc := C.shim_post_send(c.qp, C.uint64_t(c.seq), opcode, flags, c.sge, C.int(len(wr.Local)),
		C.uint64_t(wr.RemoteTO), C.uint32_t(wr.RemoteSTag), C.uint32_t(wr.InvalidateSTag))
	if rc < 0 {
		return fmt.Errorf("verbs: post %v %d: ibv_post_send: %v: %w", wr.Op, wr.ID, errnoErr(rc), rdma.ErrInvalid)
	}
	c.sq = append(c.sq, pending{seq: c.seq, id: wr.ID, op: wr.Op, length: length})
	return nil
}
