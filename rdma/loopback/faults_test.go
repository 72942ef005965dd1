package loopback_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// Fault tests run in synctest bubbles: time is virtual, so delays and link
// timeouts cost nothing and every timing is exact; synctest also fails the
// test if a goroutine is left behind.

func faultPair(t *testing.T) (rdmatest.Config, *loopback.Conn, *loopback.Conn) {
	cfg := rdmatest.Config{Provider: loopback.New(), Timeout: time.Hour}
	a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	return cfg, a.(*loopback.Conn), b.(*loopback.Conn)
}

func setFaults(t *testing.T, c *loopback.Conn, f loopback.Faults) {
	t.Helper()
	if err := c.SetFaults(f); err != nil {
		t.Fatalf("set faults: %v", err)
	}
}

func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, a, loopback.Faults{Delay: 10 * time.Millisecond})
		start := time.Now()
		for id := uint64(1); id <= 3; id++ {
			rdmatest.PostRecv(t, b, id)
			rdmatest.Post(t, a, rdma.WorkRequest{ID: id, Op: rdma.OpSend})
		}
		rdmatest.WaitN(t, cfg, b, 1)
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Fatalf("first Send delivered after %v, want 10ms", d)
		}
		rdmatest.WaitN(t, cfg, b, 2)
		if d := time.Since(start); d != 30*time.Millisecond {
			t.Fatalf("third Send delivered after %v, want 30ms", d)
		}
		rdmatest.WaitN(t, cfg, a, 3)
	})
}

// TestDrop: after a lost message the link is silent both ways until the
// link timeout, then both sides fail with ErrConnectionLost.
func TestDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, a, loopback.Faults{Drop: 2, LinkTimeout: time.Second})
		for id := uint64(1); id <= 3; id++ {
			rdmatest.PostRecv(t, b, id)
			rdmatest.Post(t, a, rdma.WorkRequest{ID: id, Op: rdma.OpSend})
		}
		rdmatest.PostRecv(t, a, 10)
		synctest.Wait()
		rdmatest.Post(t, b, rdma.WorkRequest{ID: 20, Op: rdma.OpSend})
		start := time.Now()
		synctest.Wait()
		var cs [4]rdma.Completion
		if n := a.Poll(cs[:]); n != 1 || cs[0].ID != 1 {
			t.Fatalf("initiator completions before the timeout %+v", cs[:n])
		}
		if n := b.Poll(cs[:]); n != 1 || cs[0].ID != 1 {
			t.Fatalf("responder completions before the timeout %+v", cs[:n])
		}
		o := drainBoth(t, cfg, a, b)
		if d := time.Since(start); d != time.Second {
			t.Fatalf("link failed after %v, want 1s", d)
		}
		if !errors.Is(o.aerr, rdma.ErrConnectionLost) || !errors.Is(o.berr, rdma.ErrConnectionLost) {
			t.Fatalf("errors %v, %v, want ErrConnectionLost", o.aerr, o.berr)
		}
		wantStatuses(t, o.ac, map[uint64]rdma.Status{2: rdma.StatusTransport, 3: rdma.StatusFlushed, 10: rdma.StatusFlushed})
		wantStatuses(t, o.bc, map[uint64]rdma.Status{2: rdma.StatusFlushed, 3: rdma.StatusFlushed, 20: rdma.StatusFlushed})
	})
}

// TestDropReadResponse: a lost Read Response fails the Read with
// StatusTransport.
func TestDropReadResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, b, loopback.Faults{Drop: 1})
		src := rdmatest.Alloc(t, b, 8, rdma.AccessRemoteRead)
		sink := rdmatest.Alloc(t, a, 8, rdma.AccessLocalWrite)
		start := time.Now()
		rdmatest.Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: src.STag(), RemoteTO: src.TO()})
		o := drainBoth(t, cfg, a, b)
		if d := time.Since(start); d != loopback.DefaultLinkTimeout {
			t.Fatalf("link failed after %v, want %v", d, loopback.DefaultLinkTimeout)
		}
		wantStatuses(t, o.ac, map[uint64]rdma.Status{1: rdma.StatusTransport})
	})
}

// TestAbort: the connection is reset when the message after the Abort-th
// is due. The receives are all posted first, since the reset may come
// before the last Send is posted (the provider runs Sends as they are
// posted), which the post then reports.
func TestAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, a, loopback.Faults{Abort: 2})
		for id := uint64(1); id <= 4; id++ {
			rdmatest.PostRecv(t, b, id)
		}
		wantA := map[uint64]rdma.Status{1: rdma.StatusSuccess, 2: rdma.StatusSuccess, 3: rdma.StatusTransport, 4: rdma.StatusFlushed}
		for id := uint64(1); id <= 4; id++ {
			err := a.PostSend(&rdma.WorkRequest{ID: id, Op: rdma.OpSend})
			if id == 4 && errors.Is(err, rdma.ErrConnectionLost) {
				// The provider ran the third Send, and the reset,
				// before this post: nothing of 4 to complete.
				delete(wantA, 4)
				continue
			}
			if err != nil {
				t.Fatalf("post Send %d: %v", id, err)
			}
		}
		o := drainBoth(t, cfg, a, b)
		if !errors.Is(o.aerr, rdma.ErrConnectionLost) || !errors.Is(o.berr, rdma.ErrConnectionLost) {
			t.Fatalf("errors %v, %v, want ErrConnectionLost", o.aerr, o.berr)
		}
		wantStatuses(t, o.ac, wantA)
		wantStatuses(t, o.bc, map[uint64]rdma.Status{1: rdma.StatusSuccess, 2: rdma.StatusSuccess, 3: rdma.StatusFlushed, 4: rdma.StatusFlushed})
	})
}

