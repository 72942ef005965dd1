package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"
)

// benchRunner runs the suite --repeat times over, drawing its progress
// on stderr when progress is set.
type benchRunner struct {
	o        *benchOptions
	cases    []benchCase
	stderr   io.Writer
	progress bool
	run      int // the run being measured, from 0
}

// runAll measures the suite o.repeat times and returns each run's
// results. Where it stops early it returns the runs done and an error
// saying what they cover: when Ctrl-C (ctx) ends it, the runs completed,
// or the first run's cases measured if none was. It returns no runs and
// the error where a case failed or none was measured.
func (r *benchRunner) runAll(ctx context.Context) ([][]benchResult, error) {
	o := r.o
	var before func(round, i int)
	if r.progress {
		before = r.before
	}
	var runs [][]benchResult
	for r.run = 0; r.run < o.repeat; r.run++ {
		samples, done, err := runRounds(ctx, r.cases, o.rounds, o.duration/time.Duration(o.rounds), o.gap, before)
		if r.progress {
			fmt.Fprint(r.stderr, "\r\033[K")
		}
		if err != nil {
			return nil, err
		}
		results, err := summarizeRun(r.cases, samples)
		if err != nil {
			return nil, err
		}
		if ctx.Err() == nil {
			runs = append(runs, results)
			continue
		}
		switch {
		case len(runs) > 0:
			return runs, fmt.Errorf("interrupted in run %d of %d: the results cover the %s completed", r.run+1, o.repeat, plural(len(runs), "run"))
		case len(results) == 0:
			return nil, errors.New("interrupted before any case was measured")
		default:
			return [][]benchResult{results}, fmt.Errorf("interrupted with %s of %d done: the results cover what was measured (%s of %d)", plural(done, "round"), o.rounds, plural(len(results), "case"), len(r.cases))
		}
	}
	return runs, nil
}

// before draws the progress line ahead of case i in round.
func (r *benchRunner) before(round, i int) {
	c := r.cases[i]
	rep := ""
	if r.o.repeat > 1 {
		rep = fmt.Sprintf("run %d/%d, ", r.run+1, r.o.repeat)
	}
	fmt.Fprintf(r.stderr, "\r\033[K[%sround %d/%d, %d/%d] %s %s %d x%d ...", rep, round+1, r.o.rounds, i+1, len(r.cases), c.transport, c.op, c.size, c.outstanding)
}

