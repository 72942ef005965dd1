package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/internal/rawtcp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// benchResult is one line of the report; the JSON keys are a stable
// interface (see --help).
type benchResult struct {
	Transport   string  `json:"transport"`
	Op          string  `json:"op"`
	Size        int     `json:"size"`
	Outstanding int     `json:"outstanding"`
	Ops         int     `json:"ops"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	MBPerSec    float64 `json:"mb_per_sec"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	// CPUusPerOp is the process's CPU time per operation, user and
	// system, every thread's; 0 where the platform does not report it.
	CPUusPerOp float64 `json:"cpu_us_per_op"`

	// With --repeat: the number of runs the figures above are the
	// medians of, and the range of each figure over them.
	Runs     int         `json:"runs,omitempty"`
	OpsRange *benchRange `json:"ops_per_sec_range,omitempty"`
	MBRange  *benchRange `json:"mb_per_sec_range,omitempty"`
	P50Range *benchRange `json:"p50_us_range,omitempty"`
	P99Range *benchRange `json:"p99_us_range,omitempty"`
	CPURange *benchRange `json:"cpu_us_per_op_range,omitempty"`
}

// benchCase is one measurement: outstanding workers each calling op in a
// loop, or, with turns, cases of one outstanding operation measured
// together.
type benchCase struct {
	transport   string
	op          string
	size        int // payload bytes moved per operation
	outstanding int
	// setup returns the operation each worker runs, and a cleanup.
	setup func() (op func(ctx context.Context, worker int) error, cleanup func(), err error)
	// turns, when set, are cases of one outstanding operation that one
	// goroutine runs in turn, one operation of each per turn, each timed
	// on its own and reported as a case of its own: a figure and its
	// baseline measured over the same instants, which a ratio of
	// latencies needs on a machine whose speed moves from one tenth of a
	// second to the next. transport, op, size and setup are unused.
	turns []benchCase
}

// parts returns the cases c reports: its turns, or c.
func (c benchCase) parts() []benchCase {
	if len(c.turns) > 0 {
		return c.turns
	}
	return []benchCase{c}
}

// alternatedSuffix ends the op name of a case measured in turn with
// others (benchCase.turns).
const alternatedSuffix = "-alternated"

// alternated returns a case that runs cs in turn, each renamed with
// alternatedSuffix so as not to be mistaken for the case measured alone.
func alternated(cs ...benchCase) benchCase {
	var g benchCase
	var names []string
	for _, c := range cs {
		names = append(names, c.transport+" "+c.op)
		if c.outstanding != 1 {
			panic("bench: an alternated case must have one operation outstanding")
		}
		c.op += alternatedSuffix
		g.turns = append(g.turns, c)
	}
	g.transport, g.op, g.outstanding = "alternated:", strings.Join(names, ", "), 1
	return g
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "bench [flags]", stderr)
	connect := fs.String("connect", "", "benchmark the server at HOST:PORT (rpcrdma serve) instead of an in-process one; runs the rdma cases only")
	serverAddr := fs.String("server-addr", "127.0.0.1:0", "address of the in-process server (with --provider verbs: an IP address of the RDMA device, port 0)")
	duration := fs.Duration("duration", 1500*time.Millisecond, "measuring time per case")
	rounds := fs.Int("rounds", 3, "measure the suite this many times over, each case for duration/rounds per round, and report each case over all its rounds")
	repeat := fs.Int("repeat", 1, "run the whole suite this many times and report each figure as the median over the runs, with its range, and the ratios to the baselines taken within each run")
	jsonOut := fs.Bool("json", false, "print one JSON object with a results array instead of a table")
	gap := fs.Duration("gap", 0, "with one operation outstanding, sleep this long before each operation, as a program that does other work between its calls does")
	var tf transportFlags
	tf.register(fs, false)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: rpcrdma bench [flags]

