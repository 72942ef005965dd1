package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// nfsBenchResult is one line of the report; the JSON keys are a stable
// interface.
type nfsBenchResult struct {
	Transport string  `json:"transport"`
	Op        string  `json:"op"`
	Pattern   string  `json:"pattern"`
	Size      int     `json:"block_size"`
	QueueDep  int     `json:"queue_depth"`
	Conns     int     `json:"connections"`
	Ops       int     `json:"ops"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	MBPerSec  float64 `json:"mb_per_sec"`
	P50us     float64 `json:"p50_us"`
	P90us     float64 `json:"p90_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	MaxUs     float64 `json:"max_us"`
	// CPUusPerOp is this process's CPU time per operation, user and
	// system (the client's: fio's usr and sys, per operation); 0 where
	// the platform does not report it.
	CPUusPerOp float64 `json:"cpu_us_per_op"`
}

// parseSize reads a byte count with an optional k, m or g suffix (powers
// of 1024).
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(strings.ToLower(s), "k"):
		mult = 1 << 10
	case strings.HasSuffix(strings.ToLower(s), "m"):
		mult = 1 << 20
	case strings.HasSuffix(strings.ToLower(s), "g"):
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 1<<40/mult {
		return 0, fmt.Errorf("size %q: want a positive count of bytes, with k, m or g", s)
	}
	return n * mult, nil
}

func nfsBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nfs bench", "nfs bench [flags] HOST:/export[/dir]", stderr)
	var f nfsFlags
	f.register(fs)
	ops := fs.String("op", "write,read", "operations, in order: read, write (comma-separated)")
	patterns := fs.String("pattern", "seq", "access patterns: seq, rand (comma-separated)")
	bsFlag := fs.String("bs", "1m", "block size per READ or WRITE (k, m suffixes)")
	qd := fs.Int("qd", 8, "calls in flight per connection")
	nconns := fs.Int("conns", 1, "connections")
	duration := fs.Duration("duration", 3*time.Second, "measuring time per case")
	sizeFlag := fs.String("size", "256m", "size of the file the bench reads and writes")
	name := fs.String("file", "rpcrdma-nfs-bench.dat", "the file, in the directory given")
	jsonOut := fs.Bool("json", false, "print one JSON object with a results array instead of a table")
	if err := f.parse(fs, args, 1); err != nil {
		return err
	}
	r, ok := parseRemote(fs.Arg(0))
	if !ok {
		return errNotRemote
	}
	bs, err := parseSize(*bsFlag)
	if err != nil {
		return fmt.Errorf("--bs: %w", err)
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	if *qd < 1 || *nconns < 1 || size < bs {
		return fmt.Errorf("want --qd and --conns at least 1 and --size at least --bs")
	}
	ctx := context.Background()
	mctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	clients := make([]*nfs.Client, *nconns)
	var dir string
	for i := range clients {
		c, p, err := f.mountRemote(mctx, r, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i], dir = c, p
		if bs > c.MaxRead() || bs > c.MaxWrite() {
			return fmt.Errorf("--bs %d is over the server's transfer size (read %d, write %d)", bs, c.MaxRead(), c.MaxWrite())
		}
	}
	c0 := clients[0]
	dfh, _, err := c0.LookupPath(mctx, dir)
	if err != nil {
		return err
	}
	fh, err := c0.Create(mctx, dfh, *name, nfs3.Unchecked, nfs3.SetAttr{SetMode: true, Mode: 0o644})
	if err != nil {
		return err
	}
	progress := !*jsonOut && isTerminal(stderr)
	var results []nfsBenchResult
	for _, op := range strings.Split(*ops, ",") {
		for _, pat := range strings.Split(*patterns, ",") {
			if op != "read" && op != "write" || pat != "seq" && pat != "rand" {
				return fmt.Errorf("--op %q --pattern %q: want read or write, seq or rand", op, pat)
			}
			if op == "read" {
				if a, err := c0.Getattr(mctx, fh); err != nil {
					return err
				} else if a.Size < uint64(size) { // fill the file first
					if _, err := c0.WriteAt(mctx, fh, make([]byte, size-int(a.Size)), a.Size); err != nil {
						return err
					}
				}
			}
			res, err := runNFSBench(ctx, clients, fh, op, pat, bs, size, *qd, *duration, progress, stderr)
			if err != nil {
				return err
			}
			res.Transport = f.transport
			results = append(results, res)
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Results []nfsBenchResult `json:"results"`
		}{results})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transport\top\tpattern\tbs\tqd\tconns\tops\tops/s\tMB/s\tp50 µs\tp90 µs\tp99 µs\tp99.9 µs\tmax µs\tcpu µs/op\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t\n", r.Transport, strings.ToUpper(r.Op), r.Pattern,
			r.Size, r.QueueDep, r.Conns, r.Ops, r.OpsPerSec, r.MBPerSec, r.P50us, r.P90us, r.P99us, r.P999us, r.MaxUs, r.CPUusPerOp)
	}
	return tw.Flush()
}

