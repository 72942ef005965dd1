package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The command never loses or overwrites data by surprise: these tests run
// the real binary against nfs serve on loopback, each for a finding an
// operator made.

// tcpArgs are the flags that reach s over TCP.
func (s *nfsServer) tcpArgs() []string {
	return []string{"--transport", "tcp", "--nfs-port", s.tcpPort, "--mount-port", s.tcpPort}
}

// nfsRun runs an nfs subcommand against s over TCP and returns its
// output and exit code.
func (s *nfsServer) nfsRun(t *testing.T, sub string, args ...string) (string, string, int) {
	t.Helper()
	return rpcrdmaCmd(t, 60*time.Second, append(append([]string{"nfs", sub}, s.tcpArgs()...), args...)...)
}

func noise(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// exportFiles lists the names in the served directory dir, recursively.
func exportFiles(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	return names
}

func TestNFSBenchLeavesFilesAlone(t *testing.T) {
	s := startNFSServe(t)
	data := noise(1 << 20)
	existing := filepath.Join(s.dir, "data.bin")
	os.WriteFile(existing, data, 0o644)
	short := filepath.Join(s.dir, "short.txt")
	os.WriteFile(short, []byte("hello\n"), 0o644)
	bench := []string{"--duration", "100ms", "--bs", "64k", "--qd", "2", "--json"}

	// A write benchmark on an existing file is refused without --overwrite.
	_, errOut, code := s.nfsRun(t, "bench", append(bench, "--op", "write", "--file", "data.bin", "127.0.0.1:/export")...)
	if code != 1 || !strings.Contains(errOut, "--overwrite") {
		t.Errorf("write on an existing file: exit %d %s", code, errOut)
	}
	// A read benchmark reads it as it is.
	out, errOut, code := s.nfsRun(t, "bench", append(bench, "--op", "read", "--pattern", "seq,rand", "--file", "data.bin", "127.0.0.1:/export")...)
	var res struct{ Results []nfsBenchResult }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Results) != 2 || res.Results[0].Ops == 0 {
		t.Errorf("read of an existing file: exit %d %s %s", code, out, errOut)
	}
	// A file smaller than --size is not grown, nor one smaller than a block.
	_, errOut, code = s.nfsRun(t, "bench", append(bench, "--op", "read", "--size", "4m", "--file", "data.bin", "127.0.0.1:/export")...)
	if code != 1 || !strings.Contains(errOut, "does not grow") {
		t.Errorf("read with --size over the file: exit %d %s", code, errOut)
	}
	_, errOut, code = s.nfsRun(t, "bench", append(bench, "--op", "read", "--file", "short.txt", "127.0.0.1:/export")...)
	if code != 1 || !strings.Contains(errOut, "less than one block") {
		t.Errorf("read of a 6-byte file: exit %d %s", code, errOut)
	}
	if got, _ := os.ReadFile(existing); !bytes.Equal(got, data) {
		t.Error("the existing file changed")
	}
	if got, _ := os.ReadFile(short); string(got) != "hello\n" {
		t.Errorf("the short file now holds %d bytes", len(got))
	}
	// With --overwrite, a write benchmark may write it.
	if _, errOut, code = s.nfsRun(t, "bench", append(bench, "--op", "write", "--size", "1m", "--overwrite", "--file", "data.bin", "127.0.0.1:/export")...); code != 0 {
		t.Errorf("write --overwrite: exit %d %s", code, errOut)
	}

	// The bench's own file is removed at the end, or kept with --keep.
	before := exportFiles(t, s.dir)
	if _, errOut, code = s.nfsRun(t, "bench", append(bench, "--size", "1m", "127.0.0.1:/export")...); code != 0 {
		t.Fatalf("bench: exit %d %s", code, errOut)
	}
	if after := exportFiles(t, s.dir); len(after) != len(before) {
		t.Errorf("the bench left files: %v, before %v", after, before)
	}
	if _, errOut, code = s.nfsRun(t, "bench", append(bench, "--size", "1m", "--keep", "--file", "kept.dat", "127.0.0.1:/export")...); code != 0 {
		t.Fatalf("bench --keep: exit %d %s", code, errOut)
	}
	if fi, err := os.Stat(filepath.Join(s.dir, "kept.dat")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("bench --keep: %v %v", fi, err)
	}

	// A size over the free space fails before anything is made, at once.
	start := time.Now()
	before = exportFiles(t, s.dir)
	_, errOut, code = s.nfsRun(t, "bench", append(bench, "--op", "read", "--size", "1000000g", "127.0.0.1:/export")...)
	if code != 1 || !strings.Contains(errOut, "over the free space on the server") || strings.Contains(errOut, "goroutine") {
		t.Errorf("bench --size 1000000g: exit %d %s", code, errOut)
	}
	if after := exportFiles(t, s.dir); len(after) != len(before) || time.Since(start) > 20*time.Second {
		t.Errorf("bench --size 1000000g left %v (before %v) after %v", after, before, time.Since(start))
	}
}

