//go:build linux && cgo && verbs

package rpcrdma_test

import (
	"context"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bc, stop := verbsNull(ctx, b, "an RDMA device's IP address (lab/bench-verbs.sh runs this in the lab guest)", verbs.Options{BusyPoll: busyPoll})
	defer stop()
	roundtrip.Measure(b, 0, func() error { return bc.Null(ctx) })
}

func BenchmarkVerbsNull(b *testing.B)         { benchVerbsNull(b, 0) }
func BenchmarkVerbsNullBusyPoll(b *testing.B) { benchVerbsNull(b, -1) }

// verbsNull connects a client to a benchprog server over the verbs
// provider opened with o, requester and responder in this process on
// the device lab.VerbsTarget names (o.Device is set to it; without one,
// b is skipped, saying to set RPCRDMA_VERBS_ADDR to want), and makes 100
// NULL calls to warm it up: buffers, credits, the first calls' page
// faults. ctx bounds the listener and the connection. It returns the
// client and stop, which closes both ends and waits for the server.
func verbsNull(ctx context.Context, b *testing.B, want string, o verbs.Options) (bc benchprog.Client, stop func()) {
	b.Helper()
	ip, device := lab.VerbsTarget(b, want)
	o.Device = device
	p, err := verbs.New(o)
	if err != nil {
		b.Fatal(err)
	}
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
	bc = benchprog.Client{C: cli}
	for range 100 {
		if err := bc.Null(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return bc, func() {
		cli.Close()
		conn.Close()
		srv.Close()
		l.Close()
		<-served
	}
}
