// Package nfs is an NFS version 3 (RFC 1813) client and server and an NFS
// version 4.1 (RFC 8881) client over package rpc, so over TCP and over
// RPC-over-RDMA (RFC 8166) alike, with the direct data placement RFC 8267
// defines for NFS: WRITE data travels in read chunks, READ data in write
// chunks straight into the reader's buffer, and long READDIR, READDIRPLUS
// and READLINK replies in reply chunks. The codecs are in nfs/nfs3,
// nfs/nfs4 and nfs/mount.
//
// Serving a directory (NFS and MOUNT on TCP, NFS on RDMA; ExampleNewServer
// runs it):
//
//	fsys, _ := nfs.NewLocalFS("/srv/export")
//	srv, _ := nfs.NewServer(nfs.ServerConfig{Exports: []nfs.Export{{Path: "/export", FS: fsys}}, Secret: secret})
//	go srv.NewRPCServer(true, nil).ServeListener(tcpListener) // NFS + MOUNT, e.g. :2049
//	cfg := &rpcrdma.Config{}
//	cfg.Bounds.ArgLimit = srv.ArgLimit // no read chunk larger than a WRITE takes
//	l, _ := rpcrdma.Listen(ctx, provider, ":20049", cfg)
//	go rpcrdma.Serve(ctx, l, srv.NewRPCServer(false, nil))
//
// Any filesystem can be served by implementing FS; LocalFS is the one over
// a local directory, confined to it by os.Root. File handles are signed
// (handle.go) so that no client can forge one or carry one into another
// export.
//
// Reading a file with the NFSv3 client:
//
//	c, _ := nfs.Mount(ctx, nfs.MountConfig{MountAddr: "server:2049", Export: "/export",
//		Dial: nfs.RDMA(provider, "server:20049", nil)})
//	fh, attr, _ := c.LookupPath(ctx, "dir/file")
//	buf := make([]byte, attr.Size)
//	c.ReadAt(ctx, fh, buf, 0)
//
// Files is one view of a server's files for both versions (V3Files,
// V41Files); Upload, DownloadFile, UploadTree and DownloadTree copy files
// and trees over it without ever leaving a partial file under its final
// name. Mount4 is the NFSv4.1 client: a session whose slots give each request
// exactly-once semantics (RFC 8881 Section 2.10.6), recovery of a lost
// session or client ID with the open state reclaimed in the restarted
// server's grace period (RFC 8881 Section 8.4.2, client4_recover.go), and
// the file operations, OPEN and CLOSE through File4. Over RPC-over-RDMA
// with rpcrdma.Config.BackwardCredits set, its backchannel is the
// connection itself (RFC 8167): it serves CB_SEQUENCE, CB_RECALL,
// CB_RECALL_ANY and CB_GETATTR, and a file opened with
// OpenOptions.Delegation reads from its cache while it holds a
// delegation and, under a write delegation, keeps its UNSTABLE writes
// until they must go (client4_cb.go, client4_deleg.go).
//
// Tour: fs.go (the FS interface), localfs.go (LocalFS), handle.go (file
// handles), perm.go (permission checks), errors.go (errno to status),
// server.go and server_procs.go (the NFS procedures), mountd.go (MOUNT),
// bounds.go (ArgLimit), client.go (Client, Mount), files.go (Files),
// copy.go and tree.go (copying files and trees), export.go (finding an export and its
// ports), client4.go, client4_ops.go, client4_recover.go, client4_deleg.go,
// client4_cb.go and slots.go (the NFSv4.1 client).
package nfs
