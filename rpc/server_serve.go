package rpc

// For each transport, Serve runs the transport's receive path, which hands
// each call to a worker goroutine, at most MaxInFlight at once. Workers
// are started as needed and wait for the next call when done (as many per
// transport as it has had calls in flight, at most MaxInFlight), so in
// steady state a call costs a hand-off, not a new goroutine whose stack
// grows again through the reply path. The transport delivers each call
// from its own receive path (see serveConn), which saves a goroutine
// hand-off per call; calls it delivers past MaxInFlight wait in a queue
// that finishing workers take from, never on goroutines of their own. A
// short call may instead run on the goroutine that received it
// (inlinePushed).

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// Serve answers the calls arriving on t until t fails or the server shuts
// down, then closes t, waits for the calls in progress to finish, and
// returns: ErrServerClosed after Shutdown or Close, t's Recv error
// otherwise (a *ConnError for the transports of this package). The Server
// owns t from the call on.
func (s *Server) Serve(t Transport) error {
	sc := s.addConn(t, nil)
	if sc == nil {
		t.Close()
		return ErrServerClosed
	}
	return s.serveConn(sc)
}

// ServeListener accepts connections on l and serves each over a
// StreamTransport (record marking) until l fails or the server shuts down.
// It returns ErrServerClosed after Shutdown or Close (which close l), and
// the Accept error otherwise, leaving l open; connections already accepted
// go on being served.
func (s *Server) ServeListener(l net.Listener) error {
	return s.serveAccepted(l, func() (Transport, net.Conn, error) {
		c, err := l.Accept()
		if err != nil {
			return nil, nil, err
		}
		return NewStreamTransport(c, s.stream), c, nil
	})
}

// serverConn is the state of one served transport.
type serverConn struct {
	t      Transport
	c      net.Conn      // under t, when ServeListener accepted it; nil otherwise
	sem    chan struct{} // one slot per call in flight
	work   chan *Msg     // to idle workers; closed when the loop ends
	idle   atomic.Int32  // workers waiting on work, or about to
	ctx    context.Context
	cancel context.CancelFunc // cancels the handlers' ctx

	mu       sync.Mutex
	inFlight int
	closing  bool   // Shutdown began: close t once inFlight drops to 0
	queue    []*Msg // pushed calls waiting for a slot; non-empty only while sem is full
}

// begin accounts for a new call and reports whether it may run.
func (sc *serverConn) begin() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closing {
		return false
	}
	sc.inFlight++
	return true
}

// end accounts for a finished call.
func (sc *serverConn) end() {
	sc.mu.Lock()
	sc.inFlight--
	idle := sc.closing && sc.inFlight == 0
	sc.mu.Unlock()
	if idle {
		sc.t.Close()
	}
}

// next gives up the caller's MaxInFlight slot, unless a pushed call waits
// for one: it then returns that call, which takes over the slot. The slot
// is given up under sc.mu, where serveConn queues a call only while
// every slot is taken, so a queued call always has a worker that will
// take it.
func (sc *serverConn) next() *Msg {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.queue) > 0 {
		m := sc.queue[0]
		sc.queue[0] = nil
		sc.queue = sc.queue[1:]
		return m
	}
	<-sc.sem
	return nil
}

// closeWhenIdle makes sc close its transport once no call is in flight.
func (sc *serverConn) closeWhenIdle() {
	sc.mu.Lock()
	sc.closing = true
	idle := sc.inFlight == 0
	sc.mu.Unlock()
	if idle {
		sc.t.Close()
	}
}

// addConn registers a transport to serve, and c the net.Conn under it if
// there is one to report, or returns nil when shutting down.
func (s *Server) addConn(t Transport, c net.Conn) *serverConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil
	}
	sc := &serverConn{t: t, c: c, sem: make(chan struct{}, s.maxInFlight), work: make(chan *Msg)}
	sc.ctx, sc.cancel = context.WithCancel(context.Background())
	s.conns[sc] = struct{}{}
	return sc
}

// serveConn serves sc's transport through the one delivery contract,
// Pusher (a transport that does not push is adapted): its receive path
// calls deliver, which must not block, so a call goes straight to an idle
// worker (or a new one), and one that finds MaxInFlight calls running
// joins a queue that finishing workers take from, costing no goroutine.
// Such a transport bounds what it delivers (RPC-over-RDMA by its credits),
// and so the queue. A stream's reader (pushWaits) is instead made to wait
// for a slot, which holds the peer back through the stream's flow
// control, as a loop calling Recv would. It returns the error that ended
// the transport once deliver has had it, having cancelled the handlers'
// context so that workers drop what is still queued; the Pusher contract
// says nothing is delivered after that error, so the workers' channel can
// then be closed.
func (s *Server) serveConn(sc *serverConn) error {
	var wg sync.WaitGroup
	p := asPusher(sc.t)
	ended := make(chan error, 1)
	ir, _ := p.(InlineReplier)
	_, waits := p.(pushWaits)
	p.Push(func(m *Msg, err error) bool {
		if err != nil {
			if _, ok := errors.AsType[*CallError](err); ok {
				// The transport dropped one message; it carries on.
				s.stats.dropped.Add(1)
				return true
			}
			ended <- err
			return false
		}
		if ir != nil && s.inlinePushed(sc, ir, m, &wg) {
			return true
		}
		if waits {
			s.waitSlot(sc, m, &wg)
			return true
		}
		sc.mu.Lock()
		if len(sc.queue) == 0 {
			select {
			case sc.sem <- struct{}{}:
				sc.mu.Unlock()
				s.dispatch(sc, m, &wg)
				return true
			default:
			}
		}
		// Every slot is taken: the worker that finishes first takes
		// the call (serverConn.next).
		sc.queue = append(sc.queue, m)
		sc.mu.Unlock()
		return true
	})
	err := <-ended
	sc.cancel()
	return s.endConn(sc, &wg, err)
}

