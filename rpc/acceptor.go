package rpc

import (
	"io"
	"net"
)

// An Acceptor hands a Server the transport of each new connection, for
// transports that are not record marking over a net.Conn: rpcrdma.Serve
// serves an rpcrdma.Listener through one. Accept waits for the next
// connection; Close makes a blocked Accept return an error. Server calls
// Accept from one goroutine and Close from another.
type Acceptor interface {
	Accept() (Transport, error)
	io.Closer
}

// ServeAcceptor serves each transport a accepts until a fails or the
// server shuts down, as ServeListener does for a net.Listener: it returns
// ErrServerClosed after Shutdown or Close (which close a), and Accept's
// error otherwise, leaving a open. Transports already accepted go on being
// served; Shutdown waits for them.
func (s *Server) ServeAcceptor(a Acceptor) error {
	return s.serveAccepted(a, func() (Transport, net.Conn, error) {
		t, err := a.Accept()
		return t, nil, err
	})
}

// serveAccepted is ServeAcceptor and ServeListener: it serves each
// transport accept returns until accept fails, l being what Shutdown and
// Close close to make it fail. accept also returns the net.Conn under the
// transport when there is one to report to ServerOptions.ConnState.
func (s *Server) serveAccepted(l io.Closer, accept func() (Transport, net.Conn, error)) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()

	var err error
	for {
		t, c, aerr := accept()
		if aerr != nil {
			err = aerr
			break
		}
		s.setState(c, StateNew, nil)
		sc := s.addConn(t, c)
		if sc == nil {
			t.Close()
			s.setState(c, StateClosed, ErrServerClosed)
			continue // l is being closed
		}
		go s.serveConn(sc)
	}

	return s.leave(func() { delete(s.listeners, l) }, err)
}

// leave runs remove, which takes a connection or a listener out of the
// server's tables, under s.mu, and returns what serving it returns: err,
// or ErrServerClosed once the server is closing.
func (s *Server) leave(remove func(), err error) error {
	s.mu.Lock()
	remove()
	closing := s.closing
	s.checkIdle()
	s.mu.Unlock()
	if closing {
		return ErrServerClosed
	}
	return err
}
