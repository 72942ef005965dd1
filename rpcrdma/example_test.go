package rpcrdma_test

import (
	"context"
	"fmt"
	"log"

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
	l.Close()
	srv.Shutdown(ctx)
	<-served
	// Output: server received 262144 bytes; read chunks: 1
}
