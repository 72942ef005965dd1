package nfs_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// Serve a directory over NFSv3: NFS and MOUNT on TCP, NFS on RDMA over
// the software iWARP, with the transport's per-procedure limit taken from
// the NFS server (a WRITE may pull at most the server's largest I/O),
// then read a file back over RDMA with the package's client. The README
// shows this code.
func ExampleNewServer() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "export")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello, NFS over RDMA\n"), 0o644)

	fsys, err := nfs.NewLocalFS(dir) // or any nfs.FS of your own
	if err != nil {
		log.Fatal(err)
	}
	defer fsys.Close()
	srv, err := nfs.NewServer(nfs.ServerConfig{
		Exports: []nfs.Export{{Path: "/export", FS: fsys}},
		Secret:  nil, // keys the file handles; nil: random, handles die with srv
	})
	if err != nil {
		log.Fatal(err)
	}

	tl, err := net.Listen("tcp", "127.0.0.1:0") // e.g. :2049
	if err != nil {
		log.Fatal(err)
	}
	tcp := srv.NewRPCServer(true, nil) // NFS and MOUNT
	go tcp.ServeListener(tl)
	defer tcp.Shutdown(ctx)

	p, err := iwarp.New(iwarp.Options{}) // verbs.New for RDMA hardware
	if err != nil {
		log.Fatal(err)
	}
	cfg := &rpcrdma.Config{}
	// A WRITE's data may not exceed the server's largest I/O: refuse a
	// larger read chunk before pulling it.
	cfg.Bounds.ArgLimit = srv.ArgLimit
	rl, err := rpcrdma.Listen(ctx, p, "127.0.0.1:0", cfg) // e.g. :20049
	if err != nil {
		log.Fatal(err)
	}
	rdma := srv.NewRPCServer(false, nil) // NFS only: MOUNT stays on TCP (RFC 8267)
	go rpcrdma.Serve(ctx, rl, rdma)
	defer rdma.Shutdown(ctx)

	c, err := nfs.Mount(ctx, nfs.MountConfig{
		MountAddr: tl.Addr().String(),
		Export:    "/export",
		Dial:      nfs.RDMA(p, rl.Addr().String(), nil),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fh, attr, err := c.LookupPath(ctx, "hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, attr.Size)
	n, err := c.ReadAt(ctx, fh, buf, 0) // the server writes into buf (a write chunk)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", buf[:n])
	// Output:
	// hello, NFS over RDMA
}

// Serve a directory over NFS on the in-process loopback RDMA provider,
// copy a file onto it and read it back: the WRITE's data travels in a
// read chunk that the server pulls, the READ's in a write chunk that the
// server places straight into the client's buffer (RFC 8267).
func Example_loopback() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "export")
	defer os.RemoveAll(dir)
	fsys, err := nfs.NewLocalFS(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer fsys.Close()
	srv, err := nfs.NewServer(nfs.ServerConfig{Exports: []nfs.Export{{Path: "/export", FS: fsys}}})
	if err != nil {
		log.Fatal(err)
	}

	// MOUNT is served on TCP only.
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	mountd := srv.NewRPCServer(true, nil)
	go mountd.ServeListener(tl)
	defer mountd.Shutdown(ctx)

	network := loopback.New()
	cfg := &rpcrdma.Config{}
	cfg.Bounds.ArgLimit = srv.ArgLimit
	rl, err := rpcrdma.Listen(ctx, network, "", cfg)
	if err != nil {
		log.Fatal(err)
	}
	rs := srv.NewRPCServer(false, nil)
	go rpcrdma.Serve(ctx, rl, rs)
	defer rs.Shutdown(ctx)

	// Keep the client's connection to print what it carried.
	var conn *rpcrdma.Conn
	dial := func(ctx context.Context) (rpc.Transport, error) {
		var err error
		conn, err = rpcrdma.Dial(ctx, network, rl.Addr().String(), nil)
		return conn, err
	}
	c, err := nfs.Mount(ctx, nfs.MountConfig{MountAddr: tl.Addr().String(), Export: "/export", Dial: dial})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16) // 64 KiB
	if _, err := c.Upload(ctx, c.Root(), "data", bytes.NewReader(data), nfs.UploadOptions{Size: int64(len(data))}); err != nil {
		log.Fatal(err)
	}
	fh, _, err := c.LookupPath(ctx, "data")
	if err != nil {
		log.Fatal(err)
	}
	back := make([]byte, len(data))
	n, err := c.ReadAt(ctx, fh, back, 0)
	if err != nil {
		log.Fatal(err)
	}
	st := conn.Stats()
	fmt.Println("read back", n, "bytes, equal:", bytes.Equal(back[:n], data))
	fmt.Println("read chunks:", st.ReadChunks, "write chunks:", st.WriteChunks)
	// Output:
	// read back 65536 bytes, equal: true
	// read chunks: 1 write chunks: 1
}
