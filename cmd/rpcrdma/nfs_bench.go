package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
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
	P9999us   float64 `json:"p9999_us"`
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

// benchFlags are nfs bench's own flags, named as fio names them where
// fio has the setting (fio(1), "JOB PARAMETERS"); the bench's older
// names stay as aliases.
type benchFlags struct {
	rw, ops, patterns      string
	rwmixread              int
	bs, bssplit, size      string
	iodepth, numjobs, rate int
	runtime, ramp          fioDuration
	status                 fioDuration
	name                   string
	overwrite, keep        bool
	verify                 bool
	format                 string
	legacyJSON             bool
	plot                   string
}

func (b *benchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.rw, "rw", "", "workloads, run in turn (comma-separated): read, write, randread, randwrite, rw (or readwrite), randrw; metadata: getattr, lookup, create (CREATE and REMOVE), readdir; default: write,read")
	fs.StringVar(&b.ops, "op", "", "older form of --rw: read, write (comma-separated), combined with --pattern")
	fs.StringVar(&b.patterns, "pattern", "seq", "with --op: seq, rand (comma-separated)")
	fs.IntVar(&b.rwmixread, "rwmixread", 50, "percentage of READs in rw and randrw")
	fs.StringVar(&b.bs, "bs", "1m", "block size of each READ and WRITE (k, m suffixes)")
	fs.StringVar(&b.bssplit, "bssplit", "", "block sizes and their shares, as fio: 4k/50:64k/30:1m/20")
	fs.IntVar(&b.iodepth, "iodepth", 8, "calls in flight per connection")
	fs.IntVar(&b.iodepth, "qd", 8, "alias of --iodepth")
	fs.IntVar(&b.numjobs, "numjobs", 1, "connections, each with --iodepth calls in flight, reported together")
	fs.IntVar(&b.numjobs, "conns", 1, "alias of --numjobs")
	b.runtime = fioDuration(3 * time.Second)
	fs.Var(&b.runtime, "runtime", "measuring time of each workload (seconds, or with a unit: 500ms)")
	fs.Var(&b.runtime, "duration", "alias of --runtime")
	fs.Var(&b.ramp, "ramp_time", "run this long before measuring each workload")
	fs.IntVar(&b.rate, "rate_iops", 0, "open loop: start this many operations a second in all, latency counted from when each was due (no coordinated omission); 0: as fast as the calls in flight allow")
	fs.StringVar(&b.size, "size", "256m", "size of the file the bench creates; an existing --file is read as large as it is")
	fs.StringVar(&b.name, "file", "", "an existing file to read, or a new one to make, in the directory given; default: a new file of the bench's own")
	fs.BoolVar(&b.overwrite, "overwrite", false, "let a write workload write into an existing --file, destroying what it holds")
	fs.BoolVar(&b.keep, "keep", false, "keep the file the bench created, instead of removing it at the end")
	fs.BoolVar(&b.verify, "verify", false, "stamp every 512 bytes written with their offset and check the stamps of every READ; an existing --file is checked as it is (written by a bench with --verify --keep)")
	fs.StringVar(&b.format, "output-format", "normal", "normal (a table), or json (fio's JSON layout, with the transport's facts under \"rpcrdma\")")
	fs.Var(&b.status, "status-interval", "print IOPS, MiB/s, p50, p99 and max every this long (seconds, or with a unit)")
	fs.StringVar(&b.plot, "plot", "", "write FILE.svg (or FILE.html) with each workload's latency over time (p50, p99, max per interval) and its latency histogram")
	fs.BoolVar(&b.legacyJSON, "json", false, "the bench's older JSON: a results array of one object per workload")
}

// fioDuration is a duration as fio takes one: a count of seconds, or a
// Go duration with its unit.
type fioDuration time.Duration

func (d *fioDuration) String() string { return time.Duration(*d).String() }

