package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// Dial connects to an RPC-over-RDMA responder at addr over provider p and
// returns a requester Conn, ready for rpc.NewClient. It sends this side's
// RFC 8797 private data and settles the inline sizes from the
// responder's. cfg may be nil for every default; a field outside its
// documented range fails Dial with an error that names it.
func Dial(ctx context.Context, p rdma.Provider, addr string, cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := newConn(*cfg, false)
	c.req = newRequester(c)
	back := int(c.cfg.BackwardCredits)
	if back > 0 {
		c.bc = newBackchannel(c)
	}
	// Receives for every reply, one spare, and the backward calls
	// granted (RFC 8167, "Client Receive Buffers").
	slots := int(c.cfg.credits()) + 1 + back
	rcfg := c.cfg.RDMA
	rcfg.PrivateData = c.cfg.privateData().Append(nil)
	rcfg.RecvQueueDepth = max(rcfg.RecvQueueDepth, slots)
	rcfg.SendQueueDepth = max(rcfg.SendQueueDepth, 2*slots)
	rcfg.Prepare = func(rc rdma.Conn) error { return c.setup(rc, slots) }
	rc, err := p.Dial(ctx, addr, rcfg)
	if err != nil {
		return nil, fmt.Errorf("rpcrdma: dialing %s: %w", addr, err)
	}
	c.rc = rc
	// Clamp the credits asked for to the receives actually posted.
	c.req.credits.max = min(c.req.credits.max, uint32(max(c.recvSlots-1-back, 1)))
	c.start()
	n := c.negV[c.req.version()]
	c.log.Debug("rpcrdma: connected", "addr", addr, "peer_private_data", n.peerPD, "send_inline", n.sendLimit, "recv_inline", n.recvLimit)
	return c, nil
}

// Recv returns the next message for the rpc layer: on a requester, the
// next reply (or a *rpc.CallError failing one call); on a responder, the
// next call, with its read chunks pulled (calls whose chunks take longer to
// pull may be overtaken by later ones). It implements rpc.Transport.
func (c *Conn) Recv() (*rpc.Msg, error) {
	for {
		// Messages that arrived before the connection ended are
		// delivered first.
		var in inbound
		var pc pulledCall
		pulled := false
		select {
		case in = <-c.incoming:
		case pc = <-c.pulled:
			pulled = true
		default:
			select {
			case in = <-c.incoming:
			case pc = <-c.pulled:
				pulled = true
			case <-c.done:
				select {
				case in = <-c.incoming:
				default:
					return nil, c.Err()
				}
			}
		}
		if pulled {
			m, err := c.resp.finishCall(pc)
			if err != nil {
				c.fail(err)
				return nil, c.Err()
			}
			return m, nil
		}
		if c.req != nil {
			return c.replyOf(in)
		}
		m, ok, err := c.resp.recvCall(&in)
		if err != nil {
			c.fail(err)
			return nil, c.Err()
		}
		if !ok {
			continue
		}
		if rep, ok := c.resp.configReply(m); ok {
			if err := c.resp.sendReply(c.ctx, rep); err != nil {
				c.log.Debug("rpcrdma: answering CONF_RDMA", "err", err)
			}
			m.Release()
			continue
		}
		return m, nil
	}
}

// replyOf turns what the requester received into what Recv returns.
func (c *Conn) replyOf(in inbound) (*rpc.Msg, error) {
	if in.err != nil {
		return nil, &rpc.CallError{XID: in.hdr.XID, Err: in.err}
	}
	p := getReplyMsg()
	p.m = rpc.Msg{Body: rpc.Body{XDR: in.payload}, Release: p.put}
	for i, wc := range in.hdr.Chunks.Writes {
		if n := wc.Length(); n > 0 {
			p.m.Items = append(p.m.Items, rpc.DDPItem{Offset: rpc.Unplaced, Data: in.writes[i][:n]})
		}
	}
	return &p.m, nil
}

// Push implements rpc.Pusher: a requester hands each reply to deliver on
// the goroutine that received it (the rpc.Client uses it, and so needs no
// goroutine of its own blocked in Recv). A responder hands calls without
// read chunks to deliver from the loop (the rpc.Server uses it, and its
// worker gets the call one hand-off sooner); a goroutine calls Recv for
// the rest, the calls whose chunks are pulled first and CONF_RDMA, and
// hands on what it returns. The error that ends the connection comes last,
// once the loop has ended.
func (c *Conn) Push(deliver func(*rpc.Msg, error)) {
	if c.req == nil {
		c.pushMu.Lock()
		c.callPush = deliver
		c.pushMu.Unlock()
		go func() {
			for {
				m, err := c.Recv()
				final := err != nil
				if final {
					_, perCall := errors.AsType[*rpc.CallError](err)
					final = !perCall
				}
				if final {
					// The loop delivers nothing once it has ended.
					<-c.loopDone
				}
				c.pushMu.Lock()
				if final {
					c.callPush = nil
				}
				deliver(m, err)
				c.pushMu.Unlock()
				if final {
					return
				}
			}
		}()
		return
	}
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	for {
		select {
		case in := <-c.incoming:
			deliver(c.replyOf(in))
			continue
		default:
		}
		break
	}
	if c.pushEnded {
		deliver(nil, c.Err())
		return
	}
	c.push = deliver
}

