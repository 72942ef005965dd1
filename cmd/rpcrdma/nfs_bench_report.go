package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// benchReport is what nfs bench prints once its workloads have run.
type benchReport struct {
	host, export, transport string
	vers                    string
	target                  string // the HOST:/path argument
	file                    *benchFile
	jobs                    []*jobResult
	b                       *benchFlags
}

// write prints the report as the flags ask, and the plot.
func (r *benchReport) write(w io.Writer) error {
	var err error
	switch {
	case r.b.legacyJSON:
		err = printNFSBench(w, r.legacy(), true)
	case r.b.format == "json":
		err = r.writeFioJSON(w)
	default:
		err = printNFSBench(w, r.legacy(), false)
		r.writeTransport(w)
	}
	if err == nil && r.b.plot != "" && len(r.jobs) > 0 {
		if perr := writePlot(r.b.plot, r); perr != nil {
			return fmt.Errorf("--plot: %w", perr)
		}
	}
	return err
}

// legacy returns the rows of the table and of --json: one per workload
// and direction that made calls.
func (r *benchReport) legacy() []nfsBenchResult {
	var out []nfsBenchResult
	for _, j := range r.jobs {
		k := workloadKinds[j.rw]
		pattern := "seq"
		if k.random {
			pattern = "rand"
		} else if k.meta {
			pattern = "-"
		}
		total := j.dirs[dirRead].ios.Load() + j.dirs[dirWrite].ios.Load()
		for dir, op := range []string{"read", "write"} {
			d := j.dirs[dir]
			n := d.ios.Load()
			if k.meta {
				op = j.rw
			} else if n == 0 && !(dir == dirRead && k.reads || dir == dirWrite && k.writes) {
				continue
			}
			if k.meta && dir == dirWrite {
				continue
			}
			s := d.hist.Summary()
			secs := j.elapsed.Seconds()
			bs := j.bss[0].size
			if k.meta {
				bs = 0
			}
			res := nfsBenchResult{Transport: r.transport, Op: op, Pattern: pattern, Size: bs, QueueDep: j.iodepth,
				Conns: j.numjobs, Ops: int(n), Seconds: secs, OpsPerSec: float64(n) / secs, MBPerSec: float64(d.bytes.Load()) / secs / 1e6,
				P50us: s.pct(50) / 1e3, P90us: s.pct(90) / 1e3, P99us: s.pct(99) / 1e3, P999us: s.pct(99.9) / 1e3,
				P9999us: s.pct(99.99) / 1e3, MaxUs: s.Max / 1e3, Partial: j.partial}
			if j.cpuOK && total > 0 {
				res.CPUusPerOp = float64(j.cpu.Nanoseconds()) / 1e3 / float64(total)
			}
			out = append(out, res)
		}
	}
	return out
}

// printNFSBench writes the rows as a table or as the older JSON.
func printNFSBench(w io.Writer, results []nfsBenchResult, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Results []nfsBenchResult `json:"results"`
		}{results})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transport\top\tpattern\tbs\tqd\tconns\tops\tops/s\tMB/s\tp50 µs\tp90 µs\tp99 µs\tp99.9 µs\tp99.99 µs\tmax µs\tcpu µs/op\t")
	for _, r := range results {
		op := strings.ToUpper(r.Op)
		if r.Partial {
			op += " (stopped)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t\n", r.Transport, op, r.Pattern,
			r.Size, r.QueueDep, r.Conns, r.Ops, r.OpsPerSec, r.MBPerSec, r.P50us, r.P90us, r.P99us, r.P999us, r.P9999us, r.MaxUs, r.CPUusPerOp)
	}
	return tw.Flush()
}

// writeTransport prints, under the table, what RPC-over-RDMA negotiated
// and how each workload's calls travelled: the facts of the "xprt: rdma"
// line of /proc/self/mountstats, without a mount.
func (r *benchReport) writeTransport(w io.Writer) {
	if len(r.jobs) == 0 || r.jobs[0].info == nil {
		return
	}
	i := r.jobs[0].info
	fmt.Fprintf(w, "\nrpc-over-rdma: version %d, inline send %d receive %d, remote invalidation %v\n",
		i.Version, i.SendInline, i.RecvInline, onOff(i.RemoteInvalidation))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tcalls\tinline\tread chunks\twrite chunks\treply chunks\tlong calls\tremote inv\tcredits granted (max)\tin use (max)\t")
	for _, j := range r.jobs {
		s := j.stats
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", j.rw, s.CallsSent, s.Inline, s.ReadChunks, s.WriteChunks, s.ReplyChunks, s.LongCalls,
			s.RemoteInvalid, j.grantMax, j.inUseMax)
	}
	tw.Flush()
}

