//go:build linux && cgo && verbs

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// SharedRecvQueue is a shared receive queue (ibv_create_srq) on one
// device; it implements rdma.SharedRecvQueue. Its receive completions
// arrive on a completion queue of its own, waited on through Go's poller
// like a connection's, and name the connection by the queue pair number
// the device reports. Its methods are safe for concurrent use.
//
// The queue belongs to one protection domain, and so do the connections
// attached to it: rdma_rxe checks a receive's memory against the
// protection domain of the queue pair the Send arrived on, not the
// queue's. Attached connections therefore share a protection domain (each
// unattached connection has its own): an STag that one attached
// connection exposes is valid on the others too, for a peer that learns
// or guesses it (RFC 5042 on sharing a protection domain between
// streams).
type SharedRecvQueue struct {
	p     *Provider
	dev   string
	list  **C.struct_ibv_context // librdmacm's device list, held until Close
	ctx   *C.struct_ibv_context
	mem   *Conn // owns the protection domain and the regions of Alloc; no queue pair
	srq   *C.struct_ibv_srq
	depth int
	sges  int

	watcher *watcher // the device's async event watcher, or nil
	limitCh chan struct{}

	mu      sync.Mutex
	seq     uint64
	ids     map[uint64]uint64 // wr_id → the caller's id, for receives posted and not completed
	posted  int               // receives posted and not yet consumed
	out     int               // receives posted whose completion has not been returned
	conns   map[uint32]*Conn  // attached connections by queue pair number
	armed   bool              // the limit event is armed, at limit
	limit   int
	closed  bool
	drained bool // closed, and every completion collected

	cqueue            // its receives' completions (cq.go)
	cqMu   sync.Mutex // the polls, wcs, ready, wake
	ready  []rdma.Completion
	wake   chan struct{}

	wg sync.WaitGroup
}

var (
	_ rdma.SharedRecvProvider = (*Provider)(nil)
	_ rdma.SharedRecvQueue    = (*SharedRecvQueue)(nil)
)

// NewSharedRecvQueue creates a shared receive queue on the provider's
// device (Options.Device, or the only device there is): a queue bounded
// by cfg.Depth (DefaultQueueDepth if zero; lowered to the device's
// max_srq_wr and MaxQueueDepth), its protection domain, and its
// completion queue and channel. Connections dialed or accepted with
// ConnConfig.SharedRecv set to it must be on the same device.
func (p *Provider) NewSharedRecvQueue(cfg rdma.SharedRecvConfig) (rdma.SharedRecvQueue, error) {
	if cfg.Depth < 0 {
		return nil, fmt.Errorf("verbs: new shared receive queue: depth %d is negative: %w", cfg.Depth, rdma.ErrInvalid)
	}
	var n C.int
	list := C.shim_device_list(&n)
	if list == nil {
		return nil, fmt.Errorf("verbs: new shared receive queue: rdma_get_devices found no device")
	}
	q := &SharedRecvQueue{p: p, list: list, limitCh: make(chan struct{}, 1),
		ids: map[uint64]uint64{}, conns: map[uint32]*Conn{}, wake: make(chan struct{})}
	var names []string
	for i := range int(n) {
		ctx := C.shim_device_at(list, C.int(i))
		name := C.GoString(C.shim_context_name(ctx))
		names = append(names, name)
		if name == p.opts.Device || p.opts.Device == "" && n == 1 {
			q.ctx, q.dev = ctx, name
		}
	}
	if q.ctx == nil {
		C.rdma_free_devices(list)
		return nil, fmt.Errorf("verbs: new shared receive queue: it belongs to one device, and Options.Device (%q) names none of %v: %w", p.opts.Device, names, rdma.ErrInvalid)
	}
	if err := q.create(cfg.Depth); err != nil {
		q.destroy()
		return nil, fmt.Errorf("verbs: new shared receive queue on %s: %w", q.dev, err)
	}
	q.watchAsync()
	q.wg.Add(1)
	go q.cqLoop()
	return q, nil
}

