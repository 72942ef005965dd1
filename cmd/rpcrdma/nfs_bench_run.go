package main

// How nfs bench runs one workload: --numjobs connections, each with
// --iodepth workers making calls one after the other. In the closed loop
// (the default) a worker starts its next call when the last one returns;
// with --rate_iops the calls are due at fixed times, and a call's latency
// counts from when it was due, so a server that stalls is charged for
// the calls it kept from starting (no coordinated omission). Latencies
// go to histograms (latency.go) per direction, one for the whole
// workload and one for the --status-interval line.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// bsShare is one block size of --bssplit and its percentage.
type bsShare struct{ size, pct int }

// Directions of a workload's calls: data reads (and metadata calls that
// only look), data writes (and CREATE+REMOVE).
const (
	dirRead = iota
	dirWrite
)

// dirStats are one direction's counts and latencies.
type dirStats struct {
	ios, bytes atomic.Uint64
	hist       latHist
}

// nfsBenchRun holds what every workload of one bench shares.
type nfsBenchRun struct {
	clients  []nfs.Files      // per connection (NFSv4.1: the one session, repeated)
	files    []nfs.File       // the bench file, opened on each
	conns    *[]*rpcrdma.Conn // RDMA connections, as dialed (reconnects append)
	file     *benchFile
	bss      []bsShare
	b        *benchFlags
	stderr   io.Writer
	progress bool
}

// jobResult is one workload's outcome.
type jobResult struct {
	rw        string
	start     time.Time
	elapsed   time.Duration // measured, after the ramp
	dirs      [2]*dirStats
	partial   bool // a signal stopped it
	cpu       time.Duration
	cpuOK     bool
	stats     rpcrdma.StatsSnapshot // RDMA counters over the workload
	info      *rpcrdma.Info         // the first RDMA connection's, at the workload's end
	grantMax  uint32                // the most credits it was granted during the workload
	iodepth   int
	numjobs   int
	size      int
	bss       []bsShare
	rwmixread int
	rate      int
	// timeline holds, with --plot, each interval's latencies.
	timeline []timePoint
	inUseMax int // the most calls outstanding on one RDMA connection
}

// timePoint is one interval of one direction, for --plot.
type timePoint struct {
	at            float64 // seconds since measuring began, at the interval's end
	dir           int
	iops          float64
	p50, p99, max float64 // ns
}

// rdmaStats sums the RDMA connections' counters.
func (r *nfsBenchRun) rdmaStats() rpcrdma.StatsSnapshot {
	var s rpcrdma.StatsSnapshot
	for _, c := range *r.conns {
		cs := c.Stats()
		s.Add(&cs)
	}
	return s
}

