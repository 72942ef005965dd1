// Package loopback is an in-process RDMA provider: connections between
// goroutines of one process, strict exactly as RDMA hardware is, for tests
// of everything above package rdma.
//
// Strict means: a Send arriving with no posted receive, or longer than the
// posted receive, ends the connection (there is no buffering and no
// receiver-not-ready retry); every tagged access is checked in the order
// Linux siw applies (docs/linux-interop.md section 2) and a violation
// terminates the connection with the Terminate code siw or the RFC would
// send; an RDMA Read beyond the responder's IRD ends the connection. Faults
// (latency, a lost message, an abort) are injected per connection with
// Conn.SetFaults.
//
// A Network owns a listener namespace and a device-wide STag table; there is
// no global state. Each connection runs one goroutine per direction, which
// executes what that side transmits (its send queue and the RDMA Read
// Responses it owes) in order; nothing else starts goroutines.
package loopback

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/srq"
)

// Provider limits. A ConnConfig value of zero picks the default; a larger
// value than the maximum is lowered to it.
const (
	DefaultQueueDepth = 128
	MaxQueueDepth     = 16384
	DefaultReadDepth  = 16 // IRD and ORD
	MaxReadDepth      = 128
	MaxSGE            = 32
	MaxMessageSize    = 1 << 30
	listenBacklog     = 64
)

// Addr is a loopback address.
type Addr string

// Network returns "loopback".
func (Addr) Network() string { return "loopback" }

func (a Addr) String() string { return string(a) }

// Network is an in-process RDMA fabric: a listener namespace and an STag
// table shared by its connections, as a device's is. The zero value is not
// usable; call New. Its methods are safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
	nextName  uint64
	stags     *memreg.Table
}

var _ rdma.Provider = (*Network)(nil)

// New returns an empty Network.
func New() *Network {
	return &Network{
		listeners: make(map[string]*Listener),
		stags:     newSTagTable(),
	}
}

// Registered returns how many memory regions are registered on the
// network's connections: the leak check for registered memory.
func (n *Network) Registered() int {
	return n.stags.Live()
}

func (n *Network) name(prefix string) Addr {
	n.nextName++
	return Addr(fmt.Sprintf("%s-%d", prefix, n.nextName))
}

// Listen starts a listener at addr, any name not in use; "" picks one.
func (n *Network) Listen(ctx context.Context, addr string) (rdma.Listener, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loopback: listen %q: %w", addr, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	a := Addr(addr)
	if addr == "" {
		a = n.name("listener")
	}
	if n.listeners[string(a)] != nil {
		return nil, fmt.Errorf("loopback: listen %q: address in use", addr)
	}
	ln := &Listener{
		n:      n,
		addr:   a,
		reqs:   make(chan *ConnRequest, listenBacklog),
		closed: make(chan struct{}),
	}
	n.listeners[string(a)] = ln
	return ln, nil
}

// Dial connects to the listener at addr. The returned rdma.Conn is a *Conn.
func (n *Network) Dial(ctx context.Context, addr string, cfg rdma.ConnConfig) (rdma.Conn, error) {
	if err := rdma.CheckPrivateData("dial", cfg.PrivateData); err != nil {
		return nil, err
	}
	if _, err := n.newSettings(cfg); err != nil {
		return nil, fmt.Errorf("loopback: dial %q: %w", addr, err)
	}
	n.mu.Lock()
	ln := n.listeners[addr]
	if ln == nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("loopback: dial %q: no listener at that address", addr)
	}
	req := &ConnRequest{
		ln:    ln,
		cfg:   cfg,
		pd:    append([]byte(nil), cfg.PrivateData...),
		local: ln.addr,
		peer:  n.name("dial"),
		reply: make(chan reply, 1),
	}
	select {
	case ln.reqs <- req:
	default:
		n.mu.Unlock()
		return nil, fmt.Errorf("loopback: dial %q: listener backlog of %d requests is full", addr, listenBacklog)
	}
	n.mu.Unlock()

	var r reply
	select {
	case r = <-req.reply:
	case <-ctx.Done():
		req.mu.Lock()
		if req.state != reqAnswered {
			req.state = reqWithdrawn
			req.mu.Unlock()
			return nil, fmt.Errorf("loopback: dial %q: %w", addr, ctx.Err())
		}
		req.mu.Unlock()
		r = <-req.reply
	}
	switch {
	case r.err != nil:
		return nil, fmt.Errorf("loopback: dial %q: %w", addr, r.err)
	case r.rejected:
		return nil, &rdma.RejectError{PrivateData: r.pd}
	}
	c := r.conn
	if cfg.Prepare != nil {
		if err := cfg.Prepare(c); err != nil {
			c.Close()
			return nil, fmt.Errorf("loopback: dial %q: prepare: %w", addr, err)
		}
	}
	c.establish()
	return c, nil
}

