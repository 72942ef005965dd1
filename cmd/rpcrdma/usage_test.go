package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUsageErrors: a wrong flag value, a missing argument and an extra one
// all exit 2 with one line that says what is wrong.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "127.0.0.1:20049"}, `unexpected argument "127.0.0.1:20049": bench takes no arguments (to benchmark a server: --connect 127.0.0.1:20049)`},
		{[]string{"bench", "--connect", "127.0.0.1:1", "extra"}, `unexpected argument "extra"`},
		{[]string{"serve", "extra"}, `unexpected argument "extra": serve takes no arguments`},
		{[]string{"ping"}, "want one address"},
		{[]string{"ping", "127.0.0.1:1", "extra"}, `unexpected argument "extra"`},
		{[]string{"ping", "--timeout", "-1s", "127.0.0.1:1"}, "--timeout -1s"},
		{[]string{"ping", "--interval", "-1ms", "127.0.0.1:1"}, "--interval -1ms"},
		{[]string{"ping", "--count", "0", "127.0.0.1:1"}, "--count 0"},
		{[]string{"ping", "--ddp-threshold", "-1", "127.0.0.1:1"}, "--ddp-threshold -1"},
		{[]string{"ping", "--first-send-delay", "-1ms", "127.0.0.1:1"}, "--first-send-delay -1ms"},
		{[]string{"ping", "--rpcrdma-version", "3", "127.0.0.1:1"}, "--rpcrdma-version 3"},
		{[]string{"ping", "--prog", "nfs", "127.0.0.1:1"}, `invalid value "nfs" for flag -prog`},
		{[]string{"serve", "--shutdown-timeout", "-1s"}, "--shutdown-timeout -1s"},
		{[]string{"serve", "--reply-cache", "-1"}, "--reply-cache -1"},
		{[]string{"serve", "--log-level", "loud"}, `--log-level "loud"`},
		{[]string{"bench", "--rounds", "0"}, "--rounds 0"},
		{[]string{"bench", "--repeat", "0"}, "--repeat 0"},
		{[]string{"bench", "--duration", "0s"}, "--duration 0s"},
		{[]string{"trace"}, "want one capture file"},
	} {
		_, errOut, code := rpcrdmaCmd(t, 10*time.Second, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("rpcrdma %s: exit %d, want 2 and %q:\n%s", strings.Join(tc.args, " "), code, tc.want, errOut)
		}
	}
}

// TestPingOutput: one call is "1 call", --timeout 0 means no timeout, and
// program numbers print as the help gives them.
func TestPingOutput(t *testing.T) {
	s := startServe(t)
	out, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "1", "--timeout", "0", s.addr)
	if code != 0 || !strings.Contains(out, "\n1 call: min ") {
		t.Errorf("ping --count 1 --timeout 0: exit %d\n%s\n%s", code, out, errOut)
	}
	// The summary's median lies between min and max; of two calls, it
	// is their mean, as bench's medians are.
	summary := func(count string) (lo, med, avg, hi time.Duration) {
		t.Helper()
		out, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--count", count, "--interval", "0", s.addr)
		for _, line := range strings.Split(out, "\n") {
			var a, b, c, d string
			if n, _ := fmt.Sscanf(line, count+" calls: min %s median %s avg %s max %s", &a, &b, &c, &d); n == 4 {
				parse := func(s string) time.Duration { v, _ := time.ParseDuration(strings.TrimSuffix(s, ",")); return v }
				lo, med, avg, hi = parse(a), parse(b), parse(c), parse(d)
			}
		}
		if code != 0 || lo <= 0 || med < lo || hi < med || avg < lo || hi < avg {
			t.Errorf("ping --count %s: exit %d, min %v median %v avg %v max %v\n%s\n%s", count, code, lo, med, avg, hi, out, errOut)
		}
		return lo, med, avg, hi
	}
	summary("5")
	if lo, med, _, hi := summary("2"); (med - (lo+hi)/2).Abs() > time.Microsecond {
		t.Errorf("ping --count 2: median %v, want the mean of %v and %v", med, lo, hi)
	}
	_, errOut, code = rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "1", "--prog", "0x20049002", s.addr)
	if code != 1 || !strings.Contains(errOut, "program 0x20049002 version 1: ") {
		t.Errorf("ping of an unserved program: exit %d\n%s", code, errOut)
	}
	_, errOut, code = rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "1", "--prog", "100003", "--vers", "3", s.addr)
	if code != 1 || !strings.Contains(errOut, "program 100003 version 3: ") {
		t.Errorf("ping of NFS: exit %d\n%s", code, errOut)
	}
	for _, c := range []string{"ping", "serve"} {
		if _, help, _ := rpcrdmaCmd(t, 10*time.Second, c, "--help"); !strings.Contains(help, "0x20049001") || strings.Contains(help, "537169921") {
			t.Errorf("%s --help does not give the bench program in hex:\n%s", c, help)
		}
	}
}

