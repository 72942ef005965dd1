package rpcrdma_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Serve an ONC RPC program over RPC-over-RDMA on the software iWARP, and
// call it. The WRITE procedure's argument is DDP-eligible, so a large one
// travels in a read chunk: the server pulls it with RDMA Reads straight
// from the client's buffer.
func ExampleServe() {
	const prog, vers, procWrite = 0x20000042, 1, 1
	ctx := context.Background()

	p, err := iwarp.New(iwarp.Options{})
	if err != nil {
		log.Fatal(err)
	}

	srv := rpc.NewServer(nil)
	srv.Handle(prog, vers, procWrite, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		data := c.Decoder().DDPOpaque(1 << 20)
		return rpc.Body{XDR: xdr.AppendUint32(nil, uint32(len(data)))}, nil
	})
	l, err := rpcrdma.Listen(ctx, p, "127.0.0.1:0", nil)
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- rpcrdma.Serve(ctx, l, srv) }()

	conn, err := rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
	if err != nil {
		log.Fatal(err)
	}
	cli := rpc.NewClient(conn)

	var args rpc.Body
	args.AppendDDPOpaque(make([]byte, 256<<10)) // 256 KiB: a read chunk
	rep, err := cli.Call(ctx, &rpc.Request{Prog: prog, Vers: vers, Proc: procWrite, Args: args})
	if err != nil {
		log.Fatal(err)
	}
	d := rpc.NewBodyDecoder(rep.Results)
	fmt.Println("server received", d.Uint32(), "bytes;", "read chunks:", conn.Stats().ReadChunks)

	cli.Close()
	conn.Close()
	srv.Shutdown(ctx) // closes l and waits for the connections it served
	fmt.Println(<-served)
	// Output:
	// server received 262144 bytes; read chunks: 1
	// rpc: server closed
}

// Call the client back over the connection it opened (RFC 8167), as an
// NFSv4.1 server sends callbacks: both sides set BackwardCredits, the
// client serves a program on its Conn's Backchannel and the server calls
// it through its own, once the client has said it is ready (here with a
// forward call; NFSv4.1 uses CREATE_SESSION).
func ExampleConn_Backchannel() {
	const prog, vers, procHello = 0x20000042, 1, 1
	const cbProg, cbVers, cbRecall = 0x40000000, 1, 1
	ctx := context.Background()

	p, err := iwarp.New(iwarp.Options{})
	if err != nil {
		log.Fatal(err)
	}
	// The server learns of the connection it accepts from its ConnState
	// hook, which must not block: the channel has room.
	accepted := make(chan *rpcrdma.Conn, 1)
	l, err := rpcrdma.Listen(ctx, p, "127.0.0.1:0", &rpcrdma.Config{
		BackwardCredits: 4,
		ConnState: func(c *rpcrdma.Conn, s rpcrdma.ConnState) {
			if s == rpcrdma.StateEstablished {
				accepted <- c
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ready := make(chan struct{})
	srv := rpc.NewServer(nil)
	srv.Handle(prog, vers, procHello, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		close(ready)
		return rpc.Body{}, nil
	})
	go rpcrdma.Serve(ctx, l, srv)

	// The client: a callback service on its connection's backchannel,
	// then a forward call to say it is there.
	conn, err := rpcrdma.Dial(ctx, p, l.Addr().String(), &rpcrdma.Config{BackwardCredits: 4})
	if err != nil {
		log.Fatal(err)
	}
	cb := rpc.NewServer(nil)
	cb.Handle(cbProg, cbVers, cbRecall, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		d := c.Decoder()
		fmt.Println("client: recall of", d.Str(64))
		return rpc.Body{}, d.Done()
	})
	go cb.Serve(conn.Backchannel())
	cli := rpc.NewClient(conn)
	if _, err := cli.Call(ctx, &rpc.Request{Prog: prog, Vers: vers, Proc: procHello}); err != nil {
		log.Fatal(err)
	}

	// The server: a call to the client on the connection it accepted.
	sc := <-accepted
	<-ready
	back := rpc.NewClient(sc.Backchannel())
	args := rpc.Body{XDR: xdr.AppendString(nil, "file-17")}
	if _, err := back.Call(ctx, &rpc.Request{Prog: cbProg, Vers: cbVers, Proc: cbRecall, Args: args}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("server: backward calls sent:", sc.Stats().BackwardCalls)

	back.Close()
	cli.Close()
	cb.Close()
	srv.Close()
	conn.Close()
	l.Close()
	// Output:
	// client: recall of file-17
	// server: backward calls sent: 1
}

// A client that outlives its connection: the server restarts between two
// calls, and the client dials it again by itself. A call in flight when
// a connection is lost would be sent again on the next one.
func ExampleDialClient() {
	const prog, vers = 0x20000042, 1
	ctx := context.Background()

	p, err := iwarp.New(iwarp.Options{})
	if err != nil {
		log.Fatal(err)
	}
	// serve starts the server on addr and returns the address it took.
	var stop func()
	serve := func(addr string) string {
		l, err := rpcrdma.Listen(ctx, p, addr, nil)
		if err != nil {
			log.Fatal(err)
		}
		srv := rpc.NewServer(nil)
		srv.Handle(prog, vers, 0, func(context.Context, *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })
		served := make(chan error, 1)
		go func() { served <- rpcrdma.Serve(ctx, l, srv) }()
		stop = func() { srv.Close(); <-served }
		return l.Addr().String()
	}

	addr := serve("127.0.0.1:0")
	cli, err := rpcrdma.DialClient(ctx, p, addr, nil, &rpc.ReconnectConfig{MinBackoff: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	fmt.Println("first call:", cli.Null(ctx, prog, vers))

	stop() // the server goes away, and the connection with it
	serve(addr)
	defer stop()
	fmt.Println("after the restart:", cli.Null(ctx, prog, vers), "- reconnects:", cli.Stats().Reconnects)
	// Output:
	// first call: <nil>
	// after the restart: <nil> - reconnects: 1
}