func (d *fioDuration) Set(s string) error {
	if n, err := strconv.ParseFloat(s, 64); err == nil && n >= 0 {
		*d = fioDuration(n * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return errors.New("want seconds, or a duration such as 500ms or 2m")
	}
	*d = fioDuration(v)
	return nil
}

// workloads returns the jobs --rw (or --op and --pattern) name.
func (b *benchFlags) workloads() ([]string, error) {
	if b.rw != "" && b.ops != "" {
		return nil, usagef("--rw and --op: give one of them")
	}
	if b.rw == "" {
		ops := b.ops
		if ops == "" {
			ops = "write,read"
		}
		var rws []string
		for _, op := range strings.Split(ops, ",") {
			for _, pat := range strings.Split(b.patterns, ",") {
				if op != "read" && op != "write" || pat != "seq" && pat != "rand" {
					return nil, usagef("--op %q --pattern %q: want read or write, seq or rand", op, pat)
				}
				if pat == "rand" {
					op = "rand" + op
				}
				rws = append(rws, op)
			}
		}
		return rws, nil
	}
	rws := strings.Split(b.rw, ",")
	for i, rw := range rws {
		if rw == "readwrite" {
			rws[i] = "rw"
		} else if _, ok := workloadKinds[rw]; !ok {
			return nil, usagef("--rw %q: want read, write, randread, randwrite, rw, randrw, getattr, lookup, create or readdir", rw)
		}
	}
	return rws, nil
}

// workloadKinds says, for each --rw, whether it is random and which
// directions it makes: data reads, data writes, or metadata calls.
var workloadKinds = map[string]struct {
	random, reads, writes, meta bool
}{
	"read": {reads: true}, "write": {writes: true},
	"randread": {random: true, reads: true}, "randwrite": {random: true, writes: true},
	"rw": {reads: true, writes: true}, "randrw": {random: true, reads: true, writes: true},
	"getattr": {meta: true}, "lookup": {meta: true}, "create": {meta: true}, "readdir": {meta: true},
}

// parseBSSplit reads fio's bssplit: SIZE/SHARE pairs separated by colons;
// shares are percentages, and a missing one takes what is left.
func parseBSSplit(s string) ([]bsShare, error) {
	var out []bsShare
	left, open := 100, 0
	for part := range strings.SplitSeq(s, ":") {
		size, share, hasShare := strings.Cut(part, "/")
		n, err := parseSize(size)
		if err != nil {
			return nil, usagef("--bssplit %q: %v", s, err)
		}
		p := -1
		if hasShare && share != "" {
			if p, err = strconv.Atoi(share); err != nil || p < 0 || p > left {
				return nil, usagef("--bssplit %q: shares are percentages adding up to 100", s)
			}
			left -= p
		} else {
			open++
		}
		out = append(out, bsShare{size: n, pct: p})
	}
	for i := range out {
		if out[i].pct < 0 {
			out[i].pct = left / open
		}
	}
	return out, nil
}

func nfsBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nfs bench", "nfs bench [flags] HOST:/export[/dir]", stderr)
	var f nfsFlags
	f.register(fs)
	var b benchFlags
	b.register(fs)
	if err := f.parse(fs, args, 1); err != nil {
		return err
	}
	r, ok := parseRemote(fs.Arg(0))
	if !ok {
		return errNotRemote
	}
	plan, err := b.plan(fs)
	if err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var conns []*rpcrdma.Conn
	clients, dir, closeAll, err := f.benchClients(mctx, r, &conns, b.numjobs)
	if err != nil {
		return err
	}
	defer closeAll()
	c0 := clients[0]
	if plan.maxBS > c0.MaxRead() || plan.maxBS > c0.MaxWrite() {
		return fmt.Errorf("block size %d is over the server's transfer size (read %d, write %d)", plan.maxBS, c0.MaxRead(), c0.MaxWrite())
	}
	bf, err := openBenchFile(mctx, c0, dir, b.name, benchFileRules{size: plan.size, sizeSet: plan.sizeSet, bs: plan.maxBS, writes: plan.writes, data: plan.data, overwrite: b.overwrite})
	if err != nil {
		return err
	}
	files := make([]nfs.File, len(clients))
	for i, c := range clients {
		if files[i], err = c.Open(mctx, bf.h, plan.writes || bf.mayFill); err != nil {
			return fmt.Errorf("opening %s: %w", bf.name, err)
		}
		defer files[i].Close(context.WithoutCancel(ctx))
	}
	if bf.created && !b.keep {
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			for _, f := range files {
				f.Close(rctx)
			}
			if err := c0.Remove(rctx, bf.dir, bf.name); err != nil {
				fmt.Fprintf(stderr, "rpcrdma nfs bench: removing %s: %v\n", bf.name, err)
			}
		}()
	}
	run := &nfsBenchRun{clients: clients, files: files, conns: &conns, file: bf, bss: plan.bss, b: &b, stderr: stderr,
		progress: b.format == "normal" && !b.legacyJSON && b.status == 0 && isTerminal(stderr)}
	jobs, runErr := run.all(ctx, plan)
	rep := benchReport{host: r.host, export: dir, transport: f.transport, vers: f.vers, target: fs.Arg(0), file: bf, jobs: jobs, b: &b}
	if err := rep.write(stdout); err != nil {
		return err
	}
	return runErr
}

