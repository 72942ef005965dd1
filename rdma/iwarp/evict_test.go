package iwarp

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestHandshakeEviction: TCP connections that never send their MPA
// Request, beyond MaxHandshakesPerHost, close the oldest from their host
// instead of being refused: the newest stay open, the oldest see the
// connection end, each eviction is counted, and a well-behaved initiator
// dialing during the flood connects at once.
func TestHandshakeEviction(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	const (
		perHost = 4
		flood   = 20
	)
	p := newProvider(t, Options{MaxHandshakes: 64, MaxHandshakesPerHost: perHost, HandshakeTimeout: time.Minute})
	s := serve(t, p, rdma.ConnConfig{})
	ln := s.ln.(*Listener)
	var socks []net.Conn
	defer func() {
		for _, nc := range socks {
			nc.Close()
		}
	}()
	for i := range flood {
		nc, err := net.DialTimeout("tcp", ln.Addr().String(), rawTimeout)
		if err != nil {
			t.Fatalf("TCP connection %d: %v", i, err)
		}
		socks = append(socks, nc)
	}
	waitCount(t, "the flood's evictions", func() bool { return ln.HandshakesEvicted() == flood-perHost })

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	c, err := newProvider(t, Options{}).Dial(ctx, ln.Addr().String(), rdma.ConnConfig{})
	if err != nil {
		t.Fatalf("a well-behaved initiator during the flood: %v", err)
	}
	defer c.Close()
	s.next(t)
	t.Logf("connected in %v, %d handshakes evicted", time.Since(start), ln.HandshakesEvicted())

	// Its own handshake took a place too: the oldest but perHost-1 of
	// the flood are closed, the newest perHost-1 still open.
	for i, nc := range socks {
		closed := peerEnded(t, nc)
		if want := i < flood-perHost+1; closed != want {
			t.Errorf("flood connection %d: closed %v, want %v", i, closed, want)
		}
	}
	if st := p.Stats(); st.HandshakesEvicted != flood-perHost+1 {
		t.Errorf("provider counts %d evictions, want %d", st.HandshakesEvicted, flood-perHost+1)
	}
}

// peerEnded reports whether the listener has closed nc: a read ends
// with EOF or a reset rather than waiting.
func peerEnded(t *testing.T, nc net.Conn) bool {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var b [1]byte
	_, err := nc.Read(b[:])
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return false
	case err == nil:
		t.Fatal("the listener sent bytes to a connection that sent no Request")
	case !errors.Is(err, io.EOF):
		t.Logf("read: %v", err)
	}
	return true
}

// waitCount polls cond every millisecond for up to rawTimeout.
func waitCount(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(rawTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", rawTimeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}
