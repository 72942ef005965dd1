// Command grpc compares small RPCs over go-rpcrdma with gRPC-Go unary
// calls, both in one process over loopback, for the design's target
// "small RPC rate with many outstanding calls on one connection: at least
// 2x gRPC-Go unary". It is a module of its own so that the library does not
// depend on gRPC:
//
//	cd bench/grpc && go run . [-duration 2s] [-rounds 5]
//
// Each case is an empty call: RPC NULL over RPC-over-RDMA (the software
// iWARP) and a gRPC unary method with an empty request and response (a raw
// codec, no protobuf), with 1 and 32 calls outstanding on one connection.
// The cases take turns over the rounds, and each is reported as the median
// of its rounds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

const prog, vers = 0x20000099, 1

// rawCodec passes []byte messages through, so no protobuf is involved.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

var nullDesc = grpc.ServiceDesc{
	ServiceName: "bench.Bench",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Null",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			out := []byte{}
			return &out, nil
		},
	}},
}

type call func(ctx context.Context) error

func grpcCall() (call, func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(&nullDesc, struct{}{})
	go srv.Serve(l)
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		log.Fatal(err)
	}
	return func(ctx context.Context) error {
			in, out := []byte{}, []byte{}
			return cc.Invoke(ctx, "/bench.Bench/Null", &in, &out)
		}, func() {
			cc.Close()
			srv.Stop()
		}
}

func rdmaCall() (call, func()) {
	ctx := context.Background()
	p, err := iwarp.New(iwarp.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv := rpc.NewServer(nil)
	srv.Handle(prog, vers, 1, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })
	l, err := rpcrdma.Listen(ctx, p, "127.0.0.1:0", nil)
	if err != nil {
		log.Fatal(err)
	}
	go rpcrdma.Serve(ctx, l, srv)
	conn, err := rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
	if err != nil {
		log.Fatal(err)
	}
	cli := rpc.NewClient(conn)
	return func(ctx context.Context) error { return cli.Null(ctx, prog, vers) }, func() {
		cli.Close()
		l.Close()
		srv.Close()
	}
}

type result struct{ opsPerSec, p50us float64 }

// measure runs f from n goroutines for d and returns the rate and the
// median latency.
func measure(f call, n int, d time.Duration) result {
	ctx := context.Background()
	var ops atomic.Int64
	lats := make([][]time.Duration, n)
	for w := range lats {
		lats[w] = make([]time.Duration, 0, 1<<16) // no allocation while measuring
	}
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range n {
		wg.Go(func() {
			for time.Now().Before(stop) {
				t := time.Now()
				if err := f(ctx); err != nil {
					log.Fatal(err)
				}
				if len(lats[w]) < cap(lats[w]) {
					lats[w] = append(lats[w], time.Since(t))
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	all := slices.Concat(lats...)
	slices.Sort(all)
	return result{float64(ops.Load()) / el.Seconds(), float64(all[len(all)/2].Nanoseconds()) / 1000}
}

func main() {
	duration := flag.Duration("duration", 2*time.Second, "measuring time per case and round")
	rounds := flag.Int("rounds", 5, "rounds; each case is reported as the median of its rounds")
	flag.Parse()

	type bcase struct {
		name string
		f    call
		n    int
		res  []result
	}
	g, gclose := grpcCall()
	defer gclose()
	r, rclose := rdmaCall()
	defer rclose()
	cases := []*bcase{{name: "grpc unary", f: g, n: 1}, {name: "rdma NULL", f: r, n: 1}, {name: "grpc unary", f: g, n: 32}, {name: "rdma NULL", f: r, n: 32}}
	for _, c := range cases {
		measure(c.f, c.n, *duration/4) // warm up
	}
	for range *rounds {
		for _, c := range cases {
			// Start each case with a clean heap: gRPC's garbage would
			// otherwise be collected during the next case.
			runtime.GC()
			c.res = append(c.res, measure(c.f, c.n, *duration))
		}
	}
	median := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\toutstanding\tops/s\tp50 µs")
	rate := map[string]float64{}
	for _, c := range cases {
		ops := median(c.res, func(r result) float64 { return r.opsPerSec })
		rate[fmt.Sprint(c.name, c.n)] = ops
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\n", c.name, c.n, ops, median(c.res, func(r result) float64 { return r.p50us }))
	}
	tw.Flush()
	fmt.Printf("rdma NULL / grpc unary, ops/s: %.2fx with 1 outstanding, %.2fx with 32\n",
		rate["rdma NULL1"]/rate["grpc unary1"], rate["rdma NULL32"]/rate["grpc unary32"])
}
