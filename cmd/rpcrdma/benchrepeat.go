package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// A bench run with --repeat N runs the whole suite N times in one process,
// on the same connections, and reports each case by the median of its N
// figures with their range, and the ratios the design's targets are
// stated in, each taken within one run (a case against its baseline,
// measured in the same rounds) and then summarized over the runs. Single
// runs on a shared machine move by 10-25%; the median of five is steady
// enough to compare with a target.

// benchRange is the least and the greatest of one figure over the runs.
type benchRange [2]float64

// ratioDef names a ratio of two cases' figures taken within one run.
type ratioDef struct {
	name string
	// num and den select the cases (transport, op, size, outstanding).
	num, den caseKey
	// field picks the figure compared: "p50" for latency, "mbps" or
	// "ops" for throughput, "cpu" for CPU time per operation.
	field string
}

type caseKey struct {
	transport, op string
	size, out     int
}

func keyOf(r benchResult) caseKey { return caseKey{r.Transport, r.Op, r.Size, r.Outstanding} }

// benchRatios are the ratios reported: latency ratios are case over
// baseline (lower is better), throughput ratios case over baseline
// (higher is better).
var benchRatios = []ratioDef{
	{"rdma NULL p50 / raw TCP ping-pong p50", caseKey{"rdma", "NULL", 0, 1}, caseKey{"rawtcp", "pingpong", 64, 1}, "p50"},
	{"tcp NULL p50 / raw TCP ping-pong p50", caseKey{"tcp", "NULL", 0, 1}, caseKey{"rawtcp", "pingpong", 64, 1}, "p50"},
	{"rdma NULL p50 / raw TCP ping-pong p50, alternated", caseKey{"rdma", "NULL" + alternatedSuffix, 0, 1}, caseKey{"rawtcp", "pingpong" + alternatedSuffix, 64, 1}, "p50"},
	{"tcp NULL p50 / raw TCP ping-pong p50, alternated", caseKey{"tcp", "NULL" + alternatedSuffix, 0, 1}, caseKey{"rawtcp", "pingpong" + alternatedSuffix, 64, 1}, "p50"},
	{"rdma NULL cpu/op / raw TCP ping-pong cpu/op", caseKey{"rdma", "NULL", 0, 1}, caseKey{"rawtcp", "pingpong", 64, 1}, "cpu"},
	{"rdma NULL x32 ops/s / tcp NULL x32 ops/s", caseKey{"rdma", "NULL", 0, 32}, caseKey{"tcp", "NULL", 0, 32}, "ops"},
	{"rdma WRITE 1 MiB MB/s / raw TCP bulk", caseKey{"rdma", "WRITE", mib, 1}, caseKey{"rawtcp", "bulk", mib, 1}, "mbps"},
	{"rdma READ 1 MiB MB/s / raw TCP bulk", caseKey{"rdma", "READ", mib, 1}, caseKey{"rawtcp", "bulk", mib, 1}, "mbps"},
	{"rdma WRITE 1 MiB x4 MB/s / raw TCP bulk x4", caseKey{"rdma", "WRITE", mib, 4}, caseKey{"rawtcp", "bulk", mib, 4}, "mbps"},
	{"rdma READ 1 MiB x4 MB/s / raw TCP bulk x4", caseKey{"rdma", "READ", mib, 4}, caseKey{"rawtcp", "bulk", mib, 4}, "mbps"},
	{"CRC on / off, WRITE 1 MiB MB/s", caseKey{"rdma+crc", "WRITE", mib, 1}, caseKey{"rdma", "WRITE", mib, 1}, "mbps"},
	{"CRC on / off, READ 1 MiB MB/s", caseKey{"rdma+crc", "READ", mib, 1}, caseKey{"rdma", "READ", mib, 1}, "mbps"},
	{"rdma WRITE 1 MiB MB/s / raw TCP bulk, alternated", caseKey{"rdma", "WRITE" + alternatedSuffix, mib, 1}, caseKey{"rawtcp", "bulk" + alternatedSuffix, mib, 1}, "mbps"},
	{"rdma READ 1 MiB MB/s / raw TCP bulk, alternated", caseKey{"rdma", "READ" + alternatedSuffix, mib, 1}, caseKey{"rawtcp", "bulk" + alternatedSuffix, mib, 1}, "mbps"},
	{"CRC on / off, WRITE 1 MiB MB/s, alternated", caseKey{"rdma+crc", "WRITE" + alternatedSuffix, mib, 1}, caseKey{"rdma", "WRITE" + alternatedSuffix, mib, 1}, "mbps"},
	{"CRC on / off, READ 1 MiB MB/s, alternated", caseKey{"rdma+crc", "READ" + alternatedSuffix, mib, 1}, caseKey{"rdma", "READ" + alternatedSuffix, mib, 1}, "mbps"},
}

