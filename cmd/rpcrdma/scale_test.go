package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// Many connections to `rpcrdma serve` and `rpcrdma nfs serve`, each
// started with its defaults in a process of its own, opened from this
// one over the software iWARP: what an idle connection costs the
// server's resident memory, and what the idle ones cost the busy.

// scalePerHost is how many connections come from each loopback source
// address (127.0.0.2, ...): fewer than rpcrdma.DefaultMaxConnsPerAddr.
const scalePerHost = 1000

// scaleServer is a server command running in a child process.
type scaleServer struct {
	cmd     *exec.Cmd
	addr    string // its RPC-over-RDMA address
	metrics string // its metrics address
	exited  chan error
	prog    uint32 // the program NULL calls go to
	vers    uint32
}

// startScaleServer runs the command binary with args, which ask for
// metrics, and waits for addrRE's first submatch in its log.
func startScaleServer(b *testing.B, addrRE *regexp.Regexp, args ...string) *scaleServer {
	b.Helper()
	s := &scaleServer{exited: make(chan error, 1)}
	s.cmd = exec.Command(binPath, args...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ready := make(chan struct{})
	var log strings.Builder
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			if log.Len() < 1<<16 {
				log.WriteString(sc.Text() + "\n")
			}
			if m := metricsRE.FindStringSubmatch(sc.Text()); m != nil {
				s.metrics = m[1]
			}
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil && s.addr == "" {
				s.addr = strings.Trim(m[1], `"`)
				close(ready)
			}
			mu.Unlock()
		}
		s.exited <- s.cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-s.exited:
		b.Fatalf("%s exited before listening: %v\n%s", args[0], err, log.String())
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		b.Fatalf("%s did not log its address in 30 s", args[0])
	}
	// The metrics line comes before the listening line in nfs serve's
	// log and after it in serve's.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		m := s.metrics
		mu.Unlock()
		if m != "" {
			break
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			b.Fatalf("%s did not log its metrics address in 10 s", args[0])
		}
	}
	b.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return s
}