// create makes the queue's verbs objects.
func (q *SharedRecvQueue) create(depth int) error {
	p := q.p
	var l C.struct_shim_limits
	if rc := C.shim_query(q.ctx, 1, &l); rc < 0 {
		return fmt.Errorf("ibv_query_device: %w", errnoErr(rc))
	}
	if depth == 0 {
		depth = DefaultQueueDepth
	}
	q.depth = min(depth, int(l.max_srq_wr), int(l.max_cqe), MaxQueueDepth)
	q.sges = max(min(int(l.max_srq_sge), MaxSGE), 1)
	if q.depth < 1 {
		return fmt.Errorf("the device allows %d receives on a shared receive queue", int(l.max_srq_wr))
	}
	pd, err := C.ibv_alloc_pd(q.ctx)
	if pd == nil {
		return fmt.Errorf("ibv_alloc_pd: %w", err)
	}
	p.res.pds.Add(1)
	q.mem = &Conn{p: p, pd: pd, dev: device{name: q.dev, iwarp: l.transport == C.IBV_TRANSPORT_IWARP, maxSGE: q.sges},
		mrs: map[*mr]struct{}{}}
	q.mem.sge = (*C.struct_ibv_sge)(C.calloc(C.size_t(q.sges), C.size_t(unsafe.Sizeof(C.struct_ibv_sge{}))))
	q.mem.lim = rdma.Limits{MaxSGE: q.sges}
	if err := q.createCQ(p, q.ctx, q.depth); err != nil {
		return err
	}
	srq, err := C.shim_create_srq(pd, C.int(q.depth), C.int(q.sges))
	if srq == nil {
		return fmt.Errorf("ibv_create_srq (%d receives, %d SGEs): %w", q.depth, q.sges, err)
	}
	p.res.srqs.Add(1)
	q.srq = srq
	return nil
}

// checkSharedRecv checks a ConnConfig.SharedRecv: nil, or a queue of p
// that is not closed. setup checks the device.
func (p *Provider) checkSharedRecv(s rdma.SharedRecvQueue) error {
	if s == nil {
		return nil
	}
	q, ok := s.(*SharedRecvQueue)
	if !ok || q == nil || q.p != p {
		return fmt.Errorf("shared receive queue %T is not this provider's: %w", s, rdma.ErrInvalid)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fmt.Errorf("shared receive queue on %s is closed: %w", q.dev, rdma.ErrInvalid)
	}
	return nil
}

// attachable returns what a connection on the device ctx (named dev)
// needs to create its queue pair attached to q: the protection domain,
// the queue and its completion queue.
func (q *SharedRecvQueue) attachable(ctx *C.struct_ibv_context, dev string) (*C.struct_ibv_pd, *C.struct_ibv_srq, *C.struct_ibv_cq, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, nil, nil, fmt.Errorf("shared receive queue on %s is closed: %w", q.dev, rdma.ErrInvalid)
	}
	if ctx != q.ctx {
		return nil, nil, nil, fmt.Errorf("the connection is on device %s, its shared receive queue on %s: %w", dev, q.dev, rdma.ErrInvalid)
	}
	return q.mem.pd, q.srq, q.cq, nil
}

// attach records c, whose queue pair exists, as attached.
func (q *SharedRecvQueue) attach(c *Conn) {
	q.mu.Lock()
	q.conns[c.qpNum] = c
	q.mu.Unlock()
}

// detach forgets c, whose queue pair is destroyed, after collecting the
// completions its queue pair left (a receive it was taking when it ended
// completes flushed). The caller does not hold c.mu.
func (q *SharedRecvQueue) detach(c *Conn) {
	q.cqMu.Lock()
	q.collectLocked()
	q.cqMu.Unlock()
	q.mu.Lock()
	if q.conns[c.qpNum] == c {
		delete(q.conns, c.qpNum)
	}
	q.mu.Unlock()
}

// cqLoop waits on the completion channel through the poller, as a
// connection's leading Wait does, until Close interrupts it.
func (q *SharedRecvQueue) cqLoop() {
	defer q.wg.Done()
	for {
		took, err := q.wait(&q.cqMu, q)
		if err != nil {
			q.p.log.Error("verbs: shared receive queue's completion channel failed", "device", q.dev, "err", err)
			return
		}
		if !took {
			return
		}
		q.cqMu.Lock()
		q.signalLocked()
		q.cqMu.Unlock()
	}
}

// collectLocked polls the completion queue into ready. The caller holds
// cqMu.
func (q *SharedRecvQueue) collectLocked() {
	if q.collect(q) {
		q.signalLocked()
	}
}

// takeLocked records polled receive completions (taker). The caller
// holds cqMu.
func (q *SharedRecvQueue) takeLocked(wcs []C.struct_shim_wc) {
	for i := range wcs {
		q.ready = append(q.ready, q.completion(&wcs[i]))
	}
}

