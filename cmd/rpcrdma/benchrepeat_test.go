package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in     []float64
		med    float64
		lo, hi float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{9, 9, 1, 2, 8}, 8, 1, 9},
	} {
		m, r := median(append([]float64(nil), tc.in...))
		if m != tc.med || r != (benchRange{tc.lo, tc.hi}) {
			t.Errorf("median(%v) = %v %v, want %v [%v %v]", tc.in, m, r, tc.med, tc.lo, tc.hi)
		}
	}
}

// TestAggregate: each case is reported once, in first-seen order, by the
// median of each figure with its range, a case missing from a run is the
// median of the runs that measured it, and ratios are taken within each
// run before the median (not medians divided).
func TestAggregate(t *testing.T) {
	raw := func(p50 float64) benchResult {
		return benchResult{Transport: "rawtcp", Op: "pingpong", Size: 64, Outstanding: 1, Ops: 10, OpsPerSec: 1e6 / p50, P50us: p50, P99us: 2 * p50, CPUusPerOp: p50}
	}
	null := func(p50 float64) benchResult {
		return benchResult{Transport: "rdma", Op: "NULL", Size: 0, Outstanding: 1, Ops: 5, OpsPerSec: 1e6 / p50, P50us: p50, P99us: 3 * p50, AllocsPerOp: 1, CPUusPerOp: p50 / 2}
	}
	runs := [][]benchResult{
		{raw(10), null(20)},
		{raw(20), null(22)},
		{raw(12), null(30)},
		{raw(11)},
	}
	agg := aggregate(runs)
	if len(agg) != 2 || agg[0].Transport != "rawtcp" || agg[1].Transport != "rdma" {
		t.Fatalf("aggregate: %+v", agg)
	}
	r := agg[0]
	if r.Runs != 4 || r.Ops != 40 || r.P50us != 11.5 || *r.P50Range != (benchRange{10, 20}) || r.P99us != 23 || *r.P99Range != (benchRange{20, 40}) {
		t.Errorf("rawtcp: %+v p50 %v p99 %v", r, *r.P50Range, *r.P99Range)
	}
	n := agg[1]
	if n.Runs != 3 || n.P50us != 22 || *n.P50Range != (benchRange{20, 30}) || n.AllocsPerOp != 1 || n.CPUusPerOp != 11 || *n.CPURange != (benchRange{10, 15}) {
		t.Errorf("rdma NULL: %+v", n)
	}
	rats := ratios(runs)
	if len(rats) != 2 || rats[0].Name != "rdma NULL p50 / raw TCP ping-pong p50" || rats[1].Name != "rdma NULL cpu/op / raw TCP ping-pong cpu/op" {
		t.Fatalf("ratios: %+v", rats)
	}
	// Per run: 2.0, 1.1, 2.5; medians divided would give 22/11.5.
	if got := rats[0]; got.Runs != 3 || got.Median != 2.0 || got.Range != (benchRange{1.1, 2.5}) {
		t.Errorf("ratio: %+v", got)
	}
	// CPU per operation, per run: 1.0, 0.55, 1.25.
	if got := rats[1]; got.Runs != 3 || got.Median != 1.0 || got.Range != (benchRange{0.55, 1.25}) {
		t.Errorf("cpu ratio: %+v", got)
	}
}

