package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestGuestNFS41Verbs: `rpcrdma nfs --vers 4.1 --provider verbs`, built on
// the host with -tags verbs and run in the lab guest from its share,
// speaks NFSv4.1 to the guest's knfsd over rxe0 (RoCE v2) and over siw0
// (the kernel's soft-iWARP), as an operator on an RDMA host would: probe
// reports a session with the backchannel granted, cat reads a file, cp
// copies a 3 MiB file in and back out with the same SHA-256 on the
// client, on the server's disk and after the round trip, ls lists it,
// and bench reads with READ data in write chunks over two connections of
// one session, and removes its own file. rdma_cm chooses the device by
// address; on rxe0 the device's sent packet counter must move by at
// least the file's packets. TestNFSFiles41Knfsd is the same over the
// software iWARP from the host. It skips without the lab VM.
func TestGuestNFS41Verbs(t *testing.T) { onGuestDevices(t, guestNFS41) }

// guestNFS41 runs the NFSv4.1 commands of bin in the guest against knfsd
// at ip, over device.
func guestNFS41(t *testing.T, bin, device, ip string) {
	dir := "/tmp/nfs41v-" + device
	name := fmt.Sprintf("go41v-%s-%d.bin", device, time.Now().UnixNano())
	// run runs `rpcrdma nfs SUB --vers 4.1 --provider verbs --device
	// DEVICE ARGS...` in dir, then the shell command after, if any.
	run := func(sub, args, after string) string {
		t.Helper()
		cmd := fmt.Sprintf("cd %s && timeout 240 %s nfs %s --vers 4.1 --provider verbs --device %s %s", dir, bin, sub, device, args)
		if after != "" {
			cmd += " && " + after
		}
		start := time.Now()
		out, rc := lab.Run(t, cmd, 5*time.Minute)
		t.Logf("guest (%v): %s\n%s", time.Since(start).Round(time.Millisecond), cmd, out)
		if rc != 0 {
			t.Fatalf("guest command failed (exit status %d)", rc)
		}
		return out
	}
	if out, rc := lab.Run(t, fmt.Sprintf("rm -rf %[1]s && mkdir -p %[1]s && head -c 3145733 /dev/urandom >%[1]s/src", dir), lab.CmdTimeout); rc != 0 {
		t.Fatalf("guest: making %s: %s", dir, out)
	}
	defer lab.Run(t, fmt.Sprintf("rm -rf %s /export/%s", dir, name), lab.CmdTimeout)

	out := run("probe", ip, "")
	for _, want := range []string{"SESSION v4.1", "slots, requests up to", "server owner", "backchannel granted"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe: output lacks %q", want)
		}
	}
	if out := run("cat", ip+":/hello.txt", ""); out != "hello from the guest\n" {
		t.Errorf("cat: %q", out)
	}

	before := rxeSentPackets(t)
	run("cp", "src "+ip+":/"+name, "")
	run("cp", ip+":/"+name+" back", "")
	out = run("ls", ip+":/", fmt.Sprintf("sha256sum src /export/%s back", name))
	if !regexp.MustCompile(`(?m)^-\S+ +1 .* 3145733 .* ` + regexp.QuoteMeta(name) + `$`).MatchString(out) {
		t.Errorf("ls does not list %s with 3145733 bytes", name)
	}
	sums := regexp.MustCompile(`(?m)^([0-9a-f]{64})  (src|/export/\S+|back)$`).FindAllStringSubmatch(out, -1)
	if len(sums) != 3 || sums[0][1] != sums[1][1] || sums[0][1] != sums[2][1] {
		t.Errorf("SHA-256 of the file copied in, of knfsd's copy and of the file copied back differ or are missing")
	}
	if device == "rxe0" {
		// A Soft-RoCE packet carries at most the path MTU (1024 bytes on
		// the guest's 1500-byte Ethernet): the file went twice.
		if sent := rxeSentPackets(t) - before; sent < 2*3<<10 {
			t.Errorf("rxe0 sent %d packets during the copies, want at least %d", sent, 2*3<<10)
		}
	}

	out = run("bench", "--output-format json --rw randread --bs 64k --size 4m --runtime 1 --conns 2 "+ip+":/", "")
	var f fioOutput
	if err := json.Unmarshal([]byte(out), &f); err != nil || len(f.Jobs) != 1 || f.Jobs[0].Read.TotalIOs == 0 {
		t.Fatalf("bench: %v", err)
	}
	if wc, _ := f.Jobs[0].RPCRDMA["write_chunks"].(float64); wc < float64(f.Jobs[0].Read.TotalIOs) {
		t.Errorf("bench: %v READs, %v write chunks: READ data did not land in write chunks", f.Jobs[0].Read.TotalIOs, wc)
	}
	var head struct{ RPCRDMA struct{ File string } }
	json.Unmarshal([]byte(out), &head)
	if head.RPCRDMA.File == "" {
		t.Errorf("bench's report names no file")
	} else if out, _ := lab.Run(t, "ls -A /export", lab.CmdTimeout); strings.Contains(out, head.RPCRDMA.File+"\n") {
		t.Errorf("bench left its file %s in /export", head.RPCRDMA.File)
	}
}