// TestDialErrorNamesAddressOnce: the line for a refused connection names
// the address once, not once per layer.
func TestDialErrorNamesAddressOnce(t *testing.T) {
	_, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "1", "127.0.0.1:1")
	if code != 1 || strings.Count(errOut, "127.0.0.1:1") != 1 || !strings.Contains(errOut, "cannot reach 127.0.0.1:1: ") {
		t.Errorf("ping to a closed port: exit %d\n%s", code, errOut)
	}
}

// TestPingPlainTCP: a TCP server that answers with something else than
// MPA, and keeps the connection open, is reported as not an RDMA server
// from its first bytes, not as a handshake timeout.
func TestPingPlainTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n"))
				<-done
			}()
		}
	}()
	_, errOut, code := rpcrdmaCmd(t, 60*time.Second, "ping", "--count", "1", "--timeout", "30s", ln.Addr().String())
	if code != 1 || !strings.Contains(errOut, "is not an RDMA server: ") || !strings.Contains(errOut, `"HTTP/1.1 400 Bad Request\r\n"`) {
		t.Errorf("ping to an HTTP server: exit %d\n%s", code, errOut)
	}
}

// TestServeLogsDisconnect: a client that disconnects as clients do is not
// logged as a failed connection.
func TestServeLogsDisconnect(t *testing.T) {
	s := startServe(t)
	if _, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "1", s.addr); code != 0 {
		t.Fatalf("ping: %s", errOut)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.logText(), "connection closed by the peer") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	log := s.logText()
	if !strings.Contains(log, "connection closed by the peer") || strings.Contains(log, "failed") {
		t.Errorf("server log after a ping:\n%s", log)
	}
}

// TestBenchInterrupt: Ctrl-C while bench measures prints the cases
// measured so far, and exits 130 as shells expect of SIGINT. The interrupt comes once the server has counted calls
// (its metrics), so bench is measuring; --duration is too long for the run
// to end by itself.
func TestBenchInterrupt(t *testing.T) {
	s := startServe(t, "--metrics", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "bench", "--connect", s.addr, "--duration", "1h", "--rounds", "1")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the first case (NULL, one outstanding) is being
	// measured: its warm-up is three calls, so the server having seen
	// ten NULL calls means at least one measured call has been made,
	// however slowly the machine runs. The bench finishes that call
	// before it stops.
	s.waitCalls(t, "NULL", 10)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("bench after Ctrl-C: %v\n%s", err, errOut.String())
	}
	if !regexp.MustCompile(`(?m)^\s+rdma\s+NULL\s+0\s+1\s+\d+`).MatchString(out.String()) ||
		!strings.Contains(errOut.String(), "interrupted with 0 rounds of 1 done") {
		t.Errorf("bench after Ctrl-C printed:\n%s\n%s", out.String(), errOut.String())
	}
}
