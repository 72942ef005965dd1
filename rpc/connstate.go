package rpc

// Connection states: what ServerOptions.ConnState reports about each
// connection ServeListener accepts, as net/http's Server.ConnState does
// for HTTP (https://pkg.go.dev/net/http#ConnState).
//
// A connection Accept returns is StateNew before anything is read from
// it, and StateClosed once the Server is done with it: its transport is
// closed and every call it brought has finished, whatever ended it (the
// peer, an I/O or framing error, Shutdown or Close). One accepted while
// the server shuts down is closed at once and reports both states too.
//
// Only ServeListener's connections are reported: a transport given to
// Serve belongs to the program that accepted it, and an Acceptor's
// transports are followed by their own package (rpcrdma.Config.ConnState
// for RPC-over-RDMA). Per-call states (net/http's StateActive and
// StateIdle) are not reported either: an RPC connection carries many
// calls at once, and ServerStats counts them.

import (
	"net"
	"strconv"
)

// ConnState is a state of a connection ServeListener has accepted,
// reported to ServerOptions.ConnState. Each connection reports StateNew,
// then StateClosed; each state once, in that order, with the net.Conn
// the listener returned.
type ConnState uint8

const (
	// StateNew: the listener has returned the connection, and the Server
	// is about to serve it; nothing has been read from it yet.
	StateNew ConnState = iota
	// StateClosed: the Server is done with the connection: it is closed
	// and no call on it runs any more. It is the last state reported.
	StateClosed
)

var connStateNames = [...]string{StateNew: "new", StateClosed: "closed"}

// String returns "new" or "closed".
func (s ConnState) String() string {
	if int(s) < len(connStateNames) {
		return connStateNames[s]
	}
	return "ConnState(" + strconv.Itoa(int(s)) + ")"
}

// setState reports state s of c, with err, to ServerOptions.ConnState, if
// any. c is nil for a transport that did not come from ServeListener:
// nothing is reported for it.
func (s *Server) setState(c net.Conn, st ConnState, err error) {
	if c != nil && s.connState != nil {
		s.connState(c, st, err)
	}
}

// reportClosed reports StateClosed for c, if not nil, whose transport
// ended with err: the err is ErrServerClosed if the server was shutting
// down by then (Shutdown and Close mark it so before they close a
// transport), err otherwise.
func (s *Server) reportClosed(c net.Conn, err error) {
	if c == nil || s.connState == nil {
		return
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		err = ErrServerClosed
	}
	s.connState(c, StateClosed, err)
}