// TestAbortReadResponse: an abort while a Read Response is due fails the
// Read with StatusTransport.
func TestAbortReadResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, b, loopback.Faults{Abort: 1})
		src := rdmatest.Alloc(t, b, 8, rdma.AccessRemoteRead)
		sink := rdmatest.Alloc(t, a, 8, rdma.AccessLocalWrite)
		for id := uint64(1); id <= 2; id++ {
			rdmatest.Post(t, a, rdma.WorkRequest{ID: id, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: src.STag(), RemoteTO: src.TO()})
		}
		o := drainBoth(t, cfg, a, b)
		wantStatuses(t, o.ac, map[uint64]rdma.Status{1: rdma.StatusSuccess, 2: rdma.StatusTransport})
	})
}

// TestSourceInvalidatedBeforeExecution: a work request whose local MR is
// invalidated between posting and execution fails with a local protection
// error, fatal as on an RNIC.
func TestSourceInvalidatedBeforeExecution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, a, loopback.Faults{Delay: time.Second})
		m := rdmatest.Alloc(t, a, 8, 0)
		rdmatest.PostRecv(t, b, 1, rdma.SGE{MR: rdmatest.Alloc(t, b, 8, rdma.AccessLocalWrite), Length: 8})
		rdmatest.Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(m)}})
		m.Invalidate()
		o := drainBoth(t, cfg, a, b)
		o.wantTerm(t, false, localCatastro)
		wantStatuses(t, o.ac, map[uint64]rdma.Status{1: rdma.StatusLocalProtection})
		wantStatuses(t, o.bc, map[uint64]rdma.Status{1: rdma.StatusFlushed})
	})
}

// TestSinkInvalidatedDuringRead: the Read Response finds the requester's
// sink invalidated; the requester detects it.
func TestSinkInvalidatedDuringRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, b, loopback.Faults{Delay: time.Second})
		src := rdmatest.Alloc(t, b, 8, rdma.AccessRemoteRead)
		sink := rdmatest.Alloc(t, a, 8, rdma.AccessLocalWrite)
		rdmatest.Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: src.STag(), RemoteTO: src.TO()})
		synctest.Wait() // the request is at b, whose response waits a second
		sink.Invalidate()
		o := drainBoth(t, cfg, a, b)
		o.wantTerm(t, false, ddpPlacement)
		wantStatuses(t, o.ac, map[uint64]rdma.Status{1: rdma.StatusLocalProtection})
	})
}

// TestCloseDuringDelay: Close interrupts a delayed transmission and the
// goroutines exit.
func TestCloseDuringDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, a, loopback.Faults{Delay: time.Hour})
		rdmatest.Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSend})
		synctest.Wait()
		b.Close()
		o := drainBoth(t, cfg, a, b)
		if !errors.Is(o.aerr, rdma.ErrDisconnected) || !errors.Is(o.berr, rdma.ErrClosed) {
			t.Fatalf("errors %v, %v", o.aerr, o.berr)
		}
		wantStatuses(t, o.ac, map[uint64]rdma.Status{1: rdma.StatusFlushed})
	})
}

// TestCloseDuringBrokenLink: Close while a dropped message awaits the link
// timeout ends both sides at once.
func TestCloseDuringBrokenLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, a, b := faultPair(t)
		setFaults(t, a, loopback.Faults{Drop: 1, LinkTimeout: time.Hour})
		rdmatest.Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSend})
		synctest.Wait()
		a.Close()
		o := drainBoth(t, cfg, a, b)
		if !errors.Is(o.aerr, rdma.ErrClosed) || !errors.Is(o.berr, rdma.ErrDisconnected) {
			t.Fatalf("errors %v, %v", o.aerr, o.berr)
		}
		wantStatuses(t, o.ac, map[uint64]rdma.Status{1: rdma.StatusFlushed})
	})
}

func TestSetFaultsInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a, _ := faultPair(t)
		for _, f := range []loopback.Faults{{Delay: -1}, {Drop: -1}, {LinkTimeout: -1}, {Abort: -1}, {ORD: -1}} {
			if err := a.SetFaults(f); !errors.Is(err, rdma.ErrInvalid) {
				t.Errorf("SetFaults(%+v): %v, want ErrInvalid", f, err)
			}
		}
	})
}

func wantStatuses(t *testing.T, cs []rdma.Completion, want map[uint64]rdma.Status) {
	t.Helper()
	if len(cs) != len(want) {
		t.Fatalf("completions %+v, want %d", cs, len(want))
	}
	for _, c := range cs {
		if st, ok := want[c.ID]; !ok || c.Status != st {
			t.Fatalf("completion %d (%v) is %v, want %v", c.ID, c.Op, c.Status, st)
		}
	}
}
