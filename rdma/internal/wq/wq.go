// Package wq holds a software queue pair's work queues for the providers
// in this module: the send queue, the receive queue and the completion
// queue, and the rules that tie them together, which every provider
// follows the same way (rdma.Conn's documentation): a work request
// occupies its queue slot from Post until Poll or Wait has returned its
// completion, so the completion queue, sized for both queues, never
// overflows; send-queue completions keep posting order even when later
// work finishes first; flushing at the end completes everything
// outstanding. The provider's lock guards a Queues.
package wq

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
)

// Ring is a fixed-capacity FIFO addressed by absolute sequence numbers: the
// element pushed n-th has sequence n and stays in the same slot until
// popped, so other queues may refer to it by sequence. Slots are reused
// without being cleared, which keeps their slices' backing arrays and so
// keeps posting free of allocations once every slot has been used.
type Ring[T any] struct {
	Buf        []T
	Head, Tail uint64 // sequence of the oldest element; of the next push
}

// NewRing returns a ring of n slots (at least one).
func NewRing[T any](n int) Ring[T] { return Ring[T]{Buf: make([]T, max(n, 1))} }

// Len returns how many elements the ring holds.
func (r *Ring[T]) Len() int { return int(r.Tail - r.Head) }

// Full reports whether every slot is taken.
func (r *Ring[T]) Full() bool { return r.Len() == len(r.Buf) }

// At returns the element with sequence seq, which must be in the ring.
func (r *Ring[T]) At(seq uint64) *T { return &r.Buf[seq%uint64(len(r.Buf))] }

// Push appends a slot and returns it for the caller to fill. The caller has
// checked that the ring is not full: queue depths are enforced before.
func (r *Ring[T]) Push() *T {
	if r.Full() {
		panic("wq: ring overflow")
	}
	r.Tail++
	return r.At(r.Tail - 1)
}

// Front returns the oldest element; the ring must not be empty.
func (r *Ring[T]) Front() *T { return r.At(r.Head) }

// Pop drops the oldest element.
func (r *Ring[T]) Pop() { r.Head++ }

// Clear empties the ring.
func (r *Ring[T]) Clear() { r.Head = r.Tail }

// SendWR is a send-queue slot: the work request as posted and, once
// finished, its outcome.
type SendWR struct {
	ID         uint64
	Op         rdma.Op
	SGL        []rdma.SGE
	Length     int
	RemoteSTag rdma.STag
	RemoteTO   uint64
	Invalidate rdma.STag
	MSN        uint32 // for the provider: the MSN its Send or Read Request went with

	Done   bool
	Status rdma.Status
	N      int
}

// RecvWR is a receive-queue slot.
type RecvWR struct {
	ID     uint64
	SGL    []rdma.SGE
	Length int
}

// Queues are one connection's work queues.
type Queues struct {
	SQ Ring[SendWR]
	RQ Ring[RecvWR]
	CQ Ring[rdma.Completion]

	SQUsed int // send-queue work posted and whose completion has not been polled
	RQUsed int // receives posted and not polled
	Reads  int // RDMA Reads posted and not polled, for the ORD

	// Ready has a token when completions may be waiting: Push sets it,
	// and Poll passes it on while any are left.
	Ready chan struct{}

	// interrupted is set by Interrupt and consumed by the Wait it makes
	// return (rdma.WaitInterrupter). A pointer, so that Queues, which
	// New returns by value, holds no lock-like value.
	interrupted *atomic.Bool
}

// Interrupt makes the Wait in progress, or else the next one, return (0,
// nil) unless completions are available (rdma.WaitInterrupter). It does
// not take the provider's lock and does not allocate.
func (q *Queues) Interrupt() {
	q.interrupted.Store(true)
	Signal(q.Ready)
}

// New returns queues of sq and rq slots and a completion queue for both.
// Every slot's scatter/gather list starts with some capacity
// (memreg.PresizeSGLs).
func New(sq, rq int) Queues {
	q := Queues{
		SQ:    NewRing[SendWR](sq),
		RQ:    NewRing[RecvWR](rq),
		CQ:    NewRing[rdma.Completion](sq + rq),
		Ready: make(chan struct{}, 1),

		interrupted: new(atomic.Bool),
	}
	memreg.PresizeSGLs(q.SQ.Buf, func(w *SendWR) *[]rdma.SGE { return &w.SGL })
	memreg.PresizeSGLs(q.RQ.Buf, func(r *RecvWR) *[]rdma.SGE { return &r.SGL })
	return q
}

