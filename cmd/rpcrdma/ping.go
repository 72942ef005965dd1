package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

func cmdPing(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ping", "ping [flags] HOST:PORT", stderr)
	prog := progFlag(benchprog.Prog)
	fs.Var(&prog, "prog", "program `number` to call NULL on, decimal or 0x hexadecimal (100003 for NFS)")
	vers := fs.Uint("vers", benchprog.Vers, "program version")
	count := fs.Int("count", 3, "number of NULL calls")
	interval := fs.Duration("interval", 200*time.Millisecond, "pause between calls")
	timeout := fs.Duration("timeout", 10*time.Second, "limit for connecting and for each call; 0: none")
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
such as Linux knfsd; a server over Linux soft-iWARP (siw) also needs
--first-send-delay 50ms. Exits non-zero with a one-line error when the
server is down, rejects the connection, or does not speak RPC-over-RDMA;
exits 2 for a wrong flag or argument.

flags:
`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		return usagef("want one address, HOST:PORT")
	case 1:
	default:
		return usagef("unexpected argument %q: want one address, HOST:PORT", fs.Arg(1))
	}
	if err := tf.check(); err != nil {
		return err
	}
	if *count < 1 {
		return usagef("--count %d: want at least 1", *count)
	}
	if *interval < 0 {
		return usagef("--interval %v: want 0 or more", *interval)
	}
	if *timeout < 0 {
		return usagef("--timeout %v: want 0 (none) or more", *timeout)
	}
	// withTimeout bounds ctx by --timeout, unless it is 0.
	withTimeout := func() (context.Context, context.CancelFunc) {
		if *timeout == 0 {
			return context.WithCancel(context.Background())
		}
		return context.WithTimeout(context.Background(), *timeout)
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
	ctx, cancel := withTimeout()
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
		ctx, cancel := withTimeout()
		start := time.Now()
		err := cli.Null(ctx, uint32(prog), uint32(*vers))
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
			err = fmt.Errorf("NULL call %d to program %s version %d: %w", i+1, progString(uint32(prog)), *vers, err)
			if i == 0 && tf.firstSendDelay == 0 && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w (a Linux soft-iWARP server needs --first-send-delay %v)", err, iwarp.SiwFirstSendDelay)
			}
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
	var sum time.Duration
	v := make([]float64, len(rtts))
	for i, r := range rtts {
		sum += r
		v[i] = float64(r)
	}
	med, rg := median(v) // as bench's: the mean of the middle two of an even count
	us := func(f float64) time.Duration { return time.Duration(f).Round(time.Microsecond) }
	fmt.Fprintf(stdout, "%s: min %v, median %v, avg %v, max %v\n", plural(len(rtts), "call"),
		us(rg[0]), us(med), (sum / time.Duration(len(rtts))).Round(time.Microsecond), us(rg[1]))
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

// plural returns "1 call", "2 calls".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// dialError is a connection failure said in one line that names the
// address once; it unwraps to the error it describes.
type dialError struct {
	msg string
	err error
}

func (e *dialError) Error() string { return e.msg }
func (e *dialError) Unwrap() error { return e.err }

// describeDialError turns a connection failure into one clear line. Each
// layer below names the address it dialed (rpcrdma, iwarp, net), so the
// line keeps only the first cause that does not.
func describeDialError(addr string, err error) error {
	cause := err
	for e := err; e != nil; e = errors.Unwrap(e) {
		if !strings.Contains(e.Error(), addr) {
			cause = e
			break
		}
	}
	var rej *rdma.RejectError
	var op *net.OpError
	var msg string
	switch {
	case errors.As(err, &rej):
		msg = fmt.Sprintf("%s rejected the connection (MPA reject): %v", addr, cause)
	case errors.Is(err, iwarp.ErrNotMPA):
		msg = fmt.Sprintf("%s is not an RDMA server: %v", addr, cause)
	case errors.As(err, &op) && op.Op == "dial":
		msg = fmt.Sprintf("cannot reach %s: %v", addr, op.Err)
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("%s did not complete the iWARP handshake in time (not an RDMA server?): %v", addr, cause)
	default:
		msg = fmt.Sprintf("connecting to %s: %v", addr, cause)
	}
	return &dialError{msg, err}
}
