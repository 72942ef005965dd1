package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// latHist is a latency histogram with log-linear buckets, as HdrHistogram
// and fio's own keep them: each power of two of nanoseconds is cut into
// latSub equal buckets, so a percentile read from it is within 1/latSub
// (3%) of the true value, in 16 KiB whatever the count. Record may be
// called from any number of goroutines at once; the reads are meant for
// after the writers stopped, or for a live view that tolerates a sample
// recorded meanwhile.
type latHist struct {
	counts [64 * latSub]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // ns
	sumSq  atomic.Uint64 // µs², for the standard deviation without overflow
	min    atomic.Int64  // ns; 0: none yet
	max    atomic.Int64
}

const (
	latSubBits = 5
	latSub     = 1 << latSubBits
)

// latBucket returns the bucket of ns nanoseconds.
func latBucket(ns uint64) int {
	if ns < latSub {
		return int(ns)
	}
	exp := bits.Len64(ns) - 1 // ns in [2^exp, 2^(exp+1))
	sub := int(ns>>(exp-latSubBits)) & (latSub - 1)
	return (exp-latSubBits+1)*latSub + sub
}

// latBucketMid returns a value inside bucket i: its middle.
func latBucketMid(i int) uint64 {
	if i < latSub {
		return uint64(i)
	}
	exp := i/latSub + latSubBits - 1
	sub := uint64(i % latSub)
	lo := (1 << exp) | sub<<(exp-latSubBits)
	return lo + (1<<(exp-latSubBits))/2
}

// Record adds one latency.
func (h *latHist) Record(d time.Duration) {
	ns := uint64(max(d, 0))
	h.counts[latBucket(ns)].Add(1)
	h.n.Add(1)
	h.sum.Add(ns)
	us := ns / 1000
	h.sumSq.Add(us * us)
	for {
		m := h.min.Load()
		if m != 0 && m <= int64(ns) || h.min.CompareAndSwap(m, max(int64(ns), 1)) {
			break
		}
	}
	for {
		m := h.max.Load()
		if m >= int64(ns) || h.max.CompareAndSwap(m, int64(ns)) {
			break
		}
	}
}

// latSummary is what a report shows of a histogram.
type latSummary struct {
	N                     uint64
	Min, Max, Mean, Stdev float64 // ns
	// Pct holds the percentiles of latPercentiles, in ns.
	Pct []float64
}

// latPercentiles are the percentiles reported: fio's default list, and
// 99.99, which fio reports too.
var latPercentiles = []float64{1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99}

// Summary returns the count, extremes, mean, standard deviation and
// percentiles; the maximum and minimum are exact, the percentiles within
// a bucket's width, never above the maximum.
func (h *latHist) Summary() latSummary {
	s := latSummary{N: h.n.Load(), Min: float64(h.min.Load()), Max: float64(h.max.Load())}
	if s.N == 0 {
		s.Min = 0
		s.Pct = make([]float64, len(latPercentiles))
		return s
	}
	s.Mean = float64(h.sum.Load()) / float64(s.N)
	meanUs := s.Mean / 1000
	if v := float64(h.sumSq.Load())/float64(s.N) - meanUs*meanUs; v > 0 {
		s.Stdev = math.Sqrt(v) * 1000
	}
	s.Pct = h.percentiles(s.N, latPercentiles)
	for i := range s.Pct {
		s.Pct[i] = min(max(s.Pct[i], s.Min), s.Max)
	}
	return s
}

// percentiles walks the buckets once for the sorted list ps.
func (h *latHist) percentiles(n uint64, ps []float64) []float64 {
	out := make([]float64, len(ps))
	var seen uint64
	j := 0
	for i := range h.counts {
		seen += h.counts[i].Load()
		for j < len(ps) && float64(seen) >= math.Ceil(ps[j]/100*float64(n)) && seen > 0 {
			out[j] = float64(latBucketMid(i))
			j++
		}
		if j == len(ps) {
			break
		}
	}
	for ; j < len(ps); j++ {
		out[j] = float64(h.max.Load())
	}
	return out
}

// pct returns percentile p of s, which must be in latPercentiles.
func (s latSummary) pct(p float64) float64 {
	for i, q := range latPercentiles {
		if q == p {
			return s.Pct[i]
		}
	}
	return math.NaN()
}
