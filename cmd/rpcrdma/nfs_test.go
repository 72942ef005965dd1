package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// nfsServer is a running `rpcrdma nfs serve` of a temporary directory.
type nfsServer struct {
	dir               string
	tcpPort, rdmaPort string
	cmd               *exec.Cmd
	exited            chan error
}

var nfsListeningRE = regexp.MustCompile(`tcp 127\.0\.0\.1:(\d+) \(NFS, MOUNT\); rdma 127\.0\.0\.1:(\d+)`)

func startNFSServe(t *testing.T, args ...string) *nfsServer {
	t.Helper()
	s := &nfsServer{dir: t.TempDir(), exited: make(chan error, 1)}
	s.cmd = exec.Command(binPath, append(append([]string{"nfs", "serve", "--tcp", "127.0.0.1:0", "--rdma", "127.0.0.1:0"}, args...), s.dir)...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan []string, 1)
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := nfsListeningRE.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m
			}
		}
		s.exited <- s.cmd.Wait()
	}()
	select {
	case m := <-ready:
		s.tcpPort, s.rdmaPort = m[1], m[2]
	case err := <-s.exited:
		t.Fatalf("nfs serve exited: %v\n%s", err, log.String())
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		t.Fatal("nfs serve did not say where it listens")
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

// client runs an nfs subcommand against s over transport and fails the
// test unless it exits 0.
func (s *nfsServer) client(t *testing.T, transport, sub string, args ...string) (string, string) {
	t.Helper()
	port := s.rdmaPort
	if transport == "tcp" {
		port = s.tcpPort
	}
	full := append([]string{"nfs", sub, "--transport", transport, "--nfs-port", port, "--mount-port", s.tcpPort}, args...)
	out, errOut, code := rpcrdmaCmd(t, 60*time.Second, full...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s\n%s", full, code, out, errOut)
	}
	return out, errOut
}

func TestNFSCommands(t *testing.T) {
	s := startNFSServe(t)
	os.WriteFile(filepath.Join(s.dir, "hello.txt"), []byte("hello, nfs\n"), 0o644)
	os.Mkdir(filepath.Join(s.dir, "sub"), 0o755)
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(i * 31 >> 3)
	}
	local := filepath.Join(t.TempDir(), "big.bin")
	os.WriteFile(local, big, 0o644)

	for _, tr := range []string{"rdma", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			out, _ := s.client(t, tr, "probe", "127.0.0.1")
			for _, want := range []string{"MOUNT NULL (tcp)", "MOUNT EXPORT", "/export", "NFS NULL v3", "MNT /export", "FSINFO", "rtmax 1048576", "PATHCONF", "FSSTAT"} {
				if !strings.Contains(out, want) {
					t.Errorf("probe lacks %q:\n%s", want, out)
				}
			}
			if tr == "rdma" && !strings.Contains(out, "rpc-over-rdma: version 1") {
				t.Errorf("probe shows no RPC-over-RDMA parameters:\n%s", out)
			}
			out, _ = s.client(t, tr, "ls", "127.0.0.1:/export")
			if !regexp.MustCompile(`-rw-r--r-- +1 .* 11 .* hello.txt`).MatchString(out) || !regexp.MustCompile(`drwxr-xr-x .* sub`).MatchString(out) {
				t.Errorf("ls:\n%s", out)
			}
			if out, _ = s.client(t, tr, "cat", "127.0.0.1:/export/hello.txt"); out != "hello, nfs\n" {
				t.Errorf("cat: %q", out)
			}
			// cp both ways: into a directory, and back out.
			s.client(t, tr, "cp", local, "127.0.0.1:/export/sub")
			if got, _ := os.ReadFile(filepath.Join(s.dir, "sub", "big.bin")); !bytes.Equal(got, big) {
				t.Fatalf("cp to the server: %d bytes arrived", len(got))
			}
			back := filepath.Join(t.TempDir(), "back.bin")
			s.client(t, tr, "cp", "127.0.0.1:/export/sub/big.bin", back)
			if got, _ := os.ReadFile(back); !bytes.Equal(got, big) {
				t.Fatalf("cp from the server: %d bytes", len(got))
			}
			out, _ = s.client(t, tr, "bench", "--json", "--duration", "200ms", "--size", "4m", "--bs", "256k", "--qd", "4", "--conns", "2",
				"--op", "write,read", "--pattern", "seq,rand", "127.0.0.1:/export/sub")
			var res struct{ Results []nfsBenchResult }
			if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Results) != 4 {
				t.Fatalf("bench --json: %v\n%s", err, out)
			}
			for _, r := range res.Results {
				if r.Ops == 0 || r.MBPerSec <= 0 || r.P50us <= 0 || r.P99us < r.P50us || r.Transport != tr || r.Conns != 2 {
					t.Errorf("bench result %+v", r)
				}
				// The client's CPU time per operation: there, and no
				// more than every CPU busy throughout.
				if limit := 1.5 * float64(runtime.NumCPU()) * r.Seconds * 1e6 / float64(r.Ops); r.CPUusPerOp <= 0 || r.CPUusPerOp > limit {
					if _, ok := processCPU(); ok {
						t.Errorf("bench %s %s: cpu %.1f µs/op, want in (0, %.1f]", r.Op, r.Pattern, r.CPUusPerOp, limit)
					}
				}
			}
			out, _ = s.client(t, tr, "bench", "--duration", "100ms", "--size", "1m", "--bs", "64k", "--op", "read", "127.0.0.1:/export")
			if !strings.Contains(out, "READ") || !strings.Contains(out, "p99 µs") || !strings.Contains(out, "cpu µs/op") {
				t.Errorf("bench table:\n%s", out)
			}
		})
	}

	// Errors: a path outside every export, a missing file.
	_, errOut, code := rpcrdmaCmd(t, 20*time.Second, "nfs", "cat", "--transport", "tcp", "--nfs-port", s.tcpPort, "--mount-port", s.tcpPort, "127.0.0.1:/elsewhere/x")
	if code != 1 || !strings.Contains(errOut, "none of") {
		t.Errorf("cat outside the exports: exit %d %s", code, errOut)
	}
	_, errOut, code = rpcrdmaCmd(t, 20*time.Second, "nfs", "cat", "--transport", "tcp", "--nfs-port", s.tcpPort, "--mount-port", s.tcpPort, "127.0.0.1:/export/missing")
	if code != 1 || !strings.Contains(errOut, "NFS3ERR_NOENT") {
		t.Errorf("cat of a missing file: exit %d %s", code, errOut)
	}
}

