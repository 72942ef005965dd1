// Package nfs is an NFS version 3 (RFC 1813) client and server over
// package rpc, so over TCP and over RPC-over-RDMA (RFC 8166) alike, with
// the direct data placement RFC 8267 defines for NFS: WRITE data travels
// in read chunks, READ data in write chunks straight into the reader's
// buffer, and long READDIR, READDIRPLUS and READLINK replies in reply
// chunks. The codecs are in nfs/nfs3 and nfs/mount.
//
// Serving a directory (NFS and MOUNT on TCP, NFS on RDMA):
//
//	fsys, _ := nfs.NewLocalFS("/srv/export")
//	srv, _ := nfs.NewServer(nfs.ServerConfig{Exports: []nfs.Export{{Path: "/export", FS: fsys}}, Secret: secret})
//	tcp := srv.NewRPCServer(true, nil)          // NFS + MOUNT
//	go tcp.ServeListener(tcpListener)           // e.g. :2049
//	l, _ := rpcrdma.Listen(ctx, provider, ":20049", nil)
//	go rpcrdma.Serve(ctx, l, srv.NewRPCServer(false, nil))
//
// Any filesystem can be served by implementing FS; LocalFS is the one over
// a local directory, confined to it by os.Root. File handles are signed
// (handle.go) so that no client can forge one or carry one into another
// export.
//
// Reading a file:
//
//	c, _ := nfs.Mount(ctx, nfs.MountConfig{MountAddr: "server:2049", Export: "/export",
//		Dial: nfs.RDMA(provider, "server:20049", nil)})
//	fh, attr, _ := c.LookupPath(ctx, "dir/file")
//	buf := make([]byte, attr.Size)
//	c.ReadAt(ctx, fh, buf, 0)
//
// Tour: fs.go (the FS interface), localfs.go (LocalFS), handle.go (file
// handles), perm.go (permission checks), errors.go (errno to status),
// server.go and server_procs.go (the NFS procedures), mountd.go (MOUNT),
// client.go (Client, Mount).
package nfs
