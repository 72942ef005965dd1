package main

import (
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
		for _, want := range []string{"NFSv4.1 ", "offered", "SESSION v4.1", "slots, requests up to", "server owner", "lease 10s", "max read 1048576"} {
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
