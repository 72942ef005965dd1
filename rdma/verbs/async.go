//go:build linux && cgo && verbs

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// Asynchronous events (ibv_get_async_event(3)) report what no work
// completion can: a queue pair that failed with nothing posted, a
// completion queue overrun, a port that went down, a device that died or
// is being removed. Each device context has one async fd, and librdmacm
// opens each device once per process and shares that context among all
// rdma_cm identifiers; so one watcher per context reads it, for every
// connection of every Provider on that device. It runs while at least one
// connection is up on the device, and waits on the fd through Go's
// poller like the completion and rdma_cm channels: the fd is made
// non-blocking (for the whole process: rdma-core itself does not read
// it), each wake-up drains it until EAGAIN (the poller is edge-triggered),
// and every event is acknowledged at once.

var (
	watchersMu sync.Mutex
	watchers   = map[*C.struct_ibv_context]*watcher{}
)

// watcher reads one device context's async events.
type watcher struct {
	ctx  *C.struct_ibv_context
	f    *os.File
	done chan struct{}

	mu    sync.Mutex
	conns map[*Conn]struct{}
	srqs  map[uintptr]*SharedRecvQueue // by the struct ibv_srq's address
}

// watchAsync adds c, whose queue pair exists, to its device's watcher,
// starting the watcher if c is the first. Failing to start it only loses
// the early warning: the error is logged, and c still learns of failures
// from its completions and from rdma_cm.
func (c *Conn) watchAsync() {
	w := startWatcher(c.p, c.id.verbs, c.dev.name)
	if w == nil {
		return
	}
	w.conns[c] = struct{}{}
	w.mu.Unlock()
	c.watcher = w
}

// watchAsync adds q to its device's watcher, for its limit event, as
// Conn.watchAsync does.
func (q *SharedRecvQueue) watchAsync() {
	w := startWatcher(q.p, q.ctx, q.dev)
	if w == nil {
		return
	}
	w.srqs[uintptr(unsafe.Pointer(q.srq))] = q
	w.mu.Unlock()
	q.watcher = w
}

// startWatcher returns the watcher of ctx, started if need be, with its
// mu held; or nil if it cannot start, which it logs.
func startWatcher(p *Provider, ctx *C.struct_ibv_context, dev string) *watcher {
	watchersMu.Lock()
	defer watchersMu.Unlock()
	w := watchers[ctx]
	if w == nil {
		f, err := pollable(int(ctx.async_fd), "ibv_async_fd")
		if err != nil {
			p.log.Warn("verbs: cannot watch the device's asynchronous events", "device", dev, "err", err)
			return nil
		}
		w = &watcher{ctx: ctx, f: f, done: make(chan struct{}), conns: map[*Conn]struct{}{}, srqs: map[uintptr]*SharedRecvQueue{}}
		watchers[ctx] = w
		go w.run(dev)
	}
	w.mu.Lock()
	return w
}

// unwatchAsync removes c from its watcher, and stops the watcher (its
// goroutine gone, its fd closed) if c was the last. The caller does not
// hold c.mu.
func (c *Conn) unwatchAsync() {
	w := c.watcher
	if w == nil {
		return
	}
	c.watcher = nil
	w.remove(func() { delete(w.conns, c) })
}

// unwatchAsync removes q from its watcher, as Conn.unwatchAsync does.
func (q *SharedRecvQueue) unwatchAsync() {
	w := q.watcher
	if w == nil {
		return
	}
	q.watcher = nil
	w.remove(func() { delete(w.srqs, uintptr(unsafe.Pointer(q.srq))) })
}

// remove runs del under w.mu and stops w if it then watches nothing.
func (w *watcher) remove(del func()) {
	watchersMu.Lock()
	defer watchersMu.Unlock()
	w.mu.Lock()
	del()
	last := len(w.conns) == 0 && len(w.srqs) == 0
	w.mu.Unlock()
	if !last {
		return
	}
	delete(watchers, w.ctx)
	w.f.SetReadDeadline(time.Now())
	<-w.done
	w.f.Close()
}

