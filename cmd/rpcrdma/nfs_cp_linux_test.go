package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns a new pseudo-terminal's controlling side and its
// terminal (pts(4)), or skips the test where there are none.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	ptm := os.NewFile(uintptr(fd), "/dev/ptmx")
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		ptm.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	return ptm, pts
}

// TestNFSCpProgress: on a terminal, cp draws a progress line (bytes,
// rate, time left) and erases it before its summary; elsewhere it says
// only the summary.
func TestNFSCpProgress(t *testing.T) {
	s := startNFSServe(t)
	src := filepath.Join(t.TempDir(), "f.bin")
	os.WriteFile(src, noise(3<<20), 0o644)

	ptm, pts := openPTY(t)
	defer ptm.Close()
	cmd := exec.Command(binPath, append(append([]string{"nfs", "cp"}, s.tcpArgs()...), src, "127.0.0.1:/export/")...)
	cmd.Stderr = pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close() // the child holds it; its exit ends the reads below
	got := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, ptm) // until EIO: no process holds the terminal
		got <- b.Bytes()
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("cp on a terminal: %v", err)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("cp on a terminal did not end")
	}
	var out []byte
	select {
	case out = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	line := regexp.MustCompile(`\r\x1b\[K` + regexp.QuoteMeta(src) + `  [0-9.]+ [KMG]iB of 3\.0 MiB  [0-9.]+ MB/s  \d+s left`)
	if !line.Match(out) || !bytes.Contains(out, []byte("\r\x1b[K3145728 bytes in ")) {
		t.Errorf("cp on a terminal drew no progress line, or did not erase it:\n%q", out)
	}

	_, errOut, code := s.nfsRun(t, "cp", src, "127.0.0.1:/export/again.bin")
	if code != 0 || strings.Contains(errOut, "\r") || strings.Contains(errOut, "\x1b") || !strings.HasPrefix(errOut, "3145728 bytes in ") {
		t.Errorf("cp elsewhere: exit %d %q", code, errOut)
	}
}
