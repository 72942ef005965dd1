package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// These tests build the command and run it as a user would.

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rpcrdma-cmd-test")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "rpcrdma")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running `rpcrdma serve`.
type server struct {
	cmd     *exec.Cmd
	addr    string
	metrics string
	mu      sync.Mutex
	log     bytes.Buffer
	exited  chan error
}

var (
	listeningRE = regexp.MustCompile(`listening on (\S+)`)
	metricsRE   = regexp.MustCompile(`metrics on http://(\S+)/metrics`)
)

// startServe runs `rpcrdma serve --listen 127.0.0.1:0 args...` and waits
// for it to log its address. It is killed at cleanup if still running.
func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	s := &server{exited: make(chan error, 1)}
	s.cmd = exec.Command(binPath, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-level", "debug"}, args...)...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			if m := metricsRE.FindStringSubmatch(line); m != nil {
				s.metrics = m[1]
			}
			if m := listeningRE.FindStringSubmatch(line); m != nil && !once {
				s.addr = strings.Trim(m[1], `"`)
				once = true
				close(ready)
			}
			s.mu.Unlock()
		}
		s.exited <- s.cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-s.exited:
		t.Fatalf("serve exited before listening: %v\n%s", err, s.logText())
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		t.Fatalf("serve did not log its address\n%s", s.logText())
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
	})
	return s
}

