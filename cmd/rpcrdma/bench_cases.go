package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/internal/rawtcp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// closers are the stops of what bench started, run last first.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

// close runs every stop added, the last added first.
func (c *closers) close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

// benchSuite returns the cases bench runs: against o.connect, the rdma
// cases; with none, an in-process server's, the baselines (raw TCP and
// ONC RPC over TCP), the 1 MiB cases with CRC, and the cases compared
// one at a time again in turn (alternated). It adds to cl the stops of
// the servers and connections it starts, on error too.
func benchSuite(o *benchOptions, cl *closers) ([]benchCase, error) {
	var cases []benchCase
	rdmaAddr := o.connect
	if rdmaAddr == "" {
		addr, stop, err := startRDMAServer(o.tf, o.serverAddr)
		if err != nil {
			return nil, err
		}
		cl.add(stop)
		rdmaAddr = addr
		raw, stopRaw, err := rawTCPCases()
		if err != nil {
			return nil, err
		}
		cl.add(stopRaw)
		cases = append(cases, raw...)
		tcp, stopTCP, err := rpcTCPCases()
		if err != nil {
			return nil, err
		}
		cl.add(stopTCP)
		cases = append(cases, tcp...)
	}
	rc, stopRC, err := rdmaCases(rdmaAddr, o.tf)
	if err != nil {
		return nil, err
	}
	cl.add(stopRC)
	cases = append(cases, rc...)
	if o.connect == "" && !o.tf.crc && o.tf.providerName == "iwarp" {
		cc, err := crcCases(rdmaAddr, o.tf, cl)
		if err != nil {
			return nil, err
		}
		cases = append(cases, cc...)
	}
	if o.connect == "" {
		cases = append(cases, alternatedCases(cases)...)
	}
	return cases, nil
}

// crcCases are the 1 MiB cases again with MPA CRC32c, on a connection of
// their own, for what CRC costs measured within the run.
func crcCases(addr string, tf transportFlags, cl *closers) ([]benchCase, error) {
	ctf := tf
	ctf.crc = true
	cc, stopCC, err := rdmaCases(addr, ctf)
	if err != nil {
		return nil, err
	}
	cl.add(stopCC)
	var cases []benchCase
	for _, c := range cc {
		if c.size == mib && (c.op == "WRITE" || c.op == "READ") {
			c.transport = "rdma+crc"
			cases = append(cases, c)
		}
	}
	return cases, nil
}

// alternatedCases are the cases the ratios with one operation at a time
// compare, again, one of each in turn: the ping-pong and the NULLs, and
// raw bulk and the 1 MiB WRITE and READ, CRC off and on.
func alternatedCases(cases []benchCase) []benchCase {
	pick := func(keys ...caseKey) []benchCase {
		var g []benchCase
		for _, k := range keys {
			for _, c := range cases {
				if (caseKey{c.transport, c.op, c.size, c.outstanding}) == k {
					g = append(g, c)
				}
			}
		}
		return g
	}
	var alt []benchCase
	for _, g := range [][]benchCase{
		pick(caseKey{"rawtcp", "pingpong", 64, 1}, caseKey{"rdma", "NULL", 0, 1}, caseKey{"tcp", "NULL", 0, 1}),
		pick(caseKey{"rawtcp", "bulk", mib, 1}, caseKey{"rdma", "WRITE", mib, 1}, caseKey{"rdma", "READ", mib, 1},
			caseKey{"rdma+crc", "WRITE", mib, 1}, caseKey{"rdma+crc", "READ", mib, 1}),
	} {
		if len(g) > 1 {
			alt = append(alt, alternated(g...))
		}
	}
	return alt
}

// startRDMAServer serves the bench program over the flags' provider at
// addr and returns the address bound.
func startRDMAServer(tf transportFlags, addr string) (string, func(), error) {
	p, err := tf.provider()
	if err != nil {
		return "", nil, err
	}
	srv := rpc.NewServer(nil)
	benchprog.Register(srv)
	stf := tf
	stf.responder = true
	stf.version = 2
	cfg := stf.config(nil)
	cfg.Bounds.ArgLimit = benchprog.ArgLimit
	l, err := rpcrdma.Listen(context.Background(), p, addr, cfg)
	if err != nil {
		return "", nil, err
	}
	done := make(chan struct{})
	go func() { rpcrdma.Serve(context.Background(), l, srv); close(done) }()
	return l.Addr().String(), func() { srv.Close(); <-done }, nil
}

const mib = 1 << 20

