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

// cmdPing is the ping command: it connects, prints what the connection
// negotiated and makes --count NULL calls, printing each round trip and
// a summary.
func cmdPing(args []string, stdout, stderr io.Writer) error {
	o, err := parsePingFlags(args, stderr)
	if err != nil {
		return err
	}
	p, err := o.tf.provider()
	if err != nil {
		return err
	}
	pg := &pinger{o: o, out: stdout, p: p, cfg: o.tf.config(o.tf.logger()), conns: make(chan *rpcrdma.Conn, 1)}
	cli, err := pg.connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	rtts, failed, err := pg.calls(cli)
	if err != nil {
		return err
	}
	return o.summary(stdout, rtts, failed)
}

// pingOptions are ping's flags and its address.
type pingOptions struct {
	addr      string
	prog      progFlag
	vers      uint
	count     int
	interval  time.Duration
	timeout   time.Duration
	reconnect bool
	tf        transportFlags
}

// parsePingFlags parses ping's arguments and checks the flags' values.
func parsePingFlags(args []string, stderr io.Writer) (*pingOptions, error) {
	o := pingOptions{prog: progFlag(benchprog.Prog)}
	fs := newFlags("ping", "ping [flags] HOST:PORT", stderr)
	fs.Var(&o.prog, "prog", "program `number` to call NULL on, decimal or 0x hexadecimal (100003 for NFS)")
	fs.UintVar(&o.vers, "vers", benchprog.Vers, "program version")
	fs.IntVar(&o.count, "count", 3, "number of NULL calls")
	fs.DurationVar(&o.interval, "interval", 200*time.Millisecond, "pause between calls")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "limit for connecting and for each call; 0: none")
	fs.BoolVar(&o.reconnect, "reconnect", false, "when the connection is lost, connect again and carry on, sending the call in flight again; a call that fails is reported and counted, and ping goes on")
	o.tf.register(fs, false)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), pingUsage)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
		return nil, usagef("want one address, HOST:PORT")
	case 1:
	default:
		return nil, usagef("unexpected argument %q: want one address, HOST:PORT", fs.Arg(1))
	}
	if err := o.tf.check(); err != nil {
		return nil, err
	}
	if o.count < 1 {
		return nil, usagef("--count %d: want at least 1", o.count)
	}
	if o.interval < 0 {
		return nil, usagef("--interval %v: want 0 or more", o.interval)
	}
	if o.timeout < 0 {
		return nil, usagef("--timeout %v: want 0 (none) or more", o.timeout)
	}
	o.addr = fs.Arg(0)
	return &o, nil
}

// withTimeout returns a context bounded by --timeout, unless it is 0.
func (o *pingOptions) withTimeout() (context.Context, context.CancelFunc) {
	if o.timeout == 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), o.timeout)
}

// pinger makes ping's connections and calls.
type pinger struct {
	o   *pingOptions
	out io.Writer
	p   rdma.Provider
	cfg *rpcrdma.Config
	// conns receives each connection made, for its negotiation to be
	// printed before the next call's round trip.
	conns chan *rpcrdma.Conn
}

// dial connects to the address and posts the connection on conns.
func (pg *pinger) dial(ctx context.Context) (rpc.Transport, error) {
	c, err := rpcrdma.Dial(ctx, pg.p, pg.o.addr, pg.cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-pg.conns: // never printed: replaced before a call ended
	default:
	}
	pg.conns <- c
	return c, nil
}

// connect returns the client ping calls with: on one connection, or with
// --reconnect one that dials again when its connection is lost.
func (pg *pinger) connect() (*rpc.Client, error) {
	ctx, cancel := pg.o.withTimeout()
	defer cancel()
	if pg.o.reconnect {
		cli, err := rpc.DialClient(ctx, rpc.ReconnectConfig{Dial: pg.dial})
		if err != nil {
			return nil, describeDialError(pg.o.addr, err)
		}
		return cli, nil
	}
	first, err := pg.dial(ctx)
	if err != nil {
		return nil, describeDialError(pg.o.addr, err)
	}
	return rpc.NewClient(first), nil
}

// calls makes the --count NULL calls, printing each round trip, and
// returns those of the calls that succeeded and the number that failed.
// Without --reconnect the first failure ends it with its error.
func (pg *pinger) calls(cli *rpc.Client) ([]time.Duration, int, error) {
	var rtts []time.Duration
	failed := 0
	for i := 0; i < pg.o.count; i++ {
		if i > 0 {
			time.Sleep(pg.o.interval)
		}
		rtt, err := pg.call(cli, i)
		if err != nil {
			if !pg.o.reconnect {
				return nil, 0, err
			}
			fmt.Fprintln(pg.out, err)
			failed++
			continue
		}
		rtts = append(rtts, rtt)
		fmt.Fprintf(pg.out, "NULL %d: %v\n", i+1, rtt.Round(time.Microsecond))
	}
	return rtts, failed, nil
}

// call makes NULL call i and returns its round trip, printing first what
// a connection made since the last call negotiated.
func (pg *pinger) call(cli *rpc.Client, i int) (time.Duration, error) {
	ctx, cancel := pg.o.withTimeout()
	start := time.Now()
	err := cli.Null(ctx, uint32(pg.o.prog), uint32(pg.o.vers))
	rtt := time.Since(start)
	cancel()
	select {
	case conn := <-pg.conns:
		if i > 0 {
			fmt.Fprintf(pg.out, "connection lost; connected again (%d dials failed meanwhile)\n", cli.Stats().DialErrors)
		}
		printInfo(pg.out, pg.o.addr, conn, pg.o.tf)
	default:
	}
	if err != nil {
		err = fmt.Errorf("NULL call %d to program %s version %d: %w", i+1, progString(uint32(pg.o.prog)), pg.o.vers, err)
		if i == 0 && pg.o.tf.firstSendDelay == 0 && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (a Linux soft-iWARP server needs --first-send-delay %v)", err, iwarp.SiwFirstSendDelay)
		}
		return 0, err
	}
	return rtt, nil
}

// summary prints the round trips' least, median, mean and greatest, and
// returns an error when any call failed.
func (o *pingOptions) summary(w io.Writer, rtts []time.Duration, failed int) error {
	if len(rtts) == 0 {
		return fmt.Errorf("all %d NULL calls failed", o.count)
	}
	var sum time.Duration
	v := make([]float64, len(rtts))
	for i, r := range rtts {
		sum += r
		v[i] = float64(r)
	}
	med, rg := median(v) // as bench's: the mean of the middle two of an even count
	us := func(f float64) time.Duration { return time.Duration(f).Round(time.Microsecond) }
	fmt.Fprintf(w, "%s: min %v, median %v, avg %v, max %v\n", plural(len(rtts), "call"),
		us(rg[0]), us(med), (sum / time.Duration(len(rtts))).Round(time.Microsecond), us(rg[1]))
	if failed > 0 {
		return fmt.Errorf("%d of %d NULL calls failed", failed, o.count)
	}
	return nil
}

// pingUsage is ping's --help, before the flags.
const pingUsage = `usage: rpcrdma ping [flags] HOST:PORT

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
`

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
