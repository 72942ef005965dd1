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
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[a] = struct{}{}
	s.mu.Unlock()

	var err error
	for {
		t, aerr := a.Accept()
		if aerr != nil {
			err = aerr
			break
		}
		sc := s.addConn(t)
		if sc == nil {
			t.Close()
			continue // a is being closed
		}
		go s.serveConn(sc)
	}

	return s.leave(func() { delete(s.listeners, a) }, err)
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

// streamAcceptor accepts record-marking transports from a net.Listener.
type streamAcceptor struct {
	l    net.Listener
	opts *StreamOptions
}

func (a streamAcceptor) Accept() (Transport, error) {
	c, err := a.l.Accept()
	if err != nil {
		return nil, err
	}
	return NewStreamTransport(c, a.opts), nil
}

func (a streamAcceptor) Close() error { return a.l.Close() }
