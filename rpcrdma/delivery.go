package rpcrdma

import (
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// How received messages reach the rpc layer, the same for both roles and
// the one way there is. Whoever makes a message ready hands it over
// (delivery.hand): for a requester, whoever completes a call (the loop, a
// caller with the turn, a side goroutine after a pull or a failed
// resend); for a responder, the loop for a call that needs nothing more,
// a pull's completion for a call whose data chunks have been read, a side
// goroutine for a call that waited for memory or had its position-zero
// chunk pulled (responder_recv.go). Once rpc.Pusher's Push has been
// called (the rpc.Client and rpc.Server do), the message goes straight to
// the deliver function Push set, on the goroutine that made it ready, one
// at a time. Before Push it waits in a queue, which Push delivers first
// and which Recv, rpc.Transport's method for a caller that does not push,
// takes from. The error that ends the connection is handed over last
// (delivery.end), once the loop has handed over everything received
// before it; nothing is delivered after it.

// A delivered is one message for the rpc layer, or a *rpc.CallError
// failing one call.
type delivered struct {
	m   *rpc.Msg
	err error
}

// delivery is a Conn's way to the rpc layer.
type delivery struct {
	// mu guards what follows and serializes every call of to.
	mu    sync.Mutex
	to    func(*rpc.Msg, error) bool // set by Push; nil before, and once it has had the end
	queue fifo[delivered]            // before Push: for Recv, and for Push to deliver first
	ended bool                       // end has run: nothing more is taken
	err   error                      // the connection's end, once ended
	// wake holds a token for Recv once the queue has gained a message or
	// the end has come; a Recv that finds the end puts it back, for the
	// next.
	wake chan struct{}
}

// init sizes the queue: limit messages at most wait for Recv or Push. The
// peer can have no more in flight than the receives posted, so a full
// queue means neither Recv nor Push is being called.
func (d *delivery) init(limit int) {
	d.queue.size = limit
	d.wake = make(chan struct{}, 1)
}

// hand gives the rpc layer m, or err (a *rpc.CallError): to Push's
// deliver function on the calling goroutine, which must be one that may
// run the rpc layer's delivery (it does not block), or into the queue.
// It reports false, having taken nothing, once the end has been handed
// over or when the queue is full (full is then true): the caller then
// gives m back.
func (d *delivery) hand(m *rpc.Msg, err error) (ok, full bool) {
	d.mu.Lock()
	if d.to != nil {
		d.to(m, err)
		d.mu.Unlock()
		return true, false
	}
	switch {
	case d.ended:
	case !d.queue.put(delivered{m, err}):
		full = true
	default:
		ok = true
		d.signal()
	}
	d.mu.Unlock()
	return ok, full
}

// signal leaves Recv a token, if it has none.
func (d *delivery) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// push is Conn.Push: what is queued goes to deliver first, then, on the
// goroutines that make them ready, every message after, and the end.
func (d *delivery) push(deliver func(*rpc.Msg, error) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		q, ok := d.queue.get()
		if !ok {
			break
		}
		deliver(q.m, q.err)
	}
	if d.ended {
		deliver(nil, d.err)
		return
	}
	d.to = deliver
}

// pushing reports whether Push has been called and the end has not been
// handed over.
func (d *delivery) pushing() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.to != nil
}

// end hands over err, the connection's end: to Push's deliver function if
// it has been called, else to Recv once the queue is empty. The loop calls
// it as it returns, once it has handed over every message received
// before the end.
func (d *delivery) end(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ended, d.err = true, err
	if d.to != nil {
		d.to(nil, err)
		d.to = nil
	}
	d.signal()
}

// recv is Conn.Recv: the oldest message queued, or, once the queue is
// empty and the end has come, the connection's error. Messages received
// before the end come first.
func (d *delivery) recv() (*rpc.Msg, error) {
	for {
		d.mu.Lock()
		q, ok := d.queue.get()
		ended, err := d.ended, d.err
		d.mu.Unlock()
		if ok {
			return q.m, q.err
		}
		if ended {
			d.signal() // for the next Recv
			return nil, err
		}
		<-d.wake
	}
}

// release gives back what is still queued once the end has come and
// Close has been called: nothing will take it.
func (d *delivery) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.ended {
		return
	}
	for {
		q, ok := d.queue.get()
		if !ok {
			return
		}
		if q.m != nil && q.m.Release != nil {
			q.m.Release()
		}
	}
}

// fifo is a bounded queue. Its ring is allocated by the first put and
// doubles when full, up to size entries, and is kept: a channel's buffer
// is allocated when it is made, used or not, while most connections queue
// nothing (their messages are pushed) or a call or two that came before
// Push. It is not safe for concurrent use: the delivery's mu guards it.
type fifo[T any] struct {
	ring []T
	head int // index in ring of the oldest value
	n    int // values queued
	size int // the most that may be queued; set before first use
}

// put appends v; it reports false, keeping nothing, when size values are
// queued already.
func (q *fifo[T]) put(v T) bool {
	if q.n >= q.size {
		return false
	}
	if q.n == len(q.ring) {
		ring := make([]T, min(max(2*len(q.ring), 2), q.size))
		for i := range q.n {
			ring[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = v
	q.n++
	return true
}

// get removes and returns the oldest value; ok is false when the queue is
// empty.
func (q *fifo[T]) get() (v T, ok bool) {
	if q.n == 0 {
		return v, false
	}
	var zero T
	v, q.ring[q.head] = q.ring[q.head], zero // keep nothing of v alive
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return v, true
}