// maxSamples bounds the latencies each worker keeps.
const maxSamples = 1 << 20

// runNFSBench runs one case: qd workers per client, each issuing op in a
// loop for d.
func runNFSBench(ctx context.Context, clients []*nfs.Client, fh nfs3.FileHandle, op, pat string, bs, size, qd int,
	d time.Duration, progress bool, stderr io.Writer) (nfsBenchResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	blocks := uint64(size / bs)
	var next, done atomic.Uint64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lats []time.Duration
	var firstErr error
	cpu0, _ := processCPU()
	start := time.Now()
	deadline := start.Add(d)
	for w := range len(clients) * qd {
		c := clients[w%len(clients)]
		wg.Go(func() {
			buf := make([]byte, bs)
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				blk := next.Add(1) - 1
				if pat == "rand" {
					blk = rng.Uint64N(blocks)
				}
				off := blk % blocks * uint64(bs)
				t0 := time.Now()
				var err error
				if op == "read" {
					_, _, err = c.Read(ctx, fh, buf, off)
				} else {
					_, _, _, err = c.Write(ctx, fh, buf, off, nfs3.Unstable)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil && ctx.Err() == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					break
				}
				if len(mine) < maxSamples {
					mine = append(mine, time.Since(t0))
				}
				done.Add(1)
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	if progress {
		tick := time.NewTicker(time.Second)
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
	loop:
		for {
			select {
			case <-tick.C:
				n := done.Load()
				el := time.Since(start).Seconds()
				fmt.Fprintf(stderr, "\r%s %s bs %d: %.0f ops/s %.1f MB/s   ", strings.ToUpper(op), pat, bs, float64(n)/el, float64(n)*float64(bs)/el/1e6)
			case <-stopped:
				break loop
			}
		}
		tick.Stop()
		fmt.Fprint(stderr, "\r\033[K")
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, _ := processCPU()
	if firstErr != nil {
		return nfsBenchResult{}, firstErr
	}
	if op == "write" {
		if _, err := clients[0].Commit(context.Background(), fh); err != nil {
			return nfsBenchResult{}, err
		}
	}
	slices.Sort(lats)
	pct := func(p float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))].Nanoseconds()) / 1e3
	}
	n := done.Load()
	var cpuPerOp float64
	if n > 0 {
		cpuPerOp = float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / float64(n)
	}
	return nfsBenchResult{
		Op: op, Pattern: pat, Size: bs, QueueDep: qd, Conns: len(clients), Ops: int(n), Seconds: elapsed.Seconds(),
		OpsPerSec: float64(n) / elapsed.Seconds(), MBPerSec: float64(n) * float64(bs) / elapsed.Seconds() / 1e6,
		P50us: pct(0.5), P90us: pct(0.9), P99us: pct(0.99), P999us: pct(0.999), MaxUs: pct(1),
		CPUusPerOp: cpuPerOp,
	}, nil
}
