package rpcrdma

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Credits (RFC 5666 section 3.3; RFC 8166 section 3.3.1).
//
// A requester may have at most as many calls outstanding as the responder
// has granted it; a call is outstanding from its Send until its reply (or
// RDMA_ERROR) arrives. Every connection starts with a grant of one, the
// grant in each reply replaces the previous one (it is a total, not a
// delta), a grant of zero is a protocol violation that would deadlock the
// requester, and a requester clamps a large grant to the receives it can
// post for replies.
//
// Every decision about the forward direction's credits is made here; the
// connection's code asks. A requester asks for Config.Credits in every
// call, posts a receive for each plus one spare and the backward calls it
// grants, and has at most that many calls in flight (requesterRecvs,
// callCapacity, creditWindow). A responder grants GrantPolicy's largest,
// never more than the receives it posts less two for messages outside
// the credit count and those of the backward direction (responderRecvs,
// grantState.start, fixedGrant); with a Listener's shared receive pool
// (pool.go) the grant starts at one (sharedFirstGrant) and moves
// (grantState): raiseTo decides when and how far it rises, review when
// and how far it falls, and settle when the receives of a lowered grant
// may go back to the pool; mostUnanswered says when a requester ignores
// its grant. The pool decides only whether it has the receives to
// promise. The backward direction's credits (RFC 8167) are
// Config.BackwardCredits, granted by the requester's serving half and
// taken by the responder's calling half in a creditWindow of its own
// (backchannel_serve.go, backchannel_call.go).

// creditWindow is the requester's view: the grant and the calls in flight.
// Acquire blocks until a call may be sent. It is safe for concurrent use.
type creditWindow struct {
	mu       sync.Mutex
	max      uint32        // local capacity: most calls we will have in flight
	grant    uint32        // peer's grant, clamped to [1, max]
	inFlight uint32        // calls sent and not yet answered
	peak     uint32        // the most in flight since takePeak
	wake     chan struct{} // closed and replaced when a waiter might proceed
	waiters  int           // acquires waiting on wake
	closed   error         // set by close; Acquire then fails with it
}

func newCreditWindow(capacity uint32) *creditWindow {
	return &creditWindow{max: max(capacity, 1), grant: 1, wake: make(chan struct{})}
}

// errZeroGrant is returned by update for a grant of zero, which it treats
// as one: RFC 8166 section 3.3.1 forbids it; Linux floors it to one.
var errZeroGrant = errors.New("rpcrdma: peer granted zero credits")

// update records a grant received in a reply and returns the grant in
// force. A zero grant is treated as one and reported with errZeroGrant so
// the caller can count it; a grant above max is clamped to max.
func (w *creditWindow) update(granted uint32) (uint32, error) {
	var err error
	if granted == 0 {
		granted, err = 1, errZeroGrant
	}
	granted = min(granted, w.max)
	w.mu.Lock()
	defer w.mu.Unlock()
	if granted > w.grant {
		w.broadcastLocked()
	}
	w.grant = granted
	return granted, err
}

// acquire takes one credit, waiting until the number of calls in flight is
// below the grant, ctx is done, or the window is closed.
func (w *creditWindow) acquire(ctx context.Context) error {
	for {
		w.mu.Lock()
		if w.closed != nil {
			w.mu.Unlock()
			return w.closed
		}
		if w.inFlight < w.grant {
			w.inFlight++
			w.peak = max(w.peak, w.inFlight)
			w.mu.Unlock()
			return nil
		}
		wake := w.wake
		w.waiters++
		w.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		w.mu.Lock()
		w.waiters--
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// release returns a credit when a call's reply arrives or the call is
// abandoned before its Send.
func (w *creditWindow) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inFlight == 0 {
		panic("rpcrdma: credit released twice")
	}
	w.inFlight--
	w.broadcastLocked()
}

// close fails every current and future acquire with err.
func (w *creditWindow) close(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed == nil {
		w.closed = err
		w.broadcastLocked()
	}
}

// state returns the grant and the calls in flight, for metrics and tests.
func (w *creditWindow) state() (grant, inFlight uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.grant, w.inFlight
}

// takePeak returns the most calls in flight at once since the last
// takePeak (or since the window was made) and starts a new period from
// the calls in flight now.
func (w *creditWindow) takePeak() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.peak
	w.peak = w.inFlight
	return p
}

