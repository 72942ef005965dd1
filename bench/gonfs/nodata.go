package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// noDataFS is a LocalFS whose READ and WRITE leave the file's data alone:
// a READ answers with whatever the server's READ buffer holds, a WRITE
// moves nothing into the file. Everything else (handles, permissions,
// attributes, the sizes READ checks against, XDR, the transport) is the
// real server's, so serving it measures the NFS layer without the copy
// of the file's data into or out of the page cache, which
// `rpcrdma bench`'s plain READ and WRITE do not pay either. It is for
// this comparison only: what it serves is not the file.
type noDataFS struct{ *nfs.LocalFS }

func (f noDataFS) ReadAt(ctx context.Context, ino uint64, p []byte, off int64) (int, bool, error) {
	a, err := f.Getattr(ctx, ino)
	if err != nil {
		return 0, false, err
	}
	if off >= int64(a.Size) {
		return 0, true, nil
	}
	n := int(min(int64(len(p)), int64(a.Size)-off))
	return n, off+int64(n) == int64(a.Size), nil
}

func (f noDataFS) WriteAt(ctx context.Context, ino uint64, p []byte, off int64, stable nfs3.StableHow) (nfs3.StableHow, error) {
	if _, err := f.Getattr(ctx, ino); err != nil {
		return 0, err
	}
	return nfs3.FileSync, nil
}

// serveNoData serves DIR through noDataFS as `rpcrdma nfs serve` serves
// it: NFS and MOUNT over TCP, NFS over RPC-over-RDMA on the software
// iWARP with the command's defaults (CRC as the client asks, 128 credits,
// 4 KiB inline).
func serveNoData(args []string) error {
	fs := flag.NewFlagSet("serve-nodata", flag.ExitOnError)
	tcpAddr := fs.String("tcp", "127.0.0.1:2051", "NFS and MOUNT over TCP")
	rdmaAddr := fs.String("rdma", "127.0.0.1:20051", "NFS over RPC-over-RDMA (software iWARP)")
	fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	local, err := nfs.NewLocalFS(fs.Arg(0))
	if err != nil {
		return err
	}
	defer local.Close()
	srv, err := nfs.NewServer(nfs.ServerConfig{Exports: []nfs.Export{{Path: "/export", FS: noDataFS{local}}}})
	if err != nil {
		return err
	}
	tl, err := net.Listen("tcp", *tcpAddr)
	if err != nil {
		return err
	}
	p, err := iwarp.New(iwarp.Options{Revision: 2, CRC: iwarp.CRCFollow})
	if err != nil {
		return err
	}
	cfg := &rpcrdma.Config{Grant: rpcrdma.GrantPolicy{Max: 128}, Versions: []wire.Version{wire.Version1}}
	cfg.Bounds.ArgLimit = srv.ArgLimit
	rl, err := rpcrdma.Listen(context.Background(), p, *rdmaAddr, cfg)
	if err != nil {
		return err
	}
	defer rl.Close()
	fmt.Fprintf(os.Stderr, "rpcrdma nfs server without file data serving %s; tcp %s, rdma %s\n", fs.Arg(0), tl.Addr(), rl.Addr())
	served := make(chan error, 2)
	go func() { served <- srv.NewRPCServer(true, nil).ServeListener(tl) }()
	go func() { served <- rpcrdma.Serve(context.Background(), rl, srv.NewRPCServer(false, nil)) }()
	err = <-served
	if errors.Is(err, rpc.ErrServerClosed) {
		return nil
	}
	return err
}
