package rpcrdma

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// holdReads is a provider whose accepted (responder) connections hold
// back every RDMA Read completion until want Reads have been posted, so a
// responder that pulls one call's chunks at a time never sees its first
// Read complete.
type holdReads struct {
	rdma.Provider
	want int
}

func (p holdReads) Listen(ctx context.Context, addr string) (rdma.Listener, error) {
	l, err := p.Provider.Listen(ctx, addr)
	return holdListener{l, p.want}, err
}

type holdListener struct {
	rdma.Listener
	want int
}

func (l holdListener) Accept(ctx context.Context) (rdma.ConnRequest, error) {
	r, err := l.Listener.Accept(ctx)
	return holdRequest{r, l.want}, err
}

type holdRequest struct {
	rdma.ConnRequest
	want int
}

func (r holdRequest) Accept(ctx context.Context, cfg rdma.ConnConfig) (rdma.Conn, error) {
	c, err := r.ConnRequest.Accept(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &holdConn{Conn: c, want: r.want}, nil
}

type holdConn struct {
	rdma.Conn
	want int

	mu     sync.Mutex
	posted int               // Reads posted
	held   []rdma.Completion // Read completions held back
	out    int               // Reads posted whose completion the responder has not had
	max    int               // most of those at once
}

func (c *holdConn) PostSend(wr *rdma.WorkRequest) error {
	if wr.Op == rdma.OpRead {
		c.mu.Lock()
		c.posted++
		c.out++
		c.max = max(c.max, c.out)
		c.mu.Unlock()
	}
	return c.Conn.PostSend(wr)
}

// filter moves Read completions out of cs[:n] into c.held while fewer
// than want Reads have been posted, and back once enough have been.
func (c *holdConn) filter(cs []rdma.Completion, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := 0
	for _, comp := range cs[:n] {
		if comp.Op == rdma.OpRead {
			if c.posted < c.want {
				c.held = append(c.held, comp)
				continue
			}
			c.out--
		}
		cs[k] = comp
		k++
	}
	if c.posted >= c.want {
		for len(c.held) > 0 && k < len(cs) {
			cs[k] = c.held[0]
			c.held = c.held[1:]
			c.out--
			k++
		}
	}
	return k
}

func (c *holdConn) Poll(cs []rdma.Completion) int {
	return c.filter(cs, c.Conn.Poll(cs))
}

func (c *holdConn) Wait(ctx context.Context, cs []rdma.Completion) (int, error) {
	for {
		n, err := c.Conn.Wait(ctx, cs)
		if k := c.filter(cs, n); k > 0 || err != nil {
			return k, err
		}
	}
}

// TestReadsOfSeveralCallsInFlight: the responder pulls the read chunks of
// one call while those of another are still arriving (DESIGN.md: Reads
// pipelined up to the ORD), rather than one call at a time. The provider
// completes no Read until two have been posted, so a responder that
// waited for the first call's chunk before taking the second call would
// answer neither.
func TestReadsOfSeveralCallsInFlight(t *testing.T) {
	p := holdReads{Provider: loopback.New(), want: 2}
	pr := newPairOver(t, p, "", nil, nil)
	ctx := ctxT(t)
	// A first reply raises the requester's credits above one.
	if err := pr.cli.Null(ctx, testProg, testVers); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			data := pattern(64<<10+i, byte(i))
			var args rpc.Body
			args.AppendDDPOpaque(data)
			rep, err := pr.call(ctx, procSum, args, nil, 0)
			checkSum(t, rep, err, data)
		})
	}
	wg.Wait()
	hc := pr.resp.rc.(*holdConn)
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.posted != 2 || hc.max != 2 {
		t.Errorf("responder posted %d Reads, at most %d outstanding; want 2 and 2", hc.posted, hc.max)
	}
}

// TestResponderPush: a responder Conn is an rpc.Pusher too; it hands its
// calls to deliver, inline ones from the loop and those with read chunks
// once pulled, one at a time, and the end of the connection last.
func TestResponderPush(t *testing.T) {
	ctx := ctxT(t)
	conn, resp := dialAccept(t, loopback.New(), "", nil, nil)
	defer resp.Close()
	cli := rpc.NewClient(conn)
	defer cli.Close()
	calls := make(chan *rpc.Msg, 1)
	ended := make(chan error, 1)
	var active atomic.Int32
	var over atomic.Bool
	resp.Push(func(m *rpc.Msg, err error) bool {
		if active.Add(1) != 1 {
			t.Error("deliver called while another call of it runs")
		}
		defer active.Add(-1)
		if over.Load() {
			t.Errorf("deliver called after the final error (%v, %v)", m, err)
		}
		if err != nil {
			over.Store(true)
			ended <- err
			return false
		}
		calls <- m
		return true
	})
	// An inline call, which the loop delivers itself, and one with a
	// read chunk, which reaches deliver through Recv once pulled.
	for _, args := range []rpc.Body{{}, ddpArgs(pattern(4096, 1))} {
		done := make(chan error, 1)
		go func() {
			_, err := cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procSum, Args: args})
			done <- err
		}()
		m := <-calls
		if len(args.Items) > 0 && (len(m.Items) != 1 || !bytes.Equal(m.Items[0].Data, pattern(4096, 1))) {
			t.Fatalf("pulled call's items %v, want the 4096 bytes sent", len(m.Items))
		}
		xid, _, _ := rpc.PeekHeader(m.XDR)
		rh := rpc.ReplyHeader{XID: xid, Stat: rpc.MsgAccepted, AcceptStat: rpc.Success}
		if err := resp.Send(ctx, &rpc.Msg{Body: rpc.Body{XDR: rh.Append(nil)}}); err != nil {
			t.Fatal(err)
		}
		m.Release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if s := resp.Stats(); s.ReadChunks != 1 || s.CallsReceived != 2 {
		t.Errorf("stats %+v: want 2 calls, one read chunk pulled", s)
	}
	resp.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("end delivered as %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the end of the connection was not delivered")
	}
}