With no --connect, starts an in-process RPC-over-RDMA server over the
software iWARP on loopback TCP and runs a fixed suite, one case per data
path (inline, read chunk, write chunk, reply chunk, long call), with one
and with many calls outstanding. In the same run it measures the
baselines: raw TCP ping-pong and bulk transfer, one at a time and four
outstanding on one connection (transport "rawtcp"), and ONC RPC over TCP
record marking with the same program (transport "tcp"). Unless --crc
asks for MPA CRC32c everywhere, the 1 MiB WRITE and READ cases also run
with CRC on (transport "rdma+crc"), for its cost. Every case has a
connection of its own, dialed when it first runs and kept over every
round and run: on a socket that has carried 1 MiB transfers both ways,
Linux's TCP makes each small exchange slower, and the raw ping-pong,
which the NULL is compared with, never carries any.

The cases take turns: the suite runs --rounds times, each case for a
slice of --duration per round, so that a baseline and the case compared
with it are measured over the same stretch of time, under the same load
from the rest of the machine. The ping-pong and the two NULL cases with
one call outstanding also run alternated (op "pingpong-alternated",
"NULL-alternated"): one goroutine makes a ping-pong, an RPC-over-RDMA
NULL and an ONC RPC over TCP NULL in turn, each timed on its own, so
that the three are measured over the same instants: where the machine's
speed moves from one tenth of a second to the next (a shared VM), it
moves the three together. So do the raw bulk transfer and the 1 MiB
WRITE and READ, with CRC off and on ("bulk-alternated",
"WRITE-alternated", "READ-alternated"). Each runs with colder caches
than alone, so their figures differ a little. An alternated case's
allocs/op and cpu µs/op count the whole turn. A case with one operation outstanding
reports ops/s over its operations' own time, gaps and turns left out.

All of these are calls made back to back, while the connections'
goroutines and the machine's cores are awake. --gap D sleeps D before
each operation of the cases with one outstanding, as a program that
does other work between its calls does: every case then pays to wake
goroutines and cores, and the RPC-over-RDMA calls, which wake more of
them than raw TCP does, lose more (on a 2-core VM with --gap 1.5ms, the
NULL's p50 went from about 1.4x the ping-pong's to 2-2.5x).

Per case: operations per second, MB/s of payload, p50 and p99 latency,
heap allocations per operation, and the process's CPU time per
operation, user and system on every thread (getrusage; "cpu µs/op"),
both for client and in-process server together (with --connect, the
client's alone). With one operation outstanding and both ends in one
process on loopback, some thread of the process works at almost every
instant of a round trip (the network is the kernel's, on the same
cores), so there CPU time per operation is close to the latency; with
several outstanding it is what an operation costs. After the cases, the
ratios the design's targets are stated in (NULL p50 against the raw TCP
ping-pong, 1 MiB MB/s against raw TCP bulk, CRC on against off) and the
NULL's CPU time against the ping-pong's, each taken within the run.

--repeat N runs the whole suite N times over (on the same connections)
and reports each figure as its median over the runs, with its range, and
each ratio as the median and range of its value in each run: a stable
figure on a busy machine, where single runs move by 10-25%.

Ctrl-C stops the measuring and prints the cases measured so far (exit
status 1); with --repeat, the runs completed, or the first run's cases
if none was; a second Ctrl-C kills it. --json prints {"results": [...],
"ratios": [...]}; each result has the keys transport, op, size,
outstanding, ops, ops_per_sec, mb_per_sec, p50_us, p99_us,
allocs_per_op, cpu_us_per_op (0 where the platform does not report it),
and with --repeat also runs and the ranges ops_per_sec_range,
mb_per_sec_range, p50_us_range, p99_us_range, cpu_us_per_op_range
([least, greatest]), and the output has "runs": one {"results": [...]}
per run. Each ratio has the keys name, median, range and runs.