// endPush gives a pushing requester the error that ended the connection,
// once the loop has delivered everything before it.
func (c *Conn) endPush() {
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	c.pushEnded = true
	if c.push != nil {
		c.push(nil, c.Err())
		c.push = nil
	}
}

// replyMsg is a pooled rpc.Msg for a reply Recv returns; the rpc.Client
// releases it once it has the results, which alias the caller's memory
// (or memory given up to it), never the Msg's own.
type replyMsg struct {
	m   rpc.Msg
	put func() // m.Release, bound once
}

var replyMsgs sync.Pool

func getReplyMsg() *replyMsg {
	p, _ := replyMsgs.Get().(*replyMsg)
	if p == nil {
		p = new(replyMsg)
		p.put = func() {
			p.m = rpc.Msg{} // Items went to the caller: not reused
			replyMsgs.Put(p)
		}
	}
	return p
}

// Listener accepts RPC-over-RDMA connections as a responder.
type Listener struct {
	l   rdma.Listener
	cfg Config
}

// Listen listens for RPC-over-RDMA requesters at addr over provider p. cfg
// may be nil for every default: Versions One and Two served, inline sizes
// DefaultInlineSize, DefaultCredits granted. A field outside its documented
// range fails Listen with an error that names it.
func Listen(ctx context.Context, p rdma.Provider, addr string, cfg *Config) (*Listener, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l, err := p.Listen(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("rpcrdma: listening on %s: %w", addr, err)
	}
	return &Listener{l: l, cfg: *cfg}, nil
}

// Addr returns the address requesters dial.
func (l *Listener) Addr() net.Addr { return l.l.Addr() }

// Close stops listening; established connections carry on.
func (l *Listener) Close() error { return l.l.Close() }

// Accept waits for the next requester and returns the responder side of
// its connection. The requester's private data decides the inline sizes
// and whether replies may use Send With Invalidate.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	for {
		req, err := l.l.Accept(ctx)
		if err != nil {
			return nil, err
		}
		c, err := l.accept(ctx, req)
		if err == nil {
			return c, nil
		}
		// One requester failing to connect does not end the listener.
		l.cfg.logger().Debug("rpcrdma: accept failed", "remote", req.RemoteAddr(), "err", err)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

func (l *Listener) accept(ctx context.Context, req rdma.ConnRequest) (*Conn, error) {
	c := newConn(l.cfg, true)
	c.resp = &responder{c: c, pending: make(map[uint32]*inCall), done: make(map[uint32]*readReply)}
	grantMax := c.cfg.Grant.Grant(^uint32(0))
	back := int(c.cfg.BackwardCredits)
	if back > 0 {
		c.bc = newBackchannel(c)
	}
	// Receives for every call granted, two for messages outside the
	// credit count, and one per backward call outstanding (RFC 8167,
	// "Server Receive Buffers").
	slots := int(grantMax) + 2 + back
	rcfg := c.cfg.RDMA
	rcfg.PrivateData = c.cfg.privateData().Append(nil)
	rcfg.RecvQueueDepth = max(rcfg.RecvQueueDepth, slots)
	rcfg.SendQueueDepth = max(rcfg.SendQueueDepth, 2*slots)
	rcfg.Prepare = func(rc rdma.Conn) error {
		if err := c.setup(rc, slots); err != nil {
			return err
		}
		// Never grant more than the receives posted, less two for
		// messages outside the credit count (RDMA_DONE, a stray error).
		c.resp.grant = min(grantMax, uint32(max(c.recvSlots-2-back, 1)))
		return nil
	}
	rc, err := req.Accept(ctx, rcfg)
	if err != nil {
		return nil, err
	}
	c.rc = rc
	c.start()
	return c, nil
}

// Serve accepts connections on l and serves srv on each, as
// srv.ServeListener does for TCP, until l fails, ctx ends or srv shuts
// down. It returns rpc.ErrServerClosed after srv.Shutdown or srv.Close
// (which close l), ctx's error if ctx ended first, and Accept's error
// otherwise (net.ErrClosed when l was closed), leaving l open.
// Connections already accepted go on being served: srv.Shutdown ends them
// gracefully (in-flight calls complete first) and waits for them,
// srv.Close ends them at once.
func Serve(ctx context.Context, l *Listener, srv *rpc.Server) error {
	err := srv.ServeAcceptor(acceptor{ctx, l})
	if ctx.Err() != nil && !errors.Is(err, rpc.ErrServerClosed) {
		return ctx.Err()
	}
	return err
}

// acceptor is a Listener as the rpc.Server accepts transports from it.
type acceptor struct {
	ctx context.Context
	l   *Listener
}

func (a acceptor) Accept() (rpc.Transport, error) {
	c, err := a.l.Accept(a.ctx)
	if err != nil {
		return nil, err // not a nil *Conn in an interface
	}
	return c, nil
}

func (a acceptor) Close() error { return a.l.Close() }