// summarizeRun returns one run's results from its samples (runRounds),
// leaving out the cases not reached before Ctrl-C.
func summarizeRun(cases []benchCase, samples [][]caseSample) ([]benchResult, error) {
	var results []benchResult
	i := 0
	for _, g := range cases {
		for _, c := range g.parts() {
			smp := samples[i]
			i++
			if len(smp) == 0 {
				continue // not reached before Ctrl-C
			}
			r, err := summarize(c, smp)
			if err != nil {
				return nil, fmt.Errorf("%s %s %d bytes, %d outstanding: %w", c.transport, c.op, c.size, c.outstanding, err)
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// calling before (if not nil) ahead of each. It returns the samples of
// each case's parts, in order, and the number of whole rounds done: all
// of them, or fewer when stop ends (Ctrl-C), which cuts the case being
// measured short and measures no other. A case that fails ends the run
// with its error.
func runRounds(stop context.Context, cases []benchCase, rounds int, slice, gap time.Duration, before func(round, i int)) ([][]caseSample, int, error) {
	first := make([]int, len(cases)) // each case's first part's index
	n := 0
	for i, c := range cases {
		first[i] = n
		n += len(c.parts())
	}
	samples := make([][]caseSample, n)
	for round := range rounds {
		for i, c := range cases {
			if stop.Err() != nil {
				return samples, round, nil
			}
			if before != nil {
				before(round, i)
			}
			var smps []caseSample
			var err error
			if c.outstanding == 1 {
				// One operation at a time, or cases in turn: on this
				// goroutine, each operation timed on its own.
				smps, err = measureTurns(stop, c.parts(), slice, gap)
			} else {
				var smp caseSample
				smp, err = measure(stop, c, slice)
				smps = []caseSample{smp}
			}
			if err != nil {
				return nil, round, fmt.Errorf("%s %s %d bytes, %d outstanding: %w", c.transport, c.op, c.size, c.outstanding, err)
			}
			for k, smp := range smps {
				if len(smp.lat) > 0 {
					samples[first[i]+k] = append(samples[first[i]+k], smp)
				}
			}
		}
	}
	return samples, rounds, nil
}

// caseSample is one round of a case: every operation's latency, the time
// the round took and the heap allocations made in it.
type caseSample struct {
	lat     []time.Duration
	elapsed time.Duration
	sampleUsage
}

// sampleUsage is what a sample counts besides its operations: the heap
// allocations and the process's CPU time (processCPU) it took.
type sampleUsage struct {
	mallocs uint64
	cpu     time.Duration
}

// readSampleUsage returns the process's counts so far; since, what they
// have grown by from u. The first reading of a sample follows a garbage
// collection, so that one owed by earlier work does not fall in it.
func readSampleUsage() sampleUsage {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cpu, _ := processCPU()
	return sampleUsage{ms.Mallocs, cpu}
}

func (u sampleUsage) since() sampleUsage {
	v := readSampleUsage()
	return sampleUsage{v.mallocs - u.mallocs, v.cpu - u.cpu}
}

// measure runs one round of a case with several operations outstanding
// for d after a short warm-up, or until stop ends (Ctrl-C): the sample
// then covers the time measured.
func measure(stop context.Context, c benchCase, d time.Duration) (caseSample, error) {
	op, cleanup, err := c.setup()
	if err != nil {
		return caseSample{}, err
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	// Warm up: each worker runs a few operations.
	for w := 0; w < c.outstanding; w++ {
		for range 3 {
			if err := op(ctx, w); err != nil {
				return caseSample{}, err
			}
		}
	}
	lat := make([][]time.Duration, c.outstanding)
	for w := range lat {
		lat[w] = make([]time.Duration, 0, 1<<16)
	}
	runtime.GC()
	u0 := readSampleUsage()
	var wg sync.WaitGroup
	errs := make([]error, c.outstanding)
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < c.outstanding; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				if !t0.Before(deadline) || stop.Err() != nil {
					return
				}
				if err := op(ctx, w); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	u := u0.since()
	if err := errors.Join(errs...); err != nil {
		return caseSample{}, err
	}
	smp := caseSample{elapsed: elapsed, sampleUsage: u}
	for _, l := range lat {
		smp.lat = append(smp.lat, l...)
	}
	return smp, nil
}

// measureTurns runs one round of cases of one operation outstanding, in
// turn, for d, or until stop ends, after a short warm-up: this goroutine
// runs one operation of each case, then the next turn, sleeping gap
// before each operation. Each sample's elapsed time is the sum of its
// own operations' latencies, so that its operations per second are those
// of the case alone, gaps and turns left out; its heap allocations and CPU
// time are those of the whole round, every case's (a count per case would
// need a stop of the world or a system call per operation), so that with
// more than one case its allocations and CPU time per operation are per
// turn.
func measureTurns(stop context.Context, cases []benchCase, d, gap time.Duration) ([]caseSample, error) {
	ops := make([]func(context.Context, int) error, len(cases))
	for i, c := range cases {
		op, cleanup, err := c.setup()
		if err != nil {
			return nil, err
		}
		defer cleanup()
		ops[i] = op
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	for range 3 {
		for _, op := range ops {
			if err := op(ctx, 0); err != nil {
				return nil, err
			}
		}
	}
	smps := make([]caseSample, len(cases))
	for i := range smps {
		smps[i].lat = make([]time.Duration, 0, 1<<14)
	}
	runtime.GC()
	u0 := readSampleUsage()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && stop.Err() == nil {
		for i, op := range ops {
			if gap > 0 {
				time.Sleep(gap)
			}
			t0 := time.Now()
			if err := op(ctx, 0); err != nil {
				return nil, fmt.Errorf("%s %s: %w", cases[i].transport, cases[i].op, err)
			}
			l := time.Since(t0)
			smps[i].lat = append(smps[i].lat, l)
			smps[i].elapsed += l
		}
	}
	u := u0.since()
	for i := range smps {
		smps[i].sampleUsage = u
	}
	return smps, nil
}

// summarize reports a case over all its rounds.
func summarize(c benchCase, samples []caseSample) (benchResult, error) {
	var all []time.Duration
	var elapsed time.Duration
	var mallocs uint64
	var cpu time.Duration
	for _, s := range samples {
		all = append(all, s.lat...)
		elapsed += s.elapsed
		mallocs += s.mallocs
		cpu += s.cpu
	}
	if len(all) == 0 {
		return benchResult{}, errors.New("no operation completed")
	}
	slices.Sort(all)
	n := len(all)
	r := benchResult{
		Transport: c.transport, Op: c.op, Size: c.size, Outstanding: c.outstanding, Ops: n,
		OpsPerSec:   float64(n) / elapsed.Seconds(),
		P50us:       float64(all[n/2].Nanoseconds()) / 1e3,
		P99us:       float64(all[min(n-1, n*99/100)].Nanoseconds()) / 1e3,
		AllocsPerOp: float64(mallocs) / float64(n),
		CPUusPerOp:  float64(cpu.Nanoseconds()) / 1e3 / float64(n),
	}
	r.MBPerSec = r.OpsPerSec * float64(c.size) / 1e6
	return r, nil
}