// Listener is a loopback listener.
type Listener struct {
	n         *Network
	addr      Addr
	reqs      chan *ConnRequest
	closed    chan struct{}
	closeOnce sync.Once
}

// Accept waits for the next connection request. The returned
// rdma.ConnRequest is a *ConnRequest.
func (ln *Listener) Accept(ctx context.Context) (rdma.ConnRequest, error) {
	select {
	case <-ln.closed:
		return nil, fmt.Errorf("loopback: accept on %s: %w", ln.addr, rdma.ErrClosed)
	default:
	}
	select {
	case req := <-ln.reqs:
		return req, nil
	case <-ln.closed:
		return nil, fmt.Errorf("loopback: accept on %s: %w", ln.addr, rdma.ErrClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("loopback: accept on %s: %w", ln.addr, ctx.Err())
	}
}

// Addr returns the address to dial, an Addr.
func (ln *Listener) Addr() net.Addr { return ln.addr }

// Close stops listening and refuses the requests not yet accepted.
func (ln *Listener) Close() error {
	ln.closeOnce.Do(func() {
		ln.n.mu.Lock()
		delete(ln.n.listeners, string(ln.addr))
		close(ln.closed)
		ln.n.mu.Unlock()
		for {
			select {
			case req := <-ln.reqs:
				req.answer(reqPending, reply{err: fmt.Errorf("listener %s closed", ln.addr)})
			default:
				return
			}
		}
	})
	return nil
}

type reqState uint8

const (
	reqPending   reqState = iota
	reqAccepting          // Accept is running the responder's Prepare
	reqAnswered
	reqWithdrawn // the initiator's Dial gave up
)

type reply struct {
	conn     *Conn
	rejected bool
	pd       []byte
	err      error
}

// ConnRequest is an initiator's request, as Listener.Accept returns it.
type ConnRequest struct {
	ln          *Listener
	cfg         rdma.ConnConfig // the initiator's
	pd          []byte
	local, peer Addr
	reply       chan reply // capacity 1, written once

	mu    sync.Mutex
	state reqState
}

// PrivateData returns the initiator's private data.
func (r *ConnRequest) PrivateData() []byte { return r.pd }

// RemoteAddr returns the initiator's address, an Addr.
func (r *ConnRequest) RemoteAddr() net.Addr { return r.peer }

// LocalAddr returns the listener's address, an Addr.
func (r *ConnRequest) LocalAddr() net.Addr { return r.local }

// answer sends the reply if the request is in state from. It returns the
// state it found.
func (r *ConnRequest) answer(from reqState, rep reply) reqState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state
	if st == from {
		r.state = reqAnswered
		r.reply <- rep
	}
	return st
}

// Reject refuses the request with privateData.
func (r *ConnRequest) Reject(privateData []byte) error {
	if err := rdma.CheckPrivateData("reject", privateData); err != nil {
		return err
	}
	rep := reply{rejected: true, pd: append([]byte(nil), privateData...)}
	if st := r.answer(reqPending, rep); st != reqPending {
		return fmt.Errorf("loopback: reject request from %s: %s", r.peer, st)
	}
	return nil
}

func (s reqState) String() string {
	switch s {
	case reqPending:
		return "request pending"
	case reqAccepting:
		return "request being accepted"
	case reqAnswered:
		return "request already answered"
	}
	return "initiator gave up"
}

