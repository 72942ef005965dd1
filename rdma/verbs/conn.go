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
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

type unsafePtr = unsafe.Pointer

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// pollBatch is how many completions one ibv_poll_cq call takes.
const pollBatch = 32

// flushGrace is how long a connection whose queue pair was flushed for
// no reason it knows waits for rdma_cm to report one (a disconnect) before
// it ends with rdma.ErrConnectionLost.
const flushGrace = time.Second

// closeWait bounds how long Close waits for the flushed completions of
// outstanding work requests.
const closeWait = 5 * time.Second

// Conn is one side of an RC queue pair connected by rdma_cm, with its own
// protection domain, one completion queue for both queues and one
// completion channel. Its methods are safe for concurrent use.
//
// Completions arrive through the completion channel, whose fd is
// non-blocking and waited on by Go's poller. No goroutine of the
// connection's own waits there: a Wait that finds no completion parks on
// the channel itself (the leader, awaitChannel), so the goroutine that
// wants a completion is the one the poller wakes, with no hand-off
// between two; other Waits at the same time wait for the leader on wake.
// One goroutine per connection parks on its rdma_cm channel (cmLoop). None
// holds an OS thread while it waits.
type Conn struct {
	p   *Provider
	ch  *channel
	id  *C.struct_rdma_cm_id
	pd  *C.struct_ibv_pd
	cc  *C.struct_ibv_comp_channel
	ccf *os.File
	cq  *C.struct_ibv_cq
	qp  *C.struct_ibv_qp
	srq *SharedRecvQueue // the shared receive queue it is attached to, or nil (srq.go)

	dev           device
	lim           rdma.Limits
	peerPD        []byte
	local, remote *Addr

	mu       sync.Mutex
	sge      *C.struct_ibv_sge // scratch SGE array, C memory, under mu
	seq      uint64            // wr_id of the next work request
	sq, rq   []pending         // posted, not yet polled off the CQ
	sqOut    int               // send-queue work not yet returned to the user
	rqOut    int               // receives not yet returned
	readsOut int               // Reads not yet returned
	deferred []rdma.WorkRequest
	started  bool
	err      error
	done     chan struct{}
	mrs      map[*mr]struct{}
	closing  bool
	leaving  bool // destroy has begun: Waits no longer park on the channel
	closed   bool

	flushTimer *time.Timer // ends the connection after flushGrace; under mu

	// What identifies this connection in an asynchronous event; set
	// before it is watched, constant after.
	qpNum   uint32
	cqAddr  uintptr
	port    int
	watcher *watcher // its device's async event watcher, or nil
	gone    bool     // the device is being removed or died; under mu

	cqMu  sync.Mutex // ibv_poll_cq, wcs, ready
	wcs   *C.struct_shim_wc
	ready []rdma.Completion
	wake  chan struct{} // closed and replaced when ready grows or the state changes
	intr  chan struct{} // cap 1: a pending InterruptWait (direct.go)

	// Event-mode waiting (Wait, awaitChannel). The Wait holding leader
	// parks on the completion channel; followers counts the Waits
	// waiting for it on wake. A read deadline in the past on ccf
	// interrupts the leader (kickLocked): the connection ended, Close,
	// or the leader's context.
	leader    sync.Mutex
	followers atomic.Int32
	ccRaw     syscall.RawConn

	wg sync.WaitGroup // cmLoop and endLocked's wake-up; destroy waits
}

// pending is a posted work request.
type pending struct {
	seq    uint64
	id     uint64
	op     rdma.Op
	length int // bytes of a send-queue work request

	done bool            // completed, waiting for earlier work to complete
	c    rdma.Completion // its completion, once done
}

var _ rdma.Conn = (*Conn)(nil)

