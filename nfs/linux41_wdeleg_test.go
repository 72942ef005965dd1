package nfs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// TestLinux41WriteDelegation asks knfsd for a write delegation
// (OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG on an OPEN for reading and
// writing, over RDMA with the backchannel). Linux grants write
// delegations from 6.6 on; an older knfsd (the lab's 6.1) grants none,
// and the test says so and skips. Granted, the client keeps an UNSTABLE
// write; the guest's own read of the file makes knfsd recall the
// delegation, and the read must see the write, which the client sends
// (WRITE, COMMIT) before it returns the delegation.
func TestLinux41WriteDelegation(t *testing.T) {
	p, addr := knfsdSiw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Mount4(ctx, Config4{Dial: RDMA(p, addr, &rpcrdma.Config{BackwardCredits: 4}),
		Cred: &rpc.AuthSysParms{MachineName: "go-rpcrdma-test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Info().Backchannel {
		t.Fatal("knfsd did not grant the backchannel on the connection")
	}
	name := fmt.Sprintf("wdeleg41-%d.txt", time.Now().UnixNano())
	guestHello(t, name)
	var f *File4
	got := nfs4.DelegNone
	// knfsd grants nothing while a grace period runs: try for 30 s.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		f, err = c.Open(ctx, c.Root(), name, OpenOptions{Access: nfs4.ShareAccessBoth, Delegation: true})
		if errors.Is(err, nfs4.ErrGrace) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got = f.Delegation(); got == nfs4.DelegWrite || time.Now().After(deadline) {
			break
		}
		f.Close(ctx)
	}
	defer f.Close(ctx)
	if got != nfs4.DelegWrite {
		uname, _ := lab.Run(t, "uname -r", lab.CmdTimeout)
		t.Skipf("knfsd (Linux %s) granted %v, not a write delegation, to an OPEN for reading and writing that wanted one",
			strings.TrimSpace(uname), got)
	}
	if _, _, _, err := f.WriteAt(ctx, []byte("HELLO\n"), 0, nfs4.Unstable); err != nil {
		t.Fatal(err)
	}
	out, rc := lab.Run(t, "timeout 50 cat /export/"+name, lab.CmdTimeout)
	if rc != 0 || out != "HELLO\n" {
		t.Errorf("the guest read %q (rc %d) under the recall, want the client's write", out, rc)
	}
	if f.Delegated() || c.Info().Recalls < 1 {
		t.Errorf("after the guest's read: delegated %v, %+v", f.Delegated(), c.Info())
	}
}
