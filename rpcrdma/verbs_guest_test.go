package rpcrdma_test

import (
	"context"
	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestVerbsGuest builds this package's tests with -tags verbs and runs
// them in the lab guest: TestVerbsLinuxNFS (our requester over the verbs
// provider against knfsd) and TestVerbsGuestClientMount (the kernel's NFS
// client against our responder over verbs) and TestVerbsSharedReceives (a
// responder's shared receive pool on a real shared receive queue), each on
// rxe0 (RoCE v2) and siw0 (iWARP). It skips without the lab VM.
func TestVerbsGuest(t *testing.T) {
	if lab.InGuest() {
		t.Skip("already in the guest")
	}
	out := lab.RunTestBinary(t, ".", []string{"verbs"}, "-test.run", "^TestVerbs(LinuxNFS|GuestClientMount|SharedReceives)$", "-test.v")
	for _, want := range []string{"--- PASS: TestVerbsLinuxNFS/rxe0", "--- PASS: TestVerbsLinuxNFS/siw0",
		"--- PASS: TestVerbsGuestClientMount/rxe0", "--- PASS: TestVerbsGuestClientMount/siw0",
		"--- PASS: TestVerbsSharedReceives/rxe0", "--- PASS: TestVerbsSharedReceives/siw0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the guest's output:\n%s", want, out)
		}
	}
}

// TestVerbsGuestToIWARP: across providers. Our responder over the pure-Go
// iWARP listens on the host where the guest's GuestPeerIP:20049 arrives
// (lab.PeerAddr); in the guest, our requester over the verbs provider on
// siw0 calls it (TestVerbsToHostIWARP). It skips without the lab VM.
func TestVerbsGuestToIWARP(t *testing.T) {
	if lab.InGuest() {
		t.Skip("already in the guest")
	}
	lab.Require(t)
	lab.Lock(t, "peer") // PeerAddr, where the guest's calls arrive
	ip, err := iwarp.New(iwarp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := rpcrdma.Listen(ctx, ip, lab.PeerAddr, nil)
	if err != nil {
		t.Skipf("cannot listen where the guest's calls arrive (%s): %v", lab.PeerAddr, err)
	}
	srv := rpc.NewServer(nil)
	benchprog.Register(srv)
	served := make(chan struct{})
	go func() { rpcrdma.Serve(ctx, l, srv); close(served) }()
	out := lab.RunTestBinary(t, ".", []string{"verbs"}, "-test.run", "^TestVerbsToHostIWARP$", "-test.v", "-verbs.peer")
	l.Close()
	srv.Close()
	<-served
	if !strings.Contains(out, "--- PASS: TestVerbsToHostIWARP") {
		t.Errorf("the guest's requester did not pass:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "over siw0") {
			t.Log(strings.TrimSpace(line))
		}
	}
}
