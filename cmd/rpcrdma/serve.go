package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

func cmdServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve [flags]", stderr)
	listen := fs.String("listen", "127.0.0.1:20049", "address to listen on (host:port)")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "on SIGINT/SIGTERM, how long in-flight calls may take to complete")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port); empty: off")
	replyCache := fs.Int("reply-cache", 0, "keep the replies of this many recent calls, so that a call a client sends again after reconnecting is answered without running twice (0: off)")
	var tf transportFlags
	tf.register(fs, true)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: rpcrdma serve [flags]

Serves, over the software iWARP (MPA/DDP/RDMAP over TCP), RPC-over-RDMA
Versions One and Two with:
  the bench program %s version %d: NULL, WRITE (read chunks), READ (write
    chunks), LIST (reply chunk), ECHO (long call and long reply), SLEEP
    (waits, for shutdown tests);
  the Connection Configuration Protocol, program 100417 (CONF_RDMA).
Logs "listening on ADDR" when ready. SIGINT or SIGTERM stop accepting,
let in-flight calls complete, close the connections and exit 0.

flags:
`, progString(benchprog.Prog), benchprog.Vers)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs, " (the address goes in --listen)"); err != nil {
		return err
	}
	if err := tf.check(); err != nil {
		return err
	}
	if *grace < 0 {
		return usagef("--shutdown-timeout %v: want 0 or more", *grace)
	}
	if *replyCache < 0 {
		return usagef("--reply-cache %d: want 0 or more", *replyCache)
	}
	log := tf.logger()
	p, err := tf.provider()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ip, _ := p.(*iwarp.Provider)
	m := newServerMetrics(ip)
	srv := rpc.NewServer(&rpc.ServerOptions{Logger: log, ReplyCache: *replyCache})
	benchprog.RegisterWith(srv, m.wrap)
	cfg := tf.config(log)
	cfg.Bounds.ArgLimit = benchprog.ArgLimit
	conns := serveConns(m, log)
	cfg.ConnState = conns.state
	l, err := tf.listen(ctx, p, *listen, cfg, log)
	if err != nil {
		return err
	}
	m.setListener(l)
	if *metricsAddr != "" {
		if err := m.start(*metricsAddr, log); err != nil {
			l.Close()
			return fmt.Errorf("metrics: %w", err)
		}
		defer m.close()
	}
	served := make(chan error, 1)
	go func() { served <- serveLoop(l, srv, conns) }()
	log.Info("listening on "+l.Addr().String(), "rpcrdma_version", tf.version, "mpa_rev", tf.mpaRev, "crc", tf.crc, "inline", tf.inline, "credits", tf.credits, "shared_receives", l.Stats().SharedReceives)

	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	drain(log, l, srv, served, *grace)
	return nil
}

// drain stops serving on a signal: it closes l, lets the calls in flight
// complete for at most grace (then srv closes the connections), and waits
// for the serving loop to report on served.
func drain(log *slog.Logger, l *rpcrdma.Listener, srv *rpc.Server, served <-chan error, grace time.Duration) {
	log.Info("shutting down: no new connections; waiting for in-flight calls", "timeout", grace)
	l.Close()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown timed out; closing connections", "err", err)
	}
	<-served
	st := srv.Stats()
	log.Info("stopped", "calls", st.Calls, "cache_replays", st.CacheReplays)
}

// logClosed logs the end of a connection: at Debug level when the peer
// disconnected, the server closed it, or a limit of rpcrdma.Bounds did
// (the Listener logs those, a repeated one once per Bounds.LogInterval),
// which is how connections end, and at Warn level with the error when it
// failed.
func logClosed(log *slog.Logger, remote net.Addr, err error) {
	switch {
	case errors.Is(err, rpcrdma.ErrLimit):
		log.Debug("connection closed by a limit", "remote", remote, "err", err)
	case err == nil, errors.Is(err, rdma.ErrDisconnected):
		log.Debug("connection closed by the peer", "remote", remote)
	case errors.Is(err, rdma.ErrClosed), errors.Is(err, rpc.ErrServerClosed):
		log.Debug("connection closed", "remote", remote)
	default:
		log.Warn("connection failed", "remote", remote, "err", err)
	}
}