// rdmaCases are the RPC-over-RDMA cases against addr.
func rdmaCases(addr string, tf transportFlags) ([]benchCase, func(), error) {
	p, err := tf.provider()
	if err != nil {
		return nil, nil, err
	}
	return programCases("rdma", true, func() (benchprog.Client, func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := rpcrdma.Dial(ctx, p, addr, tf.config(nil))
		if err != nil {
			return benchprog.Client{}, nil, describeDialError(addr, err)
		}
		cli := benchprog.Client{C: rpc.NewClient(conn)}
		stop := func() { cli.C.Close(); conn.Close() }
		// A first call at once: a responder closes a connection that
		// sends nothing for Bounds.HandshakeTimeout.
		if err := cli.Null(ctx); err != nil {
			stop()
			return benchprog.Client{}, nil, fmt.Errorf("first call to %s: %w", addr, err)
		}
		return cli, stop, nil
	})
}

// rpcTCPCases are the same program over ONC RPC record marking on TCP.
func rpcTCPCases() ([]benchCase, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := rpc.NewServer(&rpc.ServerOptions{Stream: &rpc.StreamOptions{MaxRecord: 4 * mib}})
	benchprog.Register(srv)
	done := make(chan struct{})
	go func() { srv.ServeListener(l); close(done) }()
	cs, stopClients, err := programCases("tcp", false, func() (benchprog.Client, func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t, err := rpc.DialTCP(ctx, l.Addr().String(), &rpc.StreamOptions{MaxRecord: 4 * mib})
		if err != nil {
			return benchprog.Client{}, nil, err
		}
		cli := benchprog.Client{C: rpc.NewClient(t)}
		return cli, func() { cli.C.Close() }, nil
	})
	if err != nil {
		srv.Close()
		<-done
		return nil, nil, err
	}
	return cs, func() { stopClients(); srv.Close(); <-done }, nil
}

// programCases are the bench program's cases, each on a client of its
// own that dial makes the first time the case runs (keptConns), as the
// raw TCP cases have their connections. A connection shared by every
// case carries the 1 MiB transfers both ways, after which Linux's TCP
// makes each small exchange on that socket slower (a raw 64-byte
// ping-pong by 0.1-0.2 us against a fresh connection on loopback:
// internal/rawtcp's BenchmarkPingPongAfterBulk), where the ping-pong
// baseline, on a connection of its own, never pays it. The first case's
// client is dialed at once, so that an unreachable server is reported
// before any case runs. The TCP baseline runs the cases that have a TCP
// meaning (all false).
func programCases(transport string, all bool, dial func() (benchprog.Client, func(), error)) ([]benchCase, func(), error) {
	var kept keptConns
	simple := func(op string, size, outstanding int, f func(ctx context.Context, cli benchprog.Client, buf []byte) error) benchCase {
		client := keepOnce(&kept, dial)
		return benchCase{transport: transport, op: op, size: size, outstanding: outstanding,
			setup: func() (func(context.Context, int) error, func(), error) {
				cli, err := client()
				if err != nil {
					return nil, nil, err
				}
				bufs := make([][]byte, outstanding)
				for i := range bufs {
					bufs[i] = make([]byte, size)
					copy(bufs[i], benchprog.Pattern(size))
				}
				return func(ctx context.Context, w int) error { return f(ctx, cli, bufs[w]) }, func() {}, nil
			}}
	}
	null := func(ctx context.Context, cli benchprog.Client, _ []byte) error { return cli.Null(ctx) }
	write := func(ctx context.Context, cli benchprog.Client, b []byte) error { return cli.Write(ctx, b) }
	read := func(ctx context.Context, cli benchprog.Client, b []byte) error { return cli.Read(ctx, b) }
	list := func(ctx context.Context, cli benchprog.Client, b []byte) error {
		_, err := cli.List(ctx, len(b))
		return err
	}
	echo := func(ctx context.Context, cli benchprog.Client, b []byte) error { return cli.Echo(ctx, b) }
	cs := []benchCase{
		simple("NULL", 0, 1, null),
		simple("NULL", 0, 32, null),
		simple("WRITE", 64, 1, write),
		simple("WRITE", mib, 1, write),
		simple("READ", mib, 1, read),
	}
	if all {
		cs = append(cs,
			simple("WRITE", mib, 4, write),
			simple("READ", mib, 4, read),
			simple("LIST", 64<<10, 1, list),
			simple("ECHO", 64<<10, 1, echo),
		)
	}
	if _, _, err := cs[0].setup(); err != nil {
		kept.close()
		return nil, nil, err
	}
	return cs, kept.close, nil
}

