package main

import (
	"bytes"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestNFSProbeExitStatus: probe prints every step and exits 1 if any
// failed, 0 only when all succeeded; the versions it asks only to learn
// what the server offers are no failure when they are not offered.
func TestNFSProbeExitStatus(t *testing.T) {
	s := startNFSServe(t)
	probe := func(args ...string) (string, string, int) {
		t.Helper()
		return rpcrdmaCmd(t, 30*time.Second, append([]string{"nfs", "probe", "--transport", "tcp", "--nfs-port", s.tcpPort}, args...)...)
	}

	out, errOut, code := probe("127.0.0.1")
	if code != 0 || !regexp.MustCompile(`NFS NULL v4 .* not offered \(the server has version 3\)`).MatchString(out) || strings.Contains(out, "error:") {
		t.Errorf("probe of a working server: exit %d, want 0\n%s%s", code, out, errOut)
	}

	// An export that does not mount: every step printed, exit 1, and
	// the failed step named.
	out, errOut, code = probe("--export", "/nope", "127.0.0.1")
	if code != 1 || !strings.Contains(out, "NFS NULL v3") || !regexp.MustCompile(`MNT /nope .* error: .*MNT3ERR_NOENT`).MatchString(out) ||
		!strings.Contains(errOut, "1 of the probe's steps failed: MNT /nope") {
		t.Errorf("probe of a missing export: exit %d, want 1\n%s%s", code, out, errOut)
	}

	// NFS over TCP at the RDMA port, whose software iWARP hangs up on
	// what is not an MPA request.
	out, errOut, code = rpcrdmaCmd(t, 30*time.Second, "nfs", "probe", "--transport", "tcp", "--nfs-port", s.rdmaPort, "--mount-port", s.tcpPort, "127.0.0.1")
	if code != 1 || !strings.Contains(out, "NFS NULL v3") || !strings.Contains(out, "the peer closed it") {
		t.Errorf("probe of NFS over TCP at the RDMA port: exit %d, want 1\n%s%s", code, out, errOut)
	}
}

// TestNFSProbeNotNFS: a server without NFS answers PROG_UNAVAIL, which
// probe prints in words, and exits 1.
func TestNFSProbeNotNFS(t *testing.T) {
	srv := startServe(t) // the bench program over the software iWARP
	_, port, _ := net.SplitHostPort(srv.addr)
	out, errOut, code := rpcrdmaCmd(t, 30*time.Second, "nfs", "probe", "--nfs-port", port, "--mount-port", "1", "--export", "/export", "127.0.0.1")
	want := regexp.MustCompile(`NFS NULL v3 .* error: rpc: call 0x[0-9a-f]+: the server does not offer program 100003 \(PROG_UNAVAIL\)`)
	if code != 1 || !want.MatchString(out) {
		t.Errorf("probe of a server without NFS: exit %d, want 1 and %v\n%s%s", code, want, out, errOut)
	}
}

// TestNFSProbeHTTP: probe pointed at an HTTP server says the address is
// not an RPC server.
func TestNFSProbeHTTP(t *testing.T) {
	addr := httpAnswerer(t)
	_, port, _ := net.SplitHostPort(addr)
	out, errOut, code := rpcrdmaCmd(t, 30*time.Second, "nfs", "probe", "--transport", "tcp", "--nfs-port", port, "127.0.0.1")
	want := addr + " is not an RPC server (it answered with HTTP)"
	if code != 1 || !regexp.MustCompile(`MOUNT NULL \(tcp\) .* error: .*`+regexp.QuoteMeta(want)).MatchString(out) {
		t.Errorf("probe of an HTTP server: exit %d, want 1 and %q\n%s%s", code, want, out, errOut)
	}
}

// httpAnswerer listens on loopback and answers whatever each connection
// sends with an HTTP 400, as an HTTP server does a request it cannot
// parse. It returns the address.
func httpAnswerer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.Read(make([]byte, 4096))
				io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request")
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String()
}

// TestNFSWrongTransport: ls with NFS over TCP pointed at the RDMA port,
// whose software iWARP hangs up on each connection, fails at once saying
// so, instead of redialing until --timeout.
func TestNFSWrongTransport(t *testing.T) {
	s := startNFSServe(t)
	start := time.Now()
	_, errOut, code := rpcrdmaCmd(t, 60*time.Second, "nfs", "ls", "--transport", "tcp", "--nfs-port", s.rdmaPort, "--mount-port", s.tcpPort, "--timeout", "30s", "127.0.0.1:/export")
	want := regexp.MustCompile(regexp.QuoteMeta("127.0.0.1:"+s.rdmaPort) + ` keeps closing the connection before answering: closed \d+ connections in a row`)
	if code != 1 || !want.MatchString(errOut) {
		t.Errorf("ls over TCP at the RDMA port: exit %d, want 1 and %v\n%s", code, want, errOut)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("ls took %v to fail", d)
	}
}

// silentListener listens on loopback and reads whatever each connection
// sends without ever answering, as a hung server does. It returns the
// port.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(60 * time.Second))
				io.Copy(io.Discard, c)
			})
		}
	}()
	t.Cleanup(func() { l.Close(); <-done; conns.Wait() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// TestNFSProbeSilentServer: each step of probe has --timeout of its own,
// so a step after one the server left unanswered still runs (MNT, from
// a MOUNT server that answers); and SIGINT stops the probe at once, exit
// 130, with the steps it finished printed.
func TestNFSProbeSilentServer(t *testing.T) {
	s := startNFSServe(t)
	silent := silentListener(t)
	start := time.Now()
	out, errOut, code := rpcrdmaCmd(t, 60*time.Second, "nfs", "probe", "--transport", "tcp", "--nfs-port", silent, "--mount-port", s.tcpPort, "--timeout", "500ms", "127.0.0.1")
	if code != 1 || !regexp.MustCompile(`(?m)^NFS NULL v3 .* error: context deadline exceeded$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^MNT /export +\S+  handle \d+ bytes$`).MatchString(out) {
		t.Errorf("probe of a silent NFS server: exit %d\n%s%s", code, out, errOut)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("probe took %v", d)
	}

	cmd := exec.Command(binPath, "nfs", "probe", "--transport", "tcp", "--nfs-port", silent, "--mount-port", s.tcpPort, "127.0.0.1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	time.Sleep(time.Second) // into NFS NULL v2, which the server never answers
	cmd.Process.Signal(syscall.SIGINT)
	sent := time.Now()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatal("probe did not stop within 10 s of SIGINT")
	}
	if d := time.Since(sent); d > 2*time.Second || cmd.ProcessState.ExitCode() != 130 ||
		!strings.Contains(stdout.String(), "MOUNT EXPORT") || !strings.Contains(stderr.String(), "rpcrdma nfs probe: stopped by interrupt") {
		t.Errorf("probe after SIGINT: exit %d after %v\n%s%s", cmd.ProcessState.ExitCode(), d, stdout.String(), stderr.String())
	}
}