// TestNFSBenchReadOnlyExport: a read benchmark needs no write, and the
// metadata workloads need no block of the file they look at.
func TestNFSBenchReadOnlyExport(t *testing.T) {
	s := startNFSServe(t, "--ro")
	os.WriteFile(filepath.Join(s.dir, "data.bin"), noise(256<<10), 0o644)
	os.WriteFile(filepath.Join(s.dir, "small.txt"), []byte("tiny\n"), 0o644)
	if _, errOut, code := s.nfsRun(t, "bench", "--duration", "100ms", "--bs", "64k", "--op", "read", "--file", "data.bin", "127.0.0.1:/export"); code != 0 {
		t.Errorf("read bench on a read-only export: exit %d %s", code, errOut)
	}
	if _, errOut, code := s.nfsRun(t, "bench", "--runtime", "100ms", "--rw", "getattr,lookup,readdir", "--file", "small.txt", "127.0.0.1:/export"); code != 0 {
		t.Errorf("metadata bench on a 5-byte file: exit %d %s", code, errOut)
	}
	_, errOut, code := s.nfsRun(t, "bench", "--duration", "100ms", "--bs", "64k", "--size", "1m", "127.0.0.1:/export")
	if code != 1 || !strings.Contains(errOut, "read-only file system (NFS3ERR_ROFS)") {
		t.Errorf("bench that must create on a read-only export: exit %d %s", code, errOut)
	}
	_, errOut, code = s.nfsRun(t, "bench", "--duration", "100ms", "--rw", "randread", "127.0.0.1:/export")
	if code != 1 || !strings.Contains(errOut, "read-only file system (NFS3ERR_ROFS); to read a file that is there, name it with --file") {
		t.Errorf("read bench without --file on a read-only export: exit %d %s", code, errOut)
	}
}

// TestNFSErrorsNameTheFile: a failure on a remote file names it as the
// server's root sees it, and a status in words, in one line with one
// prefix.
func TestNFSErrorsNameTheFile(t *testing.T) {
	s := startNFSServe(t, "--ro")
	os.Mkdir(filepath.Join(s.dir, "dir"), 0o755)
	os.WriteFile(filepath.Join(s.dir, "f"), []byte("x"), 0o644)
	syscall.Mkfifo(filepath.Join(s.dir, "fifo"), 0o644)
	src := filepath.Join(t.TempDir(), "up.txt")
	os.WriteFile(src, []byte("up"), 0o644)
	for _, tc := range []struct {
		sub  string
		args []string
		want string
	}{
		{"cat", []string{"127.0.0.1:/export/dir"}, "rpcrdma nfs cat: /export/dir: nfs: READ: is a directory (NFS3ERR_ISDIR)\n"},
		{"cat", []string{"127.0.0.1:/export/fifo"}, "rpcrdma nfs cat: /export/fifo: nfs: a named pipe is not a regular file: nfs3: invalid argument (NFS3ERR_INVAL)\n"},
		{"cp", []string{"127.0.0.1:/export/fifo", t.TempDir()}, "rpcrdma nfs cp: 127.0.0.1:/export/fifo is a named pipe, not a regular file\n"},
		{"cat", []string{"127.0.0.1:/export/dir/missing"}, "rpcrdma nfs cat: /export/dir/missing: nfs: LOOKUP: no such file or directory (NFS3ERR_NOENT)\n"},
		{"cp", []string{src, "127.0.0.1:/export/dir/"}, "rpcrdma nfs cp: /export/dir/up.txt: nfs: CREATE: read-only file system (NFS3ERR_ROFS)\n"},
		{"cp", []string{src, "127.0.0.1:/export/new.txt"}, "rpcrdma nfs cp: /export/new.txt: nfs: CREATE: read-only file system (NFS3ERR_ROFS)\n"},
		{"cp", []string{"127.0.0.1:/export/nope", t.TempDir()}, "rpcrdma nfs cp: /export/nope: nfs: LOOKUP: no such file or directory (NFS3ERR_NOENT)\n"},
		{"ls", []string{"--export", "/export/dir/missing", "127.0.0.1:/export/dir/missing"},
			"rpcrdma nfs ls: nfs: MNT /export/dir/missing: no such file or directory (MNT3ERR_NOENT)\n"},
	} {
		_, errOut, code := s.nfsRun(t, tc.sub, tc.args...)
		if code != 1 || errOut != tc.want {
			t.Errorf("nfs %s %v: exit %d\n%q, want\n%q", tc.sub, tc.args, code, errOut, tc.want)
		}
	}
}

