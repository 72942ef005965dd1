package rpc

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
)

// connEvent is one call of ServerOptions.ConnState.
type connEvent struct {
	c     net.Conn
	state ConnState
	err   error
}

// connStates records what ServerOptions.ConnState reports, in order.
type connStates struct {
	mu     sync.Mutex
	events []connEvent
	closed chan net.Conn // each connection reported closed, as it is
}

func newConnStates() *connStates { return &connStates{closed: make(chan net.Conn, 16)} }

// hook is the ServerOptions.ConnState.
func (r *connStates) hook(c net.Conn, s ConnState, err error) {
	r.mu.Lock()
	r.events = append(r.events, connEvent{c, s, err})
	r.mu.Unlock()
	if s == StateClosed {
		r.closed <- c
	}
}

func (r *connStates) snapshot() []connEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]connEvent(nil), r.events...)
}

// waitClosed returns the next connection reported closed, failing t if
// none is within 10 seconds.
func (r *connStates) waitClosed(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-r.closed:
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("no connection reported closed; reported: %v", r.snapshot())
		return nil
	}
}

// lifecycles checks that each connection reported went through StateNew
// with no error, then StateClosed, each once and in that order, and
// returns the errors StateClosed came with, by connection.
func (r *connStates) lifecycles(t *testing.T) map[net.Conn]error {
	t.Helper()
	seen := make(map[net.Conn]bool) // StateNew reported
	closed := make(map[net.Conn]error)
	for i, e := range r.snapshot() {
		_, done := closed[e.c]
		switch {
		case e.state == StateNew && !seen[e.c] && e.err == nil:
			seen[e.c] = true
		case e.state == StateClosed && seen[e.c] && !done:
			closed[e.c] = e.err
		default:
			t.Errorf("report %d: %v %v (err %v), after StateNew: %v, after StateClosed: %v", i, e.c.RemoteAddr(), e.state, e.err, seen[e.c], done)
		}
	}
	for c := range seen {
		if _, ok := closed[c]; !ok {
			t.Errorf("%v: StateNew, not StateClosed", c.RemoteAddr())
		}
	}
	return closed
}

// wantClosedByServer checks that the lifecycles of n connections were
// reported, each closed with ErrServerClosed.
func (r *connStates) wantClosedByServer(t *testing.T, n int) {
	t.Helper()
	closed := r.lifecycles(t)
	if len(closed) != n {
		t.Errorf("%d connections reported, want %d", len(closed), n)
	}
	for c, err := range closed {
		if err != ErrServerClosed {
			t.Errorf("%v: StateClosed with %v, want ErrServerClosed", c.RemoteAddr(), err)
		}
	}
}

// connStateServer is a test server whose ConnState r records, served
// on a loopback listener.
type connStateServer struct {
	r      *connStates
	srv    *Server
	st     *testState
	addr   string
	served chan error // what ServeListener returns
}

func serveConnStates(t *testing.T) *connStateServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &connStateServer{r: newConnStates(), addr: l.Addr().String(), served: make(chan error, 1)}
	s.srv, s.st = newTestServer(&ServerOptions{ConnState: s.r.hook})
	go func() { s.served <- s.srv.ServeListener(l) }()
	return s
}

// checkServed checks that ServeListener returns ErrServerClosed.
func (s *connStateServer) checkServed(t *testing.T) {
	t.Helper()
	if err := <-s.served; err != ErrServerClosed {
		t.Errorf("ServeListener = %v, want ErrServerClosed", err)
	}
}

// dialConnStates connects a client to addr and makes one NULL call on
// it, so that the server has accepted the connection; it returns the
// client and the address its connection has on the client's side.
func dialConnStates(t *testing.T, addr string) (*Client, net.Addr) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(NewStreamTransport(nc, nil))
	t.Cleanup(func() { cli.Close() })
	if err := cli.Null(ctxTimeout(t, 10*time.Second), testProg, 1); err != nil {
		t.Fatal(err)
	}
	return cli, nc.LocalAddr()
}

