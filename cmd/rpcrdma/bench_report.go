package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// writeBenchReport writes the machine it ran on (benchHost) and the runs'
// results and ratios to w: a table, or with asJSON one JSON object; with
// more than one run, each figure is its median over them (benchrepeat.go).
func writeBenchReport(w io.Writer, runs [][]benchResult, asJSON bool) error {
	results := runs[0]
	if len(runs) > 1 {
		results = aggregate(runs)
	}
	rats := ratios(runs)
	host := thisHost()
	if asJSON {
		out := struct {
			Host    benchHost     `json:"host"`
			Results []benchResult `json:"results"`
			Ratios  []benchRatio  `json:"ratios"`
			Runs    []benchRun    `json:"runs,omitempty"`
		}{Host: host, Results: results, Ratios: rats}
		if len(runs) > 1 {
			for _, r := range runs {
				out.Runs = append(out.Runs, benchRun{r})
			}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintln(w, host)
	if len(runs) > 1 {
		printRepeated(w, results, rats, len(runs))
	} else {
		printTable(w, results)
		printRatios(w, rats)
	}
	return nil
}

// benchRun is one run's results in --repeat's JSON.
type benchRun struct {
	Results []benchResult `json:"results"`
}

// printTable writes rs to w as one aligned table, a line a result.
func printTable(w io.Writer, rs []benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transport\top\tsize\toutstanding\tops/s\tMB/s\tp50 µs\tp99 µs\tallocs/op\tcpu µs/op\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			r.Transport, r.Op, r.Size, r.Outstanding, r.OpsPerSec, r.MBPerSec, r.P50us, r.P99us, r.AllocsPerOp, r.CPUusPerOp)
	}
	tw.Flush()
}
