package loopback

// The transmit path: one goroutine per connection direction.
//
// A Conn's goroutine carries everything that side transmits, one message at a
// time, in order: the RDMA Read Responses it owes (first, as siw's transmit
// path favours them) and its send queue. Transmitting a message applies it to
// the peer at once under the link mutex: a Send consumes the peer's oldest
// posted receive, a Write places data after the checks siw makes
// (docs/linux-interop.md section 2), a Read Request joins the peer's inbound
// read queue, and a Read Response places data into the requester's sink. So a
// Send posted after Writes is delivered after they are placed, and a Read
// completes after its response is placed.

import (
	"fmt"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/wq"
)

// DefaultLinkTimeout is how long a broken link (Faults.Drop) goes
// unnoticed when Faults.LinkTimeout is zero.
const DefaultLinkTimeout = 100 * time.Millisecond

// Faults are injected into what one side of a connection transmits: its
// Sends, RDMA Writes and RDMA Read Requests, and the RDMA Read Responses it
// owes. Messages are counted from 1 after SetFaults.
type Faults struct {
	// Delay is waited before each message is transmitted: latency per
	// operation in this direction.
	Delay time.Duration

	// Drop, if positive, loses the Drop-th message silently. The link then
	// behaves as a broken one: nothing more is delivered in either
	// direction and nothing completes, until, LinkTimeout later, both
	// sides fail with ErrConnectionLost. The lost message's work request
	// completes with StatusTransport and the rest are flushed.
	Drop int

	// LinkTimeout is how long a broken link goes unnoticed; zero means
	// DefaultLinkTimeout.
	LinkTimeout time.Duration

	// Abort, if positive, aborts the connection, as a TCP reset would,
	// when the message after the Abort-th is due: both sides fail with
	// ErrConnectionLost at once, that message's work request completes
	// with StatusTransport and the rest are flushed.
	Abort int

	// ORD, if positive, replaces the negotiated ORD as this side's limit on
	// outstanding RDMA Reads: a misbehaving requester, which overruns the
	// peer's IRD.
	ORD int
}

// SetFaults sets the faults injected into what c transmits from now on and
// restarts the message count. Set them before posting work, for runs that
// are repeatable.
func (c *Conn) SetFaults(f Faults) error {
	if f.Delay < 0 || f.Drop < 0 || f.LinkTimeout < 0 || f.Abort < 0 || f.ORD < 0 {
		return fmt.Errorf("loopback: set faults %+v: negative value: %w", f, rdma.ErrInvalid)
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.faults, c.sent, c.delayed = f, 0, false
	return nil
}

type action uint8

const (
	actMore  action = iota // transmitted a message; look for the next
	actIdle                // nothing to do until kicked
	actDelay               // wait Faults.Delay, then transmit
	actSleep               // the link is broken; wait for its timeout
	actExit
)

// run is the goroutine that transmits for c.
func (c *Conn) run() {
	defer close(c.txDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		c.l.mu.Lock()
		act, d := c.step()
		c.l.mu.Unlock()
		switch act {
		case actExit:
			return
		case actIdle:
			select {
			case <-c.kick:
			case <-c.done:
			}
		case actDelay, actSleep:
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-c.done:
				timer.Stop()
			}
			if act == actDelay {
				c.l.mu.Lock()
				c.delayed = true
				c.l.mu.Unlock()
			}
		}
	}
}

// step transmits at most one message and says what run does next. The
// caller holds c.l.mu.
func (c *Conn) step() (action, time.Duration) {
	l := c.l
	switch {
	case c.state == stateDead:
		return actExit, 0
	case l.broken && l.breaker == c:
		if d := time.Until(l.deadline); d > 0 {
			return actSleep, d
		}
		l.lost.c.q.Finish(l.lost.seq, rdma.StatusTransport, 0)
		c.endWith(rdma.ErrConnectionLost, rdma.ErrConnectionLost)
		return actExit, 0
	case l.broken, c.peer.state != stateUp:
		return actIdle, 0
	case c.irq.Len() == 0 && c.sqNext == c.q.SQ.Tail:
		return actIdle, 0
	case c.faults.Delay > 0 && !c.delayed:
		return actDelay, c.faults.Delay
	}
	c.delayed = false
	c.transmit()
	return actMore, 0
}

