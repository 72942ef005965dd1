package iwarp_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/roundtrip"
	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// BenchmarkPingPong measures the round trip of a 64-byte Send answered by
// a 64-byte Send, each side waiting on its completion queue, beside a raw
// TCP ping-pong of the same size in the same run; both report latency
// percentiles.
func BenchmarkPingPong(b *testing.B) {
	b.Run("send", func(b *testing.B) {
		x, y := tputPair(b, 0)
		const size = 64
		setup := func(c rdma.Conn) rdma.MR {
			mr, err := c.Alloc(4*size, rdma.AccessLocalWrite)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { mr.Release() })
			for i := 0; i < 2; i++ {
				if err := c.PostRecv(uint64(i), []rdma.SGE{{MR: mr, Offset: i * size, Length: size}}); err != nil {
					b.Fatal(err)
				}
			}
			return mr
		}
		xm, ym := setup(x), setup(y)
		// echo: y answers every receive with a Send.
		done := make(chan struct{})
		go func() {
			defer close(done)
			cs := make([]rdma.Completion, 4)
			for {
				n, err := y.Wait(context.Background(), cs)
				if err != nil {
					return
				}
				for _, c := range cs[:n] {
					if c.Op != rdma.OpRecv {
						continue
					}
					y.PostRecv(c.ID, []rdma.SGE{{MR: ym, Offset: int(c.ID) * size, Length: size}})
					y.PostSend(&rdma.WorkRequest{Op: rdma.OpSend, Local: []rdma.SGE{{MR: ym, Offset: 2 * size, Length: size}}})
				}
			}
		}()
		cs := make([]rdma.Completion, 4)
		wr := &rdma.WorkRequest{Op: rdma.OpSend, Local: []rdma.SGE{{MR: xm, Offset: 2 * size, Length: size}}}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := x.PostSend(wr); err != nil {
				b.Fatal(err)
			}
			for got := false; !got; {
				n, err := x.Wait(context.Background(), cs)
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range cs[:n] {
					if c.Op == rdma.OpRecv {
						got = true
						x.PostRecv(c.ID, []rdma.SGE{{MR: xm, Offset: int(c.ID) * size, Length: size}})
					}
				}
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		reportLatency(b, lat)
		x.Close()
		y.Close()
		<-done
	})
	b.Run("rawtcp", func(b *testing.B) {
		send := roundtrip.RawTCP(b)
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := send(64); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		reportLatency(b, lat)
	})
}

// reportLatency reports the 50th, 90th and 99th percentiles of lat. The
// mean (ns/op) hides that a round trip on loopback is either quick or
// much slower (a goroutine woken on an idle core), and the p50 is the
// steadier figure to compare.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	for _, p := range []struct {
		q    int // per mille
		unit string
	}{{500, "p50-ns"}, {900, "p90-ns"}, {990, "p99-ns"}} {
		b.ReportMetric(float64(lat[len(lat)*p.q/1000].Nanoseconds()), p.unit)
	}
}
