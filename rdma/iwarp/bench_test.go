package iwarp

import (
	"context"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/race"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// pair connects two connections of a fresh provider over loopback TCP.
func pair(tb testing.TB, opts Options) (a, b rdma.Conn) {
	tb.Helper()
	p := newProvider(tb, opts)
	return rdmatest.Pair(tb, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0"}, rdma.ConnConfig{}, rdma.ConnConfig{})
}

// wait1 waits for one completion, which must succeed.
func wait1(tb testing.TB, c rdma.Conn, cs []rdma.Completion) {
	if _, err := c.Wait(context.Background(), cs[:1]); err != nil {
		tb.Fatalf("wait: %v", err)
	}
	if cs[0].Status != rdma.StatusSuccess {
		tb.Fatalf("completion %+v", cs[0])
	}
}

// sendRoundTrip sends n bytes from a to b and back, with receives posted
// just before; it is the loop body of the Send benchmark and allocation
// test.
type sendRoundTrip struct {
	a, b     rdma.Conn
	sa, sb   rdma.SGE // send sources
	ra, rb   []rdma.SGE
	wa, wb   rdma.WorkRequest
	csa, csb []rdma.Completion
}

func newSendRoundTrip(tb testing.TB, a, b rdma.Conn, n int) *sendRoundTrip {
	s := &sendRoundTrip{a: a, b: b, csa: make([]rdma.Completion, 1), csb: make([]rdma.Completion, 1)}
	s.sa = rdma.SGE{MR: rdmatest.Alloc(tb, a, n, 0), Length: n}
	s.sb = rdma.SGE{MR: rdmatest.Alloc(tb, b, n, 0), Length: n}
	s.ra = []rdma.SGE{{MR: rdmatest.Alloc(tb, a, n, rdma.AccessLocalWrite), Length: n}}
	s.rb = []rdma.SGE{{MR: rdmatest.Alloc(tb, b, n, rdma.AccessLocalWrite), Length: n}}
	s.wa = rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{s.sa}}
	s.wb = rdma.WorkRequest{ID: 2, Op: rdma.OpSend, Local: []rdma.SGE{s.sb}}
	return s
}

func (s *sendRoundTrip) run(tb testing.TB) {
	if err := s.b.PostRecv(3, s.rb); err != nil {
		tb.Fatal(err)
	}
	if err := s.a.PostRecv(4, s.ra); err != nil {
		tb.Fatal(err)
	}
	if err := s.a.PostSend(&s.wa); err != nil {
		tb.Fatal(err)
	}
	wait1(tb, s.b, s.csb) // the receive
	if err := s.b.PostSend(&s.wb); err != nil {
		tb.Fatal(err)
	}
	wait1(tb, s.a, s.csa) // a's send and receive, in either order
	wait1(tb, s.a, s.csa)
	wait1(tb, s.b, s.csb) // b's send
}

// TestSteadyStateAllocs checks that the data path, both goroutines of
// both sides included, allocates nothing per message once warm: Sends,
// and RDMA Writes and Reads of several FPDUs, with and without CRC.
func TestSteadyStateAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop values (a batch's buffers)")
	}
	for _, crc := range []CRCPolicy{CRCFollow, CRCRequire} {
		t.Run(crc.String(), func(t *testing.T) {
			a, b := pair(t, Options{CRC: crc})
			s := newSendRoundTrip(t, a, b, 64)
			src := rdmatest.Alloc(t, a, 200<<10, 0)
			dst := rdmatest.Alloc(t, b, 200<<10, rdma.AccessRemoteWrite|rdma.AccessRemoteRead)
			sink := rdmatest.Alloc(t, a, 200<<10, rdma.AccessLocalWrite)
			wr := rdma.WorkRequest{ID: 5, Op: rdma.OpWrite, Local: []rdma.SGE{rdmatest.Whole(src)}, RemoteSTag: dst.STag(), RemoteTO: dst.TO()}
			rd := rdma.WorkRequest{ID: 6, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: dst.STag(), RemoteTO: dst.TO()}
			cs := make([]rdma.Completion, 1)
			body := func() {
				s.run(t)
				if err := a.PostSend(&wr); err != nil {
					t.Fatal(err)
				}
				wait1(t, a, cs)
				if err := a.PostSend(&rd); err != nil {
					t.Fatal(err)
				}
				wait1(t, a, cs)
			}
			for range 20 {
				body()
			}
			if n := testing.AllocsPerRun(50, body); n > 0.1 {
				t.Errorf("%.2f allocations per round trip, write and read, want 0", n)
			}
		})
	}
}

func BenchmarkWrite1MiB(b *testing.B) {
	for _, crc := range []CRCPolicy{CRCFollow, CRCRequire} {
		b.Run("crc="+crc.String(), func(b *testing.B) {
			const size = 1 << 20
			x, y := pair(b, Options{CRC: crc})
			src := rdmatest.Alloc(b, x, size, 0)
			dst := rdmatest.Alloc(b, y, size, rdma.AccessRemoteWrite)
			wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: []rdma.SGE{rdmatest.Whole(src)}, RemoteSTag: dst.STag(), RemoteTO: dst.TO()}
			cs := make([]rdma.Completion, 1)
			s := newSendRoundTrip(b, x, y, 8)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if err := x.PostSend(&wr); err != nil {
					b.Fatal(err)
				}
				wait1(b, x, cs)
			}
			s.run(b) // everything written has been placed
		})
	}
}

func BenchmarkSendRoundTrip(b *testing.B) {
	for _, crc := range []CRCPolicy{CRCFollow, CRCRequire} {
		b.Run("crc="+crc.String(), func(b *testing.B) {
			const size = 64
			x, y := pair(b, Options{CRC: crc})
			s := newSendRoundTrip(b, x, y, size)
			b.SetBytes(2 * size)
			b.ReportAllocs()
			for b.Loop() {
				s.run(b)
			}
		})
	}
}
