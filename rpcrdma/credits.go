package rpcrdma

import (
	"context"
	"errors"
	"sync"
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

// creditWindow is the requester's view: the grant and the calls in flight.
// Acquire blocks until a call may be sent. It is safe for concurrent use.
type creditWindow struct {
	mu       sync.Mutex
	max      uint32        // local capacity: most calls we will have in flight
	grant    uint32        // peer's grant, clamped to [1, max]
	inFlight uint32        // calls sent and not yet answered
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
// memory a requester can make it commit.
type GrantPolicy struct {
	// Max is the largest grant, and the receives posted per connection.
	// Zero means DefaultCredits.
	Max uint32
	// Echo grants what the requester asked for, clamped to [1, Max],
	// instead of always granting Max as Linux's server does.
	Echo bool
}

// DefaultCredits is the grant a responder offers by default, as Linux's
// svcrdma does since 6.x (svcrdma_max_requests = 128 in newer kernels).
const DefaultCredits = 128

// Grant returns the credits to grant a requester that asked for requested.
// It is never zero (RFC 8166 section 3.3.1).
func (p GrantPolicy) Grant(requested uint32) uint32 {
	limit := p.Max
	if limit == 0 {
		limit = DefaultCredits
	}
	if !p.Echo {
		return limit
	}
	return min(max(requested, 1), limit)
}