// benchPlan is what the flags ask of a bench, checked.
type benchPlan struct {
	rws     []string  // the workloads, in turn
	bss     []bsShare // block sizes and shares
	maxBS   int
	size    int
	sizeSet bool // --size given
	writes  bool // a workload writes
	data    bool // a workload reads or writes data, in blocks
}

// plan checks the flags and returns what they ask for; a wrong one is a
// usage error.
func (b *benchFlags) plan(fs *flag.FlagSet) (*benchPlan, error) {
	rws, err := b.workloads()
	if err != nil {
		return nil, err
	}
	p := &benchPlan{rws: rws, bss: []bsShare{{pct: 100}}}
	if p.bss[0].size, err = parseSize(b.bs); err != nil {
		return nil, usagef("--bs: %v", err)
	}
	if b.bssplit != "" {
		if p.bss, err = parseBSSplit(b.bssplit); err != nil {
			return nil, err
		}
	}
	if p.size, err = parseSize(b.size); err != nil {
		return nil, usagef("--size: %v", err)
	}
	fs.Visit(func(fl *flag.Flag) { p.sizeSet = p.sizeSet || fl.Name == "size" })
	for _, s := range p.bss {
		p.maxBS = max(p.maxBS, s.size)
		if b.verify && s.size%stampSize != 0 {
			return nil, usagef("--verify: block sizes must be multiples of %d", stampSize)
		}
	}
	for _, rw := range rws {
		p.writes = p.writes || workloadKinds[rw].writes
		p.data = p.data || !workloadKinds[rw].meta
	}
	switch {
	case b.iodepth < 1 || b.numjobs < 1 || b.numjobs > 64:
		return nil, usagef("want --iodepth at least 1 and --numjobs 1 to 64")
	case p.size < p.maxBS:
		return nil, usagef("--size %s is less than the block size %d", b.size, p.maxBS)
	case b.rwmixread < 0 || b.rwmixread > 100:
		return nil, usagef("--rwmixread %d: want 0 to 100", b.rwmixread)
	case b.rate < 0:
		return nil, usagef("--rate_iops %d: want 0 or more", b.rate)
	case b.format != "normal" && b.format != "json":
		return nil, usagef("--output-format %q: want normal or json", b.format)
	case b.plot != "" && !strings.HasSuffix(b.plot, ".svg") && !strings.HasSuffix(b.plot, ".html"):
		return nil, usagef("--plot %q: want a file name ending in .svg or .html", b.plot)
	}
	return p, nil
}

// all runs the plan's workloads in turn, filling the file before the
// first that reads it, and returns their results, with the error that
// stopped them.
func (r *nfsBenchRun) all(ctx context.Context, p *benchPlan) ([]*jobResult, error) {
	var jobs []*jobResult
	bf := r.file
	filled := false
	for _, rw := range p.rws {
		k := workloadKinds[rw]
		if bf.mayFill && (k.reads || r.b.verify) && !filled {
			if err := fillFile(ctx, r.clients[0], r.files[0], uint64(bf.size), p.maxBS, r.b.verify); err != nil {
				return jobs, err
			}
			filled = true
		}
		res, err := r.job(ctx, rw)
		if res != nil {
			jobs = append(jobs, res)
		}
		if err != nil {
			return jobs, err
		}
	}
	return jobs, nil
}

// benchClients reaches r's files numjobs times: NFSv3, one mount and
// connection each; NFSv4.1, one session over numjobs connections. It
// returns them, the bench directory's path, and what closes them.
func (f *nfsFlags) benchClients(ctx context.Context, r remote, conns *[]*rpcrdma.Conn, numjobs int) ([]nfs.Files, string, func(), error) {
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	n := numjobs
	if f.vers != "3" {
		n = 1
	}
	var out []nfs.Files
	var dir string
	for range n {
		fsys, p, closeFn, err := f.openFiles(ctx, r, conns, numjobs)
		if err != nil {
			closeAll()
			return nil, "", nil, err
		}
		closers = append(closers, closeFn)
		out, dir = append(out, fsys), p
	}
	for len(out) < numjobs {
		out = append(out, out[0])
	}
	return out, dir, closeAll, nil
}

// benchFileRules say what the bench may do to its file.
type benchFileRules struct {
	size      int  // --size
	sizeSet   bool // given on the command line
	bs        int
	writes    bool // a write case will run
	data      bool // a case reads or writes blocks of the file
	overwrite bool // --overwrite
}