// The JSON of --output-format json follows fio's layout (fio(1), "JSON
// OUTPUT"; fio's own stat.c writes it), so that tools which read fio's
// JSON read ours: jobs[], each with "job options" and read, write and
// trim sections holding iops, bw (KiB/s), io_bytes, runtime (ms) and
// clat_ns/lat_ns with min, max, mean, stddev, N and a percentile map
// keyed "99.000000". What fio has no field for is under "rpcrdma".
type fioJSON struct {
	Version     string            `json:"fio version"`
	Timestamp   int64             `json:"timestamp"`
	TimestampMS int64             `json:"timestamp_ms"`
	Time        string            `json:"time"`
	Global      map[string]string `json:"global options"`
	Jobs        []fioJob          `json:"jobs"`
	RPCRDMA     fioRun            `json:"rpcrdma"`
}

type fioJob struct {
	Name       string            `json:"jobname"`
	GroupID    int               `json:"groupid"`
	Error      int               `json:"error"`
	Elapsed    int64             `json:"elapsed"` // s
	Options    map[string]string `json:"job options"`
	Read       fioDir            `json:"read"`
	Write      fioDir            `json:"write"`
	Trim       fioDir            `json:"trim"`
	JobRuntime int64             `json:"job_runtime"` // ms
	UsrCPU     float64           `json:"usr_cpu"`     // % of one CPU, user and system together
	SysCPU     float64           `json:"sys_cpu"`
	RPCRDMA    fioJobExtra       `json:"rpcrdma"`
}

type fioDir struct {
	IOBytes  uint64  `json:"io_bytes"`
	IOKBytes uint64  `json:"io_kbytes"`
	BWBytes  float64 `json:"bw_bytes"`
	BW       float64 `json:"bw"` // KiB/s
	IOPS     float64 `json:"iops"`
	Runtime  int64   `json:"runtime"` // ms
	TotalIOs uint64  `json:"total_ios"`
	ShortIOs uint64  `json:"short_ios"`
	DropIOs  uint64  `json:"drop_ios"`
	SlatNS   fioLat  `json:"slat_ns"`
	ClatNS   fioLat  `json:"clat_ns"`
	LatNS    fioLat  `json:"lat_ns"`
}

type fioLat struct {
	Min        float64            `json:"min"`
	Max        float64            `json:"max"`
	Mean       float64            `json:"mean"`
	Stddev     float64            `json:"stddev"`
	N          uint64             `json:"N"`
	Percentile map[string]float64 `json:"percentile,omitempty"`
}

// fioRun is what the whole run adds to fio's fields.
type fioRun struct {
	Host      string `json:"host"`
	Export    string `json:"export"`
	File      string `json:"file"`
	FileSize  int    `json:"file_size"`
	Transport string `json:"transport"`
	NFS       string `json:"nfs_version"`
	Tool      string `json:"tool_version"`
}

// fioJobExtra is what a job adds to fio's fields: the transport's facts.
type fioJobExtra struct {
	Workload       string `json:"workload"`
	Partial        bool   `json:"partial,omitempty"`
	Connections    int    `json:"connections"`
	RPCRDMAVersion int    `json:"rpcrdma_version,omitempty"`
	// Credits is the most the server granted the first RDMA connection
	// during the job (sampleGrant): what its calls earned.
	Credits            uint32 `json:"credits,omitempty"`
	InlineSend         int    `json:"inline_send,omitempty"`
	InlineRecv         int    `json:"inline_recv,omitempty"`
	RemoteInvalidation bool   `json:"remote_invalidation"`
	Calls              uint64 `json:"calls"`
	InlineCalls        uint64 `json:"inline"`
	ReadChunks         uint64 `json:"read_chunks"`
	WriteChunks        uint64 `json:"write_chunks"`
	ReplyChunks        uint64 `json:"reply_chunks"`
	LongCalls          uint64 `json:"nomsg_calls"`
	ReadChunkBytes     uint64 `json:"read_chunk_bytes"`
	WriteChunkBytes    uint64 `json:"write_chunk_bytes"`
	ReplyChunkBytes    uint64 `json:"reply_chunk_bytes"`
	CallsPending       int    `json:"calls_in_flight_at_end"`
	// CreditsInUseMax is the most calls one RDMA connection had
	// outstanding at once during the job, as the transport counts them
	// (rpcrdma.Conn.TakePeakInFlight): the credits in use, beside
	// Credits, those granted.
	CreditsInUseMax int `json:"credits_in_use_max"`
	// InlineBytes are the bytes of calls sent inline, each copied into
	// a registered send buffer: what Linux's pull-up count measures the
	// data part of.
	InlineBytes uint64  `json:"inline_bytes"`
	StartTime   string  `json:"start_time"`
	CPUPerOpUs  float64 `json:"cpu_us_per_op"`
}

