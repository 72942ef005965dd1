package loopback

// A connection's life.
//
// Two Conns, the initiator's and the responder's, share a link, whose mutex
// guards the state of both: queues, completion queues, MR state, faults.
// Each Conn is in one of three states:
//
//	setup  created by ConnRequest.Accept; ConnConfig.Prepare runs. Memory
//	       calls and posts are allowed; nothing is transmitted yet.
//	up     established. The Conn's goroutine (run, in tx.go) transmits: it
//	       executes the send queue in order and serves the RDMA Read
//	       Requests the peer sent. It waits while the peer is still in setup,
//	       as TCP would hold bytes until the peer reads them.
//	dead   the connection ended: by Close (ErrClosed here, ErrDisconnected
//	       at the peer), by a Terminate (TerminateError on both sides, Remote
//	       at the side that did not detect the error), or by a link fault
//	       (ErrConnectionLost on both). Both Conns die together; every
//	       outstanding work request is flushed into the completion queue and
//	       both goroutines exit.
//
// A work request occupies its queue slot from Post until Poll or Wait has
// returned its completion, so the completion queue, sized for both queues,
// never overflows.

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/srq"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/wq"
)

type connState uint8

const (
	stateSetup connState = iota
	stateUp
	stateDead
)

// link is what the two ends of a connection share.
type link struct {
	mu   sync.Mutex
	ends [2]*Conn // initiator, responder

	// After a fault dropped a message, broken is set: nothing more is
	// delivered, and the side that dropped it ends the link with
	// ErrConnectionLost once deadline passes. lost is the work request
	// whose message was lost.
	broken   bool
	breaker  *Conn
	lost     wrRef
	deadline time.Time
}

// wrRef names a send-queue work request: the conn and its sequence.
type wrRef struct {
	c   *Conn
	seq uint64
}

// readReq is an inbound RDMA Read Request, held until served.
type readReq struct {
	seq    uint64 // of the requester's work request
	stag   rdma.STag
	to     uint64
	length int
}

// Conn is one side of a loopback connection; it implements rdma.Conn.
type Conn struct {
	n      *Network
	l      *link
	peer   *Conn
	local  Addr
	remote Addr
	peerPD []byte
	limits rdma.Limits

	// srq is the shared receive queue c is attached to, or nil; srqWR
	// holds the receive a Send takes from it while it is delivered.
	srq   *srq.Queue
	srqWR wq.RecvWR

	done chan struct{} // closed when the state becomes dead
	kick chan struct{} // wakes run; capacity 1

	// Guarded by l.mu.
	state   connState
	err     error
	txDone  chan struct{} // closed when run exits; nil until run starts
	faults  Faults
	sent    int  // messages transmitted since SetFaults
	delayed bool // the Delay before the next message has passed
	q       wq.Queues
	sqNext  uint64 // sequence of the next work request to execute
	irq     wq.Ring[readReq]
	regs    memreg.Domain // the regions registered on c (mem.go)
	closed  bool          // Close has run (and detached c from srq)
}

var (
	_ rdma.Conn            = (*Conn)(nil)
	_ rdma.WaitInterrupter = (*Conn)(nil)
)

func newConn(n *Network, l *link, s settings, local, remote Addr, peerPD []byte) *Conn {
	c := &Conn{
		n:      n,
		l:      l,
		srq:    s.srq,
		local:  local,
		remote: remote,
		peerPD: peerPD,
		limits: rdma.Limits{
			SendQueueDepth:     s.sq,
			RecvQueueDepth:     s.rq,
			IRD:                s.ird,
			ORD:                s.ord,
			MaxSGE:             MaxSGE,
			MaxReadSGE:         MaxSGE,
			MaxMessageSize:     MaxMessageSize,
			RemoteInvalidation: true,
		},
		done: make(chan struct{}),
		kick: make(chan struct{}, 1),
		q:    wq.New(s.sq, s.rq),
		irq:  wq.NewRing[readReq](s.ird),
	}
	c.regs = c.newDomain()
	return c
}

// establish moves c from setup to up and starts its goroutine.
func (c *Conn) establish() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.state != stateSetup {
		return
	}
	c.state = stateUp
	c.txDone = make(chan struct{})
	go c.run()
	wq.Signal(c.peer.kick) // the peer may have been waiting for us
}