// benchFile is the file a bench runs on.
type benchFile struct {
	dir     nfs.Handle
	name    string
	h       nfs.Handle
	size    int  // the range the cases use
	created bool // by this bench: removed at the end unless --keep
	mayFill bool // the bench may write it to size before reading
}

// openBenchFile finds or makes the bench's file in dir. An existing file
// is read as it is, never grown, and written only with --overwrite; a new
// one is made (GUARDED, so it never takes over a file made meanwhile)
// once its size is known to fit (nfs.CheckSpace).
func openBenchFile(ctx context.Context, c nfs.Files, dir, name string, r benchFileRules) (*benchFile, error) {
	dfh, da, err := c.LookupPath(ctx, dir)
	if err != nil {
		return nil, err
	}
	if !da.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: give the directory the bench file is in, and --file for its name", dir)
	}
	bf := &benchFile{dir: dfh, name: name, size: r.size}
	if name != "" {
		fh, a, err := c.Lookup(ctx, dfh, name)
		switch {
		case err == nil:
			return bf, bf.existing(fh, a, r)
		case !isNoEnt(err):
			return nil, err
		}
	} else {
		bf.name = fmt.Sprintf("rpcrdma-bench-%d-%08x.dat", os.Getpid(), rand.Uint32())
	}
	if err := nfs.CheckSpace(ctx, c, dfh, uint64(r.size)); err != nil {
		return nil, fmt.Errorf("--size: %w", err)
	}
	f, err := c.Create(ctx, dfh, bf.name, 0o644)
	if err != nil {
		if !r.writes && (errors.Is(err, nfs3.ErrROFS) || errors.Is(err, nfs4.ErrROFS)) {
			return nil, fmt.Errorf("creating %s: %w; to read a file that is there, name it with --file", bf.name, err)
		}
		return nil, fmt.Errorf("creating %s: %w", bf.name, err)
	}
	bf.h = f.Handle()
	if err := f.Close(ctx); err != nil {
		return nil, err
	}
	bf.created, bf.mayFill = true, true
	return bf, nil
}

// existing takes the existing file fh, whose attributes are a, if the
// rules allow.
func (bf *benchFile) existing(h nfs.Handle, a nfs.FileInfo, r benchFileRules) error {
	if !a.IsRegular() {
		return fmt.Errorf("--file %s is a %s, not a regular file", bf.name, nfs.TypeName(a.Type))
	}
	if r.writes && !r.overwrite {
		return fmt.Errorf("--file %s exists (%s): a write benchmark would overwrite it; add --overwrite to allow that, or leave out --file for a file of the bench's own", bf.name, nfs.Bytes(a.Size))
	}
	bf.h, bf.mayFill = h, r.overwrite
	if !r.overwrite {
		if r.sizeSet && uint64(r.size) > a.Size {
			return fmt.Errorf("--file %s holds %s, less than --size %s; the bench does not grow a file it did not create without --overwrite", bf.name, nfs.Bytes(a.Size), nfs.Bytes(uint64(r.size)))
		}
		if !r.sizeSet {
			bf.size = int(min(a.Size, 1<<40))
		}
	}
	if r.data && bf.size < r.bs {
		return fmt.Errorf("--file %s holds %s, less than one block (--bs %d)", bf.name, nfs.Bytes(a.Size), r.bs)
	}
	return nil
}

// fillFile writes fh up to size with UNSTABLE WRITEs from one buffer of
// bs bytes and a COMMIT, so a read benchmark reads data that is there:
// zeros from the file's current size on, or, with stamp, the whole file
// with every 512 bytes stamped with its offset (stampBlock). Memory stays
// at one block whatever the size.
func fillFile(ctx context.Context, c nfs.Files, f nfs.File, size uint64, bs int, stamp bool) error {
	a, err := c.Stat(ctx, f.Handle())
	if err != nil {
		return err
	}
	from := a.Size
	if stamp {
		from = 0
	}
	buf := make([]byte, min(bs, c.MaxWrite()))
	for off := from; off < size; {
		p := buf[:min(uint64(len(buf)), size-off)]
		if stamp {
			stampBlock(p, off)
		}
		n, _, err := f.WriteAt(ctx, p, off)
		if err != nil {
			return fmt.Errorf("filling the bench file: %w", err)
		}
		if n == 0 {
			return errors.New("filling the bench file: WRITE made no progress")
		}
		off += uint64(n)
	}
	if from < size {
		if _, err := f.Commit(ctx); err != nil {
			return fmt.Errorf("filling the bench file: %w", err)
		}
	}
	return nil
}