func TestBenchRepeat(t *testing.T) {
	out, errOut, code := rpcrdmaCmd(t, 180*time.Second, "bench", "--duration", "30ms", "--rounds", "1", "--repeat", "2", "--json")
	if code != 0 {
		t.Fatalf("bench --repeat 2: exit %d\n%s", code, errOut)
	}
	b := checkBench(t, out, "rawtcp", "tcp", "rdma")
	var full struct {
		Host    benchHost     `json:"host"`
		Results []benchResult `json:"results"`
		Ratios  []benchRatio  `json:"ratios"`
		Runs    []benchRun    `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &full); err != nil {
		t.Fatal(err)
	}
	if h := full.Host; h.CPUs < 1 || h.GOMAXPROCS < 1 || h.OS == "" || h.Go == "" || h.Time == "" || (h.OS == "linux" && h.Kernel == "") {
		t.Errorf("host: %+v", h)
	}
	if len(full.Runs) != 2 {
		t.Fatalf("%d runs reported, want 2", len(full.Runs))
	}
	for _, r := range b.Results {
		if r.Runs != 2 || r.P50Range == nil || r.P50Range[0] > r.P50us || r.P50us > r.P50Range[1] {
			t.Errorf("result %+v: want 2 runs and the median within its range", r)
		}
	}
	names := map[string]bool{}
	for _, r := range full.Ratios {
		names[r.Name] = true
		if r.Runs != 2 || r.Median <= 0 || r.Range[0] > r.Median || r.Median > r.Range[1] {
			t.Errorf("ratio %+v", r)
		}
	}
	for _, want := range []string{"rdma NULL p50 / raw TCP ping-pong p50", "tcp NULL p50 / raw TCP ping-pong p50", "CRC on / off, WRITE 1 MiB MB/s"} {
		if !names[want] {
			t.Errorf("no ratio %q", want)
		}
	}
	// The table form.
	out, errOut, code = rpcrdmaCmd(t, 180*time.Second, "bench", "--duration", "20ms", "--rounds", "1", "--repeat", "2")
	if code != 0 || !strings.HasPrefix(out, "host: ") || !strings.Contains(out, "GOMAXPROCS") ||
		!strings.Contains(out, "median of 2 runs") || !strings.Contains(out, "ratios within each run") {
		t.Fatalf("bench --repeat table: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestMeasureTurns: the cases of an alternated case take turns one
// operation at a time, each operation is timed and counted for its own
// case, and a case's elapsed time is the sum of its own latencies.
func TestMeasureTurns(t *testing.T) {
	var order []string
	mk := func(name string, d time.Duration) benchCase {
		return benchCase{transport: name, op: "op", outstanding: 1,
			setup: func() (func(context.Context, int) error, func(), error) {
				return func(context.Context, int) error {
					order = append(order, name)
					time.Sleep(d)
					return nil
				}, func() {}, nil
			}}
	}
	g := alternated(mk("a", time.Millisecond), mk("b", 4*time.Millisecond))
	if g.turns[0].op != "op"+alternatedSuffix || len(g.parts()) != 2 {
		t.Fatalf("alternated: %+v", g)
	}
	smps, err := measureTurns(context.Background(), g.turns, 100*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Fatalf("%s ran twice in a row: %v", order[i], order)
		}
	}
	a, b := smps[0], smps[1]
	if len(a.lat) == 0 || len(a.lat) != len(b.lat) {
		t.Fatalf("%d and %d operations, want the same number, more than 0", len(a.lat), len(b.lat))
	}
	for i := range a.lat {
		if a.lat[i] < time.Millisecond || b.lat[i] < 4*time.Millisecond {
			t.Fatalf("turn %d: %v and %v, want at least 1ms and 4ms", i, a.lat[i], b.lat[i])
		}
	}
	var sum time.Duration
	for _, l := range b.lat {
		sum += l
	}
	if b.elapsed != sum {
		t.Errorf("elapsed %v, want the sum of the latencies %v", b.elapsed, sum)
	}
	defer func() {
		if recover() == nil {
			t.Error("alternated accepted a case with 32 outstanding")
		}
	}()
	alternated(benchCase{outstanding: 32})
}

// TestCPUModel: the first "model name" of a /proc/cpuinfo, and the host
// line a report starts with.
func TestCPUModel(t *testing.T) {
	in := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Processor\n\nprocessor\t: 1\nmodel name\t: other\n"
	if got := cpuModel(strings.NewReader(in)); got != "Intel(R) Xeon(R) Processor" {
		t.Errorf("cpuModel = %q", got)
	}
	if got := cpuModel(strings.NewReader("processor\t: 0\n")); got != "" {
		t.Errorf("cpuModel without a model name = %q", got)
	}
	h := benchHost{CPU: "X", CPUs: 2, GOMAXPROCS: 1, OS: "linux", Kernel: "6.1.0", Go: "go1.26", Time: "2026-11-29T00:40:00Z"}
	if got, want := h.String(), "host: X, 2 CPUs, GOMAXPROCS 1, linux 6.1.0, go1.26, 2026-11-29T00:40:00Z"; got != want {
		t.Errorf("host line %q, want %q", got, want)
	}
	h.CPU, h.Kernel = "", ""
	if got, want := h.String(), "host: 2 CPUs, GOMAXPROCS 1, linux, go1.26, 2026-11-29T00:40:00Z"; got != want {
		t.Errorf("host line %q, want %q", got, want)
	}
}
