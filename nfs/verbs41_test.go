//go:build linux && cgo && verbs

package nfs

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// TestVerbs41 runs in the lab guest (TestGuest41 starts it there): the
// NFSv4.1 client over the verbs provider against the guest's knfsd, on
// rxe0 (RoCE v2) and on siw0 (iWARP), two connections in one session
// with the backchannel, every operation (exercise41).
func TestVerbs41(t *testing.T) {
	if !lab.InGuest() {
		t.Skip("runs in the lab guest (TestGuest41)")
	}
	for _, dev := range []struct{ name, ip string }{{"rxe0", lab.GuestRxeIP}, {"siw0", lab.GuestSiwIP}} {
		t.Run(dev.name, func(t *testing.T) {
			p, err := verbs.New(verbs.Options{Device: dev.name})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			c, err := Mount4(ctx, Config4{Dial: RDMA(p, net.JoinHostPort(dev.ip, "20049"), &rpcrdma.Config{BackwardCredits: 4}),
				Conns: 2, Cred: &rpc.AuthSysParms{MachineName: "go-rpcrdma-guest"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if in := c.Info(); !in.Backchannel || in.MaxRead < 1<<20 {
				t.Errorf("session: %+v", in)
			}
			exercise41(t, ctx, c, dev.name)
		})
	}
}
