package main

// --plot: each workload's latency over time (p50, p99 and the maximum of
// each interval, per direction) beside its latency histogram, as one SVG
// (or an HTML page holding it). It is drawn here, with encoding/xml's
// escaping and nothing else: a plotting module in go.mod would enter the
// module graph of every program that imports the library
// (TestUserModuleGraph), for the command's sake alone.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"strings"
)

const (
	plotW, plotH   = 440, 240 // one chart
	plotPad        = 70       // room for the axes' labels
	plotRowH       = plotH + 70
	plotChartTotal = 2*(plotW+plotPad) + plotPad
)

// dirColors are the directions' colours: reads blue, writes orange.
var dirColors = [2]string{"#1f77b4", "#ff7f0e"}

// writePlot writes the report's plot to name.
func writePlot(name string, r *benchReport) error {
	var b bytes.Buffer
	height := len(r.jobs)*plotRowH + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", plotChartTotal, height)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">%s</text>`+"\n",
		esc(fmt.Sprintf("rpcrdma nfs bench %s over %s, NFS %s", r.target, r.transport, r.vers)))
	for i, j := range r.jobs {
		y := 40 + i*plotRowH
		title := fmt.Sprintf("%s, iodepth %d, %d connections", j.rw, j.iodepth, j.numjobs)
		if j.partial {
			title += " (stopped)"
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="13">%s</text>`+"\n", y+14, esc(title))
		timeChart(&b, j, plotPad, y+30)
		histChart(&b, j, 2*plotPad+plotW, y+30)
	}
	b.WriteString("</svg>\n")
	out := b.Bytes()
	if strings.HasSuffix(name, ".html") {
		out = append(append([]byte("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>rpcrdma nfs bench</title></head><body>\n"), out...),
			"</body></html>\n"...)
	}
	return os.WriteFile(name, out, 0o644)
}

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// logAxis maps nanoseconds to a chart's height on a log scale from lo to
// hi, and returns the decades between them for grid lines.
type logAxis struct{ lo, hi float64 }

func newLogAxis(vals []float64) logAxis {
	lo, hi := math.Inf(1), 0.0
	for _, v := range vals {
		if v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if hi == 0 {
		return logAxis{1e3, 1e6}
	}
	return logAxis{math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)+1e-9))}
}

func (a logAxis) pos(v float64, length float64) float64 {
	if v <= 0 {
		return 0
	}
	return (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo)) * length
}

// timeChart draws latency over time at (x, y).
func timeChart(b *bytes.Buffer, j *jobResult, x, y int) {
	var vals []float64
	end := j.elapsed.Seconds()
	for _, p := range j.timeline {
		vals = append(vals, p.p50, p.max)
		end = max(end, p.at)
	}
	ax := newLogAxis(vals)
	frame(b, x, y, "latency over time (s)", ax, true)
	for dir := range 2 {
		for k, series := range []func(timePoint) float64{
			func(p timePoint) float64 { return p.p50 }, func(p timePoint) float64 { return p.p99 }, func(p timePoint) float64 { return p.max }} {
			var pts []string
			for _, p := range j.timeline {
				if p.dir != dir {
					continue
				}
				px := float64(x) + p.at/max(end, 1e-9)*plotW
				py := float64(y+plotH) - ax.pos(series(p), plotH)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			}
			if len(pts) == 0 {
				continue
			}
			dash := [...]string{"", ` stroke-dasharray="6,3"`, ` stroke-dasharray="1,3"`}[k]
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", dirColors[dir], dash, strings.Join(pts, " "))
		}
	}
	fmt.Fprintf(b, `<text x="%d" y="%d">%.1f</text>`+"\n", x+plotW-20, y+plotH+14, end)
	legend(b, x, y-6, j, "p50 solid, p99 dashed, max dotted")
}

// histChart draws the latency histogram at (x, y): the share of calls in
// each bucket, per direction, latency on a log scale.
func histChart(b *bytes.Buffer, j *jobResult, x, y int) {
	var vals []float64
	for dir := range 2 {
		s := j.dirs[dir].hist.Summary()
		if s.N > 0 {
			vals = append(vals, s.Min, s.Max)
		}
	}
	ax := newLogAxis(vals)
	frame(b, x, y, "latency histogram (calls in each latency band)", ax, false)
	for dir := range 2 {
		h := &j.dirs[dir].hist
		n := h.n.Load()
		if n == 0 {
			continue
		}
		// Merge the fine buckets into 60 bars across the axis.
		const bars = 60
		var share [bars]float64
		for i := range h.counts {
			c := h.counts[i].Load()
			if c == 0 {
				continue
			}
			k := int(ax.pos(float64(latBucketMid(i)), bars))
			share[min(max(k, 0), bars-1)] += float64(c) / float64(n)
		}
		top := 0.0
		for _, v := range share {
			top = max(top, v)
		}
		w := float64(plotW) / bars
		for k, v := range share {
			if v == 0 {
				continue
			}
			hgt := v / top * (plotH - 10)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.6"/>`+"\n",
				float64(x)+float64(k)*w, float64(y+plotH)-hgt, w, hgt, dirColors[dir])
		}
	}
	legend(b, x, y-6, j, "")
}

// frame draws a chart's box, title and a grid line with its label at
// each decade of latency: up the left side when latency is vertical
// (over time), along the bottom when it is horizontal (the histogram).
func frame(b *bytes.Buffer, x, y int, title string, ax logAxis, vertical bool) {
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x, y, plotW, plotH)
	fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x, y+plotH+28, esc(title))
	for v := ax.lo; v <= ax.hi*1.0001; v *= 10 {
		if vertical {
			p := float64(y+plotH) - ax.pos(v, plotH)
			fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, x+plotW, p, p)
			fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x-4, p+4, esc(decade(v)))
		} else {
			p := float64(x) + ax.pos(v, plotW)
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/>`+"\n", p, p, y, y+plotH)
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", p, y+plotH+14, esc(decade(v)))
		}
	}
}

// legend names the directions drawn, with a note.
func legend(b *bytes.Buffer, x, y int, j *jobResult, note string) {
	off := 0
	for dir, name := range []string{"read", "write"} {
		if j.dirs[dir].ios.Load() == 0 {
			continue
		}
		if workloadKinds[j.rw].meta {
			name = j.rw
		}
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", x+off, y, dirColors[dir], esc(name))
		off += 60
	}
	if note != "" {
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555">%s</text>`+"\n", x+off, y, esc(note))
	}
}

// decade labels a power of ten of nanoseconds: 100 µs, 1 ms, 10 s.
func decade(ns float64) string {
	for _, u := range []struct {
		scale float64
		unit  string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}} {
		if ns >= u.scale {
			return fmt.Sprintf("%.0f %s", ns/u.scale, u.unit)
		}
	}
	return fmt.Sprintf("%.0f ns", ns)
}
