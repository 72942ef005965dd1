package rpc

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/roundtrip"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

func BenchmarkCallHeaderAppendDecode(b *testing.B) {
	h := goldenCall(b, callVectors[1])
	buf := make([]byte, 0, h.EncodedLen())
	b.SetBytes(int64(h.EncodedLen()))
	b.ReportAllocs()
	for b.Loop() {
		buf = h.Append(buf[:0])
		var g CallHeader
		d := xdr.NewDecoder(buf)
		if err := g.Decode(&d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEcho measures a 4 KiB echo call over record marking on a pipe.
func BenchmarkEcho(b *testing.B) {
	c1, c2 := net.Pipe()
	srv, _ := newTestServer(nil)
	go srv.Serve(NewStreamTransport(c2, nil))
	cli := NewClient(NewStreamTransport(c1, nil))
	defer srv.Close()
	defer cli.Close()
	payload := make([]byte, 4096)
	var args Body
	args.AppendDDPOpaque(payload)
	dst := make([]byte, len(payload))
	b.SetBytes(int64(2 * len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		rep, err := cli.Call(context.Background(), &Request{Prog: testProg, Vers: 1, Proc: procEcho, Args: args})
		if err != nil {
			b.Fatal(err)
		}
		d := NewBodyDecoder(rep.Results)
		d.DDPOpaqueInto(dst)
		if err := d.Done(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPNull measures a NULL call over record marking on loopback
// TCP, one call at a time (the short path, see the package doc) and with
// 8 outstanding, against a raw TCP ping-pong of a 64-byte message on the
// same machine in the same run: compare the p50-ns figures.
func BenchmarkTCPNull(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		send := roundtrip.RawTCP(b)
		lat := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			if err := send(64); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})
	for _, out := range []int{1, 8} {
		b.Run(fmt.Sprintf("rpc-%d", out), func(b *testing.B) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv, _ := newTestServer(nil)
			go srv.ServeListener(l)
			defer srv.Close()
			t, err := DialTCP(context.Background(), l.Addr().String(), nil)
			if err != nil {
				b.Fatal(err)
			}
			cli := NewClient(t)
			defer cli.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.ReportAllocs()
			if out == 1 {
				lat := make([]time.Duration, 0, 1<<16)
				for b.Loop() {
					t0 := time.Now()
					if err := cli.Null(ctx, testProg, 1); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				reportP50(b, lat)
				return
			}
			b.SetParallelism((out + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := cli.Null(ctx, testProg, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func reportP50(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
