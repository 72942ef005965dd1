//go:build linux && cgo && verbs

package rpcrdma_test

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// BenchmarkVerbsNullCgoCalls counts the cgo calls (runtime.NumCgoCall)
// that a NULL round trip makes over the verbs provider in event mode,
// both ends in this process on one device (RPCRDMA_VERBS_ADDR and
// RPCRDMA_VERBS_DEVICE, or rxe0 in the lab guest), as cgo-calls/op. Each
// is one shim function of package verbs (a post, a poll of the completion
// queue, a drain of the completion channel); docs/performance.md, "The
// verbs path in instructions", adds what they cost to the instructions
// bench/cachegrind.sh counts over the in-process provider. How many
// polls and channel reads find nothing depends on timing, so the count
// is the device's and the machine's, not the code's alone.
func BenchmarkVerbsNullCgoCalls(b *testing.B) {
	ip, device := os.Getenv("RPCRDMA_VERBS_ADDR"), os.Getenv("RPCRDMA_VERBS_DEVICE")
	if ip == "" {
		if !lab.InGuest() {
			b.Skip("set RPCRDMA_VERBS_ADDR to an RDMA device's IP address (or run it in the lab guest)")
		}
		ip, device = lab.GuestRxeIP, "rxe0"
	}
	p, err := verbs.New(verbs.Options{Device: device})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	l, err := rpcrdma.Listen(ctx, p, ip+":0", nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := rpc.NewServer(nil)
	benchprog.Register(srv)
	served := make(chan error, 1)
	go func() { served <- rpcrdma.Serve(ctx, l, srv) }()
	conn, err := rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
	if err != nil {
		b.Fatal(err)
	}
	cli := rpc.NewClient(conn)
	bc := benchprog.Client{C: cli}
	for range 100 { // warm-up: buffers, credits, the first calls' page faults
		if err := bc.Null(ctx); err != nil {
			b.Fatal(err)
		}
	}
	before := runtime.NumCgoCall()
	for b.Loop() {
		if err := bc.Null(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(runtime.NumCgoCall()-before)/float64(b.N), "cgo-calls/op")
	cli.Close()
	conn.Close()
	srv.Close()
	l.Close()
	<-served
}