// signalLocked wakes every Wait. The caller holds cqMu.
func (q *SharedRecvQueue) signalLocked() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// completion maps a receive's work completion, and ends the connection
// it names if the receive failed for another reason than a flush.
func (q *SharedRecvQueue) completion(wc *C.struct_shim_wc) rdma.Completion {
	status := C.enum_ibv_wc_status(wc.status)
	q.mu.Lock()
	seq := uint64(wc.wr_id)
	id := q.ids[seq]
	delete(q.ids, seq)
	q.posted--
	if q.armed && q.posted < q.limit {
		// The device's event may come later than this completion, from
		// another fd: what is known to be consumed counts first.
		q.disarmLocked()
		q.deliver()
	}
	c := q.conns[uint32(wc.qp_num)]
	q.mu.Unlock()
	cp := rdma.Completion{ID: id, Op: rdma.OpRecv}
	if c != nil {
		cp.Conn = c
	}
	if status != C.IBV_WC_SUCCESS {
		cp.Status = mapStatus(status)
		if c != nil {
			c.mu.Lock()
			c.failedLocked(status, uint32(wc.vendor_err), rdma.OpRecv, true)
			c.mu.Unlock()
		}
		return cp
	}
	cp.Len = int(wc.byte_len)
	if wc.wc_flags&C.IBV_WC_WITH_INV != 0 {
		cp.Invalidated = true
		cp.InvalidatedSTag = rdma.STag(wc.inv_rkey)
		if c != nil {
			c.mu.Lock()
			c.remoteInvalidatedLocked(cp.InvalidatedSTag)
			c.mu.Unlock()
		}
	}
	return cp
}

// Alloc returns size bytes of zeroed memory, registered with local write
// on the queue's protection domain, for its receives.
func (q *SharedRecvQueue) Alloc(size int) (rdma.MR, error) {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("verbs: shared receive queue alloc %d bytes: %w", size, rdma.ErrClosed)
	}
	return q.mem.Alloc(size, rdma.AccessLocalWrite)
}

// PostRecv posts a receive of the queue's own memory.
func (q *SharedRecvQueue) PostRecv(id uint64, sgl []rdma.SGE) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fmt.Errorf("verbs: shared receive queue post receive %d: %w", id, rdma.ErrClosed)
	}
	if q.out >= q.depth {
		return fmt.Errorf("verbs: shared receive queue post receive %d: %d outstanding: %w", id, q.out, rdma.ErrQueueFull)
	}
	q.mem.mu.Lock()
	_, err := q.mem.checkSGL(sgl, rdma.AccessLocalWrite, q.sges, false)
	if err == nil {
		q.seq++
		if rc := C.shim_post_srq_recv(q.srq, C.uint64_t(q.seq), q.mem.sge, C.int(len(sgl))); rc < 0 {
			err = fmt.Errorf("ibv_post_srq_recv: %v: %w", errnoErr(rc), rdma.ErrInvalid)
		}
	}
	q.mem.mu.Unlock()
	if err != nil {
		return fmt.Errorf("verbs: shared receive queue post receive %d: %w", id, err)
	}
	q.ids[q.seq] = id
	q.posted++
	q.out++
	return nil
}

// Poll copies up to len(cs) receive completions into cs.
func (q *SharedRecvQueue) Poll(cs []rdma.Completion) int {
	q.cqMu.Lock()
	defer q.cqMu.Unlock()
	if len(q.ready) < len(cs) {
		q.collectLocked()
	}
	n := copy(cs, q.ready)
	q.ready = q.ready[:copy(q.ready, q.ready[n:])]
	if n > 0 {
		q.mu.Lock()
		q.out -= n
		q.mu.Unlock()
	}
	return n
}

