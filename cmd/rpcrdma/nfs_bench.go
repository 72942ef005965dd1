package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
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
	// Partial says a signal stopped the case before its time was up.
	Partial bool `json:"partial,omitempty"`
}

// parseSize reads a byte count with an optional k, m, g or t suffix
// (powers of 1024), at most 1 EiB.
func parseSize(s string) (int, error) {
	num, mult := s, 1
	if len(s) > 0 {
		if i := strings.IndexByte("kmgt", s[len(s)-1]|0x20); i >= 0 {
			num, mult = s[:len(s)-1], 1<<(10*(i+1))
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || n > 1<<60/mult {
		return 0, fmt.Errorf("size %q: want a positive count of bytes, with k, m, g or t, at most 1 EiB", s)
	}
	return n * mult, nil
}

func nfsBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nfs bench", "nfs bench [flags] HOST:/export[/dir]", stderr)
	var f nfsFlags
	f.register(fs)
	ops := fs.String("op", "write,read", "operations, in order: read, write (comma-separated)")
	patterns := fs.String("pattern", "seq", "access patterns: seq, rand (comma-separated)")
	bsFlag := fs.String("bs", "1m", "block size per READ or WRITE (k, m suffixes)")
	qd := fs.Int("qd", 8, "calls in flight per connection")
	nconns := fs.Int("conns", 1, "connections")
	duration := fs.Duration("duration", 3*time.Second, "measuring time per case")
	sizeFlag := fs.String("size", "256m", "size of the file the bench creates; an existing --file is read as large as it is")
	name := fs.String("file", "", "an existing file to read, or a new one to make, in the directory given; default: a new file of the bench's own")
	overwrite := fs.Bool("overwrite", false, "let a write benchmark write into an existing --file, destroying what it holds")
	keep := fs.Bool("keep", false, "keep the file the bench created, instead of removing it at the end")
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
		return usagef("--bs: %v", err)
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return usagef("--size: %v", err)
	}
	sizeSet := false
	fs.Visit(func(fl *flag.Flag) { sizeSet = sizeSet || fl.Name == "size" })
	if *qd < 1 || *nconns < 1 || size < bs {
		return usagef("want --qd and --conns at least 1 and --size at least --bs")
	}
	type benchCase struct{ op, pat string }
	var cases []benchCase
	writes := false
	for _, op := range strings.Split(*ops, ",") {
		for _, pat := range strings.Split(*patterns, ",") {
			if op != "read" && op != "write" || pat != "seq" && pat != "rand" {
				return usagef("--op %q --pattern %q: want read or write, seq or rand", op, pat)
			}
			writes = writes || op == "write"
			cases = append(cases, benchCase{op, pat})
		}
	}
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
	bf, err := openBenchFile(mctx, c0, dir, *name, benchFileRules{size: size, sizeSet: sizeSet, bs: bs, writes: writes, overwrite: *overwrite})
	if err != nil {
		return err
	}
	if bf.created && !*keep {
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := c0.Remove(rctx, bf.dir, bf.name); err != nil {
				fmt.Fprintf(stderr, "rpcrdma nfs bench: removing %s: %v\n", bf.name, err)
			}
		}()
	}
	progress := !*jsonOut && isTerminal(stderr)
	var results []nfsBenchResult
	var runErr error
	for _, bc := range cases {
		if bc.op == "read" && bf.mayFill {
			if runErr = fillFile(ctx, c0, bf.fh, uint64(bf.size), bs); runErr != nil {
				break
			}
		}
		res, err := runNFSBench(ctx, clients, bf.fh, bc.op, bc.pat, bs, bf.size, *qd, *duration, progress, stderr)
		if res.Ops > 0 || err == nil {
			res.Transport = f.transport
			results = append(results, res)
		}
		if err != nil {
			runErr = err
			break
		}
	}
	if err := printNFSBench(stdout, results, *jsonOut); err != nil {
		return err
	}
	return runErr
}

// printNFSBench writes the results as a table or as JSON.
func printNFSBench(w io.Writer, results []nfsBenchResult, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Results []nfsBenchResult `json:"results"`
		}{results})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transport\top\tpattern\tbs\tqd\tconns\tops\tops/s\tMB/s\tp50 µs\tp90 µs\tp99 µs\tp99.9 µs\tmax µs\tcpu µs/op\t")
	for _, r := range results {
		op := strings.ToUpper(r.Op)
		if r.Partial {
			op += " (stopped)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t\n", r.Transport, op, r.Pattern,
			r.Size, r.QueueDep, r.Conns, r.Ops, r.OpsPerSec, r.MBPerSec, r.P50us, r.P90us, r.P99us, r.P999us, r.MaxUs, r.CPUusPerOp)
	}
	return tw.Flush()
}

// benchFileRules say what the bench may do to its file.
type benchFileRules struct {
	size      int  // --size
	sizeSet   bool // given on the command line
	bs        int
	writes    bool // a write case will run
	overwrite bool // --overwrite
}

// benchFile is the file a bench runs on.
type benchFile struct {
	dir     nfs3.FileHandle
	name    string
	fh      nfs3.FileHandle
	size    int  // the range the cases use
	created bool // by this bench: removed at the end unless --keep
	mayFill bool // the bench may write it to size before reading
}

