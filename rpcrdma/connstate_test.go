package rpcrdma

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// failHandshakes is a provider whose Listener fails the handshakes of its
// first requests: the first it rejects before accepting, the second fails
// in Prepare, after the connection's own Prepare has run.
type failHandshakes struct {
	rdma.Provider
	n *atomic.Int32 // requests seen
}

func (p failHandshakes) Listen(ctx context.Context, addr string) (rdma.Listener, error) {
	l, err := p.Provider.Listen(ctx, addr)
	return failListener{l, p.n}, err
}

type failListener struct {
	rdma.Listener
	n *atomic.Int32
}

func (l failListener) Accept(ctx context.Context) (rdma.ConnRequest, error) {
	r, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return failRequest{r, l.n.Add(1)}, nil
}

type failRequest struct {
	rdma.ConnRequest
	seq int32
}

func (r failRequest) Accept(ctx context.Context, cfg rdma.ConnConfig) (rdma.Conn, error) {
	switch r.seq {
	case 1:
		r.Reject(nil)
		return nil, errors.New("test: request 1 rejected before accepting")
	case 2:
		prepare := cfg.Prepare
		cfg.Prepare = func(rc rdma.Conn) error {
			if err := prepare(rc); err != nil {
				return err
			}
			return errors.New("test: request 2 failed after Prepare")
		}
	}
	return r.ConnRequest.Accept(ctx, cfg)
}

// stateLog records what Config.ConnState reports, by connection.
type stateLog struct {
	mu     sync.Mutex
	order  []*Conn // in their StateNew order
	states map[*Conn][]ConnState
	remote map[*Conn]net.Addr // at StateNew
	errs   map[*Conn]error    // at StateClosed
}

func newStateLog() *stateLog {
	return &stateLog{states: map[*Conn][]ConnState{}, remote: map[*Conn]net.Addr{}, errs: map[*Conn]error{}}
}

func (s *stateLog) hook(c *Conn, st ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case StateNew:
		s.order = append(s.order, c)
		s.remote[c] = c.RemoteAddr()
		c.Info() // safe before the handshake
	case StateClosed:
		s.errs[c] = c.Err()
	}
	s.states[c] = append(s.states[c], st)
}

// closed returns how many connections have reported StateClosed.
func (s *stateLog) closed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errs)
}

// TestConnState: Config.ConnState hears, for each connection Serve
// accepts, StateNew, StateEstablished and StateClosed, each once and in
// that order, and StateNew then StateClosed for a handshake that fails
// (rejected, or failing after Prepare); a connection evicted to make room
// under Bounds.MaxConns closes with the eviction as its Err, one the peer
// closes with the disconnection. A request refused is not reported, and a
// requester ignores ConnState.
func TestConnState(t *testing.T) {
	leaktest.Check(t)
	ctx := ctxT(t)
	lp := loopback.New()
	p := failHandshakes{lp, new(atomic.Int32)}
	log := newStateLog()
	l, err := Listen(ctx, p, "", &Config{ConnState: log.hook, Bounds: Bounds{MaxConns: 1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer()
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, l, srv) }()

	for i := range 2 {
		if conn, err := Dial(ctx, p, l.Addr().String(), nil); err == nil {
			conn.Close()
			t.Fatalf("request %d: handshake did not fail", i+1)
		}
	}
	waitFor(t, "the failed handshakes reported", func() bool { return log.closed() == 2 })

	dialCfg := &Config{ConnState: func(*Conn, ConnState) { t.Error("a requester called Config.ConnState") }}
	evicted, err := dialNull(t, ctx, p, l)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(ctx, p, l.Addr().String(), dialCfg)
	if err != nil {
		t.Fatal(err)
	}
	cli := rpc.NewClient(conn)
	if err := cli.Null(ctx, testProg, testVers); err != nil {
		t.Fatal(err)
	}
	if err := evicted.Null(ctx, testProg, testVers); err == nil {
		t.Fatal("the idle connection was not evicted at MaxConns")
	}
	cli.Close()
	waitFor(t, "every connection closed", func() bool { return log.closed() == 4 })
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, rpc.ErrServerClosed) {
		t.Errorf("Serve returned %v, want rpc.ErrServerClosed", err)
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.order) != 4 {
		t.Fatalf("%d connections reported, want 4", len(log.order))
	}
	failed := []ConnState{StateNew, StateClosed}
	full := []ConnState{StateNew, StateEstablished, StateClosed}
	for i, c := range log.order {
		want := full
		if i < 2 {
			want = failed
		}
		if got := log.states[c]; !slices.Equal(got, want) {
			t.Errorf("connection %d: states %v, want %v", i+1, got, want)
		}
		if log.remote[c] == nil {
			t.Errorf("connection %d: no remote address at StateNew", i+1)
		}
		if log.errs[c] == nil {
			t.Errorf("connection %d: Err is nil at StateClosed", i+1)
		}
	}
	if le, ok := errors.AsType[*LimitError](log.errs[log.order[2]]); !ok || le.Reason != EvictIdle {
		t.Errorf("the evicted connection closed with %v, want an evict_idle LimitError", log.errs[log.order[2]])
	}
	if err := log.errs[log.order[3]]; !errors.Is(err, rdma.ErrDisconnected) {
		t.Errorf("the connection the peer closed closed with %v, want rdma.ErrDisconnected", err)
	}
}

// TestConnStateString: the states print their names.
func TestConnStateString(t *testing.T) {
	for s, want := range map[ConnState]string{StateNew: "new", StateEstablished: "established", StateClosed: "closed", 7: "ConnState(7)"} {
		if got := fmt.Sprint(s); got != want {
			t.Errorf("ConnState %d prints %q, want %q", uint8(s), got, want)
		}
	}
}
