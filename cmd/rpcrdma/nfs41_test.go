package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestNFSProbe41Knfsd: probe finds the NFSv4 minor versions knfsd speaks
// and prints what a 4.1 session negotiated, over TCP and over RDMA.
func TestNFSProbe41Knfsd(t *testing.T) {
	lab.Require(t)
	for _, args := range [][]string{
		{"--transport", "tcp", "--nfs-port", "12049"},
		{"--first-send-delay", "50ms"},
	} {
		full := append(append([]string{"nfs", "probe", "--vers", "4.1"}, args...), "127.0.0.1")
		out, errOut, code := rpcrdmaCmd(t, 90*time.Second, full...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", full, code, out, errOut)
		}
		for _, want := range []string{"NFSv4.1 ", "offered", "SESSION v4.1", "slots, requests up to", "server owner", "lease 10s", "max read 1048576", map[bool]string{true: "backchannel not asked for", false: "backchannel granted"}[args[0] == "--transport"]} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", full, want, out)
			}
		}
		if strings.Contains(out, "MOUNT") {
			t.Errorf("--vers 4.1 asked MOUNT:\n%s", out)
		}
	}
}

// TestNFSProbe41NotOffered: a server without NFSv4 fails a 4.1 probe,
// saying which versions it has.
func TestNFSProbe41NotOffered(t *testing.T) {
	s := startNFSServe(t)
	out, errOut, code := s.nfsRun(t, "probe", "--vers", "4.1", "127.0.0.1")
	if code != 1 || !strings.Contains(out, "NFS NULL v4") || !strings.Contains(out, "not offered; the server has version 3") ||
		!strings.Contains(errOut, "NFS NULL v4") {
		t.Errorf("probe --vers 4.1 of a v3 server: exit %d\n%s%s", code, out, errOut)
	}
}

// TestNFSFiles41Knfsd: ls, cat, cp both ways and bench speak NFSv4.1 to
// knfsd over RDMA, the copy through a temporary name, the bench on one
// session over two connections.
func TestNFSFiles41Knfsd(t *testing.T) {
	lab.Require(t)
	o := []string{"--vers", "4.1", "--first-send-delay", "50ms"}
	run := func(args ...string) (string, string) {
		t.Helper()
		full := append(append([]string{"nfs", args[0]}, o...), args[1:]...)
		out, errOut, code := rpcrdmaCmd(t, 3*time.Minute, full...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", full, code, out, errOut)
		}
		return out, errOut
	}
	if out, _ := run("cat", "127.0.0.1:/hello.txt"); out != "hello from the guest\n" {
		t.Errorf("cat: %q", out)
	}
	local := t.TempDir()
	name := fmt.Sprintf("go41-cp-%d.bin", time.Now().UnixNano())
	data := noise(2<<20 + 5)
	os.WriteFile(filepath.Join(local, name), data, 0o640)
	run("cp", filepath.Join(local, name), "127.0.0.1:/")
	defer lab.Run(t, "rm -f /export/"+name, lab.CmdTimeout)
	out, _ := run("ls", "127.0.0.1:/")
	if !regexp.MustCompile(`(?m)^-rw-r----- +1 .* 2097157 .* `+name+`$`).MatchString(out) || strings.Contains(out, ".part") {
		t.Errorf("ls after cp:\n%s", out)
	}
	back := filepath.Join(local, "back")
	run("cp", "127.0.0.1:/"+name, back)
	if got, _ := os.ReadFile(back); !bytes.Equal(got, data) {
		t.Errorf("cp back: %d bytes", len(got))
	}
	out, _ = run("bench", "--output-format", "json", "--rw", "randwrite,randread", "--bs", "64k", "--size", "4m", "--runtime", "1", "--numjobs", "2", "127.0.0.1:/")
	var f fioOutput
	if err := json.Unmarshal([]byte(out), &f); err != nil || len(f.Jobs) != 2 || f.Jobs[0].Write.TotalIOs == 0 || f.Jobs[1].Read.TotalIOs == 0 {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	if f.Jobs[1].RPCRDMA["write_chunks"].(float64) < float64(f.Jobs[1].Read.TotalIOs) {
		t.Errorf("READs did not land in write chunks: %v", f.Jobs[1].RPCRDMA)
	}
	// Its own file, named in the report, is gone (other tests' benches
	// may run in the same export at the same time).
	var head struct{ RPCRDMA struct{ File string } }
	json.Unmarshal([]byte(out), &head)
	benchFile := head.RPCRDMA.File
	if out, _ := run("ls", "127.0.0.1:/"); benchFile == "" || strings.Contains(out, " "+benchFile+"\n") {
		t.Errorf("bench left its file %q:\n%s", benchFile, out)
	}
}

// TestNFSProbeJSON: probe --json gives every step and the session's
// parameters as one JSON object, and exits as the text form does.
func TestNFSProbeJSON(t *testing.T) {
	s := startNFSServe(t)
	out, errOut, code := s.nfsRun(t, "probe", "--json", "127.0.0.1")
	var rep struct {
		Host  string
		Steps []struct {
			Step, Result, Error string
			Micros              int64
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Host != "127.0.0.1" || len(rep.Steps) < 8 {
		t.Fatalf("probe --json: exit %d\n%s%s", code, out, errOut)
	}
	for _, st := range rep.Steps {
		if st.Step == "" || st.Error != "" || st.Result == "" {
			t.Errorf("step %+v", st)
		}
	}
	if strings.Contains(out, "MOUNT NULL (tcp)  ") {
		t.Error("probe --json printed the text form too")
	}
	lab.Require(t)
	out, errOut, code = rpcrdmaCmd(t, 90*time.Second, "nfs", "probe", "--json", "--vers", "4.1", "--first-send-delay", "50ms", "127.0.0.1")
	var rep41 struct {
		Session41 struct {
			Slots       int
			Backchannel bool
			MaxRead     int `json:"max_read"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep41) != nil || rep41.Session41.Slots == 0 || !rep41.Session41.Backchannel || rep41.Session41.MaxRead != 1<<20 {
		t.Errorf("probe --json --vers 4.1 against knfsd: exit %d %+v\n%s%s", code, rep41, out, errOut)
	}
}

// TestNFSProbeHuman: probe -h prints FSSTAT's sizes as df -h does.
func TestNFSProbeHuman(t *testing.T) {
	s := startNFSServe(t)
	out, errOut, code := s.nfsRun(t, "probe", "-h", "127.0.0.1")
	if code != 0 || !regexp.MustCompile(`FSSTAT .* [0-9.]+ [KMGTPE]iB of [0-9.]+ [KMGTPE]iB free`).MatchString(out) {
		t.Errorf("probe -h: exit %d\n%s%s", code, out, errOut)
	}
}
