package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fioOutput is fio's JSON layout as fio(1) documents it and as tools that
// read fio's output (fio_jsonplus_clat2csv, fio-plot, benchmark
// harnesses) parse it, written without reference to our encoder.
type fioOutput struct {
	FioVersion string `json:"fio version"`
	Timestamp  int64  `json:"timestamp"`
	Jobs       []struct {
		JobName    string            `json:"jobname"`
		Error      int               `json:"error"`
		JobOptions map[string]string `json:"job options"`
		Read       fioOutputDir      `json:"read"`
		Write      fioOutputDir      `json:"write"`
		JobRuntime int64             `json:"job_runtime"`
		RPCRDMA    map[string]any    `json:"rpcrdma"`
	} `json:"jobs"`
}

type fioOutputDir struct {
	IOBytes  int64   `json:"io_bytes"`
	BW       float64 `json:"bw"`
	IOPS     float64 `json:"iops"`
	Runtime  int64   `json:"runtime"`
	TotalIOs int64   `json:"total_ios"`
	ClatNS   struct {
		Min, Max, Mean float64
		N              int64              `json:"N"`
		Percentile     map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

func TestNFSBenchFioJSON(t *testing.T) {
	s := startNFSServe(t)
	for _, tr := range []string{"rdma", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			out, _ := s.client(t, tr, "bench", "--output-format", "json", "--runtime", "200ms", "--ramp_time", "50ms", "--size", "4m",
				"--bssplit", "64k/50:128k/50", "--iodepth", "4", "--numjobs", "2", "--rw", "randrw,read", "--rwmixread", "70", "127.0.0.1:/export")
			var f fioOutput
			if err := json.Unmarshal([]byte(out), &f); err != nil {
				t.Fatalf("not fio's JSON: %v\n%s", err, out)
			}
			if !strings.HasPrefix(f.FioVersion, "rpcrdma-") || f.Timestamp == 0 || len(f.Jobs) != 2 {
				t.Fatalf("fio JSON head: %+v", f)
			}
			mix := f.Jobs[0]
			if mix.JobName != "randrw" || mix.JobOptions["rw"] != "randrw" || mix.JobOptions["rwmixread"] != "70" ||
				mix.JobOptions["iodepth"] != "4" || mix.JobOptions["numjobs"] != "2" || mix.JobOptions["bssplit"] != "65536/50:131072/50" {
				t.Errorf("job options %v", mix.JobOptions)
			}
			for _, d := range []fioOutputDir{mix.Read, mix.Write, f.Jobs[1].Read} {
				p50, p99, p9999 := d.ClatNS.Percentile["50.000000"], d.ClatNS.Percentile["99.000000"], d.ClatNS.Percentile["99.990000"]
				if d.TotalIOs == 0 || d.IOPS <= 0 || d.BW <= 0 || d.IOBytes < d.TotalIOs*64<<10 || d.ClatNS.N != d.TotalIOs ||
					p50 <= 0 || p99 < p50 || p9999 < p99 || d.ClatNS.Max < p9999 || d.ClatNS.Min > p50 {
					t.Errorf("a direction: %+v", d)
				}
			}
			if mix.Read.TotalIOs < mix.Write.TotalIOs {
				t.Errorf("rwmixread 70 made %d reads and %d writes", mix.Read.TotalIOs, mix.Write.TotalIOs)
			}
			if f.Jobs[1].Write.TotalIOs != 0 {
				t.Errorf("a read job wrote %d times", f.Jobs[1].Write.TotalIOs)
			}
			x := f.Jobs[0].RPCRDMA
			if x["connections"] != 2.0 || x["workload"] != "randrw" {
				t.Errorf("rpcrdma fields %v", x)
			}
			if tr == "rdma" {
				// The chunks say how the data travelled: WRITE data in read
				// chunks, READ data in write chunks (RFC 8267 Section 4);
				// the credits granted cover those the job used.
				if x["rpcrdma_version"] != 1.0 || x["credits"].(float64) < 1 || x["credits_in_use_max"].(float64) < 1 ||
					x["credits_in_use_max"].(float64) > 4 || x["inline_bytes"].(float64) <= 0 || x["read_chunks"].(float64) < float64(mix.Write.TotalIOs) ||
					x["write_chunks"].(float64) < float64(mix.Read.TotalIOs) || x["credits"].(float64) < x["credits_in_use_max"].(float64) {
					t.Errorf("transport facts %v against %d reads, %d writes", x, mix.Read.TotalIOs, mix.Write.TotalIOs)
				}
			}
		})
	}
}

// TestNFSBenchVerify: --verify passes on a file the bench wrote, and
// finds a block that another writer changed.
func TestNFSBenchVerify(t *testing.T) {
	s := startNFSServe(t)
	args := []string{"--runtime", "100ms", "--bs", "4k", "--size", "256k", "--verify", "--file", "v.dat", "--keep"}
	if _, errOut, code := s.nfsRun(t, "bench", append(args, "--rw", "randwrite,randread", "127.0.0.1:/export")...); code != 0 {
		t.Fatalf("verify: exit %d %s", code, errOut)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "v.dat"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 4096), 64<<10)
	f.Close()
	// Read as it is, the damage shows.
	_, errOut, code := s.nfsRun(t, "bench", "--runtime", "100ms", "--bs", "4k", "--verify", "--file", "v.dat", "--rw", "read", "127.0.0.1:/export")
	if code != 1 || !strings.Contains(errOut, "verify: the 512 bytes at offset 65536 hold the stamp of offset 0") {
		t.Errorf("verify of a damaged file: exit %d %s", code, errOut)
	}
}

