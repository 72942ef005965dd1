//go:build linux && cgo && verbs

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// pollBatch is how many completions one ibv_poll_cq call takes.
const pollBatch = 32

// cqueue is a completion queue with a completion channel of its own,
// whose fd is non-blocking and waited on through Go's poller, and the C
// array its polls fill. A connection has one for both its queues, a
// shared receive queue one for its receives; each owner serializes the
// polls and the use of wcs with a lock of its own (cqMu), and hands what
// they poll to its takeLocked.
//
// The poller is edge-triggered and the CQ raises one event per arming
// (ibv_req_notify_cq): a look (shim_cq_wake) takes every event pending,
// re-arms the CQ if there were any, and only then polls it, so a
// completion that arrives meanwhile is either polled or raises a new
// event. Once a look has polled nothing, sleeping on the channel misses
// nothing.
type cqueue struct {
	cc    *C.struct_ibv_comp_channel
	ccf   *os.File
	ccRaw syscall.RawConn
	cq    *C.struct_ibv_cq
	wcs   *C.struct_shim_wc // pollBatch entries, C memory
}

// taker records a batch of polled work completions; the caller holds the
// lock that serializes the polls. The slice is valid until the next poll.
type taker interface {
	takeLocked(wcs []C.struct_shim_wc)
}

// createCQ makes the channel and an armed CQ of entries on ctx, counting
// them in p's resources. On failure what was made is left for destroyCQ.
func (q *cqueue) createCQ(p *Provider, ctx *C.struct_ibv_context, entries int) error {
	cc, err := C.ibv_create_comp_channel(ctx)
	if cc == nil {
		return fmt.Errorf("ibv_create_comp_channel: %w", err)
	}
	p.res.compChannels.Add(1)
	q.cc = cc
	f, err := pollable(int(cc.fd), "ibv_comp_channel")
	if err != nil {
		return err
	}
	p.res.files.Add(1)
	q.ccf = f
	if q.ccRaw, err = f.SyscallConn(); err != nil {
		return err
	}
	cq, err := C.ibv_create_cq(ctx, C.int(entries), nil, cc, 0)
	if cq == nil {
		return fmt.Errorf("ibv_create_cq %d entries: %w", entries, err)
	}
	p.res.cqs.Add(1)
	q.cq = cq
	if r, err := C.ibv_req_notify_cq(cq, 0); r != 0 {
		return fmt.Errorf("ibv_req_notify_cq: %w", err)
	}
	q.wcs = (*C.struct_shim_wc)(C.calloc(pollBatch, C.size_t(unsafe.Sizeof(C.struct_shim_wc{}))))
	return nil
}

// collect polls the CQ, pollBatch completions a call, until a poll comes
// up short, and hands each batch to t. It reports whether it took any.
// It takes nothing once the CQ is destroyed. The caller holds the
// owner's cqMu.
func (q *cqueue) collect(t taker) bool {
	if q.cq == nil {
		return false
	}
	took := false
	for {
		n := int(C.shim_poll(q.cq, pollBatch, q.wcs))
		if n <= 0 {
			return took
		}
		t.takeLocked(unsafe.Slice(q.wcs, n))
		took = true
		if n < pollBatch {
			return took
		}
	}
}

// wait parks on the channel through the poller until a look polls
// completions, and hands them to t: one cgo call a look (shim_cq_wake),
// once before it sleeps and once per wake-up, each under mu, the owner's
// cqMu. A look polls at most pollBatch completions; the next wait's
// first look takes the rest. It reports whether it took any; it returns
// (false, nil) when a read deadline on ccf interrupts it, and the error
// of a failed channel or re-arm.
func (q *cqueue) wait(mu *sync.Mutex, t taker) (took bool, err error) {
	q.ccRaw.Read(func(uintptr) bool {
		mu.Lock()
		defer mu.Unlock()
		n := int(C.shim_cq_wake(q.cc, q.cq, pollBatch, q.wcs))
		if n < 0 {
			err = errnoErr(C.int(n))
			return true
		}
		if n > 0 {
			t.takeLocked(unsafe.Slice(q.wcs, n))
			took = true
		}
		return took
	})
	return took, err
}

// destroyCQ gives back the CQ, then its channel (which a CQ still using it
// would keep), and the poll array. The caller holds the owner's cqMu, or
// is its only user.
func (q *cqueue) destroyCQ(p *Provider) {
	if q.cq != nil {
		C.ibv_destroy_cq(q.cq)
		q.cq = nil
		p.res.cqs.Add(-1)
	}
	if q.ccf != nil {
		q.ccf.Close()
		q.ccf = nil
		p.res.files.Add(-1)
	}
	if q.cc != nil {
		C.ibv_destroy_comp_channel(q.cc)
		q.cc = nil
		p.res.compChannels.Add(-1)
	}
	if q.wcs != nil {
		C.free(unsafe.Pointer(q.wcs))
		q.wcs = nil
	}
}
