package rpcrdma

// Admission: how a Listener keeps its connections within Bounds.MaxConns
// and Bounds.MaxConnsPerAddr without shutting the door on a newcomer.
//
// A request that finds its host at MaxConnsPerAddr, or the Listener at
// MaxConns, makes room rather than being refused, as Linux's RPC server
// closes its least recently used connection when it has too many
// (svc_check_conn_limits in net/sunrpc/svc_xprt.c). The Listener closes,
// among the connections from the request's host (or among all of them, at
// MaxConns):
//
//  1. the oldest that has not completed its handshake: accepted, but
//     nothing received from the requester yet (on iWARP the requester's
//     first message also completes MPA, RFC 5044 Section 7.1.2; the
//     provider evicts handshakes that have not got that far itself);
//     EvictHandshake;
//  2. else the least recently active that has no call in flight; EvictIdle.
//     A call is in flight from when it is handed to the rpc.Server until
//     the server releases it. A call whose arguments are still being
//     pulled is not: a requester that withholds its Read Responses holds
//     its own connection, not the server's work.
//
// A connection with a call in flight when the choice is made is never
// closed; a request that finds every connection it competes with busy is
// refused (LimitMaxConns, LimitMaxConnsPerAddr). An evicted requester
// that is still there reconnects, as Linux's does; DialClient does it for
// a program.
//
// Activity is read without cost to the call path: each choice compares
// the messages every candidate has received with the count the previous
// choice saw, and stamps those that moved with the choice's number; the
// least recently active is the one with the oldest stamp, ties going to
// the oldest connection. Recency is thus exact to the granularity of the
// choices, which a flood makes frequent; among connections that moved
// since the same choice, the one that received fewer messages goes
// first, so that a client calling steadily outlasts connections that made
// one call in the same period. A choice walks the candidates
// once, taking each one's lock briefly: up to MaxConnsPerAddr steps, or
// MaxConns at that limit, and only when a limit is reached.

import (
	"net"
	"sync"
)

// admission is a Listener's count of its connections, in all and by
// remote host, with the open ones listed by host for eviction. Its
// fields are guarded by mu.
type admission struct {
	mu        sync.Mutex
	conns     int                   // open connections, and those being accepted
	perHost   map[string]*hostConns // by remote host
	admitted  uint64                // admissions so far, numbering admitted.seq
	decisions uint64                // choices of a connection to evict, numbering admitted.stamp
}

// hostConns are the connections from one remote host.
type hostConns struct {
	n    int         // open, and being accepted
	open []*admitted // open, in no order; admitted.idx is the index
}

// admitted is a connection a Listener has counted, from its admission to
// its end.
type admitted struct {
	host    string
	seq     uint64     // order of admission
	r       *responder // set once accepted (enlist)
	idx     int        // in its host's open list; -1 when not in it
	counted bool       // cleared when it leaves the count (leave, evict)
	seen    uint64     // messages received, at the last choice that looked
	moved   uint64     // messages received between the last two choices that saw it move
	stamp   uint64     // the choice that last saw it active, or the last one before its admission
}

// hostOf returns the host part of a, or all of it when it has no port
// (the loopback provider's names).
func hostOf(a net.Addr) string {
	s := a.String()
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

// admit counts a new connection from host. When that breaks a limit it
// makes room by taking a connection out of the count, which it returns as
// victim with the reason for the caller to close; when no connection may
// go it returns a nil a and the limit that refuses the request.
func (l *Listener) admit(host string) (a, victim *admitted, r Reason) {
	b := &l.cfg.Bounds
	l.mu.Lock()
	defer l.mu.Unlock()
	hc := l.perHost[host]
	switch {
	case hc != nil && b.maxConnsPerAddr() > 0 && hc.n >= b.maxConnsPerAddr():
		// Evicting from the host makes room under MaxConns too.
		if victim, r = l.chooseLocked(hc); victim == nil {
			return nil, nil, LimitMaxConnsPerAddr
		}
	case b.maxConns() > 0 && l.conns >= b.maxConns():
		if victim, r = l.chooseLocked(nil); victim == nil {
			return nil, nil, LimitMaxConns
		}
	}
	if victim != nil {
		l.uncountLocked(victim)
		hc = l.perHost[host] // the victim may have been its host's last
	}
	if hc == nil {
		hc = &hostConns{}
		l.perHost[host] = hc
	}
	l.conns++
	hc.n++
	l.admitted++
	return &admitted{host: host, seq: l.admitted, idx: -1, counted: true, stamp: l.decisions}, victim, r
}

// chooseLocked returns the connection to close to make room, among hc's
// (all the Listener's if hc is nil), and why; nil if every one has a call
// in flight. l.mu is held; it takes each candidate's responder lock.
func (l *Listener) chooseLocked(hc *hostConns) (*admitted, Reason) {
	l.decisions++
	var unready, idle *admitted
	look := func(a *admitted) {
		n := a.r.received.Load()
		if n == 0 {
			if unready == nil || a.seq < unready.seq {
				unready = a
			}
			return
		}
		if n != a.seen {
			a.seen, a.moved, a.stamp = n, n-a.seen, l.decisions
		}
		if unready != nil || a.r.outstanding() > 0 {
			return
		}
		if idle == nil || a.lessRecent(idle) {
			idle = a
		}
	}
	if hc != nil {
		for _, a := range hc.open {
			look(a)
		}
	} else {
		for _, h := range l.perHost {
			for _, a := range h.open {
				look(a)
			}
		}
	}
	switch {
	case unready != nil:
		return unready, EvictHandshake
	case idle != nil:
		return idle, EvictIdle
	}
	return nil, 0
}

// lessRecent reports whether a was active less recently than b, as far as
// the choices have seen: at an older choice, or at the same one with fewer
// messages since the choice before, or as many and admitted first.
func (a *admitted) lessRecent(b *admitted) bool {
	if a.stamp != b.stamp {
		return a.stamp < b.stamp
	}
	if a.moved != b.moved {
		return a.moved < b.moved
	}
	return a.seq < b.seq
}

// enlist makes a, now accepted as r's connection, a candidate for
// eviction, unless it has ended already.
func (l *Listener) enlist(a *admitted, r *responder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !a.counted {
		return
	}
	a.r = r
	hc := l.perHost[a.host]
	a.idx = len(hc.open)
	hc.open = append(hc.open, a)
}

// leave uncounts a, if it is still counted.
func (l *Listener) leave(a *admitted) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.uncountLocked(a)
}

// uncountLocked takes a out of the count and the open list; l.mu is held.
func (l *Listener) uncountLocked(a *admitted) {
	if !a.counted {
		return
	}
	a.counted = false
	l.conns--
	hc := l.perHost[a.host]
	hc.n--
	if a.idx >= 0 {
		last := len(hc.open) - 1
		hc.open[a.idx] = hc.open[last]
		hc.open[a.idx].idx = a.idx
		hc.open[last] = nil
		hc.open = hc.open[:last]
		a.idx = -1
	}
	if hc.n == 0 {
		delete(l.perHost, a.host)
	}
}

// evict closes victim, which admit has taken out of the count, for r.
func (l *Listener) evict(victim *admitted, r Reason) {
	victim.r.c.closeFor(r)
}