// SGLChecker checks a local scatter/gather list against the access it
// needs and returns how many bytes it names (the providers' checkSGL, over
// memreg.CheckSGL).
type SGLChecker func(sgl []rdma.SGE, need rdma.Access) (int, error)

// CheckedPostSend is the front end of a provider's PostSend: it checks wr
// (a send-queue opcode, a free entry of the sqDepth, an ORD slot for an
// RDMA Read, a local list that check accepts naming at most maxMsg bytes)
// and queues it. Its errors start with name ("iwarp", "loopback") and wrap
// rdma.ErrInvalid or rdma.ErrQueueFull. The caller holds the lock that
// guards q and has checked that the connection is alive.
func (q *Queues) CheckedPostSend(name string, wr *rdma.WorkRequest, sqDepth, ord, maxMsg int, check SGLChecker) error {
	if !wr.Op.IsSend() && wr.Op != rdma.OpWrite && wr.Op != rdma.OpRead {
		return fmt.Errorf("%s: post send %d: op %v: %w", name, wr.ID, wr.Op, rdma.ErrInvalid)
	}
	if q.SQUsed == sqDepth {
		return fmt.Errorf("%s: post %v %d: %d work requests outstanding: %w", name, wr.Op, wr.ID, q.SQUsed, rdma.ErrQueueFull)
	}
	if wr.Op == rdma.OpRead && q.Reads >= ord {
		return fmt.Errorf("%s: post %v %d: %d reads outstanding, ORD %d: %w", name, wr.Op, wr.ID, q.Reads, ord, rdma.ErrQueueFull)
	}
	var need rdma.Access
	if wr.Op == rdma.OpRead {
		need = rdma.AccessLocalWrite
	}
	n, err := check(wr.Local, need)
	if err != nil {
		return fmt.Errorf("%s: post %v %d: %v: %w", name, wr.Op, wr.ID, err, rdma.ErrInvalid)
	}
	if n > maxMsg {
		return fmt.Errorf("%s: post %v %d: %d bytes, more than %d: %w", name, wr.Op, wr.ID, n, maxMsg, rdma.ErrInvalid)
	}
	q.PostSend(wr, n)
	return nil
}

// CheckedPostRecv is the front end of a provider's PostRecv: it checks
// that a receive-queue entry of the rqDepth is free and that check accepts
// sgl for local writes, and queues the receive. Errors are as for
// CheckedPostSend.
func (q *Queues) CheckedPostRecv(name string, id uint64, sgl []rdma.SGE, rqDepth int, check SGLChecker) error {
	if q.RQUsed == rqDepth {
		return fmt.Errorf("%s: post recv %d: %d receives outstanding: %w", name, id, q.RQUsed, rdma.ErrQueueFull)
	}
	n, err := check(sgl, rdma.AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("%s: post recv %d: %v: %w", name, id, err, rdma.ErrInvalid)
	}
	q.PostRecv(id, sgl, n)
	return nil
}

// PostSend queues wr, whose SGL the provider has checked and found to
// hold length bytes. The caller has checked the queue depth and the ORD.
func (q *Queues) PostSend(wr *rdma.WorkRequest, length int) {
	w := q.SQ.Push()
	*w = SendWR{
		ID:         wr.ID,
		Op:         wr.Op,
		SGL:        append(w.SGL[:0], wr.Local...),
		Length:     length,
		RemoteSTag: wr.RemoteSTag,
		RemoteTO:   wr.RemoteTO,
		Invalidate: wr.InvalidateSTag,
	}
	q.SQUsed++
	if wr.Op == rdma.OpRead {
		q.Reads++
	}
}

// PostRecv queues a receive of length bytes into sgl, which the provider
// has checked. The caller has checked the queue depth.
func (q *Queues) PostRecv(id uint64, sgl []rdma.SGE, length int) {
	r := q.RQ.Push()
	r.ID, r.SGL, r.Length = id, append(r.SGL[:0], sgl...), length
	q.RQUsed++
}

