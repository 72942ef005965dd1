//go:build linux && cgo && verbs

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

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
	defer c.cqMu.Unlock()
	c.mu.Lock()
	c.flushLocked()
	for m := range c.mrs {
		m.releaseLocked()
	}
	c.closed = true
	c.destroyObjectsLocked()
	if c.done != nil && c.err == nil {
		c.err = rdma.ErrClosed
		close(c.done)
	}
	c.mu.Unlock()
	if c.wake != nil {
		c.signalLocked()
	}
}

// flushLocked moves every work request still on the queues to ready in
// posting order: its completion if it has one (held behind earlier
// work), a flushed one otherwise. The caller holds cqMu and mu.
func (c *Conn) flushLocked() {
	for _, q := range [][]pending{c.sq, c.rq} {
		for _, x := range q {
			if !x.done {
				x.c = rdma.Completion{ID: x.id, Op: x.op, Status: rdma.StatusFlushed}
			}
			c.ready = append(c.ready, x.c)
		}
	}
	c.sq, c.rq = nil, nil
}

// destroyObjectsLocked destroys the queue pair, detaches it from its
// shared receive queue, and gives back the completion queue and channel,
// the protection domain (unless the shared receive queue's), the rdma_cm
// identifier and event channel, and the SGE array. The caller holds cqMu
// and mu, which it releases around the detach.
func (c *Conn) destroyObjectsLocked() {
	p := c.p
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
	c.destroyCQ(p)
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
}
