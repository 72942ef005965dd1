package rpcrdma

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/roundtrip"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Benchmarks per data path, each beside ONC RPC over TCP record marking
// with the same program in the same run: `go test -run '^$' -bench . ./rpcrdma/`.

// benchClients returns an RPC client over RPC-over-RDMA (software iWARP on
// loopback TCP) and one over TCP record marking, both to testServer.
func benchClients(b *testing.B) map[string]*rpc.Client {
	b.Helper()
	p := newIWARP(b)
	pr := newPairOver(b, p, "127.0.0.1:0", nil, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := testServer()
	go srv.ServeListener(l)
	b.Cleanup(func() { srv.Close() })
	t, err := rpc.DialTCP(context.Background(), l.Addr().String(), &rpc.StreamOptions{MaxRecord: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	tcp := rpc.NewClient(t)
	b.Cleanup(func() { tcp.Close() })
	return map[string]*rpc.Client{"rdma": pr.cli, "tcp": tcp}
}

func benchCall(b *testing.B, cli *rpc.Client, proc uint32, args rpc.Body, bufs [][]byte, maxReply int) {
	_, err := cli.Call(context.Background(), &rpc.Request{Prog: testProg, Vers: testVers, Proc: proc, Args: args, ResultBufs: bufs, MaxReply: maxReply})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPaths(b *testing.B) {
	clients := benchClients(b)
	for _, tr := range []string{"rdma", "tcp"} {
		cli := clients[tr]
		b.Run("NULL/"+tr, func(b *testing.B) { benchNull(b, cli) })
		b.Run("NULL-64-outstanding/"+tr, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := cli.Null(context.Background(), testProg, testVers); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		data := pattern(1<<20, 1)
		b.Run("1MiB-read-chunk/"+tr, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(1 << 20)
			args := ddpArgs(data)
			for b.Loop() {
				benchCall(b, cli, procSum, args, nil, 0)
			}
		})
		b.Run("1MiB-read-chunk-4-outstanding/"+tr, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(1 << 20)
			b.SetParallelism(2) // 4 goroutines on 2 cores
			args := ddpArgs(data)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchCall(b, cli, procSum, args, nil, 0)
				}
			})
		})
		flat := rpc.Body{XDR: xdr.AppendOpaque(nil, pattern(64<<10, 2))}
		b.Run("64KiB-long-call-and-reply/"+tr, func(b *testing.B) {
			// As bench's ECHO: a position-zero read chunk carries the
			// call, a reply chunk the reply.
			b.ReportAllocs()
			b.SetBytes(64 << 10)
			for b.Loop() {
				benchCall(b, cli, procEchoFlat, flat, nil, 64<<10+1024)
			}
		})
		buf := make([]byte, 1<<20)
		b.Run("1MiB-write-chunk/"+tr, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(1 << 20)
			args := u32Args(1 << 20)
			for b.Loop() {
				benchCall(b, cli, procRead, args, [][]byte{buf}, 0)
			}
		})
		b.Run("1MiB-write-chunk-4-outstanding/"+tr, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(1 << 20)
			b.SetParallelism(2) // 4 goroutines on 2 cores
			args := u32Args(1 << 20)
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 1<<20)
				for pb.Next() {
					benchCall(b, cli, procRead, args, [][]byte{buf}, 0)
				}
			})
		})
	}
	// The NULL alone over the in-process provider, which moves messages
	// between its two ends in memory: no framing, no socket, as an RNIC
	// leaves to the hardware. bench/cachegrind.sh counts its instructions
	// (TRANSPORT=loopback) as the verbs provider's stand-in.
	b.Run("NULL/loopback", func(b *testing.B) {
		benchNull(b, newPairOver(b, loopback.New(), "", nil, nil).cli)
	})
}

// benchNull makes NULL calls one at a time on cli and reports their
// latency's quartiles and 90th percentile beside the mean.
func benchNull(b *testing.B, cli *rpc.Client) {
	b.ReportAllocs()
	lat := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		start := time.Now()
		if err := cli.Null(context.Background(), testProg, testVers); err != nil {
			b.Fatal(err)
		}
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	for _, q := range []struct {
		name string
		frac float64
	}{{"p25-ns", 0.25}, {"p50-ns", 0.5}, {"p75-ns", 0.75}, {"p90-ns", 0.9}} {
		b.ReportMetric(float64(lat[int(q.frac*float64(len(lat)))].Nanoseconds()), q.name)
	}
}

// BenchmarkAfterGap measures a NULL and a 1 MiB WRITE (a read chunk,
// pulled by RDMA Read) over the software iWARP, and a raw TCP ping-pong
// and 1 MiB transfer, one at a time: back to back, and after a 1.5 ms
// gap before each, idle (sleeping) or busy (this goroutine spinning), as
// a program that does other work between its calls has. Back to back,
// the connections' goroutines and the machine's cores are awake when the
// next call comes; after a gap they are not, and the RDMA path, which
// hands each call between more goroutines than raw TCP does, pays for
// waking them. It reports each operation's mean time (ns/op, the gaps
// left out), p50 and p99: `go test -run '^$' -bench AfterGap ./rpcrdma/`.
func BenchmarkAfterGap(b *testing.B) {
	cli := benchClients(b)["rdma"]
	args := ddpArgs(pattern(1<<20, 1))
	raw := roundtrip.RawTCP(b)
	ops := []struct {
		name string
		do   func() error
	}{
		{"rdma-null", func() error { return cli.Null(context.Background(), testProg, testVers) }},
		{"raw-tcp-pingpong", func() error { return raw(64) }},
		{"rdma-write-1MiB", func() error {
			_, err := cli.Call(context.Background(), &rpc.Request{Prog: testProg, Vers: testVers, Proc: procSum, Args: args})
			return err
		}},
		{"raw-tcp-1MiB", func() error { return raw(1 << 20) }},
	}
	const gap = 1500 * time.Microsecond
	gaps := []struct {
		name   string
		before func()
	}{
		{"back-to-back", func() {}},
		{"after-idle", func() { time.Sleep(gap) }},
		{"after-busy", func() {
			for t := time.Now(); time.Since(t) < gap; {
			}
		}},
	}
	for _, op := range ops {
		for _, g := range gaps {
			b.Run(op.name+"/"+g.name, func(b *testing.B) {
				// The operations are timed one by one: the gaps are
				// not theirs, and StopTimer would stop the world
				// (runtime.ReadMemStats) in each gap.
				lat := make([]time.Duration, 0, b.N)
				var sum time.Duration
				for b.Loop() {
					g.before()
					t0 := time.Now()
					if err := op.do(); err != nil {
						b.Fatal(err)
					}
					d := time.Since(t0)
					lat = append(lat, d)
					sum += d
				}
				b.ReportMetric(float64(sum.Nanoseconds())/float64(len(lat)), "ns/op")
				roundtrip.Report(b, lat)
			})
		}
	}
}
