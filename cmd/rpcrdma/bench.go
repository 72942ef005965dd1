package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// bench's files: this one has the command, its flags and the case type;
// bench_cases.go the suite and its servers and connections;
// bench_measure.go the rounds and runs and what each measures;
// bench_report.go and benchrepeat.go the table, the JSON and the ratios.

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

// cmdBench is the bench command: it builds the suite, measures it
// --repeat times over and reports.
func cmdBench(args []string, stdout, stderr io.Writer) error {
	o, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	var cl closers
	defer cl.close()
	cases, err := benchSuite(o, &cl)
	if err != nil {
		return err
	}
	// Ctrl-C ends the measuring and prints what was measured; a second
	// one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	r := benchRunner{o: o, cases: cases, stderr: stderr, progress: !o.json && isTerminal(stderr)}
	runs, interrupted := r.runAll(ctx)
	if runs == nil {
		return interrupted
	}
	if err := writeBenchReport(stdout, runs, o.json); err != nil {
		return err
	}
	return interrupted
}

// benchOptions are bench's flags.
type benchOptions struct {
	connect    string
	serverAddr string
	duration   time.Duration
	rounds     int
	repeat     int
	json       bool
	gap        time.Duration
	tf         transportFlags
}

// parseBenchFlags parses bench's arguments and checks the flags' values.
func parseBenchFlags(args []string, stderr io.Writer) (*benchOptions, error) {
	var o benchOptions
	fs := newFlags("bench", "bench [flags]", stderr)
	fs.StringVar(&o.connect, "connect", "", "benchmark the server at HOST:PORT (rpcrdma serve) instead of an in-process one; runs the rdma cases only")
	fs.StringVar(&o.serverAddr, "server-addr", "127.0.0.1:0", "address of the in-process server (with --provider verbs: an IP address of the RDMA device, port 0)")
	fs.DurationVar(&o.duration, "duration", 1500*time.Millisecond, "measuring time per case")
	fs.IntVar(&o.rounds, "rounds", 3, "measure the suite this many times over, each case for duration/rounds per round, and report each case over all its rounds")
	fs.IntVar(&o.repeat, "repeat", 1, "run the whole suite this many times and report each figure as the median over the runs, with its range, and the ratios to the baselines taken within each run")
	fs.BoolVar(&o.json, "json", false, "print one JSON object with a results array instead of a table")
	fs.DurationVar(&o.gap, "gap", 0, "with one operation outstanding, sleep this long before each operation, as a program that does other work between its calls does")
	o.tf.register(fs, false)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	hint := ""
	if fs.NArg() == 1 && o.connect == "" {
		hint = fmt.Sprintf(" (to benchmark a server: --connect %s)", fs.Arg(0))
	}
	if err := noArgs(fs, hint); err != nil {
		return nil, err
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return &o, nil
}

// check reports the first flag whose value is out of its range.
func (o *benchOptions) check() error {
	if err := o.tf.check(); err != nil {
		return err
	}
	if o.duration <= 0 {
		return usagef("--duration %v: want a positive duration", o.duration)
	}
	if o.rounds < 1 || o.rounds > 100 {
		return usagef("--rounds %d: want 1 to 100", o.rounds)
	}
	if o.repeat < 1 || o.repeat > 100 {
		return usagef("--repeat %d: want 1 to 100", o.repeat)
	}
	if o.gap < 0 || o.gap > time.Second {
		return usagef("--gap %v: want 0 to 1s", o.gap)
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// benchUsage is bench's --help, before the flags.
const benchUsage = `usage: rpcrdma bench [flags]

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
if none was; a second Ctrl-C kills it. The report starts with the
machine it was measured on (with --connect, the client's): CPU model,
CPUs, GOMAXPROCS, OS and kernel, Go version and time, since the same
code measures differently on another machine. --json prints {"host":
{cpu, cpus, gomaxprocs, os, kernel, go, time}, "results": [...],
"ratios": [...]}; each result has the keys transport, op, size,
outstanding, ops, ops_per_sec, mb_per_sec, p50_us, p99_us,
allocs_per_op, cpu_us_per_op (0 where the platform does not report it),
and with --repeat also runs and the ranges ops_per_sec_range,
mb_per_sec_range, p50_us_range, p99_us_range, cpu_us_per_op_range
([least, greatest]), and the output has "runs": one {"results": [...]}
per run. Each ratio has the keys name, median, range and runs.

flags:
`