func (c *Conn) LocalAddr() net.Addr       { return c.local }
func (c *Conn) RemoteAddr() net.Addr      { return c.remote }
func (c *Conn) PeerPrivateData() []byte   { return c.peerPD }
func (c *Conn) Limits() rdma.Limits       { return c.limits }
func (c *Conn) Done() <-chan struct{}     { return c.done }
func (c *Conn) String() string            { return fmt.Sprintf("loopback conn %s->%s", c.local, c.remote) }
func (c *Conn) deadErr(what string) error { return fmt.Errorf("loopback: %s: %w", what, c.err) }

// Err returns why the connection ended, or nil.
func (c *Conn) Err() error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.err
}

// PostRecv posts a receive.
func (c *Conn) PostRecv(id uint64, sgl []rdma.SGE) error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.state == stateDead {
		return c.deadErr(fmt.Sprintf("post recv %d", id))
	}
	if c.srq != nil {
		return fmt.Errorf("loopback: post recv %d: the connection receives from a shared receive queue: %w", id, rdma.ErrInvalid)
	}
	return c.q.CheckedPostRecv("loopback", id, sgl, c.limits.RecvQueueDepth, c.checkSGL)
}

// PostSend posts a send-queue work request.
func (c *Conn) PostSend(wr *rdma.WorkRequest) error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.state == stateDead {
		return c.deadErr(fmt.Sprintf("post %v %d", wr.Op, wr.ID))
	}
	if err := c.q.CheckedPostSend("loopback", wr, c.limits.SendQueueDepth, c.ord(), MaxMessageSize, c.checkSGL); err != nil {
		return err
	}
	wq.Signal(c.kick)
	return nil
}

// ord returns the limit on outstanding Reads, which Faults.ORD may raise.
func (c *Conn) ord() int {
	if c.faults.ORD > 0 {
		return c.faults.ORD
	}
	return c.limits.ORD
}

// Poll returns available completions.
func (c *Conn) Poll(cs []rdma.Completion) int {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.q.Poll(cs)
}

// Wait blocks until completions are available, ctx is done or the
// connection has ended and been drained.
func (c *Conn) Wait(ctx context.Context, cs []rdma.Completion) (int, error) {
	if len(cs) == 0 {
		return 0, fmt.Errorf("loopback: wait: empty completion slice: %w", rdma.ErrInvalid)
	}
	return c.q.Wait(ctx, c.done, func() (int, bool, error) {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		return c.q.Poll(cs), c.state == stateDead, c.err
	})
}

// end ends the link: each side gets its error, everything outstanding is
// flushed, and both goroutines are told to exit. The caller holds l.mu.
func (l *link) end(errs [2]error) {
	for i, c := range l.ends {
		if c.state == stateDead {
			continue
		}
		c.state, c.err = stateDead, errs[i]
		c.q.Flush()
		c.irq.Clear()
		close(c.done)
	}
}

// endWith ends the link with err at c and peerErr at its peer.
func (c *Conn) endWith(err, peerErr error) {
	if c == c.l.ends[0] {
		c.l.end([2]error{err, peerErr})
	} else {
		c.l.end([2]error{peerErr, err})
	}
}

// terminate ends the link because c detected te and sent a Terminate. The
// caller holds l.mu and has completed the work requests te concerns.
func (c *Conn) terminate(te rdma.TerminateError) {
	te.Remote = false
	recv := te
	recv.Remote = true
	c.endWith(te, recv)
}

// discard detaches c, which was never handed out, from its shared receive
// queue.
func (c *Conn) discard() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.srq != nil && !c.closed {
		c.srq.Detach()
	}
	c.closed = true
}

// Close ends the connection and releases its MRs.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.endWith(rdma.ErrClosed, rdma.ErrDisconnected)
	c.regs.ReleaseAllLocked()
	if c.srq != nil && !c.closed {
		c.srq.Detach()
	}
	c.closed = true
	wait := [2]chan struct{}{c.txDone, c.peer.txDone}
	c.l.mu.Unlock()
	for _, ch := range wait {
		if ch != nil {
			<-ch
		}
	}
	return nil
}

// InterruptWait implements rdma.WaitInterrupter.
func (c *Conn) InterruptWait() { c.q.Interrupt() }