// broadcastLocked wakes every waiter; with none, there is nothing to do
// (and nothing to allocate).
func (w *creditWindow) broadcastLocked() {
	if w.waiters == 0 {
		return
	}
	close(w.wake)
	w.wake = make(chan struct{})
}

// GrantPolicy decides the credits a responder grants on a connection. The
// responder keeps at least that many receives posted, so Max bounds the
// memory a requester can make it commit. It grants Max whatever the
// requester asks, as Linux's svcrdma does (on a shared receive pool the
// pool lowers it to the calls a connection has in flight, pool.go).
type GrantPolicy struct {
	// Max is the grant, and the receives posted per connection: each
	// costs every connection a receive and a send buffer (Config.Grant
	// says how much). Zero means DefaultCredits.
	Max uint32
}

// DefaultCredits is the grant a responder offers by default, as Linux's
// svcrdma does since 6.x (svcrdma_max_requests = 128 in newer kernels).
const DefaultCredits = 128

// Grant returns the credits to grant: Max, or DefaultCredits. It is never
// zero (RFC 8166 Section 3.3.1).
func (p GrantPolicy) Grant() uint32 {
	if p.Max == 0 {
		return DefaultCredits
	}
	return p.Max
}

// sharedGrantCap caps the grant of a connection receiving from a shared
// pool.
const sharedGrantCap = 32

// reviewPeriod is how often, at most, a shared pool's connection's grant
// is reviewed: lowered to the most calls it had unanswered at once in
// that time.
const reviewPeriod = time.Second

// reclaimDelay is how long the receives of a lowered grant stay promised
// to its connection: time for the requester to have the reply that lowered
// it, so that calls it sent under the larger grant are not taken for
// overruns.
const reclaimDelay = time.Second

// requesterRecvs returns the receives a requester asking for credits
// posts: one per call it may have in flight, one spare, and one per
// backward call it grants, back (RFC 8167, "Client Receive Buffers").
func requesterRecvs(credits uint32, back int) int { return int(credits) + 1 + back }

// responderRecvs returns the receives a responder whose largest grant is
// grantMax posts: one per credit, two for messages outside the credit
// count (RDMA_DONE, a stray error), and one per backward call it may
// have outstanding, back (RFC 8167, "Server Receive Buffers"). With a
// shared pool the grant is capped at sharedGrantCap: what is in flight
// on a connection is bounded by queues sized at setup, which an idle
// connection should not pay for in full.
func responderRecvs(grantMax uint32, back int, shared bool) int {
	if shared {
		grantMax = min(grantMax, sharedGrantCap)
	}
	return int(grantMax) + 2 + back
}

// sharedFirstGrant is the grant a connection receiving from a shared
// pool starts with, promised by the pool when it is accepted.
const sharedFirstGrant = 1

// callCapacity returns the most calls a requester that asked for asked
// credits has in flight, given the receives it posted, recvs, of which
// one is spare and back are for backward calls: the largest grant it
// takes.
func callCapacity(asked uint32, recvs, back int) uint32 {
	return min(max(asked, 1), uint32(max(recvs-1-back, 1)))
}

// fixedGrant returns the grant of a responder without a shared pool: the
// policy's largest, never more than the receives posted, recvs, less two
// for messages outside the credit count and back for backward calls.
func fixedGrant(p GrantPolicy, recvs, back int) uint32 {
	return min(p.Grant(), uint32(max(recvs-2-back, 1)))
}

