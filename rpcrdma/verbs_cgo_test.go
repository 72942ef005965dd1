//go:build linux && cgo && verbs

package rpcrdma_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bc, stop := verbsNull(ctx, b, "an RDMA device's IP address (or run it in the lab guest)", verbs.Options{})
	defer stop()
	before := runtime.NumCgoCall()
	for b.Loop() {
		if err := bc.Null(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(runtime.NumCgoCall()-before)/float64(b.N), "cgo-calls/op")
}