// TestNFSExportFlag: --export mounts without asking EXPORT (as against
// willscott/go-nfs, which has none), and over TCP MOUNT defaults to the
// NFS port, where go-nfs and rpcrdma nfs serve both serve it.
func TestNFSExportFlag(t *testing.T) {
	s := startNFSServe(t)
	os.WriteFile(filepath.Join(s.dir, "hello.txt"), []byte("hello, nfs\n"), 0o644)
	out, errOut, code := rpcrdmaCmd(t, 20*time.Second, "nfs", "cat", "--transport", "tcp", "--nfs-port", s.tcpPort, "--export", "/export", "127.0.0.1:/export/hello.txt")
	if code != 0 || out != "hello, nfs\n" {
		t.Errorf("cat --export /export: exit %d %q %s", code, out, errOut)
	}
	// probe MNTs --export alone (and fails, since it does not mount).
	out, errOut, code = rpcrdmaCmd(t, 20*time.Second, "nfs", "probe", "--transport", "tcp", "--nfs-port", s.tcpPort, "--export", "/nope", "127.0.0.1")
	if code != 1 || !strings.Contains(out, "MNT /nope") || strings.Contains(out, "MNT /export") {
		t.Errorf("probe --export /nope: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code = rpcrdmaCmd(t, 20*time.Second, "nfs", "cat", "--transport", "tcp", "--nfs-port", s.tcpPort, "--export", "/other", "127.0.0.1:/export/hello.txt")
	if code != 1 || !strings.Contains(errOut, "not in --export /other") {
		t.Errorf("cat of a path outside --export: exit %d %s", code, errOut)
	}
	// An export the server does not have: MNT itself answers, not EXPORT.
	_, errOut, code = rpcrdmaCmd(t, 20*time.Second, "nfs", "cat", "--transport", "tcp", "--nfs-port", s.tcpPort, "--export", "/nope", "127.0.0.1:/nope/hello.txt")
	if code != 1 || !strings.Contains(errOut, "MNT /nope") {
		t.Errorf("cat in a missing export: exit %d %s", code, errOut)
	}
}

// TestNFSServeReadOnly: nfs serve --ro refuses a copy in.
func TestNFSServeReadOnly(t *testing.T) {
	s := startNFSServe(t, "--ro")
	local := filepath.Join(t.TempDir(), "f")
	os.WriteFile(local, []byte("x"), 0o644)
	_, errOut, code := rpcrdmaCmd(t, 20*time.Second, "nfs", "cp", "--transport", "tcp", "--nfs-port", s.tcpPort, "--mount-port", s.tcpPort, local, "127.0.0.1:/export/f")
	if code != 1 || !strings.Contains(errOut, "NFS3ERR_ROFS") {
		t.Errorf("cp into a read-only export: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "f")); err == nil {
		t.Error("the file was created")
	}
}
