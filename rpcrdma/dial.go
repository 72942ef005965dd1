package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
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
	c := newConn(*cfg, wire.Version1)
	c.cfg.ConnState = nil // a Listener's hook: a dialed connection reports nothing
	c.req = newRequester(c)
	c.role = c.req
	back := int(c.cfg.BackwardCredits)
	if back > 0 {
		c.req.back = newBackServer(c)
	}
	slots := requesterRecvs(c.cfg.credits(), back)
	// A requester whose regions cannot take Send With Invalidate must
	// not invite it (RFC 8797 section 4.1.1).
	c.cfg.NoRemoteInvalidation = c.cfg.NoRemoteInvalidation || !rdma.RemoteInvalidationOf(p)
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
	// The receives actually posted bound the grant taken.
	c.req.credits.max = callCapacity(c.cfg.credits(), c.recvSlots, back)
	c.start()
	n := c.negV[c.req.version()]
	c.log.Debug("rpcrdma: connected", "addr", addr, "peer_private_data", n.peerPD, "send_inline", n.sendLimit, "recv_inline", n.recvLimit)
	return c, nil
}

// Listener accepts RPC-over-RDMA connections as a responder, within
// Config.Bounds: it counts its open connections, in all and by remote
// host, and holds the memory budget its connections share.
type Listener struct {
	l   rdma.Listener
	cfg Config
	log *slog.Logger
	mem *budget // Bounds.ServerMemory

	admission           // its connections, counted and listed for eviction (admission.go)
	limitLog  *limitLog // how the limits that act are logged (limitlog.go)

	reasons    [NumReasons]atomic.Uint64 // the limits that acted, here and on the connections
	registered atomic.Int64              // bytes registered by the open connections and the pool
	pool       *sharedPool               // Bounds.SharedReceives; nil without
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
	ln := &Listener{
		l:         l,
		cfg:       *cfg,
		log:       cfg.logger(),
		mem:       newBudget(cfg.Bounds.serverMemory()),
		admission: admission{perHost: make(map[string]*hostConns)},
		limitLog:  newLimitLog(cfg.logger(), cfg.Bounds.logInterval()),
	}
	if cfg.Bounds.SharedReceives > 0 {
		if ln.pool, err = newSharedPool(ln, p); err != nil {
			l.Close()
			return nil, err
		}
	}
	return ln, nil
}

// Addr returns the address requesters dial.
func (l *Listener) Addr() net.Addr { return l.l.Addr() }

// Close stops listening; established connections carry on (a shared
// receive pool is closed with the last of them). The counts of limits
// not yet logged are logged.
func (l *Listener) Close() error {
	err := l.l.Close()
	l.limitLog.close()
	if l.pool != nil {
		l.pool.listenerClosed()
	}
	return err
}

// Accept waits for the next requester and returns the responder side of
// its connection. The requester's private data decides the inline sizes
// and whether replies may use Send With Invalidate. A request beyond
// Bounds.MaxConns or Bounds.MaxConnsPerAddr closes a connection to make
// room (admission.go), or is rejected when every connection it competes
// with has a call in flight; one whose acceptance takes longer than
// Bounds.HandshakeTimeout is abandoned, before Accept waits for the next.
// Config.ConnState hears of each request admitted (ConnState).
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	for {
		req, err := l.l.Accept(ctx)
		if err != nil {
			return nil, err
		}
		a, victim, r := l.admit(hostOf(req.RemoteAddr()))
		if a == nil {
			l.limit(r, req.RemoteAddr())
			req.Reject(nil)
			continue
		}
		if victim != nil {
			l.evict(victim, r)
		}
		c, err := l.accept(ctx, req, a)
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

func (l *Listener) accept(ctx context.Context, req rdma.ConnRequest, a *admitted) (*Conn, error) {
	c := newConn(l.cfg, wire.Version1, wire.Version2)
	c.ln = l
	c.creq = req
	r := newResponder(c)
	c.resp, c.role = r, r
	c.setState(StateNew)
	back := int(c.cfg.BackwardCredits)
	if back > 0 {
		r.back = newBackCaller(c)
	}
	slots := responderRecvs(c.cfg.Grant.Grant(), back, l.pool != nil)
	rcfg := c.cfg.RDMA
	rcfg.PrivateData = c.cfg.privateData().Append(nil)
	rcfg.RecvQueueDepth = max(rcfg.RecvQueueDepth, slots)
	rcfg.SendQueueDepth = max(rcfg.SendQueueDepth, 2*slots)
	// What the connection gives back when it ends, whichever way: its
	// count at the Listener, its rings, what the pool promised it.
	r.onEnd = func() {
		r.stopWatch()
		l.registered.Add(-c.ringBytes()) // Close releases them
		l.leave(a)
	}
	if l.pool != nil {
		r.onClosed = func() { l.pool.detach(c.rc, r.allot.Swap(0)) }
		// The first grant's receives, from the pool (pool.go); the
		// backward direction's come from it too.
		if !l.pool.allot(sharedFirstGrant + back) {
			r.onEnd()
			l.limit(LimitReceives, req.RemoteAddr())
			req.Reject(nil)
			c.handshakeFailed(errPoolFull)
			return nil, errPoolFull
		}
		r.allot.Store(int64(sharedFirstGrant + back))
		rcfg.SharedRecv = l.pool.q
		rcfg.SendQueueDepth = max(c.cfg.RDMA.SendQueueDepth, 2*(sharedSendSlots+back))
	}
	rcfg.Prepare = func(rc rdma.Conn) error {
		if err := c.setup(rc, slots); err != nil {
			return err
		}
		r.grant.start(&c.cfg.Grant, c.recvSlots, back, l.pool != nil)
		if l.pool != nil {
			l.pool.attach(rc, c)
		}
		return nil
	}
	actx := ctx
	if d := l.cfg.Bounds.handshakeTimeout(); d > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	rc, err := req.Accept(actx, rcfg)
	if err != nil {
		if c.rc != nil {
			c.fail(err) // Prepare ran: the hooks give everything back
		} else {
			r.onEnd()
			if r.onClosed != nil {
				r.onClosed()
			}
		}
		if ctx.Err() == nil && actx.Err() != nil {
			l.limit(LimitHandshakeTimeout, req.RemoteAddr())
		}
		c.handshakeFailed(err)
		return nil, err
	}
	c.rc = rc
	c.start()
	r.watch()
	l.enlist(a, r)
	c.setState(StateEstablished)
	return c, nil
}

// Serve accepts connections on l and serves srv on each, as
// srv.ServeListener does for TCP, until l fails, ctx ends or srv shuts
// down. It returns rpc.ErrServerClosed after srv.Shutdown or srv.Close
// (which close l), ctx's error if ctx ended first, and Accept's error
// otherwise (net.ErrClosed when l was closed), leaving l open.
// Connections already accepted go on being served: srv.Shutdown ends them
// gracefully (in-flight calls complete first) and waits for them,
// srv.Close ends them at once. The Config.ConnState of l follows each
// connection, from its request to its end (connstate.go), as net/http's
// Server.ConnState does.
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
