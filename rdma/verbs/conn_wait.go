//go:build linux && cgo && verbs

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

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
	got, err := c.wait(&c.cqMu, c)
	if got {
		c.cqMu.Lock()
		c.signalLocked()
		c.cqMu.Unlock()
	}
	if err != nil {
		c.mu.Lock()
		c.endLocked(fmt.Errorf("verbs: completion channel: %v: %w", err, rdma.ErrConnectionLost))
		c.mu.Unlock()
	}
	return got
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

// collectLocked polls the CQ into ready. The caller holds cqMu.
func (c *Conn) collectLocked() {
	if c.collect(c) {
		c.signalLocked()
	}
}

// takeLocked records polled work completions (taker). The caller holds
// cqMu.
func (c *Conn) takeLocked(wcs []C.struct_shim_wc) {
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
