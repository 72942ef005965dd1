//go:build linux && cgo && verbs

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// completionLocked records a work completion on its queue and ends the
// connection on an error. The caller holds mu.
//
// Completions are handed out in posting order per queue, as the model
// promises. InfiniBand requires that of the device; Linux siw completes an
// RDMA Write when it is sent, ahead of an earlier Read still waiting for
// its response, so a completion that overtakes is held until the work
// posted before it has completed.
func (c *Conn) completionLocked(wc *C.struct_shim_wc) {
	status := C.enum_ibv_wc_status(wc.status)
	seq := uint64(wc.wr_id)
	// A flushed completion's opcode is undefined: find the work request
	// by wr_id.
	q, recv := &c.sq, false
	i := findSeq(c.sq, seq)
	if i < 0 {
		q, recv = &c.rq, true
		i = findSeq(c.rq, seq)
	}
	if i < 0 {
		c.endLocked(fmt.Errorf("verbs: completion for unknown work request %d: %w", seq, rdma.ErrConnectionLost))
		return
	}
	p := &(*q)[i]
	cp := rdma.Completion{ID: p.id, Op: p.op}
	if status == C.IBV_WC_SUCCESS {
		cp.Len = p.length // byte_len is defined for receives only
		if recv {
			cp.Len = int(wc.byte_len)
			if wc.wc_flags&C.IBV_WC_WITH_INV != 0 {
				cp.Invalidated = true
				cp.InvalidatedSTag = rdma.STag(wc.inv_rkey)
				c.remoteInvalidatedLocked(cp.InvalidatedSTag)
			}
		}
	} else {
		cp.Status = mapStatus(status)
		c.failedLocked(status, uint32(wc.vendor_err), p.op, recv)
	}
	p.done, p.c = true, cp
	c.readyHeadLocked(q)
}

// readyHeadLocked moves the completed work at the head of q to c.ready
// and reports whether there was any. The caller holds cqMu and mu.
func (c *Conn) readyHeadLocked(q *[]pending) bool {
	n := 0
	for ; n < len(*q) && (*q)[n].done; n++ {
		c.ready = append(c.ready, (*q)[n].c)
	}
	*q = (*q)[n:]
	return n > 0
}

// findSeq returns the index of the work request with seq in q, or -1.
func findSeq(q []pending, seq uint64) int {
	for i := range q {
		if q[i].seq == seq {
			return i
		}
	}
	return -1
}

// failedLocked ends the connection for a failed work completion. The
// caller holds mu.
func (c *Conn) failedLocked(status C.enum_ibv_wc_status, vendor uint32, op rdma.Op, recv bool) {
	if status != C.IBV_WC_WR_FLUSH_ERR {
		c.endLocked(wcError(status, vendor, op, recv))
		return
	}
	if c.err == nil && c.flushTimer == nil {
		// The queue pair is in the error state and this side does not
		// know why yet: the peer's disconnect (rdma_cm reports it after
		// the flush on siw) or an error the peer's device detected. Wait
		// a little for rdma_cm to say.
		c.flushTimer = time.AfterFunc(flushGrace, func() {
			c.mu.Lock()
			c.endLocked(fmt.Errorf("verbs: %v flushed: the queue pair is in the error state: %w", op, rdma.ErrConnectionLost))
			c.mu.Unlock()
		})
	}
}

// mapStatus maps an ibv_wc_status to the model's Status.
func mapStatus(s C.enum_ibv_wc_status) rdma.Status {
	switch s {
	case C.IBV_WC_SUCCESS:
		return rdma.StatusSuccess
	case C.IBV_WC_WR_FLUSH_ERR:
		return rdma.StatusFlushed
	case C.IBV_WC_LOC_LEN_ERR:
		return rdma.StatusLocalLength
	case C.IBV_WC_LOC_PROT_ERR, C.IBV_WC_MW_BIND_ERR:
		return rdma.StatusLocalProtection
	case C.IBV_WC_REM_ACCESS_ERR:
		return rdma.StatusRemoteAccess
	case C.IBV_WC_REM_OP_ERR, C.IBV_WC_REM_INV_REQ_ERR, C.IBV_WC_REM_INV_RD_REQ_ERR, C.IBV_WC_REM_ABORT_ERR:
		return rdma.StatusRemoteOperation
	case C.IBV_WC_RNR_RETRY_EXC_ERR:
		return rdma.StatusRNR
	case C.IBV_WC_RETRY_EXC_ERR, C.IBV_WC_RESP_TIMEOUT_ERR, C.IBV_WC_FATAL_ERR, C.IBV_WC_GENERAL_ERR:
		return rdma.StatusTransport
	}
	return rdma.StatusRemoteOperation
}

// wcError is the connection error for a failed work completion: a
// TerminateError with the RDMAP/DDP code closest to the verbs status, so
// that upper layers see the same errors as on the software iWARP. Remote
// says whether the peer refused (the status names a remote error).
func wcError(s C.enum_ibv_wc_status, vendor uint32, op rdma.Op, recv bool) error {
	what := op.String()
	if recv {
		what = "Receive"
	}
	detail := fmt.Sprintf("%s completed with %s (vendor error 0x%x)", what, C.GoString(C.ibv_wc_status_str(s)), vendor)
	te := rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteOperation, Code: rdma.CodeUnspecified, Detail: detail}
	switch s {
	case C.IBV_WC_REM_ACCESS_ERR:
		te.Type, te.Remote = rdma.TypeRemoteProtection, true
	case C.IBV_WC_RNR_RETRY_EXC_ERR:
		te.Layer, te.Type, te.Code, te.Remote = rdma.LayerDDP, rdma.TypeUntaggedBuffer, rdma.CodeNoBuffer, true
	case C.IBV_WC_REM_INV_REQ_ERR, C.IBV_WC_REM_OP_ERR, C.IBV_WC_REM_INV_RD_REQ_ERR:
		te.Remote = true
	case C.IBV_WC_LOC_LEN_ERR:
		te.Layer, te.Type, te.Code = rdma.LayerDDP, rdma.TypeUntaggedBuffer, rdma.CodeMessageTooLong
	case C.IBV_WC_LOC_PROT_ERR:
		te.Type = rdma.TypeLocalCatastrophic
	case C.IBV_WC_RETRY_EXC_ERR, C.IBV_WC_RESP_TIMEOUT_ERR:
		return fmt.Errorf("verbs: %s: %w", detail, rdma.ErrConnectionLost)
	default:
		te.Type = rdma.TypeLocalCatastrophic
	}
	return te
}
