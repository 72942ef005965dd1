package rpcrdma

// A Listener's shared receive pool (Bounds.SharedReceives): one shared
// receive queue of the provider (rdma.SharedRecvQueue) that every
// connection the Listener accepts receives from, instead of receives of
// its own, and one goroutine, the dispatcher, that takes each completed
// receive, hands its message to the connection it arrived on (handleRecv,
// as that connection's loop would) and posts the buffer again.
//
// Credits come from the pool (RFC 8166 Section 3.3.1): a connection is
// promised one credit when it is accepted, and a request that would
// promise more receives than the pool holds, less a spare for messages
// outside the credit count (RDMA_DONE, RDMA_ERROR), is refused
// (LimitReceives). While a connection's calls keep its whole grant busy
// and its requester asks for more credits than it has, its grant doubles,
// up to Grant.Max, what the requester asks for and 32, as long as the pool
// has receives not promised to another connection; so the grant is never 0 and never
// more than can be received. RFC 8166 Section 3.3.1 lets the grant be
// adjusted down as well as up: a reply that leaves a connection with no
// call unanswered, reviewPeriod or more after the last review, lowers its
// grant to the most calls the connection had unanswered at once since
// then, and never below one. A connection that makes a call
// now and then so comes down to one credit, while one whose calls keep
// several in flight keeps them, though its calls may all be answered for
// a moment now and then. The requester may have sent calls under the
// larger grant before it sees the reply, so those receives stay promised
// for reclaimDelay; then they return to the pool (reclaimCredits), as
// all a connection was promised does when it closes. When the grant
// moves, and how far, is decided in credits.go (grantState); here, only
// whether the pool has the receives (raiseGrant) and when they go back
// (replyGrant, reclaimCredits).
//
// The pool outlives the Listener's Close while connections it accepted
// are open: it is closed with the last of them. The call that closes it,
// the Listener's Close or the last connection's, waits for the
// dispatcher to exit, except while the dispatcher is handing a message
// to a connection: that close may then be running on the dispatcher, or
// be one the message's handling waits for (Conn.fail's once), and the
// dispatcher exits by itself when the message is handled.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// errPoolFull is why a request is refused when the pool has no receive
// left to promise.
var errPoolFull = errors.New("rpcrdma: the shared receive pool has no receive left to promise")

type sharedPool struct {
	l     *Listener
	q     rdma.SharedRecvQueue
	mr    rdma.MR
	size  int // bytes per receive
	depth int // receives in the pool
	spare int // receives never promised: messages outside the credit count
	sges  [][1]rdma.SGE
	done  chan struct{} // closed when the dispatcher exits
	// handing is set, under mu, when the dispatcher takes a connection
	// from byRC to hand it a message, and cleared once it has.
	handing atomic.Bool

	mu       sync.Mutex
	byRC     map[rdma.Conn]*Conn
	allotted int  // receives promised to connections
	closing  bool // the Listener is closed: close the pool with its last connection
	closed   bool
}

// newSharedPool creates the pool of a Listener over p and starts its
// dispatcher.
func newSharedPool(l *Listener, p rdma.Provider) (*sharedPool, error) {
	sp, ok := p.(rdma.SharedRecvProvider)
	if !ok {
		return nil, fmt.Errorf("rpcrdma: Config.Bounds.SharedReceives is set, but provider %T has no shared receive queues", p)
	}
	q, err := sp.NewSharedRecvQueue(rdma.SharedRecvConfig{Depth: l.cfg.Bounds.SharedReceives})
	if err != nil {
		return nil, fmt.Errorf("rpcrdma: creating the shared receive pool: %w", err)
	}
	pool := &sharedPool{
		l:     l,
		q:     q,
		size:  l.cfg.inlineRecv(),
		depth: q.Depth(),
		byRC:  make(map[rdma.Conn]*Conn),
		done:  make(chan struct{}),
	}
	pool.spare = min(max(2, pool.depth/16), 64)
	if pool.mr, err = q.Alloc(pool.depth * pool.size); err != nil {
		q.Close()
		return nil, fmt.Errorf("rpcrdma: allocating the shared receive pool: %w", err)
	}
	pool.sges = make([][1]rdma.SGE, pool.depth)
	for i := range pool.depth {
		if err := pool.post(i); err != nil {
			q.Close()
			return nil, err
		}
	}
	l.registered.Add(int64(pool.depth * pool.size))
	go pool.dispatch()
	return pool, nil
}

// post posts receive slot i.
func (p *sharedPool) post(i int) error {
	sgl := p.sges[i][:]
	sgl[0] = rdma.SGE{MR: p.mr, Offset: i * p.size, Length: p.size}
	if err := p.q.PostRecv(uint64(i), sgl); err != nil {
		return fmt.Errorf("rpcrdma: posting shared receive %d: %w", i, err)
	}
	return nil
}