// grantState is the grant a responder offers in every reply and, with a
// shared pool, what moves it (RFC 8166 Section 3.3.1 lets a responder
// adjust it either way): the most calls unanswered at once since the
// last review, when that was, a larger grant it was lowered from that the
// requester may still act on (0: none), and when it was last lowered.
// cur may be read by anyone; the rest, and every change of cur, belong to
// whoever holds the responder's mu.
type grantState struct {
	cur      atomic.Uint32
	peak     int
	reviewed time.Time
	ceiling  uint32
	lowered  time.Time
}

// start sets the grant a responder offers first, once it has posted
// recvs receives, back of them for the backward direction: with a shared
// pool sharedFirstGrant, else fixedGrant.
func (g *grantState) start(p *GrantPolicy, recvs, back int, shared bool) {
	if shared {
		g.cur.Store(sharedFirstGrant)
		return
	}
	g.cur.Store(fixedGrant(*p, recvs, back))
}

// load returns the grant in force.
func (g *grantState) load() uint32 { return g.cur.Load() }

// busy records that npending calls are unanswered, for the next review.
func (g *grantState) busy(npending int) { g.peak = max(g.peak, npending) }

// raiseTo returns the grant to raise g to, and true, when a call
// received leaves npending calls unanswered, keeping the whole grant
// busy, and its requester asked for requested credits, more than it has:
// the grant doubles, up to requested, the policy p's largest and
// sharedGrantCap (only a shared pool's grant is ever raised). The caller
// raises it (cur.Store) once it has the receives for it.
func (g *grantState) raiseTo(npending int, requested uint32, p *GrantPolicy) (uint32, bool) {
	cur := g.cur.Load()
	if npending < int(cur) || requested <= cur {
		return 0, false
	}
	limit := min(p.Grant(), requested, sharedGrantCap)
	if cur >= limit {
		return 0, false
	}
	return cur + min(cur, limit-cur), true
}

// review returns the grant a reply carries that leaves npending calls
// unanswered: g's, or, when none is unanswered and reviewPeriod has
// passed since the last review (the first review period starts with the
// first reply), the most calls unanswered at once since then, never
// below one, to which g is lowered. It reports whether it lowered g;
// the receives of the larger grant then stay promised for reclaimDelay
// (settle). now is called only when the review may be due.
func (g *grantState) review(npending int, now func() time.Time) (uint32, bool) {
	cur := g.cur.Load()
	if npending > 0 {
		return cur, false
	}
	t := now()
	if g.reviewed.IsZero() {
		g.reviewed = t
	}
	if t.Sub(g.reviewed) < reviewPeriod {
		return cur, false
	}
	used := uint32(max(g.peak, 1))
	g.peak, g.reviewed = 0, t
	if used >= cur {
		return cur, false
	}
	g.ceiling = max(g.ceiling, cur)
	g.lowered = t
	g.cur.Store(used)
	return used, true
}

// settle returns how much longer the receives of a lowered grant must
// stay promised, reclaimDelay after it was last lowered; at zero the
// requester has had time to see the lower grant, and the ceiling is
// forgotten.
func (g *grantState) settle(now time.Time) time.Duration {
	if d := now.Sub(g.lowered); d < reclaimDelay {
		return reclaimDelay - d
	}
	g.ceiling = 0
	return 0
}

// bound returns the largest grant the requester may be acting on: the
// grant, or a larger one it may not yet have seen lowered.
func (g *grantState) bound() uint32 { return max(g.cur.Load(), g.ceiling) }

// mostUnanswered returns how many calls unanswered at once mean that the
// requester ignores its credits. Without a shared pool, that is as many
// as the receives posted for calls, recvs less back for the backward
// direction's, more than any grant allows. A shared pool's receives are
// shared, so it is the grant the requester may be acting on (bound) and
// two messages outside the credit count.
func (g *grantState) mostUnanswered(shared bool, recvs, back int) int {
	if shared {
		return int(g.bound()) + 2
	}
	return recvs - back
}