// job runs workload rw and returns its result, with ctx's cause if a
// signal stopped it (the result then marked partial) or the first call
// that failed.
func (r *nfsBenchRun) job(parent context.Context, rw string) (*jobResult, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	b := r.b
	res := &jobResult{rw: rw, dirs: [2]*dirStats{new(dirStats), new(dirStats)}, iodepth: b.iodepth, numjobs: len(r.clients),
		size: r.file.size, bss: r.bss, rwmixread: b.rwmixread, rate: b.rate}
	before := r.rdmaStats()
	r.peakInFlight()
	var live, plive atomic.Pointer[[2]*latHist]
	live.Store(&[2]*latHist{new(latHist), new(latHist)})
	plotting := r.b.plot != ""
	if plotting {
		plive.Store(&[2]*latHist{new(latHist), new(latHist)})
	}
	var (
		wg   sync.WaitGroup
		seq  [2]atomic.Uint64 // next sequential offset per direction
		fail jobFailure
	)
	cpu0, cpuOK := processCPU()
	clk := &jobClock{start: time.Now()}
	clk.measureFrom = clk.start.Add(time.Duration(b.ramp))
	clk.deadline = clk.measureFrom.Add(time.Duration(b.runtime))
	if b.rate > 0 {
		clk.interval = time.Second / time.Duration(b.rate)
	}
	measureFrom := clk.measureFrom
	w := &worker{run: r, rw: rw, kind: workloadKinds[rw], res: res, seq: &seq}
	for i := range len(r.clients) * b.iodepth {
		wg.Go(func() {
			ww := *w
			ww.c, ww.f = r.clients[i%len(r.clients)], r.files[i%len(r.files)]
			ww.rng = rand.New(rand.NewPCG(uint64(i), uint64(clk.start.UnixNano())))
			ww.buf = make([]byte, maxShare(r.bss))
			ww.id = i
			defer ww.cleanup(parent)
			if err := ww.loop(ctx, clk, &live, &plive); err != nil {
				fail.set(ctx, err)
				cancel()
			}
		})
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	var sampler sync.WaitGroup
	var first *rpcrdma.Conn
	if len(*r.conns) > 0 {
		first = (*r.conns)[0]
		sampler.Go(func() { res.grantMax = sampleGrant(stopped, first) })
	}
	if plotting {
		sampler.Go(func() { res.timeline = sampleTimeline(stopped, measureFrom, time.Duration(b.runtime), &plive) })
	}
	r.watch(stopped, res, measureFrom, &live)
	<-stopped
	sampler.Wait()
	res.start = measureFrom
	res.elapsed = max(time.Since(measureFrom), time.Millisecond)
	if cpu1, ok := processCPU(); ok && cpuOK {
		res.cpu, res.cpuOK = cpu1-cpu0, true
	}
	after := r.rdmaStats()
	res.inUseMax = r.peakInFlight()
	if first != nil {
		info := first.Info()
		res.info = &info
	}
	res.stats = statsDelta(after, before)
	if err := fail.get(); err != nil {
		return res, err
	}
	if workloadKinds[rw].writes && parent.Err() == nil {
		if _, err := r.files[0].Commit(parent); err != nil {
			return res, err
		}
	}
	if parent.Err() != nil {
		res.partial = true
		return res, context.Cause(parent)
	}
	return res, nil
}

// jobClock is when a workload's calls are due: from start, measured
// from measureFrom (after the ramp), until deadline; with --rate_iops,
// one every interval, numbered by ticket.
type jobClock struct {
	start, measureFrom, deadline time.Time
	interval                     time.Duration
	ticket                       atomic.Uint64
}

// jobFailure keeps a workload's first failed call.
type jobFailure struct {
	mu  sync.Mutex
	err error
}

// set keeps err unless one is kept or ctx ended (the stop, not a failure).
func (f *jobFailure) set(ctx context.Context, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil && ctx.Err() == nil {
		f.err = err
	}
}

func (f *jobFailure) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// loop makes the worker's calls until the deadline or ctx's end, and
// records each measured one's latency in the workload's histograms (and
// the live ones: the status line's, and --plot's when not nil); it
// returns a failed call's error.
func (w *worker) loop(ctx context.Context, clk *jobClock, live, plive *atomic.Pointer[[2]*latHist]) error {
	res := w.res
	for ctx.Err() == nil {
		t0 := time.Now()
		if clk.interval > 0 {
			t0 = clk.start.Add(time.Duration(clk.ticket.Add(1)-1) * clk.interval)
			if !t0.Before(clk.deadline) {
				return nil
			}
			if d := time.Until(t0); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return nil
				}
			}
		} else if !t0.Before(clk.deadline) {
			return nil
		}
		dir, n, err := w.one(ctx)
		if err != nil {
			return err
		}
		if t0.Before(clk.measureFrom) {
			continue
		}
		lat := time.Since(t0)
		d := res.dirs[dir]
		d.hist.Record(lat)
		d.ios.Add(1)
		d.bytes.Add(uint64(n))
		live.Load()[dir].Record(lat)
		if p := plive.Load(); p != nil {
			p[dir].Record(lat)
		}
	}
	return nil
}

// peakInFlight returns the most calls any one RDMA connection had
// outstanding at once since the last peakInFlight: the credits it used.
func (r *nfsBenchRun) peakInFlight() int {
	most := 0
	for _, c := range *r.conns {
		most = max(most, c.TakePeakInFlight())
	}
	return most
}

// grantSample is how often sampleGrant looks at a connection's grant.
const grantSample = 10 * time.Millisecond

// sampleGrant returns the most credits c was granted from now until
// stopped closes, looking every grantSample. A responder with a shared
// receive pool grants a connection more as its calls keep the grant
// busy, and lowers it only when a reply leaves no call unanswered
// (which, at the end of a workload, its last reply does): so the grant
// at the start or the end of a workload says less than the most it had.
func sampleGrant(stopped chan struct{}, c *rpcrdma.Conn) uint32 {
	tick := time.NewTicker(grantSample)
	defer tick.Stop()
	most := c.Info().Credits
	for {
		select {
		case <-stopped:
			return most
		case <-tick.C:
			most = max(most, c.Info().Credits)
		}
	}
}