// setup creates the protection domain, completion channel, completion
// queue and queue pair on c.id's device.
func (c *Conn) setup(dev device, d rdma.Depths) error {
	p := c.p
	c.dev = dev
	rq := d.RecvQueue
	var srq *C.struct_ibv_srq
	var rcq *C.struct_ibv_cq
	if c.srq != nil {
		pd, s, cq, err := c.srq.attachable(c.id.verbs, dev.name)
		if err != nil {
			return err
		}
		c.pd, srq, rcq, rq = pd, s, cq, 0
	} else {
		pd, err := C.ibv_alloc_pd(c.id.verbs)
		if pd == nil {
			return fmt.Errorf("ibv_alloc_pd: %w", err)
		}
		p.res.pds.Add(1)
		c.pd = pd
	}
	cc, err := C.ibv_create_comp_channel(c.id.verbs)
	if cc == nil {
		return fmt.Errorf("ibv_create_comp_channel: %w", err)
	}
	p.res.compChannels.Add(1)
	c.cc = cc
	f, err := pollable(int(cc.fd), "ibv_comp_channel")
	if err != nil {
		return err
	}
	p.res.files.Add(1)
	c.ccf = f
	if c.ccRaw, err = f.SyscallConn(); err != nil {
		return err
	}
	cq, err := C.ibv_create_cq(c.id.verbs, C.int(d.SendQueue+rq), nil, cc, 0)
	if cq == nil {
		return fmt.Errorf("ibv_create_cq %d entries: %w", d.SendQueue+rq, err)
	}
	p.res.cqs.Add(1)
	c.cq = cq
	if r, err := C.ibv_req_notify_cq(cq, 0); r != 0 {
		return fmt.Errorf("ibv_req_notify_cq: %w", err)
	}
	if rc := C.shim_create_qp(c.id, c.pd, cq, C.int(d.SendQueue), C.int(rq), C.int(dev.maxSGE), srq, rcq); rc < 0 {
		return fmt.Errorf("rdma_create_qp (send %d, receive %d, %d SGEs, shared receive queue %t): %w", d.SendQueue, rq, dev.maxSGE, srq != nil, errnoErr(rc))
	}
	p.res.qps.Add(1)
	c.qp = c.id.qp
	c.qpNum = uint32(c.qp.qp_num)
	if c.srq != nil {
		c.srq.attach(c)
	}
	c.cqAddr = uintptr(unsafe.Pointer(cq))
	c.port = int(c.id.port_num)
	if c.port == 0 { // as queryDevice: rdma_cm leaves it 0 on some iWARP identifiers
		c.port = 1
	}
	c.sge = (*C.struct_ibv_sge)(C.calloc(C.size_t(dev.maxSGE), C.size_t(unsafe.Sizeof(C.struct_ibv_sge{}))))
	c.wcs = (*C.struct_shim_wc)(C.calloc(pollBatch, C.size_t(unsafe.Sizeof(C.struct_shim_wc{}))))
	c.done = make(chan struct{})
	c.wake = make(chan struct{})
	c.intr = make(chan struct{}, 1)
	c.mrs = make(map[*mr]struct{})
	return nil
}

// finish records the limits and addresses once IRD and ORD are known.
func (c *Conn) finish(dev device, d rdma.Depths) {
	c.lim = rdma.Limits{
		SendQueueDepth: d.SendQueue, RecvQueueDepth: d.RecvQueue, IRD: d.IRD, ORD: d.ORD,
		MaxSGE: dev.maxSGE, MaxReadSGE: dev.maxReadSGE, MaxMessageSize: dev.maxMsg,
		// A Send with Invalidate naming an MR from ibv_reg_mr moves an
		// InfiniBand or RoCE queue pair to the error state (only memory
		// windows and fast-registered MRs can be invalidated remotely,
		// InfiniBand Architecture Specification Volume 1, section
		// 10.6.7), and on Linux siw it revokes the key for good, which
		// userspace cannot undo. So this side's regions refuse it.
		RemoteInvalidation: false,
	}
	if c.srq != nil {
		c.lim.RecvQueueDepth = 0
	}
	c.local = localAddr(c.id, dev.name)
	c.remote = peerAddr(c.id, dev.name)
}

