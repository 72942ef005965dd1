//go:build linux && cgo && verbs

package verbs

import (
	"bytes"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestReadSinkAccess: on an iWARP device a Read's destination is reached
// through a second registration with remote write, which hardware RNICs
// require of a Read Response's sink (siw does not check, so the test
// checks the flags the provider registered); the region's own
// registration keeps only the rights asked for, so a peer's RDMA Write to
// its STag is refused; on RoCE no second registration is made. The second
// registration goes away with Invalidate, and the Read works again after
// Reregister.
func TestReadSinkAccess(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		p := newProvider(t, tg, Options{})
		cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
		a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
		iwarp := a.(*Conn).dev.iwarp
		src := rdmatest.Alloc(t, b, 64, rdma.AccessRemoteRead)
		copy(src.Bytes(), "the data a Read brings back")
		sinkMR := rdmatest.Alloc(t, a, 64, rdma.AccessLocalWrite)
		sink := sinkMR.(*mr)
		read := func(id uint64) {
			t.Helper()
			clear(sink.Bytes())
			rdmatest.Post(t, a, rdma.WorkRequest{ID: id, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sinkMR)},
				RemoteSTag: src.STag(), RemoteTO: src.TO()})
			rdmatest.Want(t, rdmatest.WaitN(t, cfg, a, 1)[0], id, rdma.OpRead, rdma.StatusSuccess, 64)
			if !bytes.Equal(sink.Bytes(), src.Bytes()) {
				t.Errorf("read %d: %q, want %q", id, sink.Bytes(), src.Bytes())
			}
		}
		before := p.Resources().MRs
		read(1)
		region, sinkAccess := sink.regAccess()
		if region != accessLocalWrite {
			t.Errorf("region registered with %#x, want local write only (%#x)", region, accessLocalWrite)
		}
		switch {
		case iwarp && sinkAccess != accessLocalWrite|accessRemoteWrite:
			t.Errorf("iWARP Read sink registered with %#x, want local and remote write (%#x)", sinkAccess, accessLocalWrite|accessRemoteWrite)
		case !iwarp && sinkAccess != 0:
			t.Errorf("%s: a Read sink registration (%#x) where none is needed", tg.device, sinkAccess)
		}
		wantMRs := before
		if iwarp {
			wantMRs++
		}
		if got := p.Resources().MRs; got != wantMRs {
			t.Errorf("%d MRs after the Read, want %d", got, wantMRs)
		}
		read(2) // the sink registration is reused
		if got := p.Resources().MRs; got != wantMRs {
			t.Errorf("%d MRs after a second Read, want %d", got, wantMRs)
		}
		if err := sinkMR.Invalidate(); err != nil {
			t.Fatal(err)
		}
		if _, s := sink.regAccess(); s != 0 || p.Resources().MRs != before-1 {
			t.Errorf("after Invalidate: sink flags %#x, %d MRs, want 0 and %d", s, p.Resources().MRs, before-1)
		}
		if _, err := sinkMR.Reregister(rdma.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		read(3)
		// The region's own STag takes no RDMA Write from the peer.
		w := rdmatest.Alloc(t, b, 8, 0)
		rdmatest.Post(t, b, rdma.WorkRequest{ID: 4, Op: rdma.OpWrite, Local: []rdma.SGE{rdmatest.Whole(w)},
			RemoteSTag: sinkMR.STag(), RemoteTO: sinkMR.TO()})
		cs, err := rdmatest.Drain(t, cfg, b)
		t.Logf("write to the sink's own STag: %v; %+v", err, cs)
		if err == nil {
			t.Errorf("a Write to a region without remote write did not fail the connection")
		}
	})
}