// benchRatio is one ratio over the runs: its median and range.
type benchRatio struct {
	Name   string     `json:"name"`
	Median float64    `json:"median"`
	Range  benchRange `json:"range"`
	Runs   int        `json:"runs"` // runs that measured both cases
}

func (d ratioDef) figure(r benchResult) float64 {
	switch d.field {
	case "p50":
		return r.P50us
	case "ops":
		return r.OpsPerSec
	case "cpu":
		return r.CPUusPerOp
	default:
		return r.MBPerSec
	}
}

// median returns the median of v (the mean of the middle two for an even
// count) and its range; v must not be empty. It sorts v.
func median(v []float64) (float64, benchRange) {
	slices.Sort(v)
	n := len(v)
	m := v[n/2]
	if n%2 == 0 {
		m = (v[n/2-1] + v[n/2]) / 2
	}
	return m, benchRange{v[0], v[n-1]}
}

// aggregate reports each case of runs by the median of its figures over
// the runs that measured it, with the ranges of ops/s, MB/s, p50 and p99,
// in the order the cases first appear. Ops is the total over the runs.
func aggregate(runs [][]benchResult) []benchResult {
	var order []caseKey
	byKey := map[caseKey][]benchResult{}
	for _, run := range runs {
		for _, r := range run {
			k := keyOf(r)
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], r)
		}
	}
	out := make([]benchResult, 0, len(order))
	for _, k := range order {
		rs := byKey[k]
		pick := func(f func(benchResult) float64) (float64, benchRange) {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			return median(v)
		}
		a := benchResult{Transport: k.transport, Op: k.op, Size: k.size, Outstanding: k.out, Runs: len(rs)}
		for _, r := range rs {
			a.Ops += r.Ops
		}
		var ops, mbps, p50, p99 benchRange
		a.OpsPerSec, ops = pick(func(r benchResult) float64 { return r.OpsPerSec })
		a.MBPerSec, mbps = pick(func(r benchResult) float64 { return r.MBPerSec })
		a.P50us, p50 = pick(func(r benchResult) float64 { return r.P50us })
		a.P99us, p99 = pick(func(r benchResult) float64 { return r.P99us })
		a.AllocsPerOp, _ = pick(func(r benchResult) float64 { return r.AllocsPerOp })
		var cpu benchRange
		a.CPUusPerOp, cpu = pick(func(r benchResult) float64 { return r.CPUusPerOp })
		a.OpsRange, a.MBRange, a.P50Range, a.P99Range, a.CPURange = &ops, &mbps, &p50, &p99, &cpu
		out = append(out, a)
	}
	return out
}

// ratios computes benchRatios within each run and summarizes each over
// the runs; a ratio whose cases no run measured both of is left out.
func ratios(runs [][]benchResult) []benchRatio {
	var out []benchRatio
	for _, d := range benchRatios {
		var v []float64
		for _, run := range runs {
			var num, den float64
			for _, r := range run {
				switch keyOf(r) {
				case d.num:
					num = d.figure(r)
				case d.den:
					den = d.figure(r)
				}
			}
			if num > 0 && den > 0 {
				v = append(v, num/den)
			}
		}
		if len(v) == 0 {
			continue
		}
		m, rg := median(v)
		out = append(out, benchRatio{Name: d.name, Median: m, Range: rg, Runs: len(v)})
	}
	return out
}

// printRepeated prints the medians of a repeated bench, each figure with
// its range, then the ratios.
func printRepeated(w io.Writer, rs []benchResult, rats []benchRatio, runs int) {
	fmt.Fprintf(w, "median of %s, (range)\n", plural(runs, "run"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transport\top\tsize\toutstanding\tops/s\t\tMB/s\t\tp50 µs\t\tp99 µs\t\tallocs/op\tcpu µs/op\t\t")
	rg := func(r *benchRange, prec int) string {
		if r == nil {
			return ""
		}
		return fmt.Sprintf("(%.*f-%.*f)", prec, r[0], prec, r[1])
	}
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%s\t%.1f\t%s\t%.1f\t%s\t%.1f\t%s\t%.1f\t%.1f\t%s\t\n",
			r.Transport, r.Op, r.Size, r.Outstanding,
			r.OpsPerSec, rg(r.OpsRange, 0), r.MBPerSec, rg(r.MBRange, 1),
			r.P50us, rg(r.P50Range, 1), r.P99us, rg(r.P99Range, 1), r.AllocsPerOp,
			r.CPUusPerOp, rg(r.CPURange, 1))
	}
	tw.Flush()
	printRatios(w, rats)
}

// printRatios prints the ratios, each taken within one run.
func printRatios(w io.Writer, rats []benchRatio) {
	if len(rats) == 0 {
		return
	}
	fmt.Fprintln(w, "\nratios within each run")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rats {
		fmt.Fprintf(tw, "%s\t%.2f\t(%.2f-%.2f)\n", r.Name, r.Median, r.Range[0], r.Range[1])
	}
	tw.Flush()
}