// run reads events until the watcher's file is closed or its deadline set.
func (w *watcher) run(device string) {
	defer close(w.done)
	rc, err := w.f.SyscallConn()
	if err != nil {
		return
	}
	for {
		var evs []C.struct_shim_async_event
		var aerr error
		err := rc.Read(func(uintptr) bool {
			for {
				var ev C.struct_shim_async_event
				r := C.shim_async(w.ctx, &ev)
				if r == -C.EAGAIN {
					return len(evs) > 0
				}
				if r < 0 {
					aerr = errnoErr(r)
					return true
				}
				evs = append(evs, ev)
			}
		})
		if err != nil {
			return // unwatchAsync set the deadline
		}
		for _, ev := range evs {
			w.dispatch(device, asyncEvent{kind: int(ev._type), qpNum: uint32(ev.qp_num), cq: uintptr(ev.cq), srq: uintptr(ev.srq), port: int(ev.port)})
		}
		if aerr != nil {
			// The fd is unusable (the device is gone): end everything on
			// it rather than spin.
			w.dispatch(device, asyncEvent{kind: C.IBV_EVENT_DEVICE_FATAL, readErr: aerr})
			return
		}
	}
}

// asyncEvent is an asynchronous event, identified by scalars.
type asyncEvent struct {
	kind    int // enum ibv_event_type
	qpNum   uint32
	cq      uintptr
	srq     uintptr
	port    int
	readErr error // ibv_get_async_event failed
}

// String names the event as ibv_event_type_str does, with the constant.
func (e asyncEvent) String() string {
	s := fmt.Sprintf("asynchronous event %q (%s)", C.GoString(C.ibv_event_type_str(C.enum_ibv_event_type(e.kind))), asyncNames[e.kind])
	if e.readErr != nil {
		s = fmt.Sprintf("ibv_get_async_event: %v", e.readErr)
	}
	return s
}

var asyncNames = map[int]string{
	C.IBV_EVENT_CQ_ERR: "IBV_EVENT_CQ_ERR", C.IBV_EVENT_QP_FATAL: "IBV_EVENT_QP_FATAL",
	C.IBV_EVENT_QP_REQ_ERR: "IBV_EVENT_QP_REQ_ERR", C.IBV_EVENT_QP_ACCESS_ERR: "IBV_EVENT_QP_ACCESS_ERR",
	C.IBV_EVENT_COMM_EST: "IBV_EVENT_COMM_EST", C.IBV_EVENT_SQ_DRAINED: "IBV_EVENT_SQ_DRAINED",
	C.IBV_EVENT_PATH_MIG: "IBV_EVENT_PATH_MIG", C.IBV_EVENT_PATH_MIG_ERR: "IBV_EVENT_PATH_MIG_ERR",
	C.IBV_EVENT_DEVICE_FATAL: "IBV_EVENT_DEVICE_FATAL", C.IBV_EVENT_PORT_ACTIVE: "IBV_EVENT_PORT_ACTIVE",
	C.IBV_EVENT_PORT_ERR: "IBV_EVENT_PORT_ERR", C.IBV_EVENT_LID_CHANGE: "IBV_EVENT_LID_CHANGE",
	C.IBV_EVENT_PKEY_CHANGE: "IBV_EVENT_PKEY_CHANGE", C.IBV_EVENT_SM_CHANGE: "IBV_EVENT_SM_CHANGE",
	C.IBV_EVENT_SRQ_ERR: "IBV_EVENT_SRQ_ERR", C.IBV_EVENT_SRQ_LIMIT_REACHED: "IBV_EVENT_SRQ_LIMIT_REACHED",
	C.IBV_EVENT_QP_LAST_WQE_REACHED: "IBV_EVENT_QP_LAST_WQE_REACHED",
	C.IBV_EVENT_CLIENT_REREGISTER:   "IBV_EVENT_CLIENT_REREGISTER", C.IBV_EVENT_GID_CHANGE: "IBV_EVENT_GID_CHANGE",
	C.IBV_EVENT_WQ_FATAL: "IBV_EVENT_WQ_FATAL",
}

