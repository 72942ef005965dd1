// Package srq is the shared receive queue of the software providers in
// this module, as package rdma documents it: receives posted once and
// consumed by whichever attached connection a Send arrives on, one
// completion per receive naming that connection, and the limit event.
//
// A Queue has its own mutex. A provider's connection takes a receive
// (Take) when the first segment of a Send arrives, holds it while the
// message is placed, and completes it (Complete) with the outcome, under
// its own lock: the lock order is the connection's lock, then the Queue's.
// The Queue never calls into a connection.
//
// The Queue's memory is registered in the provider's STag table with the
// Queue as owner, so no connection's checks accept it for remote access,
// and it has only AccessLocalWrite, so no peer can reach it at all.
package srq

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/wq"
)

// Config is what a provider fixes for its queues.
type Config struct {
	Name     string        // the provider's name in errors ("iwarp")
	Provider any           // the provider; connections check they share it
	STags    *memreg.Table // the provider's STag table
	MaxSGE   int           // most SGEs in one receive
	Depth    int           // depth in force (the caller applied default and maximum)
}

// Queue implements rdma.SharedRecvQueue.
type Queue struct {
	cfg   Config
	low   chan struct{} // the limit event; capacity 1
	ready chan struct{} // a token when completions may be waiting; capacity 1
	done  chan struct{} // closed by Close

	mu       sync.Mutex
	closed   bool
	rq       wq.Ring[wq.RecvWR]       // posted, not yet taken
	cq       wq.Ring[rdma.Completion] // completed, not yet polled
	used     int                      // posted and not polled
	limit    int                      // armed limit; 0 when disarmed
	attached int                      // connections attached and not closed
	regs     memreg.Domain            // the regions of Alloc
}

var _ rdma.SharedRecvQueue = (*Queue)(nil)

// New returns an empty queue.
func New(cfg Config) *Queue {
	q := &Queue{
		cfg:   cfg,
		low:   make(chan struct{}, 1),
		ready: make(chan struct{}, 1),
		done:  make(chan struct{}),
		rq:    wq.NewRing[wq.RecvWR](cfg.Depth),
		cq:    wq.NewRing[rdma.Completion](cfg.Depth),
	}
	q.regs = memreg.NewDomain(memreg.DomainConfig{Name: cfg.Name + ": shared receive queue", Table: cfg.STags, Mu: &q.mu,
		Dead: func() error {
			if q.closed {
				return rdma.ErrClosed
			}
			return nil
		},
		NewMR: func(b []byte) (rdma.MR, *memreg.Region) {
			m := &MR{Region: memreg.Region{Owner: q, Buf: b}, q: q}
			return m, &m.Region
		}})
	memreg.PresizeSGLs(q.rq.Buf, func(r *wq.RecvWR) *[]rdma.SGE { return &r.SGL })
	return q
}

// Depth returns the depth cfg asks for after def and max, as providers
// apply it.
func Depth(cfg rdma.SharedRecvConfig, def, max int) (int, error) {
	switch {
	case cfg.Depth < 0:
		return 0, fmt.Errorf("shared receive queue depth %d is negative: %w", cfg.Depth, rdma.ErrInvalid)
	case cfg.Depth == 0:
		return def, nil
	}
	return min(cfg.Depth, max), nil
}

// Of returns the Queue that cfg.SharedRecv names, nil if none, or an
// error matching ErrInvalid if it is not one of provider's.
func Of(cfg rdma.ConnConfig, provider any) (*Queue, error) {
	if cfg.SharedRecv == nil {
		return nil, nil
	}
	q, ok := cfg.SharedRecv.(*Queue)
	if !ok || q.cfg.Provider != provider {
		return nil, fmt.Errorf("shared receive queue %T is not this provider's: %w", cfg.SharedRecv, rdma.ErrInvalid)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, fmt.Errorf("shared receive queue closed: %w", rdma.ErrInvalid)
	}
	return q, nil
}

// Depths returns the queue depths cfg asks for after def and max
// (rdma.ConnConfig.Depths) and the Queue it names (Of), which must be
// provider's. A connection with a Queue has no receive queue of its own:
// its RecvQueue is 0.
func Depths(cfg rdma.ConnConfig, def, max rdma.Depths, provider any) (rdma.Depths, *Queue, error) {
	d, err := cfg.Depths(def, max)
	if err != nil {
		return rdma.Depths{}, nil, err
	}
	q, err := Of(cfg, provider)
	if err != nil {
		return rdma.Depths{}, nil, err
	}
	if q != nil {
		d.RecvQueue = 0
	}
	return d, q, nil
}

func (q *Queue) String() string { return q.cfg.Name + " shared receive queue" }

func (q *Queue) errf(format string, args ...any) error {
	return fmt.Errorf(q.cfg.Name+": shared receive queue: "+format, args...)
}

// Depth returns the queue's depth.
func (q *Queue) Depth() int { return q.cfg.Depth }

// Posted returns how many receives are posted and not taken.
func (q *Queue) Posted() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rq.Len()
}

// LimitReached returns the limit event's channel.
func (q *Queue) LimitReached() <-chan struct{} { return q.low }

