// Package lab lets tests use the Linux kernel of the repository's lab (the
// lab/ folder) as a peer: a Debian 12 guest in qemu with knfsd and the
// kernel's NFS client over soft-iWARP (siw0) and Soft-RoCE (rxe0), rdma-core
// and perftest, reached from the host over loopback forwards. It skips a
// test when the VM is not running, runs commands in the guest over the
// lab's command channel (as lab/guestctl.py does), runs a test binary built
// on the host inside the guest, and checks the guest kernel's log for
// crashes.
//
// Boot the lab from the repository root with
//
//	sudo lab/run-all.sh
//
// or step by step (the first step as root, for apt):
//
//	lab/00-deps.sh && lab/10-build-siw.sh && lab/20-build-initramfs.sh && lab/30-boot-vm.sh
//
// lab/README.md describes the guest: its devices, addresses, ports, exports
// and share. Everything the lab builds lives in $WORK (default
// /tmp/rpcrdma-lab); a VM booted with another WORK is used when the tests
// run with the same WORK.
//
// Nothing here probes knfsd's NFS/RDMA port: a TCP connection that closes
// without an MPA Request wedges siw's listener (docs/linux-interop.md
// section 1).
package lab

import (
	"bytes"
	"errors"
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

// Addresses on the host's loopback, forwarded by qemu to and from the guest.
const (
	// KnfsdAddr is knfsd's NFS/RDMA port (guest 20049). Through qemu's
	// forward the host reaches siw0, since iWARP runs over TCP; in the
	// guest, knfsd listens on every RDMA device.
	KnfsdAddr = "127.0.0.1:20049"
	// NFSTCPAddr is knfsd's NFS over TCP (guest 2049).
	NFSTCPAddr = "127.0.0.1:12049"
	// MountdAddr is rpc.mountd over TCP, which the guest runs on the fixed
	// port 20048.
	MountdAddr = "127.0.0.1:12048"
	// RPCBindAddr is the guest's rpcbind over TCP (guest 111).
	RPCBindAddr = "127.0.0.1:12111"
	// PeerAddr is where the guest reaches a responder on the host: the
	// guest dials GuestPeerIP port 20049 (qemu's guestfwd).
	PeerAddr = "127.0.0.1:30049"
	// PeerMountAddr is where the guest's MOUNT calls to GuestPeerIP port
	// 20048 arrive on the host.
	PeerMountAddr = "127.0.0.1:30048"
	// PeerNFSTCPAddr is where the guest's NFS over TCP calls to GuestPeerIP
	// port 2049 arrive on the host.
	PeerNFSTCPAddr = "127.0.0.1:32049"
)

// Addresses inside the guest. rdma_cm picks a device by IP address, never by
// name, so each device has its own NIC and address.
const (
	// GuestSiwIP is eth0's address in the guest, the one siw0 uses.
	GuestSiwIP = "10.0.2.15"
	// GuestRxeIP is eth1's address in the guest, the one rxe0 uses.
	GuestRxeIP = "10.0.3.15"
	// GuestPeerIP is the address at which the guest reaches the host's
	// responders (PeerAddr, PeerMountAddr, PeerNFSTCPAddr).
	GuestPeerIP = "10.0.2.100"
)

const (
	// CmdTimeout is a generous bound for one guest command.
	CmdTimeout = 60 * time.Second
	// BinaryTimeout bounds one run of a test binary in the guest (see
	// RunTestBinary): the guest runs under TCG, many times slower than the
	// host.
	BinaryTimeout = 10 * time.Minute
	// lockWait bounds the wait for the command channel while another test
	// (in this process or another) uses it.
	lockWait = BinaryTimeout + 2*time.Minute
)

// bootHint says how to boot the lab, for skip messages.
const bootHint = "boot it from the repository root with `sudo lab/run-all.sh` " +
	"(or lab/00-deps.sh as root, then lab/10-build-siw.sh, lab/20-build-initramfs.sh, lab/30-boot-vm.sh; see lab/README.md)"

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
		t.Skipf("Linux lab VM not running in WORK=%s (%v); %s", work, err, bootHint)
	}
	console, _ := os.ReadFile(filepath.Join(work, "console.log"))
	if !bytes.Contains(console, []byte("LAB-READY")) {
		t.Skipf("Linux lab VM in WORK=%s not ready (no LAB-READY on %s/console.log); %s", work, work, bootHint)
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

// Run runs cmd, one line of shell, in the guest over the command channel
// (ttyS1 on $WORK/ctl.sock) and returns its output (stdout and stderr) and
// exit status. It fails t if cmd holds a newline (the channel reads one
// line per command) or if the channel does not answer within timeout; the
// command may then still be running in the guest, so bound it there too
// (timeout(1)).
//
// Run may be called concurrently, also from other processes: the channel
// is taken under an exclusive lock on $WORK/ctl.lock (as guestctl.py does),
// so commands run one at a time.
func Run(t testing.TB, cmd string, timeout time.Duration) (string, int) {
	t.Helper()
	if strings.ContainsAny(cmd, "\r\n") {
		t.Fatalf("guest command %q: holds a newline; the command channel takes one line", cmd)
	}
	unlock, err := lockChannel(lockWait)
	if err != nil {
		t.Fatalf("guest command %q: %v", cmd, err)
	}
	defer unlock()
	c, err := dialChannel(30 * time.Second)
	if err != nil {
		t.Fatalf("guest command %q: %v", cmd, err)
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

// Lock takes the lab's host-side lock called name (a file
// $WORK/<name>.lock, flock(2)ed) until t ends, waiting while a test in this
// process or another holds it. Tests that use one of the lab's shared
// resources take its lock around that use, so that packages tested at
// once by go test ./... wait their turn instead of failing: "peer" for
// the host addresses where the guest's clients arrive (PeerAddr,
// PeerMountAddr and PeerNFSTCPAddr, and the guest's mounts of them). It
// fails t if name is not a lower-case word or the lock is not free within
// the lab's bound for a guest command channel wait (twelve minutes).
func Lock(t testing.TB, name string) {
	t.Helper()
	if !lockName.MatchString(name) {
		t.Fatalf("lab lock %q: want a lower-case word", name)
	}
	unlock, err := lockFile(name+".lock", lockWait)
	if err != nil {
		t.Fatalf("lab lock: %v", err)
	}
	t.Cleanup(unlock)
}

var lockName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// lockChannel takes the exclusive lock on $WORK/ctl.lock, waiting at most
// wait, and returns the function that releases it. The lock is flock(2)'s:
// the kernel drops it if the process dies.
func lockChannel(wait time.Duration) (unlock func(), err error) {
	return lockFile("ctl.lock", wait)
}

// lockFile takes the exclusive flock(2) lock on the file name in $WORK,
// waiting at most wait, and returns the function that releases it.
func lockFile(name string, wait time.Duration) (unlock func(), err error) {
	// Read-only is enough for flock, and works on a lock file another user
	// created.
	f, err := os.OpenFile(filepath.Join(Work(), name), os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s not taken within %v: %w", f.Name(), wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialChannel connects to the command channel, trying again for at most
// wait while qemu refuses: its socket takes one client at a time, and
// answers EAGAIN while another (a process that does not take the lock, or
// one whose connection qemu has not yet seen closed) holds it.
func dialChannel(wait time.Duration) (net.Conn, error) {
	sock := filepath.Join(Work(), "ctl.sock")
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err == nil || !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("command channel: %w", err)
			}
			return c, nil
		}
		time.Sleep(100 * time.Millisecond)
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

// DmesgSince returns the lines the guest kernel logged after mark
// (DmesgMark), without their newlines.
func DmesgSince(t testing.TB, mark float64) []string {
	t.Helper()
	out, _ := Run(t, "dmesg", CmdTimeout)
	return LinesAfter(out, mark)
}

// LinesAfter returns the lines of a kernel log, dmesg's out, stamped after
// mark, without their newlines.
func LinesAfter(out string, mark float64) []string {
	var fresh []string
	for line := range strings.Lines(out) {
		m := dmesgStamp.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if ts, _ := strconv.ParseFloat(m[1], 64); ts > mark {
			fresh = append(fresh, strings.TrimRight(line, "\n"))
		}
	}
	return fresh
}

// CheckDmesg fails t if the guest kernel logged a BUG, an Oops, a WARNING
// or a general protection fault after mark (siw has crashed on malformed
// input before), and logs every line it logged since.
func CheckDmesg(t testing.TB, mark float64) {
	t.Helper()
	fresh := DmesgSince(t, mark)
	for _, line := range fresh {
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
