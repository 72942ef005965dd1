package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

func cmdPing(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ping", "ping [flags] HOST:PORT", stderr)
	prog := fs.Uint("prog", benchprog.Prog, "program number to call NULL on (100003 for NFS)")
	vers := fs.Uint("vers", benchprog.Vers, "program version")
	count := fs.Int("count", 3, "number of NULL calls")
	interval := fs.Duration("interval", 200*time.Millisecond, "pause between calls")
	timeout := fs.Duration("timeout", 10*time.Second, "limit for connecting and for each call")
	reconnect := fs.Bool("reconnect", false, "when the connection is lost, connect again and carry on, sending the call in flight again; a call that fails is reported and counted, and ping goes on")
	var tf transportFlags
	tf.register(fs, false)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: rpcrdma ping [flags] HOST:PORT

Connects over the software iWARP, prints what the connection negotiated
(RPC-over-RDMA version, MPA revision, CRC, inline sizes each way, credits,
remote invalidation) and makes NULL calls, printing each round trip.
With --reconnect it outlives the connection, as a client watching a
server restart or fail over: it says when it connected again and what the
new connection negotiated, and exits non-zero if any call failed.
"rpcrdma ping --prog 100003 --vers 3 HOST:20049" checks an NFS/RDMA server
such as Linux knfsd. Exits non-zero with a one-line error when the server is
down, rejects the connection, or does not speak RPC-over-RDMA.

flags:
`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "rpcrdma ping: want one address, HOST:PORT")
		return errUsage
	}
	if err := tf.check(); err != nil {
		return err
	}
	if *count < 1 {
		return fmt.Errorf("--count %d: want at least 1", *count)
	}
	addr := fs.Arg(0)
	p, err := tf.provider()
	if err != nil {
		return err
	}
	cfg := tf.config(tf.logger())
	// conns receives each connection made, for its negotiation to be
	// printed before the next call's round trip.
	conns := make(chan *rpcrdma.Conn, 1)
	dial := func(ctx context.Context) (rpc.Transport, error) {
		c, err := rpcrdma.Dial(ctx, p, addr, cfg)
		if err != nil {
			return nil, err
		}
		select {
		case <-conns: // never printed: replaced before a call ended
		default:
		}
		conns <- c
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	var cli *rpc.Client
	var first rpc.Transport
	if *reconnect {
		cli, err = rpc.DialClient(ctx, rpc.ReconnectConfig{Dial: dial})
	} else if first, err = dial(ctx); err == nil {
		cli = rpc.NewClient(first)
	}
	cancel()
	if err != nil {
		return describeDialError(addr, err)
	}
	defer cli.Close()

	var rtts []time.Duration
	failed := 0
	for i := 0; i < *count; i++ {
		if i > 0 {
			time.Sleep(*interval)
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		start := time.Now()
		err := cli.Null(ctx, uint32(*prog), uint32(*vers))
		rtt := time.Since(start)
		cancel()
		select {
		case conn := <-conns:
			if i > 0 {
				fmt.Fprintf(stdout, "connection lost; connected again (%d dials failed meanwhile)\n", cli.Stats().DialErrors)
			}
			printInfo(stdout, addr, conn, tf)
		default:
		}
		if err != nil {
			err = fmt.Errorf("NULL call %d to program %d version %d: %w", i+1, *prog, *vers, err)
			if !*reconnect {
				return err
			}
			fmt.Fprintln(stdout, err)
			failed++
			continue
		}
		rtts = append(rtts, rtt)
		fmt.Fprintf(stdout, "NULL %d: %v\n", i+1, rtt.Round(time.Microsecond))
	}
	if len(rtts) == 0 {
		return fmt.Errorf("all %d NULL calls failed", *count)
	}
	lo, hi, sum := rtts[0], rtts[0], time.Duration(0)
	for _, r := range rtts {
		lo, hi, sum = min(lo, r), max(hi, r), sum+r
	}
	fmt.Fprintf(stdout, "%d calls: min %v, avg %v, max %v\n", len(rtts),
		lo.Round(time.Microsecond), (sum / time.Duration(len(rtts))).Round(time.Microsecond), hi.Round(time.Microsecond))
	if failed > 0 {
		return fmt.Errorf("%d of %d NULL calls failed", failed, *count)
	}
	return nil
}

func printInfo(w io.Writer, addr string, conn *rpcrdma.Conn, tf transportFlags) {
	in := conn.Info()
	pd := "none (RFC 8797 defaults assumed)"
	if in.PeerPrivateData {
		pd = "RFC 8797"
	}
	fmt.Fprintf(w, "connected to %s (%v)\n", addr, in.Remote)
	fmt.Fprintf(w, "  rpc-over-rdma version %d\n", in.Version)
	fmt.Fprintf(w, "  mpa revision %d, crc %s\n", providerRevision(conn, tf.mpaRev), onOff(providerCRC(conn)))
	fmt.Fprintf(w, "  peer private data: %s\n", pd)
	fmt.Fprintf(w, "  inline: send %d bytes, receive %d bytes\n", in.SendInline, in.RecvInline)
	fmt.Fprintf(w, "  credits granted: %d\n", in.Credits)
	fmt.Fprintf(w, "  remote invalidation: %s\n", onOff(in.RemoteInvalidation))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// describeDialError turns a connection failure into one clear line.
func describeDialError(addr string, err error) error {
	var rej *rdma.RejectError
	var op *net.OpError
	switch {
	case errors.As(err, &rej):
		return fmt.Errorf("%s rejected the connection (MPA reject): %w", addr, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("cannot reach %s: %w", addr, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s did not complete the iWARP handshake in time (not an RDMA server?): %w", addr, err)
	}
	return fmt.Errorf("connecting to %s: %w", addr, err)
}
