package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestLatBuckets(t *testing.T) {
	prev := -1
	for ns := uint64(0); ns < 1<<20; ns += 1 + ns/97 {
		b := latBucket(ns)
		if b < prev || b >= len(latHist{}.counts) {
			t.Fatalf("latBucket(%d) = %d after %d", ns, b, prev)
		}
		prev = b
		if mid := latBucketMid(b); math.Abs(float64(mid)-float64(ns)) > float64(ns)/latSub+1 {
			t.Fatalf("bucket %d of %d has middle %d", b, ns, mid)
		}
	}
	if b := latBucket(math.MaxUint64); b >= len(latHist{}.counts) {
		t.Fatalf("the largest latency falls in bucket %d", b)
	}
}

// TestLatHist: percentiles within a bucket's width of the exact ones,
// the extremes and the mean exact.
func TestLatHist(t *testing.T) {
	var h latHist
	r := rand.New(rand.NewPCG(1, 2))
	var all []float64
	var sum float64
	for range 100000 {
		d := time.Duration(r.ExpFloat64()*50e3) + 10*time.Microsecond
		h.Record(d)
		all = append(all, float64(d))
		sum += float64(d)
	}
	slices.Sort(all)
	s := h.Summary()
	if s.N != 100000 || s.Min != all[0] || s.Max != all[len(all)-1] || math.Abs(s.Mean-sum/1e5) > 1 {
		t.Errorf("summary %d %v %v %v, want %v %v %v", s.N, s.Min, s.Max, s.Mean, all[0], all[len(all)-1], sum/1e5)
	}
	for i, p := range latPercentiles {
		exact := all[int(math.Ceil(p/100*float64(len(all))))-1]
		if math.Abs(s.Pct[i]-exact) > exact/latSub*1.5 {
			t.Errorf("p%v = %v, exact %v", p, s.Pct[i], exact)
		}
	}
	if s.Stdev < 40e3 || s.Stdev > 60e3 {
		t.Errorf("stdev %v, want about 50 µs", s.Stdev)
	}
	var empty latHist
	if s := empty.Summary(); s.N != 0 || s.Max != 0 || len(s.Pct) != len(latPercentiles) {
		t.Errorf("empty summary %+v", s)
	}
}
