package loopback_test

import (
	"context"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// roundTrip is one Send of size bytes into a posted receive, with both
// completions polled; it allocates nothing.
type roundTrip struct {
	a, b rdma.Conn
	recv []rdma.SGE
	wr   rdma.WorkRequest
	cs   [1]rdma.Completion
}

func newRoundTrip(t testing.TB, size int) *roundTrip {
	a, b := rdmatest.Pair(t, rdmatest.Config{Provider: loopback.New()}, rdma.ConnConfig{}, rdma.ConnConfig{})
	src := rdmatest.Alloc(t, a, size, 0)
	dst := rdmatest.Alloc(t, b, size, rdma.AccessLocalWrite)
	return &roundTrip{
		a: a, b: b,
		recv: []rdma.SGE{rdmatest.Whole(dst)},
		wr:   rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(src)}},
	}
}

func (r *roundTrip) run(t testing.TB) {
	ctx := context.Background()
	if err := r.b.PostRecv(1, r.recv); err != nil {
		t.Fatal(err)
	}
	if err := r.a.PostSend(&r.wr); err != nil {
		t.Fatal(err)
	}
	for _, c := range []rdma.Conn{r.a, r.b} {
		if _, err := c.Wait(ctx, r.cs[:]); err != nil || r.cs[0].Status != rdma.StatusSuccess {
			t.Fatalf("wait: %v, %+v", err, r.cs[0])
		}
	}
}

// TestSteadyStateAllocs: posting and completing work allocates nothing once
// the queues' slots have been used.
func TestSteadyStateAllocs(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	r := newRoundTrip(t, 64)
	for i := 0; i < 2*loopback.DefaultQueueDepth; i++ {
		r.run(t)
	}
	if n := testing.AllocsPerRun(200, func() { r.run(t) }); n != 0 {
		t.Fatalf("%v allocations per Send round trip, want 0", n)
	}
}

func BenchmarkSendRecv64(b *testing.B) {
	r := newRoundTrip(b, 64)
	b.SetBytes(64)
	b.ReportAllocs()
	for b.Loop() {
		r.run(b)
	}
}

func benchmarkTagged(b *testing.B, op rdma.Op, size int) {
	a, p := rdmatest.Pair(b, rdmatest.Config{Provider: loopback.New()}, rdma.ConnConfig{}, rdma.ConnConfig{})
	local := rdmatest.Alloc(b, a, size, rdma.AccessLocalWrite)
	remote := rdmatest.Alloc(b, p, size, rdma.AccessRemoteRead|rdma.AccessRemoteWrite)
	wr := rdma.WorkRequest{ID: 1, Op: op, Local: []rdma.SGE{rdmatest.Whole(local)}, RemoteSTag: remote.STag(), RemoteTO: remote.TO()}
	var cs [1]rdma.Completion
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if err := a.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		if _, err := a.Wait(context.Background(), cs[:]); err != nil || cs[0].Status != rdma.StatusSuccess {
			b.Fatalf("wait: %v, %+v", err, cs[0])
		}
	}
}

func BenchmarkWrite1MiB(b *testing.B) { benchmarkTagged(b, rdma.OpWrite, 1<<20) }
func BenchmarkRead1MiB(b *testing.B)  { benchmarkTagged(b, rdma.OpRead, 1<<20) }
