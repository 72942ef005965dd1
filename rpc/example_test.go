package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// A complete ONC RPC program over TCP: a server with one procedure, ADD,
// which takes two unsigned integers and returns their sum, and a client
// that calls it. The same Server and Client run over RPC-over-RDMA when
// given an RDMA transport (see package rpcrdma).
func Example() {
	const prog, vers, procAdd = 0x20000099, 1, 1 // a number from the user-defined range
	ctx := context.Background()

	srv := rpc.NewServer(nil)
	srv.Handle(prog, vers, procAdd, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		d := c.Decoder()
		a, b := d.Uint32(), d.Uint32()
		if err := d.Done(); err != nil {
			return rpc.Body{}, err // answered GARBAGE_ARGS
		}
		return rpc.Body{XDR: xdr.AppendUint32(nil, a+b)}, nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(l) }()

	t, err := rpc.DialTCP(ctx, l.Addr().String(), nil)
	if err != nil {
		log.Fatal(err)
	}
	cli := rpc.NewClient(t)
	args := xdr.AppendUint32(xdr.AppendUint32(nil, 2), 40)
	rep, err := cli.Call(ctx, &rpc.Request{Prog: prog, Vers: vers, Proc: procAdd, Args: rpc.Body{XDR: args}})
	if err != nil {
		log.Fatal(err)
	}
	d := rpc.NewBodyDecoder(rep.Results)
	fmt.Println("2 + 40 =", d.Uint32())

	// A procedure the server does not have fails that call only.
	_, err = cli.Call(ctx, &rpc.Request{Prog: prog, Vers: vers, Proc: 7})
	if ae, ok := errors.AsType[*rpc.AcceptError](err); ok {
		fmt.Println("procedure 7:", ae.Stat)
	}

	cli.Close()
	srv.Shutdown(ctx)
	fmt.Println("server:", <-served)
	// Output:
	// 2 + 40 = 42
	// procedure 7: PROC_UNAVAIL
	// server: rpc: server closed
}