// ArmLimit arms the limit event.
func (q *Queue) ArmLimit(limit int) error {
	if limit < 0 || limit > q.cfg.Depth {
		return q.errf("limit %d outside [0, %d]: %w", limit, q.cfg.Depth, rdma.ErrInvalid)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limit = limit
	q.checkLimitLocked()
	return nil
}

// checkLimitLocked delivers the limit event if it is armed and reached.
func (q *Queue) checkLimitLocked() {
	if q.limit > 0 && q.rq.Len() < q.limit {
		q.limit = 0
		wq.Signal(q.low)
	}
}

// Alloc returns size bytes of local-write memory owned by q.
func (q *Queue) Alloc(size int) (rdma.MR, error) {
	return q.regs.Alloc(size, rdma.AccessLocalWrite)
}

// PostRecv posts a receive.
func (q *Queue) PostRecv(id uint64, sgl []rdma.SGE) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return q.errf("post recv %d: %w", id, rdma.ErrClosed)
	}
	if q.used == q.cfg.Depth {
		return q.errf("post recv %d: %d receives outstanding: %w", id, q.used, rdma.ErrQueueFull)
	}
	n, err := q.CheckSGL(sgl)
	if err != nil {
		return q.errf("post recv %d: %v: %w", id, err, rdma.ErrInvalid)
	}
	r := q.rq.Push()
	r.ID, r.SGL, r.Length = id, append(r.SGL[:0], sgl...), n
	q.used++
	return nil
}

// CheckSGL checks a scatter/gather list of q's memory for a receive and
// returns its length. A connection calls it (through its own checks) when
// it starts placing a Send into a receive it took.
func (q *Queue) CheckSGL(sgl []rdma.SGE) (int, error) {
	return memreg.CheckSGL(q, sgl, rdma.AccessLocalWrite, q.cfg.MaxSGE)
}

// Attach records a connection attached to q. A connection attached to a
// queue closed since Of returned it finds no receive: its first Send ends
// it.
func (q *Queue) Attach() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.attached++
}

// Detach records that an attached connection was closed; the provider
// calls it once per Attach, from the connection's Close.
func (q *Queue) Detach() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.attached--
}

// Take moves the oldest posted receive into r (reusing r.SGL's array) and
// reports whether there was one. The caller completes it with Complete.
func (q *Queue) Take(r *wq.RecvWR) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rq.Len() == 0 {
		return false
	}
	f := q.rq.Front()
	r.ID, r.SGL, r.Length = f.ID, append(r.SGL[:0], f.SGL...), f.Length
	q.rq.Pop()
	q.checkLimitLocked()
	return true
}

// Complete completes the receive id that c took, with comp's status,
// length and invalidation.
func (q *Queue) Complete(c rdma.Conn, id uint64, comp rdma.Completion) {
	comp.ID, comp.Op, comp.Conn = id, rdma.OpRecv, c
	if comp.Status != rdma.StatusSuccess {
		comp.Len = 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	*q.cq.Push() = comp
	wq.Signal(q.ready)
}

// Poll copies up to len(cs) completions into cs.
func (q *Queue) Poll(cs []rdma.Completion) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pollLocked(cs)
}

func (q *Queue) pollLocked(cs []rdma.Completion) int {
	n := 0
	for ; n < len(cs) && q.cq.Len() > 0; n++ {
		cs[n] = *q.cq.Front()
		*q.cq.Front() = rdma.Completion{} // drop the Conn reference
		q.cq.Pop()
		q.used--
	}
	if q.cq.Len() > 0 {
		wq.Signal(q.ready)
	}
	return n
}

// Wait blocks until completions are available, ctx is done or q is closed
// and drained.
func (q *Queue) Wait(ctx context.Context, cs []rdma.Completion) (int, error) {
	if len(cs) == 0 {
		return 0, q.errf("wait: empty completion slice: %w", rdma.ErrInvalid)
	}
	for {
		q.mu.Lock()
		n, closed := q.pollLocked(cs), q.closed
		q.mu.Unlock()
		switch {
		case n > 0:
			return n, nil
		case closed:
			wq.Signal(q.ready)
			return 0, q.errf("wait: %w", rdma.ErrClosed)
		}
		select {
		case <-q.ready:
		case <-q.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Close flushes the posted receives and releases q's memory, unless a
// connection is still attached.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	if q.attached > 0 {
		return q.errf("close: %d connections still attached: %w", q.attached, rdma.ErrInvalid)
	}
	q.closed = true
	for q.rq.Len() > 0 {
		*q.cq.Push() = rdma.Completion{ID: q.rq.Front().ID, Op: rdma.OpRecv, Status: rdma.StatusFlushed}
		q.rq.Pop()
	}
	q.regs.ReleaseAllLocked()
	close(q.done)
	wq.Signal(q.ready)
	return nil
}

// MR is a region of a Queue's memory; it implements rdma.MR.
type MR struct {
	memreg.Region // Owner is the *Queue; state stored under its mu
	q             *Queue
}

var _ rdma.MR = (*MR)(nil)

// Invalidate makes the region invalid: a receive naming it that a Send
// has not started to fill fails with StatusLocalProtection when one does,
// ending that connection.
func (m *MR) Invalidate() error {
	m.q.regs.Invalidate(&m.Region)
	return nil
}

// Reregister makes the region valid again with a new key. Only
// AccessLocalWrite is allowed: a queue's memory is never remotely
// accessible.
func (m *MR) Reregister(access rdma.Access) (rdma.STag, error) {
	if access != rdma.AccessLocalWrite {
		return 0, m.q.errf("reregister stag %v: access %v, only local-write: %w", m.STag(), access, rdma.ErrInvalid)
	}
	return m.q.regs.Reregister(&m.Region, access)
}

// Release deregisters the region. The memory is Go memory, which a
// connection still placing into it keeps alive; its owner must not use
// Bytes after Release.
func (m *MR) Release() error {
	m.q.regs.Release(&m.Region)
	return nil
}
