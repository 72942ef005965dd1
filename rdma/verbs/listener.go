//go:build linux && cgo && verbs

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// listenBacklog bounds the connection requests waiting for Accept; more
// are rejected.
const listenBacklog = 64

// Listener is an rdma_cm listening identifier. Its methods are safe for
// concurrent use.
type Listener struct {
	p    *Provider
	ch   *channel
	id   *C.struct_rdma_cm_id
	addr *Addr

	reqs   chan *ConnRequest
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup

	mu      sync.Mutex
	pending map[*C.struct_rdma_cm_id]*ConnRequest // requests not yet answered
}

var _ rdma.Listener = (*Listener)(nil)

// Listen binds addr ("host:port"; port 0 picks one) and listens. Binding
// a device's own IP address binds that device; a wildcard address listens
// on every device, and with Options.Device set, requests arriving on
// another device are rejected.
func (p *Provider) Listen(ctx context.Context, addr string) (rdma.Listener, error) {
	ap, err := parseAddr(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("verbs: listen %s: %w", addr, err)
	}
	ch, err := p.newChannel()
	if err != nil {
		return nil, fmt.Errorf("verbs: listen %s: %w", addr, err)
	}
	id, err := p.bindListen(ch, ap)
	if err != nil {
		ch.destroy()
		return nil, fmt.Errorf("verbs: listen %s: %w", addr, err)
	}
	l := &Listener{
		p: p, ch: ch, id: id, addr: localAddr(id, deviceName(id)),
		reqs:    make(chan *ConnRequest, listenBacklog),
		closed:  make(chan struct{}),
		pending: make(map[*C.struct_rdma_cm_id]*ConnRequest),
	}
	l.wg.Add(1)
	go l.loop()
	return l, nil
}

// bindListen creates an rdma_cm identifier on ch, binds it to ap and
// listens on it. For port 0 it takes another identifier when the port
// rdma_cm picked is taken (retryPicked); a port the caller chose fails at
// once.
func (p *Provider) bindListen(ch *channel, ap netip.AddrPort) (*C.struct_rdma_cm_id, error) {
	fam, hi, lo, port := sockaddr(ap)
	var id *C.struct_rdma_cm_id
	attempts, err := retryPicked(func() error {
		var err error
		if id, err = p.createID(ch); err != nil {
			return err
		}
		if rc := C.shim_bind_addr(id, fam, hi, lo, port); rc < 0 {
			err = fmt.Errorf("rdma_bind_addr: %w", errnoErr(rc))
		} else if id.verbs != nil {
			err = p.checkDevice(id)
		}
		if err == nil {
			if r, errno := C.rdma_listen(id, listenBacklog); r != 0 {
				if port == 0 {
					errno = pickedPortErr(errno)
				}
				err = fmt.Errorf("rdma_listen: %w", errno)
			}
		}
		if err != nil {
			p.destroyID(id)
			id = nil
		}
		return err
	})
	if err != nil && attempts > 1 {
		err = fmt.Errorf("%w; %d ports tried", err, attempts)
	}
	return id, err
}

// loop reads the listening channel: connect requests, and events of
// requests not yet accepted (their initiator gave up).
func (l *Listener) loop() {
	defer l.wg.Done()
	for {
		ev, err := l.ch.get(context.Background())
		if err != nil {
			return // closed
		}
		switch ev._type {
		case C.RDMA_CM_EVENT_CONNECT_REQUEST:
			l.request(&ev)
		default:
			l.mu.Lock()
			if r, ok := l.pending[ev.id]; ok {
				r.gone = true
			}
			l.mu.Unlock()
			l.p.log.Debug("verbs: listener event", "event", eventName(ev._type), "status", int(ev.status))
		}
	}
}

func (l *Listener) request(ev *C.struct_shim_event) {
	l.p.res.ids.Add(1) // rdma_cm created ev.id for this request
	r := &ConnRequest{
		l: l, id: ev.id, pd: goBytes(ev),
		// rdma_cm reports the initiator's values from the responder's
		// side: its responder resources are the initiator's ORD.
		peerIRD: int(ev.initiator_depth), peerORD: int(ev.responder_resources),
		local: localAddr(ev.id, deviceName(ev.id)), remote: peerAddr(ev.id, deviceName(ev.id)),
	}
	if err := l.p.checkDevice(ev.id); err != nil {
		l.p.log.Debug("verbs: request refused", "err", err)
		C.rdma_reject(ev.id, nil, 0)
		l.p.destroyID(ev.id)
		return
	}
	l.mu.Lock()
	l.pending[ev.id] = r
	l.mu.Unlock()
	select {
	case l.reqs <- r:
	default:
		r.Reject(nil)
	}
}

// Accept returns the next connection request.
func (l *Listener) Accept(ctx context.Context) (rdma.ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.closed:
		return nil, fmt.Errorf("verbs: accept on %v: %w", l.addr, net.ErrClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("verbs: accept on %v: %w", l.addr, ctx.Err())
	}
}

// Addr returns the bound address (an *Addr).
func (l *Listener) Addr() net.Addr { return l.addr }

// Close stops listening and rejects the requests not yet accepted.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.ch.wake()
		l.wg.Wait()
		l.mu.Lock()
		var rs []*ConnRequest
		for _, r := range l.pending {
			rs = append(rs, r)
		}
		l.mu.Unlock()
		for _, r := range rs {
			r.Reject(nil)
		}
		l.p.destroyID(l.id)
		l.ch.destroy()
	})
	return nil
}

