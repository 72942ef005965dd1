// Package lab lets tests use the Linux kernel as a peer, in a qemu VM that a
// lab kept outside this repository boots (docs/linux-interop.md says what it
// taught us): knfsd and the NFS/RDMA client over soft-iWARP in a qemu VM,
// reached over loopback. It skips a test when the VM is not running, runs
// commands in the guest over the lab's command channel (as guestctl.py does),
// and checks the guest kernel's log for crashes.
//
// Nothing here probes knfsd's port: a TCP connection that closes without
// an MPA Request wedges siw's listener (docs/linux-interop.md section 1).
package lab

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// KnfsdAddr is knfsd's NFS/RDMA port, forwarded by qemu.
	KnfsdAddr = "127.0.0.1:20049"
	// PeerAddr is where the guest's NFS client reaches a responder on the
	// host (qemu's guestfwd).
	PeerAddr = "127.0.0.1:30049"
	// CmdTimeout is a generous bound for one guest command.
	CmdTimeout = 60 * time.Second
)

// Work returns the lab's work directory: $WORK, or /tmp/rpcrdma-lab.
func Work() string {
	if w := os.Getenv("WORK"); w != "" {
		return w
	}
	return "/tmp/rpcrdma-lab"
}

// Require skips t unless the VM is running (its qemu.pid alive) and ready
// (LAB-READY on its console).
func Require(t testing.TB) {
	t.Helper()
	work := Work()
	pid, err := os.ReadFile(filepath.Join(work, "qemu.pid"))
	if err == nil {
		var n int
		if _, err = fmt.Sscan(string(pid), &n); err == nil {
			err = syscall.Kill(n, 0)
		}
	}
	if err != nil {
		t.Skipf("Linux lab VM not running (%v); boot it with WORK=%s ../shared/lab/30-boot-vm.sh after the lab's 00/10/20 steps", err, work)
	}
	console, _ := os.ReadFile(filepath.Join(work, "console.log"))
	if !bytes.Contains(console, []byte("LAB-READY")) {
		t.Skip("Linux lab VM not ready (no LAB-READY on its console)")
	}
}

// Knfsd returns the address of knfsd for a test that dials it: the lab
// VM's (skipping t unless it runs, and failing t if the guest kernel logs a
// bug, an oops or a warning before t ends), or RPCRDMA_LAB_ADDR's.
func Knfsd(t testing.TB) string {
	t.Helper()
	if addr := os.Getenv("RPCRDMA_LAB_ADDR"); addr != "" {
		return addr
	}
	Require(t)
	mark := DmesgMark(t)
	t.Cleanup(func() { CheckDmesg(t, mark) })
	return KnfsdAddr
}

var cmdEnd = regexp.MustCompile(`__END__ rc=(\d+)\n`)

// Run runs cmd in the guest's shell over the command channel (ttyS1 on
// $WORK/ctl.sock) and returns its output and exit status. It fails t if
// the channel does not answer within timeout.
func Run(t testing.TB, cmd string, timeout time.Duration) (string, int) {
	t.Helper()
	c, err := net.DialTimeout("unix", filepath.Join(Work(), "ctl.sock"), 5*time.Second)
	if err != nil {
		t.Fatalf("guest command channel: %v", err)
	}
	defer c.Close()
	buf := make([]byte, 64<<10)
	// Drop whatever an earlier, interrupted command left behind.
	for {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(cmd + "\n")); err != nil {
		t.Fatalf("guest command %q: %v", cmd, err)
	}
	var out []byte
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if m := cmdEnd.FindSubmatchIndex(out); m != nil {
			rc, _ := strconv.Atoi(string(out[m[2]:m[3]]))
			return string(out[:m[0]]), rc
		}
		if err != nil {
			t.Fatalf("guest command %q: %v after %q", cmd, err, out)
		}
	}
}

var dmesgStamp = regexp.MustCompile(`^\[\s*(\d+\.\d+)\]`)

// DmesgMark returns the timestamp of the guest kernel's last log line, for
// CheckDmesg.
func DmesgMark(t testing.TB) float64 {
	t.Helper()
	out, _ := Run(t, "dmesg", CmdTimeout)
	mark := -1.0
	for line := range strings.Lines(out) {
		if m := dmesgStamp.FindStringSubmatch(line); m != nil {
			mark, _ = strconv.ParseFloat(m[1], 64)
		}
	}
	return mark
}

// CheckDmesg fails t if the guest kernel logged a BUG, an Oops, a WARNING
// or a general protection fault after mark (siw has crashed on malformed
// input before), and logs every line it logged since.
func CheckDmesg(t testing.TB, mark float64) {
	t.Helper()
	out, _ := Run(t, "dmesg", CmdTimeout)
	var fresh []string
	for line := range strings.Lines(out) {
		m := dmesgStamp.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if ts, _ := strconv.ParseFloat(m[1], 64); ts <= mark {
			continue
		}
		line = strings.TrimRight(line, "\n")
		fresh = append(fresh, line)
		for _, bad := range []string{"BUG:", "Oops", "WARNING:", "general protection"} {
			if strings.Contains(line, bad) {
				t.Errorf("guest kernel: %s", line)
			}
		}
	}
	if len(fresh) > 0 {
		t.Logf("guest dmesg since the test began:\n%s", strings.Join(fresh, "\n"))
	}
}