// rss returns the server's resident set (VmRSS) in bytes.
func (s *scaleServer) rss(b *testing.B) int64 {
	b.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("reading the server's memory: %v", err)
	}
	m := regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB$`).FindSubmatch(st)
	if m == nil {
		b.Fatalf("no VmRSS line in the server's /proc status")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

var connsGaugeRE = regexp.MustCompile(`(?m)^rpcrdma_connections ([0-9]+)$`)

// conns returns the connections the server counts open.
func (s *scaleServer) conns(b *testing.B) int {
	b.Helper()
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		b.Fatalf("reading the server's metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := connsGaugeRE.FindSubmatch(body)
	if m == nil {
		b.Fatalf("no rpcrdma_connections gauge in the server's metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// waitConns waits, for at most two minutes, until the server counts n
// connections open.
func (s *scaleServer) waitConns(b *testing.B, n int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for got := s.conns(b); got != n; got = s.conns(b) {
		if time.Now().After(deadline) {
			b.Fatalf("the server counts %d connections open after two minutes, want %d", got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialScale opens the connections first to first+n-1 (numbered for their
// source address) to s and makes a NULL call on each. Idle connections
// ask for one credit, the busy ones for the default.
func dialScale(b *testing.B, s *scaleServer, first, n int, busy bool) []*rpc.Client {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	providers := map[int]*iwarp.Provider{}
	for i := first; i < first+n; i++ {
		h := i / scalePerHost
		if providers[h] == nil {
			p, err := iwarp.New(iwarp.Options{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(h>>8), byte(2+h))}})
			if err != nil {
				b.Fatal(err)
			}
			providers[h] = p
		}
	}
	cfg := &rpcrdma.Config{Credits: 1}
	if busy {
		cfg = nil
	}
	clients := make([]*rpc.Client, n)
	var failed atomic.Int64
	var firstErr atomic.Value
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				conn, err := rpcrdma.Dial(ctx, providers[(first+i)/scalePerHost], s.addr, cfg)
				if err == nil {
					clients[i] = rpc.NewClient(conn)
					err = clients[i].Null(ctx, s.prog, s.vers)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		closeScale(clients)
		b.Fatalf("%d of %d connections failed to connect or to answer a NULL; the first: %v", f, n, firstErr.Load())
	}
	return clients
}

func closeScale(clients []*rpc.Client) {
	for _, c := range clients {
		if c != nil {
			c.Close()
		}
	}
}

// busyRun makes calls NULL calls on clients, one outstanding on each,
// and returns the calls per second and the server's CPU time per call.
func busyRun(b *testing.B, s *scaleServer, clients []*rpc.Client, calls int) (perSec float64, cpu time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	cpu0 := s.cpu(b)
	start := time.Now()
	for _, c := range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(calls) {
				if err := c.Null(ctx, s.prog, s.vers); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("a busy connection's NULL failed: %v", err)
	}
	return float64(calls) / time.Since(start).Seconds(), (s.cpu(b) - cpu0) / time.Duration(calls)
}

// cpu returns the CPU time the server has used, user and system, from
// /proc/PID/stat (proc(5)), in clock ticks of 10 ms.
func (s *scaleServer) cpu(b *testing.B) time.Duration {
	b.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("reading the server's CPU time: %v", err)
	}
	// The fields after the command name, which ends with the last ')':
	// state is the first, utime the 12th, stime the 13th.
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("the server's /proc stat has %d fields after its name", len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st2, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st2) * 10 * time.Millisecond
}

// scaleCount returns RPCRDMA_CONNS (default 10,000; 1,000 with -short).
func scaleCount(b *testing.B) int {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	if v := os.Getenv("RPCRDMA_CONNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 200 || n > 60000 {
			b.Fatalf("RPCRDMA_CONNS=%q: want a number from 200 to 60000", v)
		}
	}
	return n
}

// raiseFileLimit raises this process's open file limit to its hard
// limit (the children inherit it) and skips b if that is below need.
func raiseFileLimit(b *testing.B, need uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("reading the open file limit: %v", err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("raising the open file limit: %v", err)
	}
	if uint64(lim.Cur) < need { // int64 on FreeBSD
		b.Skipf("the open file limit is %d; %d connections need %d (ulimit -Hn)", lim.Cur, need-200, need)
	}
}

// BenchmarkIdleConnections opens RPCRDMA_CONNS connections (default
// 10,000; 1,000 with -short) over the software iWARP to `rpcrdma serve`
// and to `rpcrdma nfs serve`, each started with its defaults in a child
// process, from this process and from as many loopback addresses as
// rpcrdma.DefaultMaxConnsPerAddr asks (127.0.0.2, ...), with a NULL
// answered on each. It reports the server's resident memory (VmRSS)
// per connection: what it grew by from before the first connection,
// over the connections. Then it makes NULL calls on 100 of them, one
// outstanding on each, RPCRDMA_BUSY_CALLS in all (default 100,000),
// with the others open and idle and then with them closed, in five
// rounds, and reports the median, lowest and highest of the rounds'
// throughput among the idle ones over the throughput alone, and the
// median of the server's CPU time per call among them over alone, which
// other processes on the machine move less than the throughput.
// RPCRDMA_SERVER_FLAGS adds flags to both servers' (--shared-receives 0,
// say). Run it with
//
//	go test -run '^$' -bench IdleConnections -benchtime 1x ./cmd/rpcrdma/
func BenchmarkIdleConnections(b *testing.B) {
	n := scaleCount(b)
	const busy, rounds = 100, 5
	calls := 100000
	if v := os.Getenv("RPCRDMA_BUSY_CALLS"); v != "" {
		var err error
		if calls, err = strconv.Atoi(v); err != nil || calls < busy {
			b.Fatalf("RPCRDMA_BUSY_CALLS=%q: want a number of at least %d", v, busy)
		}
	}
	extra := strings.Fields(os.Getenv("RPCRDMA_SERVER_FLAGS"))
	// This process holds a socket per connection, the server one more.
	raiseFileLimit(b, uint64(n)+200)
	for _, sc := range []struct {
		name       string
		addrRE     *regexp.Regexp
		args       func(extra []string, dir string) []string
		prog, vers uint32
	}{
		{"serve", listeningRE, func(extra []string, _ string) []string {
			return append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"}, extra...)
		}, benchprog.Prog, benchprog.Vers},
		{"nfs-serve", regexp.MustCompile(`rdma (\S+) \(NFS\)`), func(extra []string, dir string) []string {
			args := append([]string{"nfs", "serve", "--tcp", "", "--rdma", "127.0.0.1:0", "--metrics", "127.0.0.1:0"}, extra...)
			return append(args, dir)
		}, 100003, 3},
	} {
		b.Run(sc.name, func(b *testing.B) {
			for range b.N {
				s := startScaleServer(b, sc.addrRE, sc.args(extra, b.TempDir())...)
				s.prog, s.vers = sc.prog, sc.vers
				rss0 := s.rss(b)
				hot := dialScale(b, s, 0, busy, true)
				idle := dialScale(b, s, busy, n-busy, false)
				s.waitConns(b, n)
				time.Sleep(time.Second) // the accept path's garbage collected
				rss1 := s.rss(b)
				perConn := float64(rss1-rss0) / float64(n)
				b.Logf("%s: %d connections: server VmRSS %d KiB before, %d KiB after: %.1f KiB per connection",
					sc.name, n, rss0>>10, rss1>>10, perConn/1024)
				b.ReportMetric(perConn/1024, "server-KiB/conn")
				var ratios, cpuRatios []float64
				for r := range rounds {
					among, amongCPU := busyRun(b, s, hot, calls)
					closeScale(idle)
					s.waitConns(b, busy)
					alone, aloneCPU := busyRun(b, s, hot, calls)
					ratios = append(ratios, among/alone)
					cpuRatios = append(cpuRatios, float64(amongCPU)/float64(aloneCPU))
					b.Logf("%s: round %d: %d busy connections: %.0f calls/s among %d idle, %.0f alone: %.2f; server CPU per call %v among, %v alone: %.2f",
						sc.name, r, busy, among, n-busy, alone, among/alone, amongCPU, aloneCPU, cpuRatios[r])
					if r < rounds-1 {
						idle = dialScale(b, s, busy, n-busy, false)
						s.waitConns(b, n)
					}
				}
				closeScale(hot)
				slices.Sort(ratios)
				slices.Sort(cpuRatios)
				b.ReportMetric(ratios[len(ratios)/2], "busy-ratio-median")
				b.ReportMetric(ratios[0], "busy-ratio-min")
				b.ReportMetric(ratios[len(ratios)-1], "busy-ratio-max")
				b.ReportMetric(cpuRatios[len(cpuRatios)/2], "busy-cpu-ratio-median")
			}
		})
	}
}