// ConnRequest is an initiator's connection request. Its methods are safe
// for concurrent use.
type ConnRequest struct {
	l                *Listener
	id               *C.struct_rdma_cm_id
	pd               []byte
	peerIRD, peerORD int
	local, remote    *Addr

	mu       sync.Mutex
	answered bool
	gone     bool // guarded by l.mu
}

var _ rdma.ConnRequest = (*ConnRequest)(nil)

// PrivateData returns the initiator's private data. On InfiniBand and RoCE
// it is always MaxDialPrivateData bytes, zero-padded after what the
// initiator sent; on iWARP it has the length the initiator sent.
func (r *ConnRequest) PrivateData() []byte { return r.pd }

// RemoteAddr returns the initiator's address (an *Addr).
func (r *ConnRequest) RemoteAddr() net.Addr { return r.remote }

// LocalAddr returns the address the request arrived on (an *Addr naming
// the device).
func (r *ConnRequest) LocalAddr() net.Addr { return r.local }

// take marks r answered and removes it from the listener; it reports false
// if it was already answered.
func (r *ConnRequest) take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered {
		return false
	}
	r.answered = true
	r.l.mu.Lock()
	delete(r.l.pending, r.id)
	r.l.mu.Unlock()
	return true
}

// Reject refuses the request with privateData (at most
// MaxRejectPrivateData bytes).
func (r *ConnRequest) Reject(privateData []byte) error {
	if err := rdma.CheckPrivateDataMax("reject", privateData, MaxRejectPrivateData); err != nil {
		return err
	}
	if !r.take() {
		return fmt.Errorf("verbs: reject request from %v: already answered: %w", r.remote, rdma.ErrInvalid)
	}
	pd, free := cBytes(privateData)
	C.rdma_reject(r.id, pd, C.uint8_t(len(privateData)))
	free()
	r.l.p.destroyID(r.id)
	return nil
}

// Accept creates the queue pair on the request's device, runs
// cfg.Prepare, and accepts with cfg.PrivateData (at most
// MaxAcceptPrivateData bytes). IRD and ORD are negotiated as RFC 6581
// section 9.1 says, from the values the request carries.
func (r *ConnRequest) Accept(ctx context.Context, cfg rdma.ConnConfig) (rdma.Conn, error) {
	if err := rdma.CheckPrivateDataMax("accept", cfg.PrivateData, MaxAcceptPrivateData); err != nil {
		return nil, err
	}
	want, err := cfg.Depths(defaultDepths, maxDepths)
	if err != nil {
		return nil, fmt.Errorf("verbs: accept %v: %w", r.remote, err)
	}
	if err := r.l.p.checkSharedRecv(cfg.SharedRecv); err != nil {
		return nil, fmt.Errorf("verbs: accept %v: %w", r.remote, err)
	}
	if !r.take() {
		return nil, fmt.Errorf("verbs: accept request from %v: already answered: %w", r.remote, rdma.ErrInvalid)
	}
	c, err := r.accept(ctx, want, cfg)
	if err != nil {
		return nil, fmt.Errorf("verbs: accept %v: %w", r.remote, err)
	}
	return c, nil
}

func (r *ConnRequest) accept(ctx context.Context, want rdma.Depths, cfg rdma.ConnConfig) (*Conn, error) {
	p := r.l.p
	ch, err := p.newChannel()
	if err != nil {
		C.rdma_reject(r.id, nil, 0)
		p.destroyID(r.id)
		return nil, err
	}
	c := &Conn{p: p, ch: ch, id: r.id, peerPD: r.pd}
	c.srq, _ = cfg.SharedRecv.(*SharedRecvQueue) // setup checks it
	ok := false
	defer func() {
		if !ok {
			C.rdma_reject(r.id, nil, 0)
			c.destroy()
		}
	}()
	if rc, err := C.rdma_migrate_id(r.id, ch.ch); rc != 0 {
		return nil, fmt.Errorf("rdma_migrate_id: %w", err)
	}
	r.l.mu.Lock()
	gone := r.gone
	r.l.mu.Unlock()
	if gone {
		return nil, fmt.Errorf("the initiator gave up: %w", net.ErrClosed)
	}
	dev, err := queryDevice(r.id)
	if err != nil {
		return nil, err
	}
	d := dev.clamp(want)
	// RFC 6581 section 9.1 at the responder.
	if r.peerORD > 0 {
		d.IRD = min(max(d.IRD, r.peerORD), dev.maxIRD)
	}
	if r.peerIRD > 0 {
		d.ORD = min(d.ORD, r.peerIRD)
	}
	if err := c.setup(dev, d); err != nil {
		return nil, err
	}
	c.finish(dev, d)
	if cfg.Prepare != nil {
		if err := cfg.Prepare(c); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	pd, free := cBytes(cfg.PrivateData)
	rc := C.shim_accept(r.id, pd, C.int(len(cfg.PrivateData)), C.int(d.IRD), C.int(d.ORD))
	free()
	if rc < 0 {
		return nil, fmt.Errorf("rdma_accept: %w", errnoErr(rc))
	}
	ev, err := ch.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("wait for the connection: %w", err)
	}
	if ev._type != C.RDMA_CM_EVENT_ESTABLISHED {
		return nil, fmt.Errorf("wait for the connection: rdma_cm %s (status %d): %w", eventName(ev._type), int(ev.status), net.ErrClosed)
	}
	c.start()
	ok = true
	return c, nil
}
