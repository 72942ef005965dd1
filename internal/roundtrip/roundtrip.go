// Package roundtrip measures and reports what benchmarks of one call at a
// time measure: the median and 99th percentile of their round trips.
package roundtrip

import (
	"slices"
	"testing"
	"time"
)

// A Reporter is a *testing.B (its ReportMetric).
type Reporter interface {
	ReportMetric(n float64, unit string)
}

// Measure runs op warmup times, then b.N times timed, one at a time, and
// reports the round trips (Report). It fails b on op's first error.
func Measure(b *testing.B, warmup int, op func() error) {
	b.Helper()
	for range warmup {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	rtts := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		rtts[i] = time.Since(t0)
	}
	b.StopTimer()
	Report(b, rtts)
}

// Report reports the median (p50-ns/op) and the 99th percentile
// (p99-ns/op) of rtts, which it sorts, beside a benchmark's ns/op (their
// mean): perftest's ib_send_lat reports its typical latency, the median,
// which a few long stalls of a busy machine do not move.
func Report(r Reporter, rtts []time.Duration) {
	if len(rtts) == 0 {
		return
	}
	slices.Sort(rtts)
	r.ReportMetric(float64(rtts[len(rtts)/2].Nanoseconds()), "p50-ns/op")
	r.ReportMetric(float64(rtts[len(rtts)*99/100].Nanoseconds()), "p99-ns/op")
}