// affects reports whether e ends c: a queue pair error of c's queue pair
// (the QP is in the error state: IBA Volume 1 Section 11.6.3.1), an error
// of c's completion queue (it overran, and completions are lost), an error
// of c's port, or the device's death. Other events (a port up, a path
// migrated, a GID added) leave connections alone.
func (e asyncEvent) affects(c *Conn) bool {
	switch e.kind {
	case C.IBV_EVENT_QP_FATAL, C.IBV_EVENT_QP_REQ_ERR, C.IBV_EVENT_QP_ACCESS_ERR, C.IBV_EVENT_PATH_MIG_ERR:
		return c.qpNum == e.qpNum
	case C.IBV_EVENT_CQ_ERR:
		return c.cqAddr == e.cq
	case C.IBV_EVENT_PORT_ERR:
		return c.port == e.port
	case C.IBV_EVENT_DEVICE_FATAL:
		return true
	}
	return false
}

// dispatch ends the connections e affects, with an error naming it.
func (w *watcher) dispatch(device string, e asyncEvent) {
	if e.kind == C.IBV_EVENT_SRQ_LIMIT_REACHED || e.kind == C.IBV_EVENT_SRQ_ERR {
		w.mu.Lock()
		q := w.srqs[e.srq]
		w.mu.Unlock()
		switch {
		case q == nil:
		case e.kind == C.IBV_EVENT_SRQ_LIMIT_REACHED:
			q.limitReached()
		default:
			q.p.log.Error("verbs: shared receive queue failed", "device", device, "event", e)
		}
		return
	}
	w.mu.Lock()
	var hit []*Conn
	for c := range w.conns {
		if e.affects(c) {
			hit = append(hit, c)
		}
	}
	w.mu.Unlock()
	if len(hit) == 0 {
		return
	}
	for _, c := range hit {
		c.asyncEnded(device, e)
	}
}

// asyncEnded ends c for e.
func (c *Conn) asyncEnded(device string, e asyncEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.kind == C.IBV_EVENT_DEVICE_FATAL {
		c.gone = true
	}
	c.endLocked(fmt.Errorf("verbs: device %s: %v: %w", device, e, rdma.ErrConnectionLost))
}

// forgetDeadDevices makes librdmacm close the device contexts of devices
// that are gone and that no rdma_cm identifier uses any more. librdmacm
// opens each device once and keeps it open; it notices a removed device
// only when it looks at the device list again (rdma_get_devices), and the
// kernel cannot finish removing a device (rdma_rxe, for one, cannot
// disassociate a user context) until every process has closed it. A
// connection that ended for its device's removal calls this once its
// identifier is destroyed.
func forgetDeadDevices() {
	if list := C.rdma_get_devices(nil); list != nil {
		C.rdma_free_devices(list)
	}
}

// The event types, for tests (a test file cannot use cgo).
const (
	eventQPFatal     = C.IBV_EVENT_QP_FATAL
	eventCQErr       = C.IBV_EVENT_CQ_ERR
	eventPortErr     = C.IBV_EVENT_PORT_ERR
	eventPortActive  = C.IBV_EVENT_PORT_ACTIVE
	eventCommEst     = C.IBV_EVENT_COMM_EST
	eventDeviceFatal = C.IBV_EVENT_DEVICE_FATAL
)

// watching returns the number of connections the watcher of c's device
// watches, 0 if there is none, for tests.
func watching(c *Conn) int {
	watchersMu.Lock()
	defer watchersMu.Unlock()
	for _, w := range watchers {
		w.mu.Lock()
		_, ok := w.conns[c]
		n := len(w.conns)
		w.mu.Unlock()
		if ok {
			return n
		}
	}
	return 0
}
