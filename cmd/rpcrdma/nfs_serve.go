package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

func nfsServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nfs serve", "nfs serve [flags] DIR", stderr)
	tcpAddr := fs.String("tcp", "127.0.0.1:2049", "NFS and MOUNT over TCP on this address; empty: off")
	rdmaAddr := fs.String("rdma", "127.0.0.1:20049", "NFS over RPC-over-RDMA (the software iWARP) on this address; empty: off")
	export := fs.String("export", "/export", "the path clients mount")
	ro := fs.Bool("ro", false, "read-only export (NFS3ERR_ROFS)")
	squash := fs.Bool("root-squash", false, "map uid and gid 0 to 65534")
	secretFile := fs.String("secret-file", "", "file keeping the key of the file handles, created if missing (0600), so handles survive a restart; empty: a new key each run")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "on SIGINT/SIGTERM, how long in-flight calls may take to complete")
	var tf transportFlags
	tf.register(fs, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := tf.check(); err != nil {
		return err
	}
	if fs.NArg() != 1 || (*tcpAddr == "" && *rdmaAddr == "") {
		fs.Usage()
		return errUsage
	}
	log := tf.logger()
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	fsys, err := nfs.NewLocalFS(fs.Arg(0))
	if err != nil {
		return err
	}
	defer fsys.Close()
	srv, err := nfs.NewServer(nfs.ServerConfig{Secret: secret, Logger: log,
		Exports: []nfs.Export{{Path: *export, FS: fsys, ReadOnly: *ro, RootSquash: *squash}}})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var servers []*rpc.Server
	served := make(chan error, 2)
	msg := "nfs: serving " + fs.Arg(0) + " as " + *export
	if *tcpAddr != "" {
		l, err := net.Listen("tcp", *tcpAddr)
		if err != nil {
			return err
		}
		rs := srv.NewRPCServer(true, &rpc.ServerOptions{Logger: log})
		servers = append(servers, rs)
		go func() { served <- rs.ServeListener(l) }()
		msg += "; tcp " + l.Addr().String() + " (NFS, MOUNT)"
	}
	if *rdmaAddr != "" {
		p, err := tf.provider()
		if err != nil {
			return err
		}
		cfg := tf.config(log)
		cfg.Bounds.ArgLimit = srv.ArgLimit // a WRITE pulls at most wtmax
		l, err := rpcrdma.Listen(ctx, p, *rdmaAddr, cfg)
		if err != nil {
			return err
		}
		defer l.Close()
		rs := srv.NewRPCServer(false, &rpc.ServerOptions{Logger: log})
		servers = append(servers, rs)
		go func() { served <- rpcrdma.Serve(context.Background(), l, rs) }()
		msg += "; rdma " + l.Addr().String() + " (NFS)"
	}
	log.Info(msg)
	select {
	case <-ctx.Done():
	case err := <-served:
		if !errors.Is(err, rpc.ErrServerClosed) {
			return err
		}
	}
	log.Info("shutting down", "timeout", *grace)
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	var calls uint64
	for _, rs := range servers {
		if err := rs.Shutdown(sctx); err != nil {
			log.Warn("shutdown timed out; closing connections", "err", err)
			rs.Close()
		}
		calls += rs.Stats().Calls
	}
	log.Info("stopped", "calls", calls)
	return nil
}

// loadSecret reads the handle key from path, creating it if missing; ""
// returns nil (a random key).
func loadSecret(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) < 16 {
			return nil, fmt.Errorf("--secret-file %s: %d bytes, want at least 16", path, len(b))
		}
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b = make([]byte, 32)
	rand.Read(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	return b, f.Close()
}