// keptConns holds the connections the cases dial, each the first time
// its case runs (keepOnce), and kept over every round and run.
type keptConns struct {
	mu     sync.Mutex
	closes []func()
}

// keepOnce returns a function that dials with dial the first time it is
// called, keeping the connection in k, and returns the same one after.
func keepOnce[T any](k *keptConns, dial func() (T, func(), error)) func() (T, error) {
	var c T
	dialed := false
	return func() (T, error) {
		if dialed {
			return c, nil
		}
		v, closeV, err := dial()
		if err != nil {
			return v, err
		}
		k.mu.Lock()
		k.closes = append(k.closes, closeV)
		k.mu.Unlock()
		c, dialed = v, true
		return c, nil
	}
}

// close closes every connection k holds.
func (k *keptConns) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range k.closes {
		f()
	}
	k.closes = nil
}

// rawTCPCases are the raw TCP baselines: a 64-byte ping-pong and 1 MiB
// transfers each acknowledged by the receiver, in internal/rawtcp's
// exchange, which the test benchmarks' raw round trip speaks too.
func rawTCPCases() ([]benchCase, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				rawtcp.Serve(c)
			}()
		}
	}()
	// Each case dials once and keeps its connection over every round
	// (keptConns): a fresh connection per round would make the baseline
	// pay TCP's slow start and receive-buffer growth again each time (on
	// loopback, 1 MiB transfers in half-second rounds moved about 10%
	// less).
	var kept keptConns
	dialOnce := func() func() (net.Conn, error) {
		return keepOnce(&kept, func() (net.Conn, func(), error) {
			nc, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				return nil, nil, err
			}
			return nc, func() { nc.Close() }, nil
		})
	}
	rawCase := func(op string, size int) benchCase {
		dial := dialOnce()
		msg := rawtcp.Message(size)
		ack := make([]byte, rawtcp.AckLen)
		return benchCase{transport: "rawtcp", op: op, size: size, outstanding: 1,
			setup: func() (func(context.Context, int) error, func(), error) {
				c, err := dial()
				if err != nil {
					return nil, nil, err
				}
				return func(context.Context, int) error {
					if _, err := c.Write(msg); err != nil {
						return err
					}
					_, err := io.ReadFull(c, ack)
					return err
				}, func() {}, nil
			}}
	}
	stop := func() {
		kept.close()
		l.Close()
		wg.Wait()
	}
	return []benchCase{rawCase("pingpong", 64), rawCase("bulk", mib), rawPipelined(dialOnce(), mib, 4)}, stop, nil
}

// rawPipelined is the bulk baseline with n transfers outstanding on one
// connection, as n outstanding RPC calls share theirs. Each worker writes
// its message whole, in turn, and then reads its own acknowledgement once
// those before it have been read: the worker done reading passes the turn
// to the next in write order, and no other goroutine touches the socket.
// On Linux loopback a single connection moves less this way than one
// transfer at a time does (the window fills, segments get reordered), so
// the RPC cases with n outstanding are compared with this.
func rawPipelined(dial func() (net.Conn, error), size, n int) benchCase {
	var op func(context.Context, int) error
	return benchCase{transport: "rawtcp", op: "bulk", size: size, outstanding: n,
		setup: func() (func(context.Context, int) error, func(), error) {
			if op != nil {
				return op, func() {}, nil
			}
			c, err := dial()
			if err != nil {
				return nil, nil, err
			}
			msg := rawtcp.Message(size)
			var (
				wmu     sync.Mutex      // held while writing and queueing for the read turn
				qmu     sync.Mutex      // guards reading and queue
				reading bool            // a worker holds the read turn
				queue   []chan struct{} // workers waiting for it, in write order
			)
			turns := make([]chan struct{}, n)
			acks := make([][]byte, n)
			for i := range turns {
				turns[i] = make(chan struct{}, 1)
				acks[i] = make([]byte, rawtcp.AckLen)
			}
			op = func(_ context.Context, w int) error {
				wmu.Lock()
				if _, err := c.Write(msg); err != nil {
					wmu.Unlock()
					return err
				}
				qmu.Lock()
				mine := !reading
				if mine {
					reading = true
				} else {
					queue = append(queue, turns[w])
				}
				qmu.Unlock()
				wmu.Unlock()
				if !mine {
					<-turns[w]
				}
				_, err := io.ReadFull(c, acks[w])
				qmu.Lock()
				if len(queue) > 0 {
					next := queue[0]
					queue = append(queue[:0], queue[1:]...)
					qmu.Unlock()
					next <- struct{}{}
				} else {
					reading = false
					qmu.Unlock()
				}
				return err
			}
			return op, func() {}, nil
		}}
}