// start runs the connection's goroutines and posts the send-queue work
// that Prepare posted. If a post fails, the connection ends, and that
// work request and the ones after it complete flushed, in posting order
// behind what was posted: they were counted as outstanding when Prepare
// posted them, and a Wait returns the end only when nothing is.
func (c *Conn) start() {
	c.watchAsync()
	c.wg.Add(1)
	go c.cmLoop()
	c.cqMu.Lock() // before mu, as collectLocked: c.ready
	defer c.cqMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started = true
	deferred := c.deferred
	c.deferred = nil
	for i := range deferred {
		// Check again: a region may have been released or invalidated
		// since Prepare; this also fills c.sge.
		wr := &deferred[i]
		n, err := c.checkSGL(wr.Local, 0, len(wr.Local), wr.Op == rdma.OpRead)
		if err == nil {
			err = c.postSendLocked(wr, n)
		}
		if err != nil {
			c.endLocked(fmt.Errorf("verbs: post deferred %v: %v: %w", deferred[i].Op, err, rdma.ErrConnectionLost))
			for _, wr := range deferred[i:] {
				c.seq++
				c.sq = append(c.sq, pending{seq: c.seq, id: wr.ID, op: wr.Op, done: true,
					c: rdma.Completion{ID: wr.ID, Op: wr.Op, Status: rdma.StatusFlushed}})
			}
			if c.readyHeadLocked(&c.sq) {
				c.signalLocked()
			}
			return
		}
	}
}

// awaitChannel parks the calling Wait, which holds c.leader, on the
// completion channel through the poller until completions arrive, and
// reports whether it collected any into ready. Each look, the one before
// it sleeps and each after a wake-up, is one cgo call, shim_cq_wake: it
// takes the channel's events, re-arms the CQ and polls it. A wake-up that
// finds nothing on the CQ (its completions taken by a Poll meanwhile)
// sleeps again. It returns early, with false, when the connection is
// being closed or a kick arrives: the connection ended (endLocked), Close
// (destroy), or ctx is done; the caller then polls the CQ itself.
func (c *Conn) awaitChannel(ctx context.Context) bool {
	// Clear a kick left from before, then look at what it said: a kick
	// from now on interrupts the wait, so none is lost in between. The
	// connection's end is among what it said: endLocked sets c.err and
	// kicks under mu, so an end between the caller's look at c.err and
	// the clearing above is seen here. Without that look, a Wait on a
	// connection that ended with nothing outstanding slept until ctx
	// ended, since no completion was left to come (a few runs in a
	// thousand of the conformance suite's SendNoRecv on rxe, spinning
	// first: the peer's disconnect arrived as the spin ended).
	c.ccf.SetReadDeadline(time.Time{})
	c.mu.Lock()
	leaving := c.leaving
	ended := c.err != nil && c.sqOut == 0 && c.rqOut == 0
	c.mu.Unlock()
	if leaving || ended || ctx.Err() != nil || len(c.intr) > 0 {
		return false
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, c.kick)
		defer stop()
	}
	var got bool
	var err error
	rerr := c.ccRaw.Read(func(uintptr) bool {
		c.cqMu.Lock()
		n := int(C.shim_cq_wake(c.cc, c.cq, pollBatch, c.wcs))
		if n > 0 {
			c.takeLocked(n)
			c.signalLocked()
		}
		c.cqMu.Unlock()
		if n < 0 {
			err = errnoErr(C.int(n))
			return true
		}
		got = n > 0
		return got
	})
	if err != nil {
		c.mu.Lock()
		c.endLocked(fmt.Errorf("verbs: completion channel: %v: %w", err, rdma.ErrConnectionLost))
		c.mu.Unlock()
	}
	return got && rerr == nil
}

// kick interrupts the Wait parked on the completion channel, if any.
func (c *Conn) kick() {
	c.mu.Lock()
	c.kickLocked()
	c.mu.Unlock()
}