// Wait blocks until a completion is available, ctx is done, or the queue
// is closed and every completion has been returned.
func (q *SharedRecvQueue) Wait(ctx context.Context, cs []rdma.Completion) (int, error) {
	for {
		q.cqMu.Lock()
		wake := q.wake
		q.cqMu.Unlock()
		if n := q.Poll(cs); n > 0 {
			return n, nil
		}
		q.mu.Lock()
		done := q.drained
		q.mu.Unlock()
		if done {
			return 0, fmt.Errorf("verbs: shared receive queue on %s: %w", q.dev, rdma.ErrClosed)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Depth returns the queue's depth.
func (q *SharedRecvQueue) Depth() int { return q.depth }

// Posted returns how many receives are posted and not yet known to be
// consumed: a receive counts as consumed once its completion has been
// taken off the completion queue, so the count can lag the device by
// the completions not yet polled.
func (q *SharedRecvQueue) Posted() int {
	q.cqMu.Lock()
	q.collectLocked()
	q.cqMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.posted
}

// ArmLimit arms the device's limit event (ibv_modify_srq with
// IBV_SRQ_LIMIT; it arrives as IBV_EVENT_SRQ_LIMIT_REACHED on the device's
// asynchronous event fd), or delivers the token at once if fewer than
// limit receives are posted. The token also comes, and the limit is
// disarmed, when a receive completion taken off the completion queue
// leaves fewer than limit posted, whichever is first: the two arrive on
// different file descriptors, and the model promises the token by the
// time Poll or Wait has returned that completion.
func (q *SharedRecvQueue) ArmLimit(limit int) error {
	if limit < 0 || limit > q.depth {
		return fmt.Errorf("verbs: shared receive queue arm limit %d: want 0 to the depth %d: %w", limit, q.depth, rdma.ErrInvalid)
	}
	posted := q.Posted()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fmt.Errorf("verbs: shared receive queue arm limit %d: %w", limit, rdma.ErrClosed)
	}
	if limit > 0 && posted < limit {
		q.disarmLocked()
		q.deliver()
		return nil
	}
	if rc := C.shim_srq_limit(q.srq, C.int(limit)); rc < 0 {
		return fmt.Errorf("verbs: shared receive queue arm limit %d: ibv_modify_srq: %w", limit, errnoErr(rc))
	}
	q.armed, q.limit = limit > 0, limit
	return nil
}

// disarmLocked disarms the device's limit event. The caller holds mu.
func (q *SharedRecvQueue) disarmLocked() {
	if q.armed {
		C.shim_srq_limit(q.srq, 0)
		q.armed = false
	}
}

// deliver puts the limit token on limitCh unless one is there.
func (q *SharedRecvQueue) deliver() {
	select {
	case q.limitCh <- struct{}{}:
	default:
	}
}

// limitReached handles IBV_EVENT_SRQ_LIMIT_REACHED, which also disarms
// the device's limit.
func (q *SharedRecvQueue) limitReached() {
	q.mu.Lock()
	armed := q.armed
	q.armed = false
	q.mu.Unlock()
	if armed {
		q.deliver()
	}
}

// LimitReached returns the channel of the limit event.
func (q *SharedRecvQueue) LimitReached() <-chan struct{} { return q.limitCh }

// Close destroys the queue once no connection is attached: receives still
// posted complete with StatusFlushed (ibv_destroy_srq completes nothing,
// so the provider makes those completions), and the queue's memory, its
// completion queue and channel and its protection domain are given back.
func (q *SharedRecvQueue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	if n := len(q.conns); n > 0 {
		q.mu.Unlock()
		return fmt.Errorf("verbs: close shared receive queue on %s: %d connections attached: %w", q.dev, n, rdma.ErrInvalid)
	}
	q.closed = true
	q.disarmLocked()
	q.mu.Unlock()
	q.unwatchAsync()
	if q.ccf != nil {
		q.ccf.SetReadDeadline(time.Now())
	}
	q.wg.Wait()
	q.cqMu.Lock()
	q.collectLocked()
	q.mu.Lock()
	// What is left was posted and never consumed: flushed, in posting
	// order.
	for seq := uint64(1); seq <= q.seq; seq++ {
		if id, ok := q.ids[seq]; ok {
			q.ready = append(q.ready, rdma.Completion{ID: id, Op: rdma.OpRecv, Status: rdma.StatusFlushed})
		}
	}
	clear(q.ids)
	q.posted = 0
	q.drained = true
	q.mu.Unlock()
	q.destroy()
	q.signalLocked()
	q.cqMu.Unlock()
	return nil
}

// destroy gives back every object the queue holds.
func (q *SharedRecvQueue) destroy() {
	p := q.p
	if q.srq != nil {
		C.ibv_destroy_srq(q.srq)
		q.srq = nil
		p.res.srqs.Add(-1)
	}
	q.destroyCQ(p)
	if m := q.mem; m != nil {
		m.mu.Lock()
		for r := range m.mrs {
			r.releaseLocked()
		}
		m.closed = true
		m.mu.Unlock()
		C.ibv_dealloc_pd(m.pd)
		p.res.pds.Add(-1)
		C.free(unsafe.Pointer(m.sge))
		q.mem = nil
	}
	if q.list != nil {
		C.rdma_free_devices(q.list)
		q.list = nil
	}
}
