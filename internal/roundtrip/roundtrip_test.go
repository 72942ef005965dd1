package roundtrip

import (
	"testing"
	"time"
)

type metrics map[string]float64

func (m metrics) ReportMetric(n float64, unit string) { m[unit] = n }

func TestReport(t *testing.T) {
	var rtts []time.Duration
	for i := 200; i >= 1; i-- { // 1..200 µs, unsorted
		rtts = append(rtts, time.Duration(i)*time.Microsecond)
	}
	m := metrics{}
	Report(m, rtts)
	if got, want := m["p50-ns/op"], 101e3; got != want {
		t.Errorf("p50 %v, want %v", got, want)
	}
	if got, want := m["p99-ns/op"], 199e3; got != want {
		t.Errorf("p99 %v, want %v", got, want)
	}
	m = metrics{}
	Report(m, nil)
	if len(m) != 0 {
		t.Errorf("no round trips reported %v", m)
	}
}

// BenchmarkMeasure: Measure runs op warmup + b.N times and reports both
// percentiles (go test -bench Measure ./internal/roundtrip).
func BenchmarkMeasure(b *testing.B) {
	calls := 0
	Measure(b, 5, func() error { calls++; return nil })
	if calls != 5+b.N {
		b.Fatalf("op ran %d times, want %d", calls, 5+b.N)
	}
}

// TestRawTCP: a small and a large message each come back acknowledged,
// and a message size out of range is refused before anything is sent.
func TestRawTCP(t *testing.T) {
	send := RawTCP(t)
	for _, n := range []int{0, 64, MaxRawTCP} {
		if err := send(n); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a message over MaxRawTCP was accepted")
		}
	}()
	send(MaxRawTCP + 1)
}