// waitSlot dispatches m once a MaxInFlight slot is free, waiting for one
// on a stream's reader; it drops m if the server closes meanwhile.
func (s *Server) waitSlot(sc *serverConn, m *Msg, wg *sync.WaitGroup) {
	select {
	case sc.sem <- struct{}{}:
		s.dispatch(sc, m, wg)
	case <-sc.ctx.Done(): // Close, while MaxInFlight calls run
		s.stats.dropped.Add(1)
		release(m)
	}
}

// inlinePushed is inline for a pushed call, on the transport's goroutine
// that delivers it: it runs m there if m's handler is short, no other call
// is in flight or queued on sc, a MaxInFlight slot is free, and the
// transport could reserve what sending the reply needs (ir.ReserveReply),
// so that the reply's Send does not wait for that goroutine. It reports
// whether it ran m.
func (s *Server) inlinePushed(sc *serverConn, ir InlineReplier, m *Msg, wg *sync.WaitGroup) bool {
	if !s.isShort(m.XDR) {
		return false
	}
	sc.mu.Lock()
	ok := !sc.closing && sc.inFlight == 0 && len(sc.queue) == 0
	if ok {
		select {
		case sc.sem <- struct{}{}:
			sc.inFlight++
		default:
			ok = false
		}
	}
	sc.mu.Unlock()
	if !ok {
		return false
	}
	if !ir.ReserveReply(m) {
		sc.mu.Lock()
		sc.inFlight--
		sc.mu.Unlock()
		<-sc.sem
		return false
	}
	s.stats.inline.Add(1)
	s.handle(sc.ctx, sc.t, m)
	sc.mu.Lock()
	sc.inFlight--
	idle := sc.closing && sc.inFlight == 0
	sc.mu.Unlock()
	<-sc.sem
	if idle {
		// Not on this goroutine: closing a transport may wait for it.
		// endConn waits for this one with the workers.
		wg.Go(func() { sc.t.Close() })
	}
	return true
}

// dispatch hands m, which holds a MaxInFlight slot, to an idle worker or a
// new one, unless the transport is shutting down.
func (s *Server) dispatch(sc *serverConn, m *Msg, wg *sync.WaitGroup) {
	if !sc.begin() {
		// Closing for good: the queued calls go the same way.
		for m != nil {
			s.stats.dropped.Add(1)
			release(m)
			m = sc.next()
		}
		return
	}
	select {
	case sc.work <- m:
	default:
		wg.Go(func() { s.worker(sc, m) })
	}
}

// endConn finishes serving sc once its transport has ended with err: it
// cancels the handlers' context, lets the workers finish, closes the
// transport and reports StateClosed.
func (s *Server) endConn(sc *serverConn, wg *sync.WaitGroup, err error) error {
	sc.cancel()
	close(sc.work)
	wg.Wait()
	sc.t.Close()
	sc.mu.Lock()
	queued := sc.queue // empty: workers take the queue before they exit
	sc.queue = nil
	sc.mu.Unlock()
	for _, m := range queued {
		s.stats.dropped.Add(1)
		release(m)
	}
	s.reportClosed(sc.c, err)
	return s.leave(func() { delete(s.conns, sc) }, err)
}

// worker answers m, then the calls the loop hands it, until there are
// enough idle workers or the loop has ended. A transport keeps as many
// idle workers as it has had calls in flight at once, at most MaxInFlight:
// with a lower bound, more calls in flight than idle workers made some
// exit after each call and new ones start, each growing its stack again
// through the reply path, and with many NULL calls in flight copying
// stacks took a visible share of the CPU time and made the calls slower
// (docs/performance.md).
func (s *Server) worker(sc *serverConn, m *Msg) {
	for {
		s.handle(sc.ctx, sc.t, m)
		sc.end()
		if m = s.takeQueued(sc); m != nil {
			continue
		}
		if sc.idle.Add(1) > int32(s.maxInFlight) {
			sc.idle.Add(-1)
			return
		}
		next, ok := <-sc.work
		sc.idle.Add(-1)
		if !ok {
			return
		}
		m = next
	}
}

// takeQueued gives up a finished call's slot, or returns the queued
// call that takes it over, dropping those that came too late to run.
func (s *Server) takeQueued(sc *serverConn) *Msg {
	for {
		m := sc.next()
		if m == nil || (sc.ctx.Err() == nil && sc.begin()) {
			return m
		}
		// The transport has ended, or the server is closing: nothing
		// could carry the reply.
		s.stats.dropped.Add(1)
		release(m)
	}
}