// writeFioJSON writes the report in fio's JSON layout.
func (r *benchReport) writeFioJSON(w io.Writer) error {
	now := time.Now()
	out := fioJSON{Version: "rpcrdma-" + toolVersion(), Timestamp: now.Unix(), TimestampMS: now.UnixMilli(),
		Time: now.Format(time.ANSIC), Global: map[string]string{"size": strconv.Itoa(r.file.size)},
		RPCRDMA: fioRun{Host: r.host, Export: r.export, File: r.file.name, FileSize: r.file.size, Transport: r.transport, NFS: r.vers, Tool: toolVersion()}}
	for _, j := range r.jobs {
		opts := map[string]string{"rw": j.rw, "bs": strconv.Itoa(j.bss[0].size), "iodepth": strconv.Itoa(j.iodepth),
			"numjobs": strconv.Itoa(j.numjobs), "runtime": strconv.FormatInt(time.Duration(r.b.runtime).Milliseconds(), 10) + "ms",
			"ramp_time": strconv.FormatInt(time.Duration(r.b.ramp).Milliseconds(), 10) + "ms", "size": strconv.Itoa(j.size)}
		if len(j.bss) > 1 {
			var parts []string
			for _, s := range j.bss {
				parts = append(parts, fmt.Sprintf("%d/%d", s.size, s.pct))
			}
			opts["bssplit"] = strings.Join(parts, ":")
		}
		if workloadKinds[j.rw].reads && workloadKinds[j.rw].writes {
			opts["rwmixread"] = strconv.Itoa(j.rwmixread)
		}
		if j.rate > 0 {
			opts["rate_iops"] = strconv.Itoa(j.rate)
		}
		ms := j.elapsed.Milliseconds()
		fj := fioJob{Name: j.rw, Elapsed: int64(math.Round(j.elapsed.Seconds())), Options: opts, JobRuntime: ms,
			Read: fioDirOf(j.dirs[dirRead], j.elapsed), Write: fioDirOf(j.dirs[dirWrite], j.elapsed)}
		total := j.dirs[dirRead].ios.Load() + j.dirs[dirWrite].ios.Load()
		if j.cpuOK && j.elapsed > 0 {
			fj.UsrCPU = 100 * j.cpu.Seconds() / j.elapsed.Seconds()
		}
		s := j.stats
		x := fioJobExtra{Workload: j.rw, Partial: j.partial, Connections: j.numjobs, Calls: s.CallsSent, InlineCalls: s.Inline,
			ReadChunks: s.ReadChunks, WriteChunks: s.WriteChunks, ReplyChunks: s.ReplyChunks, LongCalls: s.LongCalls,
			ReadChunkBytes: s.ReadChunkBytes, WriteChunkBytes: s.WriteChunkBytes, ReplyChunkBytes: s.ReplyChunkBytes,
			CallsPending: s.CallsPending, StartTime: j.start.UTC().Format(time.RFC3339Nano), CreditsInUseMax: j.inUseMax,
			InlineBytes: s.InlineBytes}
		if j.cpuOK && total > 0 {
			x.CPUPerOpUs = float64(j.cpu.Nanoseconds()) / 1e3 / float64(total)
		}
		if i := j.info; i != nil {
			x.RPCRDMAVersion, x.Credits, x.InlineSend, x.InlineRecv, x.RemoteInvalidation = int(i.Version), j.grantMax, i.SendInline, i.RecvInline, i.RemoteInvalidation
		}
		fj.RPCRDMA = x
		out.Jobs = append(out.Jobs, fj)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// fioDirOf fills one direction's section. The latency measured is fio's
// completion latency (clat) and total latency (lat) at once: a call is
// submitted as it starts (slat 0), or, with --rate_iops, when it was due.
func fioDirOf(d *dirStats, elapsed time.Duration) fioDir {
	s := d.hist.Summary()
	n, bytes := d.ios.Load(), d.bytes.Load()
	secs := elapsed.Seconds()
	lat := fioLat{Min: s.Min, Max: s.Max, Mean: s.Mean, Stddev: s.Stdev, N: s.N}
	if n > 0 {
		lat.Percentile = make(map[string]float64, len(latPercentiles))
		for i, p := range latPercentiles {
			lat.Percentile[strconv.FormatFloat(p, 'f', 6, 64)] = s.Pct[i]
		}
	}
	total := lat
	total.Percentile = nil
	return fioDir{IOBytes: bytes, IOKBytes: bytes / 1024, BWBytes: float64(bytes) / secs, BW: float64(bytes) / 1024 / secs,
		IOPS: float64(n) / secs, Runtime: elapsed.Milliseconds(), TotalIOs: n, ClatNS: lat, LatNS: total}
}