// kickLocked is kick for a caller that holds mu.
func (c *Conn) kickLocked() {
	if c.ccf != nil && !c.closed {
		c.ccf.SetReadDeadline(time.Unix(1, 0))
	}
}

// awaitCQ blocks, through Go's poller, until the completion channel cc
// has events, and takes every pending one: shim_cq_events acknowledges
// them and re-arms cq. It reports closed once a deadline has interrupted
// it, and otherwise the channel's own error, if it failed. A shared
// receive queue's completion goroutine waits here; a connection's leading
// Wait polls in the same call (awaitChannel).
func awaitCQ(rc syscall.RawConn, cc *C.struct_ibv_comp_channel, cq *C.struct_ibv_cq) (closed bool, err error) {
	rerr := rc.Read(func(uintptr) bool {
		n := C.shim_cq_events(cc, cq)
		if n < 0 {
			err = errnoErr(n)
			return true
		}
		return n > 0
	})
	return rerr != nil, err
}

// cmLoop reads the connection's rdma_cm events after establishment.
func (c *Conn) cmLoop() {
	defer c.wg.Done()
	for {
		ev, err := c.ch.get(context.Background())
		if err != nil {
			return
		}
		var end error
		switch ev._type {
		case C.RDMA_CM_EVENT_DISCONNECTED:
			end = rdma.ErrDisconnected
		case C.RDMA_CM_EVENT_DEVICE_REMOVAL:
			end = fmt.Errorf("verbs: device %s removed: %w", c.dev.name, rdma.ErrConnectionLost)
			c.mu.Lock()
			c.gone = true
			c.mu.Unlock()
		case C.RDMA_CM_EVENT_CONNECT_ERROR, C.RDMA_CM_EVENT_UNREACHABLE:
			end = fmt.Errorf("verbs: rdma_cm %s (status %d): %w", eventName(ev._type), int(ev.status), rdma.ErrConnectionLost)
		case C.RDMA_CM_EVENT_TIMEWAIT_EXIT:
			continue
		default:
			c.p.log.Debug("verbs: connection event", "event", eventName(ev._type), "status", int(ev.status))
			continue
		}
		c.mu.Lock()
		c.endLocked(end)
		c.mu.Unlock()
	}
}

// collectLocked polls the CQ into ready. The caller holds cqMu.
func (c *Conn) collectLocked() {
	if c.cq == nil {
		return
	}
	grew := false
	for {
		n := int(C.shim_poll(c.cq, pollBatch, c.wcs))
		if n <= 0 {
			break
		}
		c.takeLocked(n)
		grew = true
		if n < pollBatch {
			break
		}
	}
	if grew {
		c.signalLocked()
	}
}

// takeLocked records the first n work completions in c.wcs. The caller
// holds cqMu.
func (c *Conn) takeLocked(n int) {
	wcs := unsafe.Slice(c.wcs, n)
	c.mu.Lock()
	for i := range wcs {
		c.completionLocked(&wcs[i])
	}
	c.mu.Unlock()
}

// signalLocked wakes every Wait. The caller holds cqMu.
func (c *Conn) signalLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

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

// endLocked ends the connection with err if it has not ended: the queue
// pair goes to the error state, which flushes every posted work request,
// and rdma_cm tells the peer. The caller holds mu.
func (c *Conn) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	if c.flushTimer != nil {
		c.flushTimer.Stop()
	}
	if c.qp != nil {
		C.shim_qp_error(c.qp)
	}
	// A device being removed sends nothing more; a peer on the same
	// device learns of the removal itself rather than as a disconnect.
	if c.id != nil && c.started && !c.gone {
		C.rdma_disconnect(c.id)
	}
	c.p.log.Debug("verbs: connection ended", "local", c.local, "remote", c.remote, "err", err)
	c.kickLocked()
	// Wake waiters without taking cqMu, which the caller may hold, on a
	// goroutine that destroy waits for with cmLoop. The Add comes before
	// destroy's Wait: Close ends the connection before destroying it, and
	// a connection destroyed without Close was never started, so nothing
	// ends it but destroy, which starts no goroutine.
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.cqMu.Lock()
		c.signalLocked()
		c.cqMu.Unlock()
	}()
}