// Accept accepts the request. The returned rdma.Conn is a *Conn.
func (r *ConnRequest) Accept(ctx context.Context, cfg rdma.ConnConfig) (rdma.Conn, error) {
	if err := rdma.CheckPrivateData("accept", cfg.PrivateData); err != nil {
		return nil, err
	}
	rs, err := r.ln.n.newSettings(cfg)
	if err != nil {
		return nil, fmt.Errorf("loopback: accept request from %s: %w", r.peer, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loopback: accept request from %s: %w", r.peer, err)
	}
	r.mu.Lock()
	if r.state != reqPending {
		st := r.state
		r.mu.Unlock()
		return nil, fmt.Errorf("loopback: accept request from %s: %s", r.peer, st)
	}
	r.state = reqAccepting
	r.mu.Unlock()

	is, _ := r.ln.n.newSettings(r.cfg) // checked by Dial
	is, rs = negotiate(is, rs)
	l := &link{}
	init := newConn(r.ln.n, l, is, r.peer, r.local, append([]byte(nil), cfg.PrivateData...))
	resp := newConn(r.ln.n, l, rs, r.local, r.peer, r.pd)
	init.peer, resp.peer = resp, init
	l.ends = [2]*Conn{init, resp}
	attach(init, resp)

	if cfg.Prepare != nil {
		if err := cfg.Prepare(resp); err != nil {
			resp.Close()
			init.discard()
			r.answer(reqAccepting, reply{rejected: true})
			return nil, fmt.Errorf("loopback: accept request from %s: prepare: %w", r.peer, err)
		}
	}
	if st := r.answer(reqAccepting, reply{conn: init}); st != reqAccepting {
		resp.Close()
		init.discard()
		return nil, fmt.Errorf("loopback: accept request from %s: %s", r.peer, st)
	}
	resp.establish()
	return resp, nil
}

// settings are one side's queue sizes and shared receive queue.
type settings struct {
	sq, rq, ird, ord int
	srq              *srq.Queue
}

func (n *Network) newSettings(cfg rdma.ConnConfig) (settings, error) {
	d, q, err := srq.Depths(cfg,
		rdma.Depths{SendQueue: DefaultQueueDepth, RecvQueue: DefaultQueueDepth, IRD: DefaultReadDepth, ORD: DefaultReadDepth},
		rdma.Depths{SendQueue: MaxQueueDepth, RecvQueue: MaxQueueDepth, IRD: MaxReadDepth, ORD: MaxReadDepth}, n)
	return settings{sq: d.SendQueue, rq: d.RecvQueue, ird: d.IRD, ord: d.ORD, srq: q}, err
}

// attach attaches the conns that have a shared receive queue to it.
func attach(cs ...*Conn) {
	for _, c := range cs {
		if c.srq != nil {
			c.srq.Attach()
		}
	}
}

// negotiate applies RFC 6581 section 9.1 to the initiator's and the
// responder's wishes: the responder's IRD rises to the initiator's ORD (up
// to the maximum), its ORD falls to the initiator's IRD, and the
// initiator's ORD falls to the responder's IRD.
func negotiate(init, resp settings) (settings, settings) {
	resp.ird = min(max(resp.ird, init.ord), MaxReadDepth)
	resp.ord = min(resp.ord, init.ird)
	init.ord = min(init.ord, resp.ird)
	init.ird = max(init.ird, resp.ord)
	return init, resp
}

// Shared receive queue limits. A SharedRecvConfig.Depth of zero picks the
// default; a larger one than the maximum is lowered to it.
const (
	DefaultSharedRecvDepth = 1024
	MaxSharedRecvDepth     = 1 << 20
)

var _ rdma.SharedRecvProvider = (*Network)(nil)

// NewSharedRecvQueue returns a shared receive queue for the network's
// connections.
func (n *Network) NewSharedRecvQueue(cfg rdma.SharedRecvConfig) (rdma.SharedRecvQueue, error) {
	d, err := srq.Depth(cfg, DefaultSharedRecvDepth, MaxSharedRecvDepth)
	if err != nil {
		return nil, fmt.Errorf("loopback: %w", err)
	}
	return srq.New(srq.Config{Name: "loopback", Provider: n, STags: n.stags, MaxSGE: MaxSGE, Depth: d}), nil
}
