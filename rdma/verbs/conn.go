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
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

type unsafePtr = unsafe.Pointer

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

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
//
// This file holds the connection's setup, start and end; posting is in
// conn_post.go, Poll and Wait in conn_wait.go, what a work completion
// does in conn_complete.go, Close in conn_close.go, and the completion
// queue and its channel, shared with SharedRecvQueue, in cq.go.
type Conn struct {
	p   *Provider
	ch  *channel
	id  *C.struct_rdma_cm_id
	pd  *C.struct_ibv_pd
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

	cqueue            // both queues' completions (cq.go)
	cqMu   sync.Mutex // the polls, wcs, ready
	ready  []rdma.Completion
	wake   chan struct{} // closed and replaced when ready grows or the state changes
	intr   chan struct{} // cap 1: a pending InterruptWait (direct.go)

	// Event-mode waiting (Wait, awaitChannel). The Wait holding leader
	// parks on the completion channel; followers counts the Waits
	// waiting for it on wake. A read deadline in the past on ccf
	// interrupts the leader (kickLocked): the connection ended, Close,
	// or the leader's context.
	leader    sync.Mutex
	followers atomic.Int32

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
	if err := c.createCQ(p, c.id.verbs, d.SendQueue+rq); err != nil {
		return err
	}
	if rc := C.shim_create_qp(c.id, c.pd, c.cq, C.int(d.SendQueue), C.int(rq), C.int(dev.maxSGE), srq, rcq); rc < 0 {
		return fmt.Errorf("rdma_create_qp (send %d, receive %d, %d SGEs, shared receive queue %t): %w", d.SendQueue, rq, dev.maxSGE, srq != nil, errnoErr(rc))
	}
	p.res.qps.Add(1)
	c.qp = c.id.qp
	c.qpNum = uint32(c.qp.qp_num)
	if c.srq != nil {
		c.srq.attach(c)
	}
	c.cqAddr = uintptr(unsafe.Pointer(c.cq))
	c.port = int(c.id.port_num)
	if c.port == 0 { // as queryDevice: rdma_cm leaves it 0 on some iWARP identifiers
		c.port = 1
	}
	c.sge = (*C.struct_ibv_sge)(C.calloc(C.size_t(dev.maxSGE), C.size_t(unsafe.Sizeof(C.struct_ibv_sge{}))))
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