// waitCalls waits until the metrics of s (started with --metrics) count
// at least n calls of the procedure named proc, for at most 30 seconds: a
// call is counted as its handler starts.
func (s *server) waitCalls(t *testing.T, proc string, n int) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^rpcrdma_calls_total\{proc="` + regexp.QuoteMeta(proc) + `"\} ([0-9]+)$`)
	deadline := time.Now().Add(30 * time.Second)
	for got := 0; ; {
		s.mu.Lock()
		maddr := s.metrics
		s.mu.Unlock()
		if maddr != "" {
			resp, err := http.Get("http://" + maddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if m := re.FindSubmatch(body); m != nil {
				got, _ = strconv.Atoi(string(m[1]))
			}
			if got >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s calls started within 30 s, want %d (metrics at %q)\n%s", got, proc, n, maddr, s.logText())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// rpcrdmaCmd runs the command and returns stdout, stderr and the exit code.
func rpcrdmaCmd(t *testing.T, timeout time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

func TestHelp(t *testing.T) {
	for _, c := range []string{"serve", "ping", "bench", "trace"} {
		_, errOut, code := rpcrdmaCmd(t, 10*time.Second, c, "--help")
		if code != 0 || !strings.Contains(errOut, "usage: rpcrdma "+c) {
			t.Errorf("%s --help: exit %d\n%s", c, code, errOut)
		}
	}
	out, _, code := rpcrdmaCmd(t, 10*time.Second, "help")
	if code != 0 || !strings.Contains(out, "bench") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
	if _, errOut, code := rpcrdmaCmd(t, 10*time.Second, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d\n%s", code, errOut)
	}
	if _, _, code := rpcrdmaCmd(t, 10*time.Second, "ping", "--bogus"); code != 2 {
		t.Errorf("bad flag: exit %d", code)
	}
	if _, errOut, code := rpcrdmaCmd(t, 10*time.Second, "bench", "--rounds", "0"); code == 0 || !strings.Contains(errOut, "--rounds 0") {
		t.Errorf("bench --rounds 0: exit %d\n%s", code, errOut)
	}
}

func TestServePing(t *testing.T) {
	s := startServe(t)
	out, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "2", "--interval", "1ms", s.addr)
	if code != 0 {
		t.Fatalf("ping: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"connected to", "rpc-over-rdma version 1", "mpa revision 2", "peer private data: RFC 8797",
		"inline: send 4096 bytes, receive 4096 bytes", "credits granted: ", "remote invalidation: on", "NULL 2:", "2 calls:"} {
		if !strings.Contains(out, want) {
			t.Errorf("ping output lacks %q:\n%s", want, out)
		}
	}
}

func TestPingVersionFallback(t *testing.T) {
	s := startServe(t, "--rpcrdma-version", "1")
	out, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--rpcrdma-version", "2", "--count", "1", s.addr)
	if code != 0 || !strings.Contains(out, "rpc-over-rdma version 1") {
		t.Fatalf("ping v2 to a v1 server: exit %d\n%s\n%s", code, out, errOut)
	}
	s2 := startServe(t)
	out, errOut, code = rpcrdmaCmd(t, 20*time.Second, "ping", "--rpcrdma-version", "2", "--count", "1", s2.addr)
	if code != 0 || !strings.Contains(out, "rpc-over-rdma version 2") {
		t.Fatalf("ping v2 to a v2 server: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestPingErrors(t *testing.T) {
	// Nothing listens on port 1 of loopback.
	_, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "1", "127.0.0.1:1")
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "rpcrdma ping: ") {
		t.Fatalf("ping to a closed port: exit %d, want 1 and one line:\n%s", code, errOut)
	}
	// A program the server does not serve.
	s := startServe(t)
	_, errOut, code = rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "1", "--prog", "100003", "--vers", "3", s.addr)
	if code != 1 || !strings.Contains(errOut, "PROG_UNAVAIL") {
		t.Fatalf("ping to an unserved program: exit %d\n%s", code, errOut)
	}
	// A TCP server that does not speak MPA.
	if _, errOut, code = rpcrdmaCmd(t, 30*time.Second, "ping", "--count", "1", "--timeout", "2s", s.metricsOrPlainTCP(t)); code != 1 {
		t.Fatalf("ping to a non-RDMA server: exit %d\n%s", code, errOut)
	}
}

// metricsOrPlainTCP returns the address of a TCP server that answers with
// something other than MPA: an HTTP server.
func (s *server) metricsOrPlainTCP(t *testing.T) string {
	t.Helper()
	srv := startServe(t, "--metrics", "127.0.0.1:0")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		srv.mu.Lock()
		a := srv.metrics
		srv.mu.Unlock()
		if a != "" {
			return a
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no metrics address logged\n%s", srv.logText())
	return ""
}

type benchOutput struct {
	Results []benchResult `json:"results"`
}

func checkBench(t *testing.T, out string, wantTransports ...string) benchOutput {
	t.Helper()
	var b benchOutput
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("bench --json output does not parse: %v\n%s", err, out)
	}
	var raw map[string][]map[string]any
	json.Unmarshal([]byte(out), &raw)
	for _, r := range raw["results"] {
		for _, k := range []string{"transport", "op", "size", "outstanding", "ops_per_sec", "mb_per_sec", "p50_us", "p99_us", "allocs_per_op", "cpu_us_per_op"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("result %v lacks key %q", r, k)
			}
		}
	}
	seen := map[string]bool{}
	for _, r := range b.Results {
		seen[r.Transport] = true
		if r.OpsPerSec <= 0 || r.Ops <= 0 || r.P50us <= 0 || r.P99us < r.P50us {
			t.Errorf("implausible result %+v", r)
		}
		if _, ok := processCPU(); ok && r.CPUusPerOp <= 0 {
			t.Errorf("%s %s x%d: cpu %.1f µs/op where getrusage reports it", r.Transport, r.Op, r.Outstanding, r.CPUusPerOp)
		}
	}
	for _, tr := range wantTransports {
		if !seen[tr] {
			t.Errorf("no %s results in %s", tr, out)
		}
	}
	return b
}

func TestBenchJSON(t *testing.T) {
	out, errOut, code := rpcrdmaCmd(t, 120*time.Second, "bench", "--duration", "60ms", "--rounds", "2", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s", code, errOut)
	}
	b := checkBench(t, out, "rawtcp", "tcp", "rdma", "rdma+crc")
	// The process's CPU time per operation is no more than every CPU
	// busy for as long as the operations took: a case's time measured is
	// its operations' own, back to back here; an alternated case's CPU
	// time counts the whole turn, of up to five operations.
	if _, ok := processCPU(); ok {
		for _, r := range b.Results {
			limit := 1.5 * float64(runtime.NumCPU()) * 1e6 / r.OpsPerSec
			if strings.HasSuffix(r.Op, alternatedSuffix) {
				limit *= 8
			}
			if r.CPUusPerOp > limit {
				t.Errorf("%s %s x%d: cpu %.1f µs/op, more than %.1f", r.Transport, r.Op, r.Outstanding, r.CPUusPerOp, limit)
			}
		}
	}
	ops := map[string]bool{}
	cases := map[string]int{}
	for _, r := range b.Results {
		if r.Transport == "rdma" {
			ops[r.Op] = true
		}
		if r.Transport == "rdma+crc" && (r.Size != 1<<20 || !strings.HasPrefix(r.Op, "WRITE") && !strings.HasPrefix(r.Op, "READ")) {
			t.Errorf("an rdma+crc case other than the 1 MiB WRITE and READ: %+v", r)
		}
		cases[fmt.Sprintf("%s %s %d x%d", r.Transport, r.Op, r.Size, r.Outstanding)]++
	}
	for c, n := range cases {
		if n != 1 {
			t.Errorf("case %s reported %d times, want once over both rounds", c, n)
		}
	}
	for _, op := range []string{"NULL", "WRITE", "READ", "LIST", "ECHO"} {
		if !ops[op] {
			t.Errorf("no rdma %s case", op)
		}
	}
	for _, c := range []string{"rawtcp pingpong-alternated 64 x1", "rdma NULL-alternated 0 x1", "tcp NULL-alternated 0 x1",
		"rawtcp bulk-alternated 1048576 x1", "rdma WRITE-alternated 1048576 x1", "rdma READ-alternated 1048576 x1",
		"rdma+crc WRITE-alternated 1048576 x1", "rdma+crc READ-alternated 1048576 x1"} {
		if cases[c] != 1 {
			t.Errorf("case %s reported %d times, want once", c, cases[c])
		}
	}
	var rats struct {
		Ratios []benchRatio `json:"ratios"`
	}
	json.Unmarshal([]byte(out), &rats)
	found := 0
	for _, r := range rats.Ratios {
		if strings.HasSuffix(r.Name, ", alternated") {
			found++
			if r.Median <= 0 || r.Runs != 1 {
				t.Errorf("ratio %+v", r)
			}
		}
	}
	if found != 6 {
		t.Errorf("%d alternated ratios, want 6: %+v", found, rats.Ratios)
	}
}

func TestServeBenchConnect(t *testing.T) {
	s := startServe(t)
	out, errOut, code := rpcrdmaCmd(t, 120*time.Second, "bench", "--connect", s.addr, "--duration", "50ms", "--json")
	if code != 0 {
		t.Fatalf("bench --connect: exit %d\n%s", code, errOut)
	}
	b := checkBench(t, out, "rdma")
	for _, r := range b.Results {
		if r.Transport != "rdma" {
			t.Errorf("--connect ran a %s case", r.Transport)
		}
	}
	// The table form, too.
	out, errOut, code = rpcrdmaCmd(t, 120*time.Second, "bench", "--connect", s.addr, "--duration", "20ms")
	if code != 0 || !strings.Contains(out, "ops/s") || !strings.Contains(out, "WRITE") {
		t.Fatalf("bench table: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestGracefulShutdown stops the server with SIGTERM while calls are in
// flight: every call completes, then the process exits 0.
func TestGracefulShutdown(t *testing.T) {
	s := startServe(t, "--metrics", "127.0.0.1:0")
	p, err := iwarp.New(iwarp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := rpcrdma.Dial(ctx, p, s.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := benchprog.Client{C: rpc.NewClient(conn)}
	defer cli.C.Close()
	if err := cli.Null(ctx); err != nil { // settle the credits first
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() { errs <- cli.Sleep(ctx, 500*time.Millisecond) }()
	}
	s.waitCalls(t, "SLEEP", n) // every call in its handler
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("in-flight call lost in shutdown: %v\n%s", err, s.logText())
		}
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, s.logText())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM\n%s", s.logText())
	}
	if !strings.Contains(s.logText(), "stopped") {
		t.Errorf("no stop message:\n%s", s.logText())
	}
}

func TestMetrics(t *testing.T) {
	s := startServe(t, "--metrics", "127.0.0.1:0")
	if _, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "3", "--interval", "1ms", s.addr); code != 0 {
		t.Fatalf("ping: %s", errOut)
	}
	if _, errOut, code := rpcrdmaCmd(t, 60*time.Second, "bench", "--connect", s.addr, "--duration", "20ms"); code != 0 {
		t.Fatalf("bench: %s", errOut)
	}
	s.mu.Lock()
	addr := s.metrics
	s.mu.Unlock()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`rpcrdma_calls_total\{proc="NULL"\} [1-9]`),
		regexp.MustCompile(`rpcrdma_calls_total\{proc="WRITE"\} [1-9]`),
		regexp.MustCompile(`rpcrdma_data_path_total\{path="read_chunk"\} [1-9]`),
		regexp.MustCompile(`rpcrdma_data_path_total\{path="write_chunk"\} [1-9]`),
		regexp.MustCompile(`rpcrdma_data_path_total\{path="reply_chunk"\} [1-9]`),
		regexp.MustCompile(`rpcrdma_bytes_total\{chunk="read"\} [1-9]`),
		regexp.MustCompile(`rpcrdma_connections_total ([2-9]|[1-9]\d+)\n`),
		regexp.MustCompile(`rpcrdma_errors_sent_total\{code="ERR_CHUNK"\} 0`),
		regexp.MustCompile(`rpcrdma_iwarp_terminates_total\{direction="sent"\} 0`),
		regexp.MustCompile(`rpcrdma_registered_bytes \d`),
		regexp.MustCompile(`rpcrdma_credits_granted \d`),
	} {
		if !want.MatchString(text) {
			t.Errorf("metrics lack %v", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

// TestPingKnfsd pings Linux knfsd over soft-iWARP in the lab VM (the
// repository's lab/ folder), in Version One and in Version Two falling back
// to One. It skips when the VM is not running.
func TestPingKnfsd(t *testing.T) {
	lab.Require(t)
	for _, v := range []string{"1", "2"} {
		out, errOut, code := rpcrdmaCmd(t, 60*time.Second, "ping", "--prog", "100003", "--vers", "3", "--rpcrdma-version", v, "--count", "2", "--interval", "1ms", "--first-send-delay", "50ms", lab.KnfsdAddr)
		if code != 0 {
			t.Fatalf("ping knfsd with --rpcrdma-version %s: exit %d\n%s\n%s", v, code, out, errOut)
		}
		for _, want := range []string{"rpc-over-rdma version 1", "peer private data: RFC 8797", "inline: send 4096 bytes, receive 4096 bytes", "NULL 2:"} {
			if !strings.Contains(out, want) {
				t.Errorf("--rpcrdma-version %s: output lacks %q:\n%s", v, want, out)
			}
		}
		if v == "2" && !strings.Contains(errOut, "falling back to version 1") {
			t.Errorf("no fallback logged:\n%s", errOut)
		}
	}
}

// TestPingReconnect kills the server while ping --reconnect runs and
// starts another on the same address: ping connects again, says so, and
// every call succeeds.
func TestPingReconnect(t *testing.T) {
	s1 := startServe(t, "--metrics", "127.0.0.1:0")
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := rpcrdmaCmd(t, 30*time.Second, "ping", "--reconnect", "--count", "10", "--interval", "100ms", s1.addr)
		done <- result{out, errOut, code}
	}()
	s1.waitCalls(t, "NULL", 1) // ping is connected: cut it off
	s1.cmd.Process.Kill()
	err := <-s1.exited
	s1.exited <- err // for the cleanup
	s2 := startServe(t, "--listen", s1.addr)
	r := <-done
	if r.code != 0 {
		t.Fatalf("ping --reconnect across a restart: exit %d\n%s\n%s\nserver:\n%s", r.code, r.out, r.errOut, s2.logText())
	}
	for _, want := range []string{"connection lost; connected again", "NULL 10:", "10 calls:"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("ping output lacks %q:\n%s", want, r.out)
		}
	}
	if n := strings.Count(r.out, "connected to "); n != 2 {
		t.Errorf("negotiation printed %d times, want 2:\n%s", n, r.out)
	}
}

// TestProviderFlag: --provider names iwarp or verbs; verbs in a build
// without it, an unknown name, --device and --busy-poll without verbs fail
// at once with one line saying why.
func TestProviderFlag(t *testing.T) {
	cases := [][]string{
		{"ping", "--provider", "ib", "127.0.0.1:1"},
		{"ping", "--device", "rxe0", "127.0.0.1:1"},
		{"serve", "--busy-poll", "-1ns", "--listen", "127.0.0.1:0"},
	}
	if !verbs.Available {
		cases = append(cases, []string{"serve", "--provider", "verbs", "--listen", "127.0.0.1:0"})
	}
	for _, args := range cases {
		_, errOut, code := rpcrdmaCmd(t, 20*time.Second, args...)
		if code != 2 && code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "--") {
			t.Errorf("%v: exit %d, want a one-line usage error:\n%s", args, code, errOut)
		}
		if args[2] == "verbs" && !strings.Contains(errOut, "-tags verbs") {
			t.Errorf("%v does not say how to build the verbs provider:\n%s", args, errOut)
		}
	}
}

// TestBenchGap: --gap sleeps before each operation of the cases with one
// outstanding, and only of those: in a 100 ms slice with a 2 ms gap such
// a case makes at most 50 operations, the NULL with 32 outstanding many
// more. A negative gap is a usage error.
func TestBenchGap(t *testing.T) {
	out, errOut, code := rpcrdmaCmd(t, 120*time.Second, "bench", "--gap", "2ms", "--duration", "100ms", "--rounds", "1", "--json")
	if code != 0 {
		t.Fatalf("bench --gap: exit %d\n%s", code, errOut)
	}
	b := checkBench(t, out, "rawtcp", "tcp", "rdma")
	for _, r := range b.Results {
		switch {
		case r.Outstanding == 1 && r.Ops > 50:
			t.Errorf("%s %s %d x1: %d operations in 100 ms with a 2 ms gap before each", r.Transport, r.Op, r.Size, r.Ops)
		case r.Transport == "rdma" && r.Op == "NULL" && r.Outstanding == 32 && r.Ops <= 50:
			t.Errorf("rdma NULL x32: %d operations in 100 ms: the gap slowed a case with 32 outstanding", r.Ops)
		}
	}
	if _, errOut, code := rpcrdmaCmd(t, 10*time.Second, "bench", "--gap", "-1s"); code != 2 || !strings.Contains(errOut, "--gap") {
		t.Errorf("bench --gap -1s: exit %d\n%s", code, errOut)
	}
}