// Signal puts a token in ch, if it has none.
func Signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Push adds a completion.
func (q *Queues) Push(comp rdma.Completion) {
	*q.CQ.Push() = comp
	Signal(q.Ready)
}

// Finish records the outcome of the send-queue work request seq and moves
// every finished one at the head of the send queue to the completion
// queue, so completions keep posting order.
func (q *Queues) Finish(seq uint64, st rdma.Status, n int) {
	w := q.SQ.At(seq)
	w.Done, w.Status, w.N = true, st, n
	if st != rdma.StatusSuccess {
		w.N = 0
	}
	q.DrainSQ()
}

// DrainSQ moves the finished work requests at the head of the send queue
// to the completion queue.
func (q *Queues) DrainSQ() {
	for q.SQ.Len() > 0 && q.SQ.Front().Done {
		w := q.SQ.Front()
		q.Push(rdma.Completion{ID: w.ID, Op: w.Op, Status: w.Status, Len: w.N})
		q.SQ.Pop()
	}
}

// CompleteRecv completes the receive at the head of the receive queue
// with comp's status, length and invalidation.
func (q *Queues) CompleteRecv(comp rdma.Completion) {
	r := q.RQ.Front()
	comp.ID, comp.Op = r.ID, rdma.OpRecv
	if comp.Status != rdma.StatusSuccess {
		comp.Len = 0
	}
	q.RQ.Pop()
	q.Push(comp)
}

// Flush completes everything outstanding with StatusFlushed: send-queue
// work not finished yet (after what finished before it, in order), then
// every posted receive. The provider calls it when the connection ends,
// after marking it dead; it signals Ready even with nothing to flush, so
// that a Wait hears of the end.
func (q *Queues) Flush() {
	defer Signal(q.Ready)
	for seq := q.SQ.Head; seq < q.SQ.Tail; seq++ {
		if w := q.SQ.At(seq); !w.Done {
			w.Done, w.Status, w.N = true, rdma.StatusFlushed, 0
		}
	}
	q.DrainSQ()
	for q.RQ.Len() > 0 {
		q.CompleteRecv(rdma.Completion{Status: rdma.StatusFlushed})
	}
}

// Poll copies up to len(cs) completions into cs, frees their queue slots
// and returns how many it copied.
func (q *Queues) Poll(cs []rdma.Completion) int {
	n := 0
	for ; n < len(cs) && q.CQ.Len() > 0; n++ {
		cs[n] = *q.CQ.Front()
		q.CQ.Pop()
		switch cs[n].Op {
		case rdma.OpRecv:
			q.RQUsed--
		case rdma.OpRead:
			q.Reads--
			q.SQUsed--
		default:
			q.SQUsed--
		}
	}
	if q.CQ.Len() > 0 {
		Signal(q.Ready) // for another waiter
	}
	return n
}

// TakeInterrupt consumes a pending Interrupt and reports whether there
// was one: a Wait of the provider's own that does not go through Wait
// takes its interrupts here.
func (q *Queues) TakeInterrupt() bool { return q.interrupted.CompareAndSwap(true, false) }

// Wait is rdma.Conn.Wait for a provider: poll, under the provider's lock,
// moves completions into its caller's slice and says whether the
// connection has ended and why; Wait blocks between polls on q.Ready, done
// (closed when the connection ends) and ctx. With nothing to return it
// returns (0, nil) once Interrupt has been called.
func (q *Queues) Wait(ctx context.Context, done <-chan struct{}, poll func() (n int, dead bool, err error)) (int, error) {
	for {
		n, dead, err := poll()
		switch {
		case n > 0:
			return n, nil
		case dead:
			Signal(q.Ready) // for another waiter: it ended for all
			return 0, err
		case q.interrupted.CompareAndSwap(true, false):
			// Interrupt stores the flag before it signals Ready, so
			// an interrupt that comes after this check wakes the
			// wait below.
			return 0, nil
		}
		if ctx.Done() == nil {
			// Flush signals Ready at the end, so with no ctx to watch
			// Ready is all there is to wait on; a receive on one
			// channel costs less than a select on two.
			<-q.Ready
			continue
		}
		select {
		case <-q.Ready:
		case <-done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
