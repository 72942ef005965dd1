//go:build linux && cgo && verbs

package rpcrdma_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/internal/roundtrip"
	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// benchVerbsNull measures a NULL call's round trip over the verbs
// provider, requester and responder in this process on one device
// connected to itself (as perftest's ib_send_lat -R runs both ends in one
// guest): RPCRDMA_VERBS_ADDR (an IP address of the device) and
// RPCRDMA_VERBS_DEVICE, or rxe0 in the lab guest. One call at a time;
// ns/op is the round trip's mean and p50-ns/op its median, to compare
// with twice ib_send_lat's typical (median) latency (lab/bench-verbs.sh
// does). The busy-poll form polls only (a negative verbs.Options.BusyPoll),
// as ib_send_lat does without -e.
func benchVerbsNull(b *testing.B, busyPoll time.Duration) {
	ip, device := os.Getenv("RPCRDMA_VERBS_ADDR"), os.Getenv("RPCRDMA_VERBS_DEVICE")
	if ip == "" {
		if !lab.InGuest() {
			b.Skip("set RPCRDMA_VERBS_ADDR to an RDMA device's IP address (lab/bench-verbs.sh runs this in the lab guest)")
		}
		ip, device = lab.GuestRxeIP, "rxe0"
	}
	p, err := verbs.New(verbs.Options{Device: device, BusyPoll: busyPoll})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := rpcrdma.Listen(ctx, p, ip+":0", nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := rpc.NewServer(nil)
	benchprog.Register(srv)
	served := make(chan error, 1)
	go func() { served <- rpcrdma.Serve(ctx, l, srv) }()
	conn, err := rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
	if err != nil {
		b.Fatal(err)
	}
	cli := rpc.NewClient(conn)
	bc := benchprog.Client{C: cli}
	// 100 warm-up calls: buffers, credits, the first calls' page faults.
	roundtrip.Measure(b, 100, func() error { return bc.Null(ctx) })
	cli.Close()
	conn.Close()
	srv.Close()
	l.Close()
	<-served
}

func BenchmarkVerbsNull(b *testing.B)         { benchVerbsNull(b, 0) }
func BenchmarkVerbsNullBusyPoll(b *testing.B) { benchVerbsNull(b, -1) }
