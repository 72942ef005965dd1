//go:build linux && cgo && verbs

package verbs

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestPeerKilled: the peer process dies (SIGKILL) with a connection up;
// the kernel tears its queue pair down, and our side ends with an error
// matching net.ErrClosed, every posted receive flushed, within the case
// timeout. Another connection of the same provider keeps working.
func TestPeerKilled(t *testing.T) {
	if addr := os.Getenv("VERBS_CHILD_DIAL"); addr != "" {
		peerChild(t, addr)
		return
	}
	forTargets(t, func(t *testing.T, tg target) {
		p := newProvider(t, tg, Options{})
		cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
		// A bystander pair on the same provider and device.
		ba, bb := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})

		ctx := rdmatest.Context(t, cfg)
		ln, err := p.Listen(ctx, cfg.ListenAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		child := exec.Command(os.Args[0], "-test.run", "^TestPeerKilled$", "-verbs.addr", tg.addr, "-verbs.device", tg.device)
		child.Env = append(os.Environ(), "VERBS_CHILD_DIAL="+ln.Addr().String())
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		defer child.Wait()
		defer child.Process.Kill()
		req, err := ln.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := req.Accept(ctx, rdma.ConnConfig{Prepare: func(c rdma.Conn) error {
			m := rdmatest.Alloc(t, c, 64, rdma.AccessLocalWrite)
			for id := uint64(1); id <= 2; id++ {
				if err := c.PostRecv(id, []rdma.SGE{rdmatest.Whole(m)}); err != nil {
					return err
				}
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := rdmatest.WaitN(t, cfg, c, 1)[0] // the child's hello
		rdmatest.Want(t, got, 1, rdma.OpRecv, rdma.StatusSuccess, 5)
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		cs, err := rdmatest.Drain(t, cfg, c)
		t.Logf("ended %v after the kill: %v; completions %+v", time.Since(start).Round(time.Millisecond), err, cs)
		if len(cs) != 1 || cs[0].ID != 2 || cs[0].Status != rdma.StatusFlushed {
			t.Errorf("completions %+v, want receive 2 flushed", cs)
		}

		// The bystander still works.
		bm := rdmatest.Alloc(t, bb, 8, rdma.AccessLocalWrite)
		rdmatest.PostRecv(t, bb, 7, rdmatest.Whole(bm))
		src := rdmatest.Alloc(t, ba, 8, 0)
		rdmatest.Post(t, ba, rdma.WorkRequest{ID: 8, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(src)}})
		rdmatest.Want(t, rdmatest.WaitN(t, cfg, bb, 1)[0], 7, rdma.OpRecv, rdma.StatusSuccess, 8)
		if ba.Err() != nil || bb.Err() != nil {
			t.Fatalf("bystander ended: %v, %v", ba.Err(), bb.Err())
		}
	})
}

// peerChild dials addr, says hello and waits to be killed.
func peerChild(t *testing.T, addr string) {
	p, err := New(Options{Device: *flagDevice})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := p.Dial(ctx, addr, rdma.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Alloc(5, 0)
	if err != nil {
		t.Fatal(err)
	}
	copy(m.Bytes(), "hello")
	if err := c.PostSend(&rdma.WorkRequest{Op: rdma.OpSend, Local: []rdma.SGE{{MR: m, Length: 5}}}); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done() // killed long before
	t.Fatal("not killed")
}

// TestHostileCredits: a peer that sends more than the receives posted (a
// requester beyond its credits) ends only that connection, on both sides,
// at once (rnr_retry_count 0): the sender's Send fails with a
// receiver-not-ready error that says so.
func TestHostileCredits(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		p := newProvider(t, tg, Options{})
		cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
		ba, bb := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
		a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
		m := rdmatest.Alloc(t, b, 8, rdma.AccessLocalWrite)
		rdmatest.PostRecv(t, b, 1, rdmatest.Whole(m)) // one credit
		src := rdmatest.Alloc(t, a, 8, 0)
		for id := uint64(1); id <= 2; id++ {
			rdmatest.Post(t, a, rdma.WorkRequest{ID: id, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(src)}})
		}
		cs, err := rdmatest.Drain(t, cfg, a)
		t.Logf("sender: %v; %+v", err, cs)
		// iWARP completes a Send when it is handed to the wire, so on siw
		// the refused Send may complete successfully; InfiniBand and RoCE
		// complete it when the responder acknowledges it, and with
		// rnr_retry_count 0 the NAK fails it at once.
		iwarp := a.(*Conn).dev.iwarp
		if len(cs) != 2 || cs[0].Status != rdma.StatusSuccess || (cs[1].Status == rdma.StatusSuccess && !iwarp) {
			t.Errorf("sender completions %+v, want the first Send delivered and the second failed", cs)
		}
		var te rdma.TerminateError
		if !iwarp && (!errors.As(err, &te) || te.Status() != rdma.StatusRNR) {
			t.Errorf("sender's error %v, want a receiver-not-ready TerminateError", err)
		}
		bs, berr := rdmatest.Drain(t, cfg, b)
		t.Logf("receiver: %v; %+v", berr, bs)
		if !errors.Is(berr, net.ErrClosed) {
			t.Errorf("receiver's error %v", berr)
		}
		// The other connection is untouched.
		bm := rdmatest.Alloc(t, bb, 8, rdma.AccessLocalWrite)
		rdmatest.PostRecv(t, bb, 7, rdmatest.Whole(bm))
		bsrc := rdmatest.Alloc(t, ba, 8, 0)
		rdmatest.Post(t, ba, rdma.WorkRequest{ID: 8, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(bsrc)}})
		rdmatest.Want(t, rdmatest.WaitN(t, cfg, bb, 1)[0], 7, rdma.OpRecv, rdma.StatusSuccess, 8)
	})
}
