package rpc

import (
	"context"
	"errors"
	"sync"
)

// A StreamTransport pushes (Pusher) with a receive turn: the right to read
// the stream and deliver what it holds. A goroutine of its own, the
// reader, takes the turn while the receiver expects messages; a caller of
// SendDeliver that finds the turn free takes it instead and delivers,
// on its own goroutine, until its reply has arrived, then gives it back.
// With one call at a time on a client connection the reader is parked
// and never woken: the caller sends, reads the reply itself and returns,
// as a raw TCP ping-pong does.

// streamPush is the state of a StreamTransport's delivery.
type streamPush struct {
	mu      sync.Mutex
	deliver func(*Msg, error) bool // set by Push; nil before
	turn    bool                   // a goroutine reads and delivers
	// want: the reader is to take the turn when it is free, because the
	// receiver expects a message (its deliver said so, or a caller that
	// found the turn taken asked).
	want   bool
	asked  bool          // a caller found the turn taken since the last deliver began: its holder keeps reading
	ended  bool          // the error that ends the transport was delivered
	wake   chan struct{} // cap 1: the reader is to look at the state again
	exited chan struct{} // closed when the reader has exited; nil before Push
}

// nudge wakes the reader, if it is parked.
func (p *streamPush) nudge() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// clearAsked forgets the callers that asked for the turn's holder to keep
// reading: the deliver about to run reports whether their calls still
// wait. One that asks from now on may have missed that report.
func (p *streamPush) clearAsked() {
	p.mu.Lock()
	p.asked = false
	p.mu.Unlock()
}

// Push implements Pusher: a reader goroutine reads and delivers until the
// error that ends the transport, which it delivers last; it then exits.
// It stops reading while deliver reports false and no call waits, until
// SendDeliver asks again or Close.
func (t *StreamTransport) Push(deliver func(*Msg, error) bool) {
	p := &t.push
	p.mu.Lock()
	p.deliver = deliver
	p.exited = make(chan struct{})
	p.mu.Unlock()
	go t.readPushed()
}

// readPushed is the reader goroutine.
func (t *StreamTransport) readPushed() {
	p := &t.push
	defer close(p.exited)
	for {
		p.mu.Lock()
		for p.turn || !p.want && !t.isClosed() {
			p.mu.Unlock()
			<-p.wake
			p.mu.Lock()
		}
		p.turn = true
		p.mu.Unlock()
		for {
			m, err := t.recv(context.Background())
			p.clearAsked()
			more := p.deliver(m, err)
			if endsTransport(err) {
				p.mu.Lock()
				p.ended = true
				p.mu.Unlock()
				return
			}
			p.mu.Lock()
			if !more && !p.asked {
				p.turn, p.want = false, false
				p.mu.Unlock()
				break
			}
			p.asked = false
			p.mu.Unlock()
		}
	}
}

// endsTransport reports whether err, delivered, ends the transport: any
// error but a *CallError.
func endsTransport(err error) bool {
	if err == nil {
		return false
	}
	_, one := errors.AsType[*CallError](err)
	return !one
}

// SendDeliver implements DirectPusher: it sends m and, if the receive turn
// is free, takes it and reads and delivers on the calling goroutine until
// arrived reports true, ctx ends (a blocked read is then interrupted by a
// read deadline, and what was read of a record is kept for the next
// reader) or the stream fails (the reader then delivers the error).
func (t *StreamTransport) SendDeliver(ctx context.Context, m *Msg, arrived func() bool) (bool, error) {
	if err := t.Send(ctx, m); err != nil {
		return false, err
	}
	p := &t.push
	p.mu.Lock()
	if p.deliver == nil || p.ended || arrived() {
		// Nothing to take over, or the reader has delivered the
		// reply already (and parked, if nothing more is expected).
		p.mu.Unlock()
		return false, nil
	}
	if p.turn {
		// Its holder delivers for this call too, and keeps reading.
		p.asked = true
		p.mu.Unlock()
		return false, nil
	}
	p.turn = true
	p.mu.Unlock()
	for {
		m, err := t.recv(ctx)
		if err != nil && (err == ctx.Err() || endsTransport(err)) {
			// The call is still pending, or the stream failed and
			// the reader is to deliver that: either way it reads.
			t.giveTurn(true)
			return false, nil
		}
		p.clearAsked()
		more := p.deliver(m, err)
		if arrived() {
			t.giveTurn(more)
			return true, nil
		}
	}
}

// giveTurn ends a caller's turn; the reader takes it if the receiver
// expects more (more, the receiver's last word), a caller asked, or the
// transport was closed (the reader delivers the error that ends it).
func (t *StreamTransport) giveTurn(more bool) {
	p := &t.push
	p.mu.Lock()
	p.turn = false
	if more || p.asked || t.isClosed() {
		p.want, p.asked = true, false
		p.mu.Unlock()
		p.nudge()
		return
	}
	p.want = false
	p.mu.Unlock()
}

// ReserveReply implements InlineReplier. A reply's Send needs nothing the
// reading goroutine frees, so it reports only whether no next message has
// been read in part behind m (calls queueing up are better run by workers
// side by side). It is called by the goroutine with the receive turn.
func (t *StreamTransport) ReserveReply(*Msg) bool { return t.br.Buffered() == 0 }

func (t *StreamTransport) deliverMayWait() {}
