package rpcrdma

// Connection states: what Config.ConnState reports about each connection
// a Listener admits, as net/http's Server.ConnState does for HTTP.
//
// A request the Listener admits (within Bounds.MaxConns and
// Bounds.MaxConnsPerAddr, admission.go) is StateNew before its handshake
// starts. Its handshake then either completes, StateEstablished, just
// before Accept returns it, or fails (the requester gave up, Prepare
// failed, Bounds.HandshakeTimeout passed, the shared receive pool was
// full, Accept's ctx ended): StateClosed at once. An established
// connection reports StateClosed when it is closed, whatever ended it
// (the peer, an eviction or another limit, the server): the first Close
// reports it as it returns, after the connection's loop and side
// goroutines have exited, so that its Stats and Err are final. Serve's
// rpc.Server closes each connection it serves when it ends; a program
// that calls Accept itself closes each Conn (as it must, to free it), and
// StateClosed comes then, not when the peer goes. A request
// refused without being admitted (every connection it competes with
// busy) reports nothing; the Listener counts it (ListenerStats.Limits).
//
// Per-call states (net/http's StateActive and StateIdle) are not
// reported: calls on an RPC-over-RDMA connection are many at once, and
// rpc.ServerStats counts them.

import (
	"net"
	"strconv"
)

// ConnState is a state of a connection a Listener has admitted, reported
// to Config.ConnState. Each connection goes through StateNew, then
// StateEstablished unless its handshake fails, then StateClosed; each
// state is reported once, in that order, for the same *Conn.
//
// The hook runs on the goroutine that makes the change, with the
// connection's work waiting for it, so it must not block: StateNew and
// StateEstablished run on the goroutine calling Accept (under Serve, the
// one accepting connections: no other connection is accepted meanwhile);
// StateClosed for a failed handshake there too, and otherwise on the
// goroutine whose Close ends the connection (under Serve, the
// rpc.Server's goroutine for the connection, before Shutdown counts the
// connection done). It is called for different connections concurrently.
// Since StateClosed runs within Close, the hook must not wait for a lock
// that a goroutine holds while it closes a connection.
type ConnState uint8

const (
	// StateNew: the Listener has admitted a connection request and its
	// handshake is about to start. Until StateEstablished the Conn is
	// not connected: only Info, RemoteAddr and Err may be called on it,
	// within the hook.
	StateNew ConnState = iota
	// StateEstablished: the handshake completed; the connection is about
	// to be returned by Accept (and served, under Serve). Info gives what
	// it negotiated.
	StateEstablished
	// StateClosed: the connection has ended, or its handshake failed;
	// Err says why. It is the last state reported.
	StateClosed
)

var connStateNames = [...]string{StateNew: "new", StateEstablished: "established", StateClosed: "closed"}

// String returns "new", "established" or "closed".
func (s ConnState) String() string {
	if int(s) < len(connStateNames) {
		return connStateNames[s]
	}
	return "ConnState(" + strconv.Itoa(int(s)) + ")"
}

// setState reports s to the Listener's Config.ConnState, if any (Dial
// clears it: a dialed connection reports nothing).
func (c *Conn) setState(s ConnState) {
	if f := c.cfg.ConnState; f != nil {
		f(c, s)
	}
}

// reportClosed reports StateClosed unless it has been reported.
func (c *Conn) reportClosed() {
	if c.stateClosed.CompareAndSwap(false, true) {
		c.setState(StateClosed)
	}
}

// handshakeFailed records err as why a responder's handshake failed,
// unless the connection has an error already (Prepare ran and failed it),
// and reports StateClosed.
func (c *Conn) handshakeFailed(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = c.connErr(err)
	}
	c.errMu.Unlock()
	c.reportClosed()
}

// addrs returns the connection's local and remote addresses: its RDMA
// connection's once set up, the request's before.
func (c *Conn) addrs() (local, remote net.Addr) {
	if c.rc != nil {
		return c.rc.LocalAddr(), c.rc.RemoteAddr()
	}
	if c.creq != nil {
		return c.creq.LocalAddr(), c.creq.RemoteAddr()
	}
	return nil, nil
}
