//go:build linux && cgo && verbs

package verbs

import (
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestSendInvalidate: a Send With Invalidate naming a region the receiver
// registered with ibv_reg_mr, the two outcomes Limits.RemoteInvalidation
// false is there for. On siw (iWARP) the receive completes and the STag
// is dead afterwards: the STag the sender named is the one that arrived
// (rdma-core's siw provider takes it from another field than the other
// providers; with STag 0, siw refuses the Send and the receive fails). On
// rxe (RoCE) the
// receiver refuses it (the InfiniBand Architecture Specification allows
// remote invalidation of memory windows and fast-registered regions
// only) and its connection ends.
func TestSendInvalidate(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		p := newProvider(t, tg, Options{})
		cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
		a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
		target := rdmatest.Alloc(t, b, 64, rdma.AccessRemoteWrite)
		stag := target.STag()
		rm := rdmatest.Alloc(t, b, 64, rdma.AccessLocalWrite)
		rdmatest.PostRecv(t, b, 1, rdmatest.Whole(rm))
		src := rdmatest.Alloc(t, a, 8, 0)
		rdmatest.Post(t, a, rdma.WorkRequest{ID: 2, Op: rdma.OpSendInvalidate, Local: []rdma.SGE{rdmatest.Whole(src)}, InvalidateSTag: stag})
		if b.(*Conn).dev.iwarp {
			c := rdmatest.WaitN(t, cfg, b, 1)[0]
			rdmatest.Want(t, c, 1, rdma.OpRecv, rdma.StatusSuccess, 8)
			rdmatest.Want(t, rdmatest.WaitN(t, cfg, a, 1)[0], 2, rdma.OpSendInvalidate, rdma.StatusSuccess, 8)
			// rdma-core's siw provider reports no invalidation in the
			// work completion (providers/siw/siw.c, copy_cqe, clears
			// wc_flags), so the receive cannot say it; the key is dead
			// all the same: an RDMA Write through it fails.
			t.Logf("siw's receive completion: %+v", c)
			rdmatest.Post(t, a, rdma.WorkRequest{ID: 3, Op: rdma.OpWrite, Local: []rdma.SGE{rdmatest.Whole(src)},
				RemoteSTag: stag, RemoteTO: target.TO()})
			cs, err := rdmatest.Drain(t, cfg, a)
			t.Logf("RDMA Write through the invalidated STag: %v; %+v", err, cs)
			if err == nil {
				t.Errorf("an RDMA Write through STag %v succeeded after the peer invalidated it", stag)
			}
			return
		}
		cs, err := rdmatest.Drain(t, cfg, b)
		t.Logf("receiver of a Send With Invalidate of an ibv_reg_mr region: %v; %+v", err, cs)
		if err == nil {
			t.Fatalf("the receiver's connection did not end")
		}
		for _, c := range cs {
			if c.Status == rdma.StatusSuccess {
				t.Errorf("completion %+v succeeded", c)
			}
		}
	})
}