// openBenchFile finds or makes the bench's file in dir. An existing file
// is read as it is, never grown, and written only with --overwrite; a new
// one is made (GUARDED, so it never takes over a file made meanwhile)
// once its size is known to fit (nfs.Client.CheckSpace).
func openBenchFile(ctx context.Context, c *nfs.Client, dir, name string, r benchFileRules) (*benchFile, error) {
	dfh, da, err := c.LookupPath(ctx, dir)
	if err != nil {
		return nil, err
	}
	if da.Type != nfs3.TypeDir {
		return nil, fmt.Errorf("%s is not a directory: give the directory the bench file is in, and --file for its name", dir)
	}
	bf := &benchFile{dir: dfh, name: name, size: r.size}
	if name != "" {
		fh, a, err := c.Lookup(ctx, dfh, name)
		switch {
		case err == nil:
			return bf, bf.existing(fh, a, r)
		case !errors.Is(err, nfs3.ErrNoEnt):
			return nil, err
		}
	} else {
		bf.name = fmt.Sprintf("rpcrdma-bench-%d-%08x.dat", os.Getpid(), rand.Uint32())
	}
	if err := c.CheckSpace(ctx, dfh, uint64(r.size)); err != nil {
		return nil, fmt.Errorf("--size: %w", err)
	}
	bf.fh, err = c.Create(ctx, dfh, bf.name, nfs3.Guarded, nfs3.SetAttr{SetMode: true, Mode: 0o644})
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", bf.name, err)
	}
	bf.created, bf.mayFill = true, true
	return bf, nil
}

// existing takes the existing file fh, whose attributes are a, if the
// rules allow.
func (bf *benchFile) existing(fh nfs3.FileHandle, a nfs3.Attr, r benchFileRules) error {
	if a.Type != nfs3.TypeReg {
		return fmt.Errorf("--file %s is not a regular file (%v)", bf.name, a.Type)
	}
	if r.writes && !r.overwrite {
		return fmt.Errorf("--file %s exists (%s): a write benchmark would overwrite it; add --overwrite to allow that, or leave out --file for a file of the bench's own", bf.name, nfs.Bytes(a.Size))
	}
	bf.fh, bf.mayFill = fh, r.overwrite
	if !r.overwrite {
		if r.sizeSet && uint64(r.size) > a.Size {
			return fmt.Errorf("--file %s holds %s, less than --size %s; the bench does not grow a file it did not create without --overwrite", bf.name, nfs.Bytes(a.Size), nfs.Bytes(uint64(r.size)))
		}
		if !r.sizeSet {
			bf.size = int(min(a.Size, 1<<40))
		}
	}
	if bf.size < r.bs {
		return fmt.Errorf("--file %s holds %s, less than one block (--bs %d)", bf.name, nfs.Bytes(a.Size), r.bs)
	}
	return nil
}

// fillFile writes zeros to fh from its current size up to size, with
// UNSTABLE WRITEs from one buffer of bs bytes and a COMMIT, so a read
// benchmark reads data that is there; memory stays at one block whatever
// the size.
func fillFile(ctx context.Context, c *nfs.Client, fh nfs3.FileHandle, size uint64, bs int) error {
	a, err := c.Getattr(ctx, fh)
	if err != nil {
		return err
	}
	buf := make([]byte, min(bs, c.MaxWrite()))
	for off := a.Size; off < size; {
		n, _, _, err := c.Write(ctx, fh, buf[:min(uint64(len(buf)), size-off)], off, nfs3.Unstable)
		if err != nil {
			return fmt.Errorf("filling the bench file: %w", err)
		}
		if n == 0 {
			return errors.New("filling the bench file: WRITE made no progress")
		}
		off += uint64(n)
	}
	if a.Size < size {
		if _, err := c.Commit(ctx, fh); err != nil {
			return fmt.Errorf("filling the bench file: %w", err)
		}
	}
	return nil
}

// maxSamples bounds the latencies each worker keeps.
const maxSamples = 1 << 20

// runNFSBench runs one case: qd workers per client, each issuing op in a
// loop for d. If ctx ends first (a signal), it returns what the case did
// until then, marked Partial, with ctx's cause.
func runNFSBench(parent context.Context, clients []*nfs.Client, fh nfs3.FileHandle, op, pat string, bs, size, qd int,
	d time.Duration, progress bool, stderr io.Writer) (nfsBenchResult, error) {
	ctx, cancel := context.WithCancel(parent)
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
	if op == "write" && parent.Err() == nil {
		if _, err := clients[0].Commit(parent, fh); err != nil {
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
	res := nfsBenchResult{
		Op: op, Pattern: pat, Size: bs, QueueDep: qd, Conns: len(clients), Ops: int(n), Seconds: elapsed.Seconds(),
		OpsPerSec: float64(n) / elapsed.Seconds(), MBPerSec: float64(n) * float64(bs) / elapsed.Seconds() / 1e6,
		P50us: pct(0.5), P90us: pct(0.9), P99us: pct(0.99), P999us: pct(0.999), MaxUs: pct(1),
		CPUusPerOp: cpuPerOp,
	}
	if parent.Err() != nil {
		res.Partial = true
		return res, context.Cause(parent)
	}
	return res, nil
}