// TestNFSBenchRateAndStatus: --rate_iops holds the rate, and
// --status-interval prints live lines.
func TestNFSBenchRateAndStatus(t *testing.T) {
	s := startNFSServe(t)
	out, errOut, code := s.nfsRun(t, "bench", "--output-format", "json", "--runtime", "1s", "--bs", "4k", "--size", "1m", "--rw", "randread",
		"--rate_iops", "200", "--status-interval", "250ms", "127.0.0.1:/export")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	var f fioOutput
	if err := json.Unmarshal([]byte(out), &f); err != nil || len(f.Jobs) != 1 {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := f.Jobs[0].Read.TotalIOs; n < 150 || n > 210 {
		t.Errorf("--rate_iops 200 for 1s made %d READs", n)
	}
	if f.Jobs[0].JobOptions["rate_iops"] != "200" {
		t.Errorf("job options %v", f.Jobs[0].JobOptions)
	}
	lines := regexp.MustCompile(`(?m)^randread +[0-9.]+s: read [0-9.k]+ IOPS, [0-9.]+ MiB/s, p50 [0-9.]+ [µm]s, p99 [0-9.]+ [µm]s, max [0-9.]+ [µm]?s$`).FindAllString(errOut, -1)
	if len(lines) < 2 {
		t.Errorf("status lines:\n%s", errOut)
	}
}

func TestParseBSSplit(t *testing.T) {
	got, err := parseBSSplit("4k/50:64k/30:1m")
	if err != nil || len(got) != 3 || got[0] != (bsShare{4096, 50}) || got[1] != (bsShare{65536, 30}) || got[2] != (bsShare{1 << 20, 20}) {
		t.Errorf("parseBSSplit: %v %v", got, err)
	}
	for _, bad := range []string{"4k/60:8k/60", "x/10", "4k/-1"} {
		if _, err := parseBSSplit(bad); err == nil {
			t.Errorf("parseBSSplit(%q) succeeded", bad)
		}
	}
}

func TestFioDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "0.5": 500 * time.Millisecond, "250ms": 250 * time.Millisecond, "2m": 2 * time.Minute} {
		var d fioDuration
		if err := d.Set(in); err != nil || time.Duration(d) != want {
			t.Errorf("Set(%q) = %v %v", in, time.Duration(d), err)
		}
	}
	var d fioDuration
	if d.Set("-1") == nil || d.Set("soon") == nil {
		t.Error("a bad duration was taken")
	}
}

func TestStamps(t *testing.T) {
	p := make([]byte, 4096)
	stampBlock(p, 8192)
	if bad, _ := checkStamps(p, 8192); bad != -1 {
		t.Errorf("a fresh stamp fails at %d", bad)
	}
	if bad, got := checkStamps(p, 4096); bad != 4096 || got != 8192 {
		t.Errorf("read at the wrong offset: %d %d", bad, got)
	}
	p[1024+3] ^= 1
	if bad, _ := checkStamps(p, 8192); bad != 8192+1024 {
		t.Errorf("a flipped bit: %d", bad)
	}
}

// TestNFSBenchPlot: --plot writes an SVG with each workload's latency
// over time and histogram, and an HTML page around it; another suffix is
// a usage error.
func TestNFSBenchPlot(t *testing.T) {
	s := startNFSServe(t)
	dir := t.TempDir()
	svg := filepath.Join(dir, "b.svg")
	if _, errOut, code := s.nfsRun(t, "bench", "--runtime", "500ms", "--bs", "4k", "--size", "1m", "--rw", "randread,randwrite", "--plot", svg, "127.0.0.1:/export"); code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name   `xml:"svg"`
		Lines   []struct{} `xml:"polyline"`
		Rects   []struct{} `xml:"rect"`
		Texts   []string   `xml:"text"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not SVG: %v", err)
	}
	// Two workloads, one direction each: three lines (p50, p99, max)
	// and a histogram's bars apiece, beside the frames.
	if len(doc.Lines) != 6 || len(doc.Rects) < 10 || !strings.Contains(strings.Join(doc.Texts, "|"), "randwrite, iodepth 8") {
		t.Errorf("plot has %d lines, %d rects; texts %q", len(doc.Lines), len(doc.Rects), doc.Texts)
	}
	html := filepath.Join(dir, "b.html")
	if _, errOut, code := s.nfsRun(t, "bench", "--runtime", "200ms", "--bs", "4k", "--size", "1m", "--rw", "read", "--plot", html, "127.0.0.1:/export"); code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	if b, _ := os.ReadFile(html); !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("the HTML page: %.80q", b)
	}
	if _, _, code := s.nfsRun(t, "bench", "--plot", filepath.Join(dir, "b.png"), "127.0.0.1:/export"); code != 2 {
		t.Errorf("--plot b.png: exit %d, want 2", code)
	}
}
