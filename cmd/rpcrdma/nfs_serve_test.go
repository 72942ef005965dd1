package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// loggedNFSServer is a running `rpcrdma nfs serve --log-level debug
// --metrics 127.0.0.1:0` whose log the test reads.
type loggedNFSServer struct {
	dir, tcpPort, rdmaPort, metrics string
	cmd                             *exec.Cmd
	exited                          chan struct{} // closed once cmd has exited
	mu                              sync.Mutex
	log                             strings.Builder
}

func (s *loggedNFSServer) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// waitLog waits until the log matches re, failing the test after 10 s.
func (s *loggedNFSServer) waitLog(t *testing.T, re string) {
	t.Helper()
	r := regexp.MustCompile(re)
	for deadline := time.Now().Add(10 * time.Second); !r.MatchString(s.logText()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not match %s:\n%s", re, s.logText())
		}
	}
}

func startLoggedNFSServe(t *testing.T, args ...string) *loggedNFSServer {
	t.Helper()
	s := &loggedNFSServer{dir: t.TempDir()}
	cmd := exec.Command(binPath, append(append([]string{"nfs", "serve", "--tcp", "127.0.0.1:0", "--rdma", "127.0.0.1:0", "--log-level", "debug", "--metrics", "127.0.0.1:0"}, args...), s.dir)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	s.waitLog(t, nfsListeningRE.String())
	text := s.logText()
	m := nfsListeningRE.FindStringSubmatch(text)
	s.tcpPort, s.rdmaPort = m[1], m[2]
	s.metrics = metricsRE.FindStringSubmatch(text)[1]
	return s
}

// TestNFSServeWatchable: nfs serve logs connections (opened, closed, and
// refused for speaking HTTP) and mounts at Info level, failed calls at
// Debug level with procedure and status, says read-only in its start
// line, and serves per-procedure metrics.
func TestNFSServeWatchable(t *testing.T) {
	s := startLoggedNFSServe(t, "--ro")
	os.WriteFile(filepath.Join(s.dir, "hello.txt"), []byte("hello, nfs\n"), 0o644)
	if !regexp.MustCompile(`nfs: serving .* as /export \(read-only\); tcp 127\.0\.0\.1:\d+ \(NFS, MOUNT\); rdma`).MatchString(s.logText()) {
		t.Errorf("the start line does not say read-only:\n%s", s.logText())
	}
	for _, tr := range []string{"tcp", "rdma"} {
		port := s.rdmaPort
		if tr == "tcp" {
			port = s.tcpPort
		}
		out, errOut, code := rpcrdmaCmd(t, 30*time.Second, "nfs", "cat", "--transport", tr, "--nfs-port", port, "--mount-port", s.tcpPort, "127.0.0.1:/export/hello.txt")
		if code != 0 || out != "hello, nfs\n" {
			t.Fatalf("cat over %s: exit %d %q %s", tr, code, out, errOut)
		}
		s.waitLog(t, `level=INFO msg="nfs: connection opened" transport=`+tr+` remote=127\.0\.0\.1:\d+`)
		s.waitLog(t, `level=INFO msg="nfs: connection closed by the peer" transport=`+tr+` remote=127\.0\.0\.1:\d+ duration=`)
	}
	// The RPC-over-RDMA version logged is the one the client's calls
	// came in (the command's client speaks version 1), not the highest
	// the server serves.
	s.waitLog(t, `msg="nfs: connection closed by the peer" transport=rdma remote=\S+ duration=\S+ rpcrdma_version=1\b`)
	s.waitLog(t, `level=INFO msg="nfs: mounted" path=/export client=\S+ uid=0`)

	_, errOut, code := rpcrdmaCmd(t, 30*time.Second, "nfs", "cat", "--transport", "tcp", "--nfs-port", s.tcpPort, "127.0.0.1:/export/missing")
	if code != 1 || !strings.Contains(errOut, "NFS3ERR_NOENT") {
		t.Fatalf("cat of a missing file: exit %d %s", code, errOut)
	}
	s.waitLog(t, `level=DEBUG msg="nfs: call failed" proc=LOOKUP status=NFS3ERR_NOENT xid=0x[0-9a-f]+`)

	// An HTTP client at the NFS port.
	c, err := net.Dial("tcp", "127.0.0.1:"+s.tcpPort)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, c) // until the server closes
	c.Close()
	s.waitLog(t, `level=INFO msg="nfs: connection rejected" transport=tcp remote=\S+ duration=\S+ err=".*is not an RPC client \(it sent an HTTP request\)"`)

	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metric := func(name string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Errorf("no %s in the metrics", name)
			return 0
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	if n := metric(`rpcrdma_nfs_calls_total{proc="LOOKUP"}`); n < 3 {
		t.Errorf("%v LOOKUPs counted, want 3 or more", n)
	}
	if n := metric(`rpcrdma_nfs_call_duration_seconds_count{proc="READ"}`); n < 2 {
		t.Errorf("%v READs timed, want 2 or more", n)
	}
	if v := metric(`rpcrdma_nfs_call_duration_seconds_sum{proc="READ"}`); v <= 0 {
		t.Errorf("READ latency sum %v", v)
	}
	if n := metric(`rpcrdma_nfs_call_duration_seconds_bucket{proc="READ",le="+Inf"}`); n < 2 {
		t.Errorf("READ +Inf bucket %v", n)
	}
	if n := metric(`rpcrdma_nfs_errors_total{status="NFS3ERR_NOENT"}`); n < 1 {
		t.Errorf("%v NFS3ERR_NOENT counted", n)
	}
	if n := metric(`rpcrdma_nfs_tcp_connections_total`); n < 3 {
		t.Errorf("%v TCP connections counted", n)
	}
	if n := metric(`rpcrdma_connections_total`); n < 1 {
		t.Errorf("%v RDMA connections counted", n)
	}
	if !strings.Contains(string(body), "# TYPE rpcrdma_nfs_call_duration_seconds histogram") {
		t.Error("no histogram TYPE line")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
}

// TestNFSServeShutdown: on SIGTERM nfs serve closes the TCP connection a
// client keeps open, logs it closed by the server, takes it off the
// open connections' gauge, and exits 0 once it has logged it.
func TestNFSServeShutdown(t *testing.T) {
	s := startLoggedNFSServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := rpc.DialTCP(ctx, "127.0.0.1:"+s.tcpPort, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := rpc.NewClient(tr)
	defer cli.Close()
	if err := cli.Null(ctx, nfs3.Program, nfs3.Version); err != nil {
		t.Fatal(err)
	}
	s.waitLog(t, `level=INFO msg="nfs: connection opened" transport=tcp remote=127\.0\.0\.1:\d+`)
	if body := s.metricsText(t); !regexp.MustCompile(`(?m)^rpcrdma_nfs_tcp_connections 1$`).MatchString(body) {
		t.Errorf("with one TCP connection open, the metrics say:\n%s", body)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("nfs serve did not exit after SIGTERM:\n%s", s.logText())
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("nfs serve exited %d after SIGTERM:\n%s", code, s.logText())
	}
	s.waitLog(t, `level=INFO msg="nfs: connection closed by the server" transport=tcp remote=127\.0\.0\.1:\d+ duration=\S+\n(.*\n)*.*msg=stopped calls=1\b`)
}

// metricsText returns what s serves at /metrics.
func (s *loggedNFSServer) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