// LocalAddr returns the local address (an *Addr naming the device).
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address (an *Addr).
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// PeerPrivateData returns the peer's private data; see
// ConnRequest.PrivateData for padding.
func (c *Conn) PeerPrivateData() []byte { return c.peerPD }

// Limits returns the limits in force.
func (c *Conn) Limits() rdma.Limits { return c.lim }

// Device returns the name of the connection's RDMA device.
func (c *Conn) Device() string { return c.dev.name }

// Done returns a channel closed when the connection ends.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

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

// Poll copies up to len(cs) completions into cs.
func (c *Conn) Poll(cs []rdma.Completion) int { return c.poll(cs, true) }

// poll is Poll; with collect false it returns only the completions
// already collected, without a look at the CQ (a cgo call).
func (c *Conn) poll(cs []rdma.Completion, collect bool) int {
	c.cqMu.Lock()
	defer c.cqMu.Unlock()
	if collect && len(c.ready) < len(cs) {
		c.collectLocked()
	}
	n := copy(cs, c.ready)
	c.ready = c.ready[:copy(c.ready, c.ready[n:])]
	if n > 0 {
		c.mu.Lock()
		for _, x := range cs[:n] {
			if x.Op == rdma.OpRecv {
				c.rqOut--
			} else {
				c.sqOut--
				if x.Op == rdma.OpRead {
					c.readsOut--
				}
			}
		}
		c.mu.Unlock()
	}
	return n
}

// Wait blocks until a completion is available, ctx is done, or the
// connection has ended and every completion has been returned. With a
// positive Options.BusyPoll it polls the completion queue for that long
// first; with a negative one it only polls, and never sleeps. Otherwise it
// sleeps on the completion channel itself, or, while another Wait does,
// until that one has taken what arrived. With nothing to return it
// returns (0, nil) after InterruptWait (direct.go).
//
// Sleeping on the channel, it looks at the CQ only where it may find
// something: once before it sleeps and once per wake-up, each with the
// channel's events in one cgo call (awaitChannel); what that collects,
// it returns without looking again. It polls the CQ itself when it is
// about to return with nothing (ctx done, an interrupt), after a sleep
// that collected nothing, and before it waits for another Wait, as every
// busy-poll round does.
func (c *Conn) Wait(ctx context.Context, cs []rdma.Completion) (int, error) {
	spin, forever := c.p.opts.BusyPoll > 0, c.p.opts.BusyPoll < 0
	var spinEnd time.Time
	if spin {
		spinEnd = time.Now().Add(c.p.opts.BusyPoll)
	}
	// Whether to poll the CQ at the top of the loop. While sleeping on
	// the channel, not: a leader's first look polls it anyway, and a
	// follower polls before it waits.
	collect := spin || forever
	for {
		c.cqMu.Lock()
		wake := c.wake
		c.cqMu.Unlock()
		if n := c.poll(cs, collect); n > 0 {
			return n, nil
		}
		c.mu.Lock()
		err, idle, closed := c.err, c.sqOut == 0 && c.rqOut == 0, c.closed
		c.mu.Unlock()
		if err != nil && idle {
			return 0, err
		}
		if !collect && (ctx.Err() != nil || len(c.intr) > 0) {
			if n := c.Poll(cs); n > 0 {
				return n, nil
			}
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if c.interrupted() {
			return 0, nil
		}
		if forever || spin && time.Now().Before(spinEnd) {
			// Other goroutines (the upper layer's, the peer's in the
			// same process) need the P between two polls: a spinning
			// goroutine is preempted only after 10 ms.
			runtime.Gosched()
			continue
		}
		if !closed && c.leader.TryLock() {
			collect = !c.awaitChannel(ctx)
			c.leader.Unlock()
			if c.followers.Load() > 0 {
				// One of them leads next, if the completions
				// this one takes are not theirs.
				c.cqMu.Lock()
				c.signalLocked()
				c.cqMu.Unlock()
			}
			continue
		}
		// A leader waits (or Close has destroyed the channel): it wakes
		// us once it has taken what arrived, or when it stops leading.
		if !collect {
			if n := c.Poll(cs); n > 0 {
				return n, nil
			}
		}
		collect = spin || forever
		c.followers.Add(1)
		select {
		case <-wake:
		case <-c.intr:
			c.followers.Add(-1)
			return 0, nil
		case <-ctx.Done():
		}
		c.followers.Add(-1)
	}
}

// Close ends the connection, waits (at most closeWait) for the flushed
// completions of outstanding work, stops the connection's goroutines and
// destroys its queue pair, completion queue, completion channel, memory
// regions, protection domain and rdma_cm identifier. The completions stay
// available to Poll and Wait.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	c.closing = true
	c.endLocked(rdma.ErrClosed)
	c.mu.Unlock()
	deadline := time.Now().Add(closeWait)
	for time.Now().Before(deadline) {
		c.cqMu.Lock()
		c.collectLocked()
		wake := c.wake
		c.cqMu.Unlock()
		c.mu.Lock()
		left := len(c.sq) + len(c.rq)
		c.mu.Unlock()
		if left == 0 {
			break
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Millisecond):
		}
	}
	c.destroy()
	return nil
}