func TestNFSCpPlacesFilesAsCp(t *testing.T) {
	s := startNFSServe(t)
	os.Mkdir(filepath.Join(s.dir, "dir"), 0o755)
	local := t.TempDir()
	src := filepath.Join(local, "f.txt")
	os.WriteFile(src, []byte("new"), 0o640)

	// Into a directory, with or without a trailing slash: under its own name.
	for _, dst := range []string{"127.0.0.1:/export/dir/", "127.0.0.1:/export/dir"} {
		os.Remove(filepath.Join(s.dir, "dir", "f.txt"))
		if _, errOut, code := s.nfsRun(t, "cp", src, dst); code != 0 {
			t.Fatalf("cp %s: exit %d %s", dst, code, errOut)
		}
		if got, _ := os.ReadFile(filepath.Join(s.dir, "dir", "f.txt")); string(got) != "new" {
			t.Errorf("cp %s: dir/f.txt holds %q; export: %v", dst, got, exportFiles(t, s.dir))
		}
	}
	if _, err := os.Stat(filepath.Join(s.dir, "dir", "dir")); err == nil {
		t.Error("cp made dir/dir")
	}
	// A trailing slash on what is not a directory fails, making nothing.
	if _, errOut, code := s.nfsRun(t, "cp", src, "127.0.0.1:/export/nodir/"); code != 1 || !strings.Contains(errOut, "NFS3ERR_NOENT") {
		t.Errorf("cp to a missing directory: exit %d %s", code, errOut)
	}
	// Replacing a file, with its mode; -n keeps it.
	os.WriteFile(filepath.Join(s.dir, "old.txt"), []byte("old"), 0o644)
	if _, errOut, code := s.nfsRun(t, "cp", "-n", src, "127.0.0.1:/export/old.txt"); code != 1 || !strings.Contains(errOut, "file exists (NFS3ERR_EXIST)") {
		t.Errorf("cp -n onto a file: exit %d %s", code, errOut)
	}
	if _, errOut, code := s.nfsRun(t, "cp", src, "127.0.0.1:/export/old.txt"); code != 0 {
		t.Errorf("cp onto a file: exit %d %s", code, errOut)
	}
	if fi, err := os.Stat(filepath.Join(s.dir, "old.txt")); err != nil || fi.Size() != 3 || fi.Mode().Perm() != 0o640 {
		t.Errorf("replaced file: %v %v", fi, err)
	}
	// Downloads: into a local directory under the remote name.
	if _, errOut, code := s.nfsRun(t, "cp", "127.0.0.1:/export/old.txt", local+"/"); code != 0 {
		t.Fatalf("cp into a local directory: exit %d %s", code, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(local, "old.txt")); string(got) != "new" {
		t.Errorf("downloaded %q", got)
	}
	// Directories and links need -r, and say so; a file does not replace a directory.
	os.Symlink("f.txt", filepath.Join(local, "link"))
	for _, tc := range []struct{ src, dst, want string }{
		{local, "127.0.0.1:/export/", "is a directory: copy it with -r"},
		{filepath.Join(local, "link"), "127.0.0.1:/export/", "is a symbolic link: copy it with -r"},
		{"127.0.0.1:/export/dir", local, "is a directory: copy it with -r"},
		{src, "127.0.0.1:/export/", ""},
	} {
		_, errOut, code := s.nfsRun(t, "cp", tc.src, tc.dst)
		if tc.want == "" {
			continue
		}
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("cp %s %s: exit %d %s", tc.src, tc.dst, code, errOut)
		}
	}
	os.Mkdir(filepath.Join(s.dir, "dir", "x"), 0o755)
	os.WriteFile(filepath.Join(local, "x"), []byte("x"), 0o644)
	if _, errOut, code := s.nfsRun(t, "cp", filepath.Join(local, "x"), "127.0.0.1:/export/dir"); code != 1 || !strings.Contains(errOut, "a file cannot replace it") {
		t.Errorf("cp of a file onto a directory: exit %d %s", code, errOut)
	}
	for _, n := range append(exportFiles(t, s.dir), exportFiles(t, local)...) {
		if strings.HasSuffix(n, ".part") {
			t.Errorf("temporary file left: %s", n)
		}
	}
}