// transmit sends the next message: a Read Response owed, else the next
// send-queue work request.
func (c *Conn) transmit() {
	fromIRQ := c.irq.Len() > 0
	ref := wrRef{c, c.sqNext}
	if fromIRQ {
		ref = wrRef{c.peer, c.irq.Front().seq}
	}
	c.sent++
	switch f := &c.faults; {
	case f.Abort > 0 && c.sent > f.Abort:
		ref.c.q.Finish(ref.seq, rdma.StatusTransport, 0)
		c.endWith(rdma.ErrConnectionLost, rdma.ErrConnectionLost)
		return
	case f.Drop > 0 && c.sent == f.Drop:
		if fromIRQ {
			c.irq.Pop()
		} else {
			c.sqNext++
		}
		timeout := f.LinkTimeout
		if timeout == 0 {
			timeout = DefaultLinkTimeout
		}
		l := c.l
		l.broken, l.breaker, l.lost, l.deadline = true, c, ref, time.Now().Add(timeout)
		return
	}
	if fromIRQ {
		c.serveRead()
		return
	}
	c.sqNext++
	c.execute(ref.seq)
}

var (
	termLocal     = rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeLocalCatastrophic, Code: rdma.CodeUnspecified}
	termPlacement = rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeLocalCatastrophic}
	termNoBuffer  = rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeUntaggedBuffer, Code: rdma.CodeNoBuffer}
	termTooLong   = rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeUntaggedBuffer, Code: rdma.CodeMessageTooLong}
	termIRD       = rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteOperation, Code: rdma.CodeCatastrophicStream}
)

// execute runs the send-queue work request seq. The caller holds c.l.mu.
func (c *Conn) execute(seq uint64) {
	w := c.q.SQ.At(seq)
	var need rdma.Access
	if w.Op == rdma.OpRead {
		need = rdma.AccessLocalWrite
	}
	// The MRs were checked at post; they may have been invalidated or
	// released since, which is a local protection error, fatal as on an
	// RNIC.
	if _, err := c.checkSGL(w.SGL, need); err != nil {
		c.q.Finish(seq, rdma.StatusLocalProtection, 0)
		c.terminate(detail(termLocal, "%v %d: local %v", w.Op, w.ID, err))
		return
	}
	switch {
	case w.Op.IsSend():
		c.execSend(seq, w)
	case w.Op == rdma.OpWrite:
		c.execWrite(seq, w)
	default:
		c.execRead(seq, w)
	}
}

// detail returns te with a Detail.
func detail(te rdma.TerminateError, format string, args ...any) rdma.TerminateError {
	te.Detail = fmt.Sprintf(format, args...)
	return te
}

// refused completes seq with the status the peer's Terminate te implies,
// and ends the link on behalf of det, the side that detected the error.
func (c *Conn) refused(seq uint64, det *Conn, te rdma.TerminateError) {
	c.q.Finish(seq, te.Status(), 0)
	det.terminate(te)
}

// execSend delivers a Send into the peer's oldest posted receive
// (as siw does, docs/linux-interop.md section 2: buffer available, room,
// local SGE checks, then the invalidation at the end of the message).
func (c *Conn) execSend(seq uint64, w *wq.SendWR) {
	p := c.peer
	r, ok := p.takeRecv()
	if !ok {
		c.refused(seq, p, detail(termNoBuffer, "%v of %d bytes with no receive posted", w.Op, w.Length))
		return
	}
	if w.Length > r.Length {
		te := detail(termTooLong, "%v of %d bytes into receive %d of %d bytes", w.Op, w.Length, r.ID, r.Length)
		p.completeRecv(r, rdma.Completion{Status: rdma.StatusLocalLength})
		c.refused(seq, p, te)
		return
	}
	if _, err := p.checkRecvSGL(r.SGL); err != nil {
		te := detail(termPlacement, "%v into receive %d: %v", w.Op, r.ID, err)
		p.completeRecv(r, rdma.Completion{Status: rdma.StatusLocalProtection})
		c.refused(seq, p, te)
		return
	}
	copySGL(r.SGL, w.SGL)
	comp := rdma.Completion{Len: w.Length, Solicited: w.Op.Solicited()}
	if w.Op.Invalidates() {
		if te, ok := p.invalidateRemote(w.Invalidate); !ok {
			p.completeRecv(r, rdma.Completion{Status: rdma.StatusRemoteInvalidRequest})
			c.refused(seq, p, te)
			return
		}
		comp.Invalidated, comp.InvalidatedSTag = true, w.Invalidate
	}
	p.completeRecv(r, comp)
	c.q.Finish(seq, rdma.StatusSuccess, w.Length)
}

