package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestGuestMountsNFSServeVerbs: `rpcrdma nfs serve --provider verbs`,
// built on the host with -tags verbs and run in the lab guest from its
// share, serves a directory of the guest to the guest kernel's NFS client
// over rxe0 (RoCE v2) and over siw0: the client mounts it with
// vers=3,proto=rdma (MOUNT over TCP to the same server), copies an 8 MiB
// file in and back out with the same SHA-256 on the client, on the
// server's disk and after the round trip, lists it, removes it and
// unmounts. rdma_cm chooses the device by address, so the test checks
// which device carried the connection (rdma res show cm_id) and, on rxe0,
// that its sent packet counter moved by at least the file's packets. The
// server ends on SIGTERM, and the guest kernel's log stays clean. On siw0
// the server polls its completion queues for 100 µs before it sleeps
// (--busy-poll). It skips without the lab VM.
func TestGuestMountsNFSServeVerbs(t *testing.T) {
	onGuestDevices(t, func(t *testing.T, bin, device, ip string) {
		flags := ""
		if device == "siw0" {
			flags = "--busy-poll 100us"
		}
		guestMountNFSServe(t, bin, device, ip, flags)
	})
}

// onGuestDevices builds the command with -tags verbs into the lab's share
// and runs run, as a subtest, for each RDMA device of the guest: rxe0
// (Soft-RoCE) and siw0 (soft-iWARP), with the guest's address on it
// (rdma_cm chooses the device by address). It skips without the lab VM,
// and fails t if the guest kernel logs a bug, an oops or a warning
// meanwhile.
func onGuestDevices(t *testing.T, run func(t *testing.T, bin, device, ip string)) {
	if lab.InGuest() {
		t.Skip("runs from the host")
	}
	lab.Require(t)
	bin := lab.BuildBinary(t, ".", []string{"verbs"})
	mark := lab.DmesgMark(t)
	defer lab.CheckDmesg(t, mark)
	for _, tg := range []struct{ device, ip string }{{"rxe0", lab.GuestRxeIP}, {"siw0", lab.GuestSiwIP}} {
		t.Run(tg.device, func(t *testing.T) { run(t, bin, tg.device, tg.ip) })
	}
}

// The guest's ports for the server: not knfsd's (2049, 20048, 20049), nor
// those of the verbs tests in package rpcrdma (20050). On siw0 the RDMA
// port is a TCP port too.
const (
	guestNFSRDMAPort = "20051"
	guestNFSTCPPort  = "12051"
)

