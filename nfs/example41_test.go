package nfs_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// An NFSv4.1 session over RPC-over-RDMA to a Linux server (knfsd on
// port 20049; over soft-iWARP the first message waits
// iwarp.SiwFirstSendDelay): four connections in one session, the
// backchannel on the connection itself, a file read under a read
// delegation. It needs a server, so `go test` compiles it but does not
// run it; nfs.TestLinux41 and nfs.TestLinux41Delegation run the same
// calls against knfsd in the lab.
func ExampleMount4() {
	ctx := context.Background()
	p, err := iwarp.New(iwarp.Options{FirstSendDelay: iwarp.SiwFirstSendDelay})
	if err != nil {
		log.Fatal(err)
	}
	c, err := nfs.Mount4(ctx, nfs.Config4{
		// BackwardCredits: receives for the server's callbacks (RFC 8167).
		Dial:  nfs.RDMA(p, "server:20049", &rpcrdma.Config{BackwardCredits: 4}),
		Conns: 4,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	in := c.Info()
	fmt.Printf("%d slots, backchannel %v, lease %v\n", in.Slots, in.Backchannel, in.Lease)

	dir, _, err := c.LookupPath(ctx, "/data")
	if err != nil {
		log.Fatal(err)
	}
	f, err := c.Open(ctx, dir, "input.bin", nfs.OpenOptions{Access: nfs4.ShareAccessRead, Delegation: true})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	buf := make([]byte, c.MaxRead()) // the server writes the data straight into buf
	n, eof, err := f.ReadAt(ctx, buf, 0)
	if err != nil {
		log.Fatal(err)
	}
	os.Stdout.Write(buf[:n])
	fmt.Println(eof, f.Delegated())
}