// takeRecv returns the receive the next Send into c fills: the oldest
// posted on c's receive queue, or one taken from its shared receive queue;
// false if there is none. The caller holds c.l.mu and completes it with
// completeRecv.
func (c *Conn) takeRecv() (*wq.RecvWR, bool) {
	if c.srq != nil {
		return &c.srqWR, c.srq.Take(&c.srqWR)
	}
	if c.q.RQ.Len() == 0 {
		return nil, false
	}
	return c.q.RQ.Front(), true
}

// completeRecv completes r, which takeRecv returned, with comp.
func (c *Conn) completeRecv(r *wq.RecvWR, comp rdma.Completion) {
	if c.srq != nil {
		c.srq.Complete(c, r.ID, comp)
		return
	}
	c.q.CompleteRecv(comp)
}

// checkRecvSGL checks the memory of a receive takeRecv returned.
func (c *Conn) checkRecvSGL(sgl []rdma.SGE) (int, error) {
	if c.srq != nil {
		return c.srq.CheckSGL(sgl)
	}
	return c.checkSGL(sgl, rdma.AccessLocalWrite)
}

// execWrite places an RDMA Write. A zero-length Write is not checked (RFC
// 5041 section 7.1).
func (c *Conn) execWrite(seq uint64, w *wq.SendWR) {
	if w.Length > 0 {
		dst, te, ok := c.peer.checkRemote("remote write", w.RemoteSTag, w.RemoteTO, w.Length, rdma.AccessRemoteWrite, &memreg.WriteCodes)
		if !ok {
			c.refused(seq, c.peer, te)
			return
		}
		gather(dst, w.SGL)
	}
	c.q.Finish(seq, rdma.StatusSuccess, w.Length)
}

// execRead sends an RDMA Read Request; the peer's goroutine answers it.
func (c *Conn) execRead(seq uint64, w *wq.SendWR) {
	// The work request stays unfinished on the send queue, holding back
	// the completions of those after it, until the response is placed.
	p := c.peer
	if p.irq.Len() >= p.limits.IRD {
		c.refused(seq, p, detail(termIRD, "RDMA Read Request beyond IRD %d", p.limits.IRD))
		return
	}
	*p.irq.Push() = readReq{seq: seq, stag: w.RemoteSTag, to: w.RemoteTO, length: w.Length}
	wq.Signal(p.kick)
}

// serveRead sends the Read Response to the oldest inbound Read Request. A
// zero-length Read is not checked (RFC 5040 section 4.4).
func (c *Conn) serveRead() {
	q := *c.irq.Front()
	c.irq.Pop()
	p := c.peer
	if q.length > 0 {
		src, te, ok := c.checkRemote("remote read", q.stag, q.to, q.length, rdma.AccessRemoteRead, &memreg.ReadCodes)
		if !ok {
			p.refused(q.seq, c, te)
			return
		}
		w := p.q.SQ.At(q.seq)
		if _, err := p.checkSGL(w.SGL, rdma.AccessLocalWrite); err != nil {
			p.q.Finish(q.seq, rdma.StatusLocalProtection, 0)
			p.terminate(detail(termPlacement, "RDMA Read Response into %v %d: %v", w.Op, w.ID, err))
			return
		}
		scatter(w.SGL, src)
	}
	p.q.Finish(q.seq, rdma.StatusSuccess, q.length)
}