func TestNFSCpRecursive(t *testing.T) {
	s := startNFSServe(t)
	src := filepath.Join(t.TempDir(), "tree")
	os.MkdirAll(filepath.Join(src, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(src, "a", "b", "f"), noise(300<<10), 0o600)
	os.Symlink("b/f", filepath.Join(src, "a", "l"))
	if _, errOut, code := s.nfsRun(t, "cp", "-r", src, "127.0.0.1:/export/"); code != 0 || !strings.Contains(errOut, "3 directories, 1 files, 1 symbolic links") {
		t.Fatalf("cp -r up: exit %d %s", code, errOut)
	}
	if l, _ := os.Readlink(filepath.Join(s.dir, "tree", "a", "l")); l != "b/f" {
		t.Errorf("link on the server: %q", l)
	}
	back := t.TempDir()
	if _, errOut, code := s.nfsRun(t, "cp", "-r", "127.0.0.1:/export/tree", back); code != 0 {
		t.Fatalf("cp -r down: exit %d %s", code, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(back, "tree", "a", "l")); !bytes.Equal(got, noise(300<<10)) {
		t.Errorf("the tree came back with %d bytes through the link", len(got))
	}
}

// interruptCp starts cp, waits until its temporary file appears in dir,
// and interrupts it.
func interruptCp(t *testing.T, s *nfsServer, dir, src, dst string) (string, int) {
	t.Helper()
	cmd := exec.Command(binPath, append(append([]string{"nfs", "cp"}, s.tcpArgs()...), src, dst)...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !hasPart(dir) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("cp did not stop after SIGINT")
	}
	return errOut.String(), cmd.ProcessState.ExitCode()
}

func hasPart(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".part") {
			return true
		}
	}
	return false
}

// TestNFSCpInterrupted: SIGINT stops a copy either way with exit 130,
// leaving neither a partial file nor a temporary one.
func TestNFSCpInterrupted(t *testing.T) {
	s := startNFSServe(t)
	local := t.TempDir()
	big := filepath.Join(local, "big")
	f, _ := os.Create(big)
	f.Truncate(2 << 30) // sparse: reading it costs little, copying it long
	f.Close()
	errOut, code := interruptCp(t, s, s.dir, big, "127.0.0.1:/export/big")
	if code != 130 || !strings.Contains(errOut, "stopped by interrupt") {
		t.Errorf("upload: exit %d %s", code, errOut)
	}
	if names := exportFiles(t, s.dir); len(names) != 0 {
		t.Errorf("upload left %v", names)
	}

	f, _ = os.Create(filepath.Join(s.dir, "big"))
	f.Truncate(2 << 30)
	f.Close()
	dst := filepath.Join(t.TempDir(), "down")
	errOut, code = interruptCp(t, s, filepath.Dir(dst), "127.0.0.1:/export/big", dst)
	if code != 130 || !strings.Contains(errOut, "stopped by interrupt") {
		t.Errorf("download: exit %d %s", code, errOut)
	}
	if names := exportFiles(t, filepath.Dir(dst)); len(names) != 0 {
		t.Errorf("download left %v", names)
	}
}