flags:
`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	hint := ""
	if fs.NArg() == 1 && *connect == "" {
		hint = fmt.Sprintf(" (to benchmark a server: --connect %s)", fs.Arg(0))
	}
	if err := noArgs(fs, hint); err != nil {
		return err
	}
	if err := tf.check(); err != nil {
		return err
	}
	if *duration <= 0 {
		return usagef("--duration %v: want a positive duration", *duration)
	}
	if *rounds < 1 || *rounds > 100 {
		return usagef("--rounds %d: want 1 to 100", *rounds)
	}
	if *repeat < 1 || *repeat > 100 {
		return usagef("--repeat %d: want 1 to 100", *repeat)
	}
	if *gap < 0 || *gap > time.Second {
		return usagef("--gap %v: want 0 to 1s", *gap)
	}

	var cases []benchCase
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	rdmaAddr := *connect
	if rdmaAddr == "" {
		addr, stop, err := startRDMAServer(tf, *serverAddr)
		if err != nil {
			return err
		}
		closers = append(closers, stop)
		rdmaAddr = addr
		raw, stopRaw, err := rawTCPCases()
		if err != nil {
			return err
		}
		closers = append(closers, stopRaw)
		cases = append(cases, raw...)
		tcp, stopTCP, err := rpcTCPCases()
		if err != nil {
			return err
		}
		closers = append(closers, stopTCP)
		cases = append(cases, tcp...)
	}
	rc, stopRC, err := rdmaCases(rdmaAddr, tf)
	if err != nil {
		return err
	}
	closers = append(closers, stopRC)
	cases = append(cases, rc...)
	if *connect == "" && !tf.crc && tf.providerName == "iwarp" {
		// The 1 MiB cases again with MPA CRC32c, on a connection of
		// their own, for what CRC costs measured within the run.
		ctf := tf
		ctf.crc = true
		cc, stopCC, err := rdmaCases(rdmaAddr, ctf)
		if err != nil {
			return err
		}
		closers = append(closers, stopCC)
		for _, c := range cc {
			if c.size == mib && (c.op == "WRITE" || c.op == "READ") {
				c.transport = "rdma+crc"
				cases = append(cases, c)
			}
		}
	}
	if *connect == "" {
		// The cases the ratios with one operation at a time compare,
		// again, one of each in turn: the ping-pong and the NULLs, and
		// raw bulk and the 1 MiB WRITE and READ, CRC off and on.
		pick := func(keys ...caseKey) []benchCase {
			var g []benchCase
			for _, k := range keys {
				for _, c := range cases {
					if (caseKey{c.transport, c.op, c.size, c.outstanding}) == k {
						g = append(g, c)
					}
				}
			}
			return g
		}
		for _, g := range [][]benchCase{
			pick(caseKey{"rawtcp", "pingpong", 64, 1}, caseKey{"rdma", "NULL", 0, 1}, caseKey{"tcp", "NULL", 0, 1}),
			pick(caseKey{"rawtcp", "bulk", mib, 1}, caseKey{"rdma", "WRITE", mib, 1}, caseKey{"rdma", "READ", mib, 1},
				caseKey{"rdma+crc", "WRITE", mib, 1}, caseKey{"rdma+crc", "READ", mib, 1}),
		} {
			if len(g) > 1 {
				cases = append(cases, alternated(g...))
			}
		}
	}

	progress := !*jsonOut && isTerminal(stderr)
	run := 0
	var before func(round, i int)
	if progress {
		before = func(round, i int) {
			c := cases[i]
			rep := ""
			if *repeat > 1 {
				rep = fmt.Sprintf("run %d/%d, ", run+1, *repeat)
			}
			fmt.Fprintf(stderr, "\r\033[K[%sround %d/%d, %d/%d] %s %s %d x%d ...", rep, round+1, *rounds, i+1, len(cases), c.transport, c.op, c.size, c.outstanding)
		}
	}
	// Ctrl-C ends the measuring and prints what was measured; a second
	// one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	var runs [][]benchResult
	var interrupted error
	for run = 0; run < *repeat; run++ {
		samples, done, err := runRounds(ctx, cases, *rounds, *duration/time.Duration(*rounds), *gap, before)
		if progress {
			fmt.Fprint(stderr, "\r\033[K")
		}
		if err != nil {
			return err
		}
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
					return fmt.Errorf("%s %s %d bytes, %d outstanding: %w", c.transport, c.op, c.size, c.outstanding, err)
				}
				results = append(results, r)
			}
		}
		if ctx.Err() == nil {
			runs = append(runs, results)
			continue
		}
		switch {
		case len(runs) > 0:
			interrupted = fmt.Errorf("interrupted in run %d of %d: the results cover the %s completed", run+1, *repeat, plural(len(runs), "run"))
		case len(results) == 0:
			return errors.New("interrupted before any case was measured")
		default:
			runs = append(runs, results)
			interrupted = fmt.Errorf("interrupted with %s of %d done: the results cover what was measured (%s of %d)", plural(done, "round"), *rounds, plural(len(results), "case"), len(cases))
		}
		break
	}
	results := runs[0]
	if len(runs) > 1 {
		results = aggregate(runs)
	}
	rats := ratios(runs)
	if *jsonOut {
		out := struct {
			Results []benchResult `json:"results"`
			Ratios  []benchRatio  `json:"ratios"`
			Runs    []benchRun    `json:"runs,omitempty"`
		}{Results: results, Ratios: rats}
		if len(runs) > 1 {
			for _, r := range runs {
				out.Runs = append(out.Runs, benchRun{r})
			}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
		return interrupted
	}
	if len(runs) > 1 {
		printRepeated(stdout, results, rats, len(runs))
	} else {
		printTable(stdout, results)
		printRatios(stdout, rats)
	}
	return interrupted
}

// benchRun is one run's results in --repeat's JSON.
type benchRun struct {
	Results []benchResult `json:"results"`
}

// runRounds measures cases rounds times over, each for slice per round,
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

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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

func printTable(w io.Writer, rs []benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transport\top\tsize\toutstanding\tops/s\tMB/s\tp50 µs\tp99 µs\tallocs/op\tcpu µs/op\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			r.Transport, r.Op, r.Size, r.Outstanding, r.OpsPerSec, r.MBPerSec, r.P50us, r.P99us, r.AllocsPerOp, r.CPUusPerOp)
	}
	tw.Flush()
}

// startRDMAServer serves the bench program over the flags' provider at
// addr and returns the address bound.
func startRDMAServer(tf transportFlags, addr string) (string, func(), error) {
	p, err := tf.provider()
	if err != nil {
		return "", nil, err
	}
	srv := rpc.NewServer(nil)
	benchprog.Register(srv)
	stf := tf
	stf.responder = true
	stf.version = 2
	cfg := stf.config(nil)
	cfg.Bounds.ArgLimit = benchprog.ArgLimit
	l, err := rpcrdma.Listen(context.Background(), p, addr, cfg)
	if err != nil {
		return "", nil, err
	}
	done := make(chan struct{})
	go func() { rpcrdma.Serve(context.Background(), l, srv); close(done) }()
	return l.Addr().String(), func() { srv.Close(); <-done }, nil
}

const mib = 1 << 20

// rdmaCases are the RPC-over-RDMA cases against addr.
func rdmaCases(addr string, tf transportFlags) ([]benchCase, func(), error) {
	p, err := tf.provider()
	if err != nil {
		return nil, nil, err
	}
	return programCases("rdma", true, func() (benchprog.Client, func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := rpcrdma.Dial(ctx, p, addr, tf.config(nil))
		if err != nil {
			return benchprog.Client{}, nil, describeDialError(addr, err)
		}
		cli := benchprog.Client{C: rpc.NewClient(conn)}
		stop := func() { cli.C.Close(); conn.Close() }
		// A first call at once: a responder closes a connection that
		// sends nothing for Bounds.HandshakeTimeout.
		if err := cli.Null(ctx); err != nil {
			stop()
			return benchprog.Client{}, nil, fmt.Errorf("first call to %s: %w", addr, err)
		}
		return cli, stop, nil
	})
}

// rpcTCPCases are the same program over ONC RPC record marking on TCP.
func rpcTCPCases() ([]benchCase, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := rpc.NewServer(&rpc.ServerOptions{Stream: &rpc.StreamOptions{MaxRecord: 4 * mib}})
	benchprog.Register(srv)
	done := make(chan struct{})
	go func() { srv.ServeListener(l); close(done) }()
	cs, stopClients, err := programCases("tcp", false, func() (benchprog.Client, func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t, err := rpc.DialTCP(ctx, l.Addr().String(), &rpc.StreamOptions{MaxRecord: 4 * mib})
		if err != nil {
			return benchprog.Client{}, nil, err
		}
		cli := benchprog.Client{C: rpc.NewClient(t)}
		return cli, func() { cli.C.Close() }, nil
	})
	if err != nil {
		srv.Close()
		<-done
		return nil, nil, err
	}
	return cs, func() { stopClients(); srv.Close(); <-done }, nil
}

// programCases are the bench program's cases, each on a client of its
// own that dial makes the first time the case runs (keptConns), as the
// raw TCP cases have their connections. A connection shared by every
// case carries the 1 MiB transfers both ways, after which Linux's TCP
// makes each small exchange on that socket slower (a raw 64-byte
// ping-pong by 0.1-0.2 us against a fresh connection on loopback:
// internal/rawtcp's BenchmarkPingPongAfterBulk), where the ping-pong
// baseline, on a connection of its own, never pays it. The first case's
// client is dialed at once, so that an unreachable server is reported
// before any case runs. The TCP baseline runs the cases that have a TCP
// meaning (all false).
func programCases(transport string, all bool, dial func() (benchprog.Client, func(), error)) ([]benchCase, func(), error) {
	var kept keptConns
	simple := func(op string, size, outstanding int, f func(ctx context.Context, cli benchprog.Client, buf []byte) error) benchCase {
		client := keepOnce(&kept, dial)
		return benchCase{transport: transport, op: op, size: size, outstanding: outstanding,
			setup: func() (func(context.Context, int) error, func(), error) {
				cli, err := client()
				if err != nil {
					return nil, nil, err
				}
				bufs := make([][]byte, outstanding)
				for i := range bufs {
					bufs[i] = make([]byte, size)
					copy(bufs[i], benchprog.Pattern(size))
				}
				return func(ctx context.Context, w int) error { return f(ctx, cli, bufs[w]) }, func() {}, nil
			}}
	}
	null := func(ctx context.Context, cli benchprog.Client, _ []byte) error { return cli.Null(ctx) }
	write := func(ctx context.Context, cli benchprog.Client, b []byte) error { return cli.Write(ctx, b) }
	read := func(ctx context.Context, cli benchprog.Client, b []byte) error { return cli.Read(ctx, b) }
	list := func(ctx context.Context, cli benchprog.Client, b []byte) error {
		_, err := cli.List(ctx, len(b))
		return err
	}
	echo := func(ctx context.Context, cli benchprog.Client, b []byte) error { return cli.Echo(ctx, b) }
	cs := []benchCase{
		simple("NULL", 0, 1, null),
		simple("NULL", 0, 32, null),
		simple("WRITE", 64, 1, write),
		simple("WRITE", mib, 1, write),
		simple("READ", mib, 1, read),
	}
	if all {
		cs = append(cs,
			simple("WRITE", mib, 4, write),
			simple("READ", mib, 4, read),
			simple("LIST", 64<<10, 1, list),
			simple("ECHO", 64<<10, 1, echo),
		)
	}
	if _, _, err := cs[0].setup(); err != nil {
		kept.close()
		return nil, nil, err
	}
	return cs, kept.close, nil
}

// keptConns holds the connections the cases dial, each the first time
// its case runs (keepOnce), and kept over every round and run.
type keptConns struct {
	mu     sync.Mutex
	closes []func()
}

// keepOnce returns a function that dials with dial the first time it is
// called, keeping the connection in k, and returns the same one after.
func keepOnce[T any](k *keptConns, dial func() (T, func(), error)) func() (T, error) {
	var c T
	dialed := false
	return func() (T, error) {
		if dialed {
			return c, nil
		}
		v, closeV, err := dial()
		if err != nil {
			return v, err
		}
		k.mu.Lock()
		k.closes = append(k.closes, closeV)
		k.mu.Unlock()
		c, dialed = v, true
		return c, nil
	}
}

// close closes every connection k holds.
func (k *keptConns) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range k.closes {
		f()
	}
	k.closes = nil
}

// rawTCPCases are the raw TCP baselines: a 64-byte ping-pong and 1 MiB
// transfers each acknowledged by the receiver, in internal/rawtcp's
// exchange, which the test benchmarks' raw round trip speaks too.
func rawTCPCases() ([]benchCase, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				rawtcp.Serve(c)
			}()
		}
	}()
	// Each case dials once and keeps its connection over every round
	// (keptConns): a fresh connection per round would make the baseline
	// pay TCP's slow start and receive-buffer growth again each time (on
	// loopback, 1 MiB transfers in half-second rounds moved about 10%
	// less).
	var kept keptConns
	dialOnce := func() func() (net.Conn, error) {
		return keepOnce(&kept, func() (net.Conn, func(), error) {
			nc, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				return nil, nil, err
			}
			return nc, func() { nc.Close() }, nil
		})
	}
	rawCase := func(op string, size int) benchCase {
		dial := dialOnce()
		msg := rawtcp.Message(size)
		ack := make([]byte, rawtcp.AckLen)
		return benchCase{transport: "rawtcp", op: op, size: size, outstanding: 1,
			setup: func() (func(context.Context, int) error, func(), error) {
				c, err := dial()
				if err != nil {
					return nil, nil, err
				}
				return func(context.Context, int) error {
					if _, err := c.Write(msg); err != nil {
						return err
					}
					_, err := io.ReadFull(c, ack)
					return err
				}, func() {}, nil
			}}
	}
	stop := func() {
		kept.close()
		l.Close()
		wg.Wait()
	}
	return []benchCase{rawCase("pingpong", 64), rawCase("bulk", mib), rawPipelined(dialOnce(), mib, 4)}, stop, nil
}

// rawPipelined is the bulk baseline with n transfers outstanding on one
// connection, as n outstanding RPC calls share theirs. Each worker writes
// its message whole, in turn, and then reads its own acknowledgement once
// those before it have been read: the worker done reading passes the turn
// to the next in write order, and no other goroutine touches the socket.
// On Linux loopback a single connection moves less this way than one
// transfer at a time does (the window fills, segments get reordered), so
// the RPC cases with n outstanding are compared with this.
func rawPipelined(dial func() (net.Conn, error), size, n int) benchCase {
	var op func(context.Context, int) error
	return benchCase{transport: "rawtcp", op: "bulk", size: size, outstanding: n,
		setup: func() (func(context.Context, int) error, func(), error) {
			if op != nil {
				return op, func() {}, nil
			}
			c, err := dial()
			if err != nil {
				return nil, nil, err
			}
			msg := rawtcp.Message(size)
			var (
				wmu     sync.Mutex      // held while writing and queueing for the read turn
				qmu     sync.Mutex      // guards reading and queue
				reading bool            // a worker holds the read turn
				queue   []chan struct{} // workers waiting for it, in write order
			)
			turns := make([]chan struct{}, n)
			acks := make([][]byte, n)
			for i := range turns {
				turns[i] = make(chan struct{}, 1)
				acks[i] = make([]byte, rawtcp.AckLen)
			}
			op = func(_ context.Context, w int) error {
				wmu.Lock()
				if _, err := c.Write(msg); err != nil {
					wmu.Unlock()
					return err
				}
				qmu.Lock()
				mine := !reading
				if mine {
					reading = true
				} else {
					queue = append(queue, turns[w])
				}
				qmu.Unlock()
				wmu.Unlock()
				if !mine {
					<-turns[w]
				}
				_, err := io.ReadFull(c, acks[w])
				qmu.Lock()
				if len(queue) > 0 {
					next := queue[0]
					queue = append(queue[:0], queue[1:]...)
					qmu.Unlock()
					next <- struct{}{}
				} else {
					reading = false
					qmu.Unlock()
				}
				return err
			}
			return op, func() {}, nil
		}}
}