// guestMountNFSServe runs the server bin on device (at ip) in the guest,
// with the extra flags, mounts it there and moves a file through it.
func guestMountNFSServe(t *testing.T, bin, device, ip, flags string) {
	dir := "/tmp/nfsv-" + device
	run := func(cmd string, timeout time.Duration) string {
		t.Helper()
		start := time.Now()
		out, rc := lab.Run(t, cmd, timeout+30*time.Second)
		t.Logf("guest (%v): %s\n%s", time.Since(start).Round(time.Millisecond), cmd, out)
		if rc != 0 {
			t.Fatalf("guest command failed (exit status %d)", rc)
		}
		return out
	}
	// The server runs in the background, in a session of its own, with
	// the command channel (fd 3) closed; it writes its log to a file.
	run(fmt.Sprintf("umount -f -l /mnt/nfsv 2>/dev/null; rm -rf %[1]s && mkdir -p %[1]s/export /mnt/nfsv && cd %[1]s && "+
		"(setsid %[2]s nfs serve --provider verbs --device %[3]s %[7]s --rdma %[4]s:%[5]s --tcp %[4]s:%[6]s --log-level debug --export /export export >log 2>&1 </dev/null 3>&- & echo $! >pid) && "+
		"for i in $(seq 300); do grep -q 'nfs: serving' log && break; kill -0 $(cat pid) || break; sleep 0.1; done; cat log; grep -q 'nfs: serving' log",
		dir, bin, device, ip, guestNFSRDMAPort, guestNFSTCPPort, flags), 60*time.Second)
	stopped := false
	stop := func() string {
		stopped = true
		// SIGTERM, then up to 30 s for the server to shut down.
		return run(fmt.Sprintf("cd %s && kill $(cat pid) && for i in $(seq 300); do kill -0 $(cat pid) 2>/dev/null || break; sleep 0.1; done; cat log; ! kill -0 $(cat pid) 2>/dev/null", dir), 60*time.Second)
	}
	defer func() {
		if !stopped {
			out, _ := lab.Run(t, fmt.Sprintf("umount -f -l /mnt/nfsv 2>/dev/null; kill -9 $(cat %[1]s/pid) 2>/dev/null; tail -c 20000 %[1]s/log", dir), lab.CmdTimeout)
			t.Logf("the server's log (its last 20000 bytes):\n%s", out)
		}
		lab.Run(t, "rm -rf "+dir, lab.CmdTimeout)
	}()

	before := rxeSentPackets(t)
	run(fmt.Sprintf("timeout 90 mount -t nfs -o vers=3,proto=rdma,port=%s,mountport=%s,mountproto=tcp,nolock,noacl,soft,timeo=300,retrans=1 %s:/export /mnt/nfsv",
		guestNFSRDMAPort, guestNFSTCPPort, ip), 90*time.Second)
	// Every connection to the server's port, both ends, is on device.
	out := run("rdma res show cm_id | grep -E ':"+guestNFSRDMAPort+"( |$)'", 30*time.Second)
	for line := range strings.Lines(out) {
		if !strings.Contains(line, "link "+device+"/") {
			t.Errorf("a connection to the server is not on %s: %s", device, line)
		}
	}

	const mib = 8
	out = run(fmt.Sprintf("cd %s && dd if=/dev/urandom of=src bs=1M count=%d 2>/dev/null && timeout 200 cp src /mnt/nfsv/f && sync && "+
		"echo 3 >/proc/sys/vm/drop_caches && timeout 200 cp /mnt/nfsv/f back && sha256sum src export/f back && ls -l /mnt/nfsv", dir, mib), 400*time.Second)
	sums := regexp.MustCompile(`(?m)^([0-9a-f]{64})  (src|export/f|back)$`).FindAllStringSubmatch(out, -1)
	if len(sums) != 3 || sums[0][1] != sums[1][1] || sums[0][1] != sums[2][1] {
		t.Fatalf("SHA-256 of the file written, of the server's copy and of the file read back differ or are missing:\n%s", out)
	}
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^-\S+\s+1\s+\S+\s+\S+\s+%d .* f$`, mib<<20)).MatchString(out) {
		t.Errorf("ls -l of the mount does not show f with %d bytes:\n%s", mib<<20, out)
	}
	out = run(fmt.Sprintf("rm /mnt/nfsv/f && ls -A /mnt/nfsv | wc -l && ls -A %s/export | wc -l && timeout 60 umount /mnt/nfsv", dir), 90*time.Second)
	if out != "0\n0\n" {
		t.Errorf("after rm, the mount and the server's directory list %q entries, want none", out)
	}
	if device == "rxe0" {
		// A Soft-RoCE packet carries at most the path MTU (1024 bytes on
		// the guest's 1500-byte Ethernet): the file went twice.
		if sent := rxeSentPackets(t) - before; sent < 2*mib<<10 {
			t.Errorf("rxe0 sent %d packets during the mount and the copies, want at least %d", sent, 2*mib<<10)
		} else {
			t.Logf("rxe0 sent %d packets", sent)
		}
	}
	out = stop()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, "msg=stopped") {
		t.Errorf("the server's log:\n%s", out)
	}
}

// rxeSentPackets returns the guest's rxe0 sent packet counter.
func rxeSentPackets(t *testing.T) int {
	t.Helper()
	out, rc := lab.Run(t, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts", lab.CmdTimeout)
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if rc != 0 || err != nil {
		t.Fatalf("rxe0's sent_pkts: %q (exit status %d)", out, rc)
	}
	return n
}