// TestNFSBenchInterrupted: SIGINT ends a bench within a second, printing
// the finished cases and the stopped one, removing its file, exit 130.
func TestNFSBenchInterrupted(t *testing.T) {
	s := startNFSServe(t)
	cmd := exec.Command(binPath, append(append([]string{"nfs", "bench"}, s.tcpArgs()...),
		"--duration", "300ms", "--bs", "64k", "--size", "1m", "--op", "write,read", "--pattern", "seq,rand", "--json", "127.0.0.1:/export")...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond) // into the third or fourth case
	cmd.Process.Signal(syscall.SIGINT)
	sent := time.Now()
	cmd.Wait()
	if d := time.Since(sent); d > 2*time.Second {
		t.Errorf("bench took %v to stop", d)
	}
	var res struct{ Results []nfsBenchResult }
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Results) == 0 {
		t.Fatalf("bench printed no results: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	if last := res.Results[len(res.Results)-1]; len(res.Results) < 4 && !last.Partial {
		t.Errorf("the stopped case is not marked partial: %+v", res.Results)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 && len(res.Results) < 4 {
		t.Errorf("exit %d, want 130\n%s", code, errOut.String())
	}
	if names := exportFiles(t, s.dir); len(names) != 0 {
		t.Errorf("bench left %v", names)
	}
}

func TestParseRemote(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want remote
		ok   bool
	}{
		{"host:/export/f", remote{host: "host", path: "/export/f"}, true},
		{"host:2050:/export", remote{host: "host", path: "/export", port: 2050}, true},
		{"[::1]:/export", remote{host: "::1", path: "/export"}, true},
		{"[fe80::1]:20049:/e/x", remote{host: "fe80::1", path: "/e/x", port: 20049}, true},
		{"10.0.0.1:/", remote{host: "10.0.0.1", path: "/"}, true},
		{"./a:/b", remote{}, false},
		{"/local/path", remote{}, false},
		{"file.txt", remote{}, false},
		{"host:99999:/x", remote{}, false},
		{"host:x:/x", remote{}, false},
		{"[::1:/x", remote{}, false},
		{":/x", remote{}, false},
	} {
		got, ok := parseRemote(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseRemote(%q) = %+v %v, want %+v %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestNFSUsageExit2: argument errors exit 2, as the README says.
func TestNFSUsageExit2(t *testing.T) {
	for _, args := range [][]string{
		{"nfs", "cp", "onlyone"},
		{"nfs", "cp", "a", "b"},
		{"nfs", "cat", "not-remote"},
		{"nfs", "bench", "--bs", "huge", "127.0.0.1:/export"},
		{"nfs", "bench", "--op", "delete", "127.0.0.1:/export"},
		{"nfs", "ls", "--transport", "udp", "127.0.0.1:/export"},
		{"nfs", "probe", "--bogus", "127.0.0.1"},
	} {
		if _, errOut, code := rpcrdmaCmd(t, 10*time.Second, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errOut)
		}
	}
	// The flag package's refusals get the command's prefix too.
	if _, errOut, _ := rpcrdmaCmd(t, 10*time.Second, "nfs", "probe", "--bogus", "127.0.0.1"); !strings.HasPrefix(errOut, "rpcrdma nfs probe: flag provided but not defined: -bogus\nusage: rpcrdma nfs probe") {
		t.Errorf("an unknown flag:\n%s", errOut)
	}
}

// TestNFSPortmapper: with no port given, the ports come from the server's
// portmapper (RFC 1833 GETPORT), as mount.nfs finds them.
func TestNFSPortmapper(t *testing.T) {
	s := startNFSServe(t)
	port, _ := strconv.Atoi(s.tcpPort)
	srv := rpc.NewServer(nil)
	srv.Handle(rpc.PortmapProgram, rpc.PortmapVersion, rpc.ProcGetPort, func(_ context.Context, c *rpc.Call) (rpc.Body, error) {
		d := c.Decoder()
		prog, vers, prot := d.Uint32(), d.Uint32(), d.Uint32()
		d.Uint32()
		answer := uint32(0)
		if prot == rpc.IPProtoTCP && (prog == 100005 && vers == 3 || prog == 100003 && vers == 3) {
			answer = uint32(port)
		}
		return rpc.Body{XDR: xdr.AppendUint32(nil, answer)}, d.Done()
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.ServeListener(l); close(done) }()
	defer func() { srv.Close(); <-done }()
	_, pmPort, _ := net.SplitHostPort(l.Addr().String())
	os.WriteFile(filepath.Join(s.dir, "f"), []byte("via the portmapper\n"), 0o644)
	out, errOut, code := rpcrdmaCmd(t, 30*time.Second, "nfs", "cat", "--transport", "tcp", "--rpcbind-port", pmPort, "127.0.0.1:/export/f")
	if code != 0 || out != "via the portmapper\n" {
		t.Errorf("cat with ports from the portmapper: exit %d %q %s", code, out, errOut)
	}
	out, _, code = rpcrdmaCmd(t, 30*time.Second, "nfs", "probe", "--transport", "tcp", "--rpcbind-port", pmPort, "127.0.0.1")
	if code != 0 || !strings.Contains(out, "PORTMAPPER "+pmPort) || !strings.Contains(out, "MOUNT at 127.0.0.1:"+s.tcpPort+", NFS at 127.0.0.1:"+s.tcpPort) {
		t.Errorf("probe with ports from the portmapper: exit %d\n%s", code, out)
	}
}

// TestNFSRemoteWithPort: HOST:PORT:/export/path and [V6]:PORT:/path
// name the NFS port as mount.nfs's port= does, over either transport.
func TestNFSRemoteWithPort(t *testing.T) {
	s := startNFSServe(t)
	os.WriteFile(filepath.Join(s.dir, "f"), []byte("through the port\n"), 0o644)
	for _, tc := range []struct{ transport, port string }{{"tcp", s.tcpPort}, {"rdma", s.rdmaPort}} {
		out, errOut, code := rpcrdmaCmd(t, 30*time.Second, "nfs", "cat", "--rpcbind-port", "0", "--transport", tc.transport, "--mount-port", s.tcpPort,
			"127.0.0.1:"+tc.port+":/export/f")
		if code != 0 || out != "through the port\n" {
			t.Errorf("cat 127.0.0.1:%s:/export/f over %s: exit %d %q %s", tc.port, tc.transport, code, out, errOut)
		}
	}

	// Nothing at the MOUNT port: the error says where it looked and how
	// to give the port.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, freePort, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close()
	_, errOut, code := rpcrdmaCmd(t, 30*time.Second, "nfs", "cat", "--rpcbind-port", "0", "--mount-port", freePort, "127.0.0.1:"+s.rdmaPort+":/export/f")
	if want := "no MOUNT service at 127.0.0.1:" + freePort + " (--mount-port)"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("cat with nothing at --mount-port: exit %d, %q; want 1 and %q", code, errOut, want)
	}

	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("over IPv6\n"), 0o644)
	cmd := exec.Command(binPath, "nfs", "serve", "--tcp", "[::1]:0", "--rdma", "", dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	ports := make(chan string, 1)
	go func() {
		defer close(exited)
		re := regexp.MustCompile(`tcp \[::1\]:(\d+) \(NFS, MOUNT\)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				ports <- m[1]
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	var port string
	select {
	case port = <-ports:
	case <-exited:
		t.Fatal("nfs serve on [::1] exited")
	case <-time.After(10 * time.Second):
		t.Fatal("nfs serve on [::1] did not say where it listens")
	}
	out, errOut, code := rpcrdmaCmd(t, 30*time.Second, "nfs", "cat", "--rpcbind-port", "0", "--transport", "tcp", "--mount-port", port, "[::1]:"+port+":/export/f")
	if code != 0 || out != "over IPv6\n" {
		t.Errorf("cat [::1]:%s:/export/f: exit %d %q %s", port, code, out, errOut)
	}
}
