package nfs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// knfsdRestart stops knfsd in the lab guest and starts it again as the
// guest's init does (NFS/TCP on 2049, NFS/RDMA on 20049). knfsd forgets
// its clients, sessions and opens, and enters a grace period (10 s in the
// lab) in which the clients its recovery directory records may reclaim.
const knfsdRestart = "rpc.nfsd 0 && rpc.nfsd -V 3 --rdma=20049 8 && " +
	"(grep -q '^rdma 20049' /proc/fs/nfsd/portlist || echo 'rdma 20049' > /proc/fs/nfsd/portlist)"

// TestLinux41Restart RESTARTS KNFSD in the lab guest (rpc.nfsd 0, then
// rpc.nfsd as the guest's init runs it; a few seconds) while two NFSv4.1
// clients, one over TCP and one over RPC-over-RDMA with a backchannel,
// hold open files, one of them under a read delegation. Each client meets
// the lost session, makes a new client ID and session, reclaims its opens
// with CLAIM_PREVIOUS in knfsd's grace period and sends RECLAIM_COMPLETE;
// the files opened before the restart are written and read after it
// through the same File4s, and a new OPEN made in the grace period waits
// out NFS4ERR_GRACE. Other tests against knfsd at the same time see the
// restart too; our own server, which the guest may mount, is not touched.
func TestLinux41Restart(t *testing.T) {
	p, addr := knfsdSiw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cred := &rpc.AuthSysParms{MachineName: "go-rpcrdma-test"}
	reconnect := rpc.ReconnectConfig{MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}
	tcp, err := Mount4(ctx, Config4{Dial: TCP(lab.NFSTCPAddr), Conns: 2, Cred: cred, Reconnect: reconnect})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	rdma, err := Mount4(ctx, Config4{Dial: RDMA(p, addr, &rpcrdma.Config{BackwardCredits: 4}), Cred: cred, Reconnect: reconnect})
	if err != nil {
		t.Fatal(err)
	}
	defer rdma.Close()

	base := fmt.Sprintf("restart41-%d", time.Now().UnixNano())
	defer lab.Run(t, "rm -f /export/"+base+"-*", lab.CmdTimeout)
	type open struct {
		c    *Client4
		f    *File4
		want string
	}
	var opens []*open
	for i, c := range []*Client4{tcp, tcp, rdma} {
		f, err := c.Open(ctx, c.Root(), fmt.Sprintf("%s-%d", base, i), OpenOptions{Access: nfs4.ShareAccessBoth, Create: true})
		if err != nil {
			t.Fatal(err)
		}
		o := &open{c: c, f: f, want: fmt.Sprintf("before %d;", i)}
		if _, _, _, err := f.WriteAt(ctx, []byte(o.want), 0, nfs4.FileSync); err != nil {
			t.Fatal(err)
		}
		opens = append(opens, o)
	}
	// A file the RDMA client reads under a read delegation.
	deleg := base + "-deleg"
	guestHello(t, deleg)
	df := openDelegated(t, ctx, rdma, deleg, 60*time.Second)
	buf := make([]byte, 64)
	if n, _, err := df.ReadAt(ctx, buf, 0); err != nil || string(buf[:n]) != "hello\n" {
		t.Fatalf("READ under the delegation: %q %v", buf[:n], err)
	}

	start := time.Now()
	if out, rc := lab.Run(t, knfsdRestart, lab.CmdTimeout); rc != 0 {
		t.Fatalf("restarting knfsd: %d %s", rc, out)
	}
	t.Logf("knfsd restarted in %v", time.Since(start).Round(time.Millisecond))

	// Writes through the File4s opened before the restart, and a new
	// OPEN in the grace period, all at once.
	var wg sync.WaitGroup
	errs := make(chan error, len(opens)+1)
	for i, o := range opens {
		wg.Go(func() {
			after := fmt.Sprintf("after %d", i)
			_, _, _, err := o.f.WriteAt(ctx, []byte(after), uint64(len(o.want)), nfs4.FileSync)
			o.want += after
			errs <- err
		})
	}
	wg.Go(func() {
		g, err := tcp.Open(ctx, tcp.Root(), base+"-new", OpenOptions{Access: nfs4.ShareAccessWrite, Create: true})
		if err == nil {
			err = g.Close(ctx)
		}
		errs <- err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("after the restart: %v", err)
		}
	}
	t.Logf("writes after the restart done %v after it began", time.Since(start).Round(time.Millisecond))
	for i, o := range opens {
		n, _, err := o.f.ReadAt(ctx, buf, 0)
		if err != nil || string(buf[:n]) != o.want {
			t.Errorf("file %d after the restart: %q %v, want %q", i, buf[:n], err, o.want)
		}
		if err := o.f.Close(ctx); err != nil {
			t.Errorf("CLOSE of file %d after the restart: %v", i, err)
		}
	}
	if n, _, err := df.ReadAt(ctx, buf, 0); err != nil || string(buf[:n]) != "hello\n" {
		t.Errorf("READ of the delegated file after the restart: %q %v", buf[:n], err)
	}
	if err := df.Close(ctx); err != nil {
		t.Errorf("CLOSE of the delegated file: %v", err)
	}
	for name, c := range map[string]*Client4{"tcp": tcp, "rdma": rdma} {
		in := c.Info()
		t.Logf("%s: recoveries %d, reclaimed %d (delegations %d), refused %d, reopened %d, grace waits %d",
			name, in.Recoveries, in.Reclaimed, in.DelegationsReclaimed, in.ReclaimRefused, in.Reopened, in.GraceWaits)
		// Two files each (the RDMA client's second is the delegated one),
		// reclaimed at each recovery: more than one if another test
		// restarted knfsd meanwhile.
		if in.Recoveries < 1 || in.Reclaimed < 2 || in.ReclaimRefused != 0 {
			t.Errorf("%s: %d recoveries, %d reclaimed, %d refused; want 1 or more, 2 or more, 0", name, in.Recoveries, in.Reclaimed, in.ReclaimRefused)
		}
	}
	if in := tcp.Info(); in.GraceWaits < 1 {
		t.Logf("the new OPEN met no NFS4ERR_GRACE (the grace period had ended?)")
	}
}