// dispatch hands every completed receive to its connection and posts it
// again, until the pool is closed.
func (p *sharedPool) dispatch() {
	defer close(p.done)
	cs := make([]rdma.Completion, 64)
	for {
		n, err := p.q.Wait(context.Background(), cs)
		for _, comp := range cs[:n] {
			p.onCompletion(comp)
		}
		if err != nil {
			return
		}
	}
}

func (p *sharedPool) onCompletion(comp rdma.Completion) {
	if comp.Conn == nil {
		return // flushed by the pool's Close
	}
	slot := int(comp.ID)
	if comp.Status == rdma.StatusSuccess {
		p.mu.Lock()
		c := p.byRC[comp.Conn]
		p.handing.Store(c != nil)
		p.mu.Unlock()
		// A connection that has ended takes no more messages: its loop
		// has delivered its last.
		if c != nil && c.Err() == nil {
			c.handleRecv(comp, p.mr.Bytes()[slot*p.size:][:comp.Len])
		}
		p.handing.Store(false)
	}
	if err := p.post(slot); err != nil {
		p.l.log.Debug("rpcrdma: shared receive not reposted", "slot", slot, "err", err)
	}
}

// allot promises n more receives, if the pool has them.
func (p *sharedPool) allot(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.allotted+n > p.depth-p.spare {
		return false
	}
	p.allotted += n
	return true
}

// attach records c, whose rdma.Conn is rc, as receiving from the pool.
func (p *sharedPool) attach(rc rdma.Conn, c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byRC[rc] = c
}

// detach forgets the connection on rc, closed now, and takes back the n
// receives promised to it; the last connection of a closed Listener
// closes the pool.
func (p *sharedPool) detach(rc rdma.Conn, n int64) {
	p.mu.Lock()
	if rc != nil {
		delete(p.byRC, rc)
	}
	p.allotted -= int(n)
	wait := p.closeIfDoneLocked()
	p.mu.Unlock()
	if wait {
		<-p.done
	}
}

// listenerClosed closes the pool now if no connection uses it, else with
// the last.
func (p *sharedPool) listenerClosed() {
	p.mu.Lock()
	p.closing = true
	wait := p.closeIfDoneLocked()
	p.mu.Unlock()
	if wait {
		<-p.done
	}
}

// closeIfDoneLocked closes the pool once the Listener is closed and no
// connection uses it. It returns whether the caller is to wait for the
// dispatcher (p.done) once it has let go of p.mu: when it closed the
// pool and the dispatcher is not handing a message to a connection,
// which, with byRC empty, it will not do again.
func (p *sharedPool) closeIfDoneLocked() bool {
	if !p.closing || p.closed || len(p.byRC) > 0 {
		return false
	}
	if err := p.q.Close(); err != nil {
		// A connection still being accepted is attached at the
		// provider; its detach closes the pool.
		return false
	}
	p.closed = true
	p.l.registered.Add(-int64(p.depth * p.size))
	return !p.handing.Load()
}

// raiseGrant raises the grant of r, receiving from its Listener's pool,
// to want (grantState.raiseTo), if the pool can promise the receives
// beyond those it has promised r's connection already. r.mu is held.
func (r *responder) raiseGrant(want uint32) {
	c := r.c
	if !c.shared() {
		return
	}
	// A grant lowered recently may still hold the receives.
	promised := uint32(max(r.allot.Load()-int64(c.cfg.BackwardCredits), 0))
	if want > promised {
		if !c.ln.pool.allot(int(want - promised)) {
			return
		}
		r.allot.Add(int64(want - promised))
	}
	r.grant.cur.Store(want)
}

// replyGrant returns the grant a reply of r carries, lowering it, with a
// shared pool, when the reply leaves no call unanswered and reviewPeriod
// has passed since the last review (grantState.review), and then arming
// the reclaim of the receives it no longer needs. The caller has taken
// the reply's call out of r.pending.
func (r *responder) replyGrant() uint32 {
	if !r.c.shared() {
		return r.grant.load()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	used, lowered := r.grant.review(r.npending, time.Now)
	if !lowered {
		return used
	}
	if r.reclaim == nil {
		r.reclaim = r.c.afterFunc(reclaimDelay, r.reclaimCredits)
	} else {
		r.c.resetTimer(r.reclaim, reclaimDelay)
	}
	return used
}

// reclaimCredits gives the pool back the receives promised to r's
// connection beyond its grant, reclaimDelay after the grant was lowered.
func (r *responder) reclaimCredits() {
	c := r.c
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.grant.settle(time.Now()); d > 0 {
		// Lowered again as this timer fired, too late for the
		// reset to stop it: the receives stay reclaimDelay after that.
		c.resetTimer(r.reclaim, d)
		return
	}
	keep := int64(r.grant.load()) + int64(c.cfg.BackwardCredits)
	if extra := r.allot.Load() - keep; extra > 0 {
		r.allot.Add(-extra)
		c.ln.pool.detach(nil, extra)
	}
}