// destroy stops the goroutines and gives back every object. Work still
// outstanding gets a flushed completion.
func (c *Conn) destroy() {
	p := c.p
	c.mu.Lock()
	c.leaving = true // a Wait that leads from now on does not park
	c.kickLocked()
	c.mu.Unlock()
	c.leader.Lock() // the Wait that led, if any, has left the channel
	defer c.leader.Unlock()
	if c.ch != nil {
		c.ch.wake()
	}
	c.wg.Wait()
	c.unwatchAsync()
	c.cqMu.Lock()
	c.mu.Lock()
	for _, q := range [][]pending{c.sq, c.rq} {
		for _, x := range q {
			if !x.done {
				x.c = rdma.Completion{ID: x.id, Op: x.op, Status: rdma.StatusFlushed}
			}
			c.ready = append(c.ready, x.c)
		}
	}
	c.sq, c.rq = nil, nil
	for m := range c.mrs {
		m.releaseLocked()
	}
	c.closed = true
	if c.qp != nil {
		C.rdma_destroy_qp(c.id)
		c.qp = nil
		p.res.qps.Add(-1)
	}
	if c.srq != nil {
		// Not under c.mu: the queue takes it to end c for a failed
		// receive.
		c.mu.Unlock()
		c.srq.detach(c)
		c.mu.Lock()
	}
	if c.cq != nil {
		C.ibv_destroy_cq(c.cq)
		c.cq = nil
		p.res.cqs.Add(-1)
	}
	if c.ccf != nil {
		c.ccf.Close()
		c.ccf = nil
		p.res.files.Add(-1)
	}
	if c.cc != nil {
		C.ibv_destroy_comp_channel(c.cc)
		c.cc = nil
		p.res.compChannels.Add(-1)
	}
	if c.pd != nil && c.srq == nil {
		C.ibv_dealloc_pd(c.pd)
		p.res.pds.Add(-1)
	}
	c.pd = nil
	if c.id != nil {
		p.destroyID(c.id)
		c.id = nil
	}
	if c.ch != nil {
		c.ch.destroy()
	}
	if c.gone {
		forgetDeadDevices()
	}
	if c.sge != nil {
		C.free(unsafe.Pointer(c.sge))
		c.sge = nil
	}
	if c.wcs != nil {
		C.free(unsafe.Pointer(c.wcs))
		c.wcs = nil
	}
	if c.done != nil && c.err == nil {
		c.err = rdma.ErrClosed
		close(c.done)
	}
	c.mu.Unlock()
	if c.wake != nil {
		c.signalLocked()
	}
	c.cqMu.Unlock()
}