// TestConnStatePeerClose: a connection ServeListener accepts reports
// StateNew with the accepted net.Conn, and StateClosed with io.EOF once
// the peer closes it; Shutdown then reports nothing more.
func TestConnStatePeerClose(t *testing.T) {
	leaktest.Check(t)
	s := serveConnStates(t)
	cli, local := dialConnStates(t, s.addr)
	if ev := s.r.snapshot(); len(ev) != 1 || ev[0].state != StateNew || ev[0].c.RemoteAddr().String() != local.String() {
		t.Fatalf("reported while the connection is open: %v, want StateNew of the connection from %v", ev, local)
	}
	cli.Close()
	c := s.r.waitClosed(t)
	if err := s.srv.Shutdown(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	s.checkServed(t)
	closed := s.r.lifecycles(t)
	if len(closed) != 1 {
		t.Fatalf("%d connections reported, want 1", len(closed))
	}
	err := closed[c]
	if _, ok := errors.AsType[*ConnError](err); !ok || !errors.Is(err, io.EOF) {
		t.Errorf("StateClosed after the peer closed: err %v, want a *ConnError with io.EOF", err)
	}
}

// TestConnStateShutdown: Shutdown closes an idle connection at once and
// one with a call in progress after the call, reporting each closed with
// ErrServerClosed before it returns, and the call gets its reply.
func TestConnStateShutdown(t *testing.T) {
	leaktest.Check(t)
	s := serveConnStates(t)
	busy, busyAddr := dialConnStates(t, s.addr)
	_, idleAddr := dialConnStates(t, s.addr)
	ctx := ctxTimeout(t, 10*time.Second)
	called := make(chan error, 1)
	go func() { _, err := busy.Call(ctx, &Request{Prog: testProg, Vers: 1, Proc: procBlock}); called <- err }()
	<-s.st.started
	shut := make(chan error, 1)
	go func() { shut <- s.srv.Shutdown(ctx) }()
	if c := s.r.waitClosed(t); c.RemoteAddr().String() != idleAddr.String() {
		t.Errorf("first reported closed: the connection from %v, want the idle one from %v", c.RemoteAddr(), idleAddr)
	}
	select {
	case c := <-s.r.closed:
		t.Fatalf("the connection from %v reported closed with a call in progress", c.RemoteAddr())
	case <-time.After(50 * time.Millisecond):
	}
	close(s.st.release)
	if err := <-called; err != nil {
		t.Errorf("the call in progress during Shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	// Shutdown has returned: every StateClosed has been reported.
	s.r.wantClosedByServer(t, 2)
	if ev := s.r.snapshot(); ev[len(ev)-1].c.RemoteAddr().String() != busyAddr.String() {
		t.Errorf("last reported: the connection from %v, want the busy one from %v", ev[len(ev)-1].c.RemoteAddr(), busyAddr)
	}
	s.checkServed(t)
}

// TestConnStateClose: Close reports the connections it closes with
// ErrServerClosed.
func TestConnStateClose(t *testing.T) {
	leaktest.Check(t)
	s := serveConnStates(t)
	dialConnStates(t, s.addr)
	s.srv.Close()
	s.r.waitClosed(t)
	s.checkServed(t)
	s.r.wantClosedByServer(t, 1)
}

// lateListener is a listener whose one connection comes out of Accept
// only once Close has been called, as one that arrived just before the
// listener closed does; Accept then fails with net.ErrClosed.
type lateListener struct {
	accepting chan struct{} // closed by the first Accept
	closed    chan struct{} // closed by Close
	once      sync.Once
	mu        sync.Mutex
	conn      net.Conn // until Accept returns it
}

func (l *lateListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	select {
	case <-l.accepting:
	default:
		close(l.accepting)
	}
	l.mu.Unlock()
	<-l.closed
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.conn; c != nil {
		l.conn = nil
		return c, nil
	}
	return nil, net.ErrClosed
}

func (l *lateListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *lateListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// TestConnStateAcceptedWhileClosing: a connection accepted once Close has
// begun is closed without being served, and reports StateNew and
// StateClosed with ErrServerClosed all the same.
func TestConnStateAcceptedWhileClosing(t *testing.T) {
	leaktest.Check(t)
	r := newConnStates()
	srv, _ := newTestServer(&ServerOptions{ConnState: r.hook})
	c1, c2 := net.Pipe()
	defer c2.Close()
	l := &lateListener{accepting: make(chan struct{}), closed: make(chan struct{}), conn: c1}
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(l) }()
	<-l.accepting
	srv.Close()
	if err := <-served; err != ErrServerClosed {
		t.Errorf("ServeListener = %v, want ErrServerClosed", err)
	}
	// ServeListener has returned: it reported the connection.
	r.wantClosedByServer(t, 1)
	if ev := r.snapshot(); len(ev) == 0 || ev[0].c != c1 {
		t.Errorf("reported: %v, want the accepted connection", ev)
	}
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("reading from the connection accepted while closing: %v, want EOF (closed)", err)
	}
}

// TestConnStateServeReportsNothing: a transport given to Serve is the
// program's own, and reports no state.
func TestConnStateServeReportsNothing(t *testing.T) {
	leaktest.Check(t)
	r := newConnStates()
	srv, _ := newTestServer(&ServerOptions{ConnState: r.hook})
	a, b := memPair()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(b) }()
	cli := NewClient(a)
	if err := cli.Null(ctxTimeout(t, 10*time.Second), testProg, 1); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	<-served
	srv.Close()
	if ev := r.snapshot(); len(ev) != 0 {
		t.Errorf("Serve reported %v", ev)
	}
}

func TestConnStateString(t *testing.T) {
	for s, want := range map[ConnState]string{StateNew: "new", StateClosed: "closed", 7: "ConnState(7)"} {
		if got := s.String(); got != want {
			t.Errorf("ConnState(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
}