// sampleTimeline takes each interval's latencies from live until stopped
// closes: sixty intervals over the measuring time, each 100 ms to 1 s.
func sampleTimeline(stopped chan struct{}, from time.Time, runtime time.Duration, live *atomic.Pointer[[2]*latHist]) []timePoint {
	every := min(max(runtime/60, 100*time.Millisecond), time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var out []timePoint
	last := time.Now()
	for {
		var now time.Time
		select {
		case <-stopped:
			now = time.Now()
		case now = <-tick.C:
		}
		h := live.Swap(&[2]*latHist{new(latHist), new(latHist)})
		// The last interval, cut short by the end, is left out when
		// it is too short to say anything.
		if now.After(from) && now.Sub(last) >= every/2 {
			for dir := range h {
				if s := h[dir].Summary(); s.N > 0 {
					out = append(out, timePoint{at: now.Sub(from).Seconds(), dir: dir, iops: float64(s.N) / now.Sub(last).Seconds(),
						p50: s.pct(50), p99: s.pct(99), max: s.Max})
				}
			}
		}
		last = now
		select {
		case <-stopped:
			return out
		default:
		}
	}
}

// watch draws the progress line on a terminal, or prints a
// --status-interval line, until stopped closes.
func (r *nfsBenchRun) watch(stopped chan struct{}, res *jobResult, from time.Time, live *atomic.Pointer[[2]*latHist]) {
	rw := res.rw
	every := time.Duration(r.b.status)
	if every == 0 && r.progress {
		every = time.Second
	}
	if every == 0 {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := time.Now()
	var lastBytes [2]uint64
	for {
		select {
		case <-stopped:
			if r.progress {
				fmt.Fprint(r.stderr, "\r\033[K")
			}
			return
		case now := <-tick.C:
			h := live.Swap(&[2]*latHist{new(latHist), new(latHist)})
			secs := now.Sub(last).Seconds()
			last = now
			var parts []string
			names := []string{"read", "write"}
			if workloadKinds[rw].meta {
				names[dirRead] = "calls:"
			}
			for dir, name := range names {
				bytes := res.dirs[dir].bytes.Load()
				moved := bytes - lastBytes[dir]
				lastBytes[dir] = bytes
				s := h[dir].Summary()
				if s.N == 0 {
					continue
				}
				rate := ""
				if !workloadKinds[rw].meta {
					rate = fmt.Sprintf(" %.1f MiB/s,", float64(moved)/secs/(1<<20))
				}
				parts = append(parts, fmt.Sprintf("%s %s IOPS,%s p50 %s, p99 %s, max %s", name, fmtCount(float64(s.N)/secs), rate,
					fmtLat(s.pct(50)), fmtLat(s.pct(99)), fmtLat(s.Max)))
			}
			if len(parts) == 0 {
				parts = append(parts, "ramping up")
			}
			line := fmt.Sprintf("%s %5.1fs: %s", rw, time.Since(from).Seconds(), strings.Join(parts, "; "))
			if r.progress {
				fmt.Fprintf(r.stderr, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(r.stderr, line)
			}
		}
	}
}

// worker is one of the calls in flight of a workload.
type worker struct {
	run  *nfsBenchRun
	rw   string
	kind struct{ random, reads, writes, meta bool }
	res  *jobResult
	seq  *[2]atomic.Uint64
	c    nfs.Files
	f    nfs.File
	rng  *rand.Rand
	buf  []byte
	id   int
	made int    // CREATE+REMOVE pairs made
	left string // a file CREATE made that REMOVE has not removed
}

// one makes one call of the workload and returns its direction and data
// bytes.
func (w *worker) one(ctx context.Context) (int, int, error) {
	f := w.run.file
	if w.kind.meta {
		return dirRead, 0, w.meta(ctx)
	}
	dir := dirRead
	if w.kind.writes && (!w.kind.reads || w.rng.IntN(100) >= w.run.b.rwmixread) {
		dir = dirWrite
	}
	bs := pickShare(w.run.bss, w.rng)
	var off uint64
	if w.kind.random {
		off = w.rng.Uint64N(uint64(f.size/bs)) * uint64(bs)
	} else {
		off = (w.seq[dir].Add(uint64(bs)) - uint64(bs)) % uint64(f.size-bs+1)
	}
	p := w.buf[:bs]
	if dir == dirWrite {
		if w.run.b.verify {
			stampBlock(p, off)
		}
		n, _, err := w.f.WriteAt(ctx, p, off)
		return dir, n, err
	}
	n, _, err := w.f.ReadAt(ctx, p, off)
	if err == nil && w.run.b.verify {
		if bad, got := checkStamps(p[:n], off); bad >= 0 {
			return dir, n, fmt.Errorf("verify: the 512 bytes at offset %d hold the stamp of offset %d", bad, got)
		}
	}
	return dir, n, err
}

// meta makes one call of a metadata workload.
func (w *worker) meta(ctx context.Context) error {
	f := w.run.file
	switch w.rw {
	case "getattr":
		_, err := w.c.Stat(ctx, f.h)
		return err
	case "lookup":
		_, _, err := w.c.Lookup(ctx, f.dir, f.name)
		return err
	case "readdir":
		_, err := w.c.List(ctx, f.dir)
		return err
	}
	name := fmt.Sprintf("%s.%d.%d", f.name, w.id, w.made)
	w.made++
	cf, err := w.c.Create(ctx, f.dir, name, 0o644)
	if err != nil {
		return err
	}
	w.left = name
	if err := cf.Close(ctx); err != nil {
		return err
	}
	if err := w.c.Remove(ctx, f.dir, name); err != nil {
		return err
	}
	w.left = ""
	return nil
}

// cleanup removes a file a stopped CREATE+REMOVE left.
func (w *worker) cleanup(ctx context.Context) {
	if w.left == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	w.c.Remove(rctx, w.run.file.dir, w.left)
}

func maxShare(bss []bsShare) int {
	m := 0
	for _, s := range bss {
		m = max(m, s.size)
	}
	return m
}

// pickShare draws a block size with the shares' weights.
func pickShare(bss []bsShare, rng *rand.Rand) int {
	if len(bss) == 1 {
		return bss[0].size
	}
	x, total := rng.IntN(100), 0
	for _, s := range bss {
		total += s.pct
		if x < total {
			return s.size
		}
	}
	return bss[len(bss)-1].size
}

// stampSize is the unit --verify stamps: the offset of each 512 bytes
// and its complement, in their first 16 bytes.
const stampSize = 512

// stampBlock stamps p, which lies at off in the file.
func stampBlock(p []byte, off uint64) {
	for i := 0; i+stampSize <= len(p); i += stampSize {
		o := off + uint64(i)
		binary.LittleEndian.PutUint64(p[i:], o)
		binary.LittleEndian.PutUint64(p[i+8:], ^o)
	}
}

// checkStamps returns the offset of the first 512 bytes of p (read at
// off) whose stamp is wrong, and the offset it names; -1 if all are
// right.
func checkStamps(p []byte, off uint64) (int64, uint64) {
	for i := 0; i+stampSize <= len(p); i += stampSize {
		o := off + uint64(i)
		got := binary.LittleEndian.Uint64(p[i:])
		if got != o || binary.LittleEndian.Uint64(p[i+8:]) != ^o {
			return int64(o), got
		}
	}
	return -1, 0
}

// statsDelta returns the counters a report shows of a minus those of b;
// the gauges stay a's.
func statsDelta(a, b rpcrdma.StatsSnapshot) rpcrdma.StatsSnapshot {
	d := a
	d.ReadChunks -= b.ReadChunks
	d.WriteChunks -= b.WriteChunks
	d.ReplyChunks -= b.ReplyChunks
	d.LongCalls -= b.LongCalls
	d.Inline -= b.Inline
	d.CallsSent -= b.CallsSent
	d.RepliesReceived -= b.RepliesReceived
	d.ReadChunkBytes -= b.ReadChunkBytes
	d.WriteChunkBytes -= b.WriteChunkBytes
	d.ReplyChunkBytes -= b.ReplyChunkBytes
	d.InlineBytes -= b.InlineBytes
	d.RemoteInvalid -= b.RemoteInvalid
	return d
}

// fmtLat formats nanoseconds for a person: 85 µs, 1.25 ms.
func fmtLat(ns float64) string {
	switch {
	case ns < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
	return fmt.Sprintf("%.2f s", ns/1e9)
}

// fmtCount formats a rate as fio does: 950, 12.3k, 1.20M.
func fmtCount(v float64) string {
	switch {
	case v < 1e4:
		return fmt.Sprintf("%.0f", v)
	case v < 1e6:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.2fM", v/1e6)
}
