package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
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
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port): calls and latencies by NFS procedure, errors by status, connections; empty: off")
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
	clog := newConnLog(log)
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	fsys, err := nfs.NewLocalFS(fs.Arg(0))
	if err != nil {
		return err
	}
	defer fsys.Close()
	nm := newNFSMetrics()
	srv, err := nfs.NewServer(nfs.ServerConfig{Secret: secret, Logger: log, Observe: nm.observe,
		Exports: []nfs.Export{{Path: *export, FS: fsys, ReadOnly: *ro, RootSquash: *squash}}})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	p, m, err := nfsProvider(&tf, *rdmaAddr != "", nm)
	if err != nil {
		return err
	}
	opts := &rpc.ServerOptions{Logger: log, Auth: loggedAuth(log)}
	sv := &nfsServing{log: log, clog: clog, served: make(chan error, 2)}
	defer sv.closeListeners()
	msg := nfsStartLine(fs.Arg(0), *export, *ro, *squash)
	if *tcpAddr != "" {
		addr, err := sv.serveTCP(*tcpAddr, srv, *opts, nm)
		if err != nil {
			return err
		}
		msg += "; tcp " + addr + " (NFS, MOUNT)"
	}
	if *rdmaAddr != "" {
		cfg := tf.config(log)
		cfg.Bounds.ArgLimit = srv.ArgLimit // a WRITE pulls at most wtmax
		conns := nfsRDMAConns(m, clog, &sv.conns)
		cfg.ConnState = conns.state
		l, err := tf.listen(ctx, p, *rdmaAddr, cfg, log)
		if err != nil {
			return err
		}
		m.setListener(l)
		rs := sv.add(l, srv.NewRPCServer(false, opts), nm)
		go func() { sv.served <- conns.serve(l, rs) }()
		msg += "; rdma " + l.Addr().String() + " (NFS)"
	}
	if *metricsAddr != "" {
		if err := m.start(*metricsAddr, log); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		defer m.close()
	}
	log.Info(msg)
	return sv.wait(ctx, *grace)
}

// serveTCP listens on addr and serves NFS and MOUNT there with srv, each
// connection logged and counted (nfsTCPConns), on a goroutine that
// reports to sv.served. It returns the address listened on.
func (sv *nfsServing) serveTCP(addr string, srv *nfs.Server, opts rpc.ServerOptions, nm *nfsMetrics) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	opts.ConnState = nfsTCPConns(nm, sv.clog, &sv.conns)
	rs := sv.add(l, srv.NewRPCServer(true, &opts), nm)
	go func() { sv.served <- servedErr(rs.ServeListener(l)) }()
	return l.Addr().String(), nil
}

// nfsProvider returns the RDMA provider the flags ask for (nil when
// serving TCP alone) and the metrics that follow it and NFS's calls.
func nfsProvider(tf *transportFlags, rdmaOn bool, nm *nfsMetrics) (rdma.Provider, *serverMetrics, error) {
	var p rdma.Provider
	if rdmaOn {
		var err error
		if p, err = tf.provider(); err != nil {
			return nil, nil, err
		}
	}
	ip, _ := p.(*iwarp.Provider)
	m := newServerMetrics(ip)
	m.more = nm.families
	return p, m, nil
}

// nfsStartLine is the first part of nfs serve's start line.
func nfsStartLine(dir, export string, ro, squash bool) string {
	msg := "nfs: serving " + dir + " as " + export
	switch {
	case ro && squash:
		msg += " (read-only, root squashed)"
	case ro:
		msg += " (read-only)"
	case squash:
		msg += " (root squashed)"
	}
	return msg
}

// nfsServing is what nfs serve runs: an RPC server per listener, the
// listeners, and the connections they accepted.
type nfsServing struct {
	log     *slog.Logger
	clog    *connLog
	servers []*rpc.Server
	closers []io.Closer // the listeners
	conns   sync.WaitGroup
	served  chan error // a listener's end
}

// add records listener l and its server rs, and returns rs.
func (s *nfsServing) add(l io.Closer, rs *rpc.Server, nm *nfsMetrics) *rpc.Server {
	s.closers = append(s.closers, l)
	s.servers = append(s.servers, rs)
	nm.rpcs = append(nm.rpcs, rs)
	return rs
}

func (s *nfsServing) closeListeners() {
	for _, l := range s.closers {
		l.Close()
	}
}

// wait serves until ctx ends (SIGINT, SIGTERM) or a listener fails, then
// takes no new connections and lets the calls in flight finish within
// grace before closing what is left.
func (s *nfsServing) wait(ctx context.Context, grace time.Duration) error {
	select {
	case <-ctx.Done():
	case err := <-s.served:
		if err != nil {
			return err
		}
	}
	s.log.Info("shutting down: no new connections; waiting for in-flight calls", "timeout", grace)
	s.closeListeners()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var calls uint64
	for _, rs := range s.servers {
		if err := rs.Shutdown(sctx); err != nil {
			s.log.Warn("shutdown timed out; closing connections", "err", err)
			rs.Close()
		}
		calls += rs.Stats().Calls
	}
	s.conns.Wait()
	s.clog.flush()
	s.log.Info("stopped", "calls", calls)
	return nil
}

// loggedAuth is rpc.DefaultAuth logging the calls it refuses, at Info
// level: a client whose credentials the server rejects sees only
// AUTH_ERROR.
func loggedAuth(log *slog.Logger) func(context.Context, *rpc.Call) (rpc.OpaqueAuth, error) {
	return func(ctx context.Context, c *rpc.Call) (rpc.OpaqueAuth, error) {
		v, err := rpc.DefaultAuth(ctx, c)
		if err != nil {
			log.LogAttrs(ctx, slog.LevelInfo, "nfs: call refused", slog.String("call", c.Header.ID().String()),
				slog.String("cred", c.Header.Cred.Flavor.String()), slog.Any("auth", err))
		}
		return v, err
	}
}

// nfsTCPConns returns nfs serve's rpc.ServerOptions.ConnState for its
// TCP connections, counted in conns with its RDMA ones: each counted in
// nm's TCP connections and logged open and closed (logNFSClosed) by log.
func nfsTCPConns(nm *nfsMetrics, log *connLog, conns *sync.WaitGroup) func(net.Conn, rpc.ConnState, error) {
	open := newOpenConns[net.Conn](conns)
	return func(c net.Conn, s rpc.ConnState, err error) {
		switch s {
		case rpc.StateNew:
			open.opened(c)
			log.line(slog.LevelInfo, "nfs: connection opened", slog.String("transport", "tcp"), slog.Any("remote", c.RemoteAddr()))
			nm.tcpOpened.Add(1)
			nm.tcpOpen.Add(1)
		case rpc.StateClosed:
			open.closed(c, func(d time.Duration) {
				nm.tcpOpen.Add(-1)
				logNFSClosed(log, "tcp", c.RemoteAddr(), d, err)
			})
		}
	}
}

// logNFSClosed logs the end of a connection that lasted d, at Info level:
// closed by the peer, by the server, or refused for what the peer sent
// (HTTP, or records no RPC peer sends), with the error if it failed. One
// closed by a limit of rpcrdma.Bounds (evicted to make room, idle, silent)
// is logged at Debug level: the Listener logs those, a repeated one once
// per Bounds.LogInterval, so that a flood does not flood the log.
func logNFSClosed(log *connLog, transport string, remote net.Addr, d time.Duration, err error, more ...slog.Attr) {
	attrs := append([]slog.Attr{slog.String("transport", transport), slog.Any("remote", remote), slog.Duration("duration", d.Round(time.Millisecond))}, more...)
	switch {
	case errors.Is(err, rpcrdma.ErrLimit):
		log.line(slog.LevelDebug, "nfs: connection closed by a limit", append(attrs, slog.Any("err", err))...)
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, rdma.ErrDisconnected):
		log.line(slog.LevelInfo, "nfs: connection closed by the peer", attrs...)
	case errors.Is(err, rpc.ErrServerClosed), errors.Is(err, rdma.ErrClosed):
		log.line(slog.LevelInfo, "nfs: connection closed by the server", attrs...)
	case errors.Is(err, rpc.ErrHTTP), errors.Is(err, rpc.ErrRecordTooLarge), errors.Is(err, rpc.ErrTooManyFragments):
		log.line(slog.LevelInfo, "nfs: connection rejected", append(attrs, slog.Any("err", err))...)
	default:
		log.line(slog.LevelInfo, "nfs: connection failed", append(attrs, slog.Any("err", err))...)
	}
}

// nfsMetrics are nfs serve's own metrics, added to a serverMetrics (its
// more): calls and their latencies by NFS procedure, failed calls by
// status, the answers package rpc gives without a handler, and TCP
// connections (serverMetrics follows the RPC-over-RDMA ones).
type nfsMetrics struct {
	procs  [nfs3.NumProcs]procMetrics
	errors sync.Map // nfs3.Stat -> *atomic.Uint64, for statuses other than NFS3_OK
	rpcs   []*rpc.Server

	tcpOpened atomic.Uint64
	tcpOpen   atomic.Int64
}

// procMetrics are one procedure's calls: counts[i] those that took at
// most latencyBounds[i] (and more than the bound before), counts[len]
// the slower ones; nanos their total duration.
type procMetrics struct {
	counts [len(latencyBounds) + 1]atomic.Uint64
	nanos  atomic.Uint64
}

// latencyBounds are the upper bounds, in seconds, of the latency
// histogram's buckets: from what a GETATTR takes on loopback to what a
// 1 MiB WRITE to a slow disk does.
var latencyBounds = [...]float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10}

func newNFSMetrics() *nfsMetrics { return &nfsMetrics{} }

// observe counts a call; nfs.Server calls it for each (ServerConfig.Observe).
func (nm *nfsMetrics) observe(c nfs.CallDone) {
	if c.Proc >= nfs3.NumProcs {
		return
	}
	pm := &nm.procs[c.Proc]
	secs := c.Duration.Seconds()
	i := sort.SearchFloat64s(latencyBounds[:], secs)
	pm.counts[i].Add(1)
	pm.nanos.Add(uint64(c.Duration))
	if c.Err == nil && c.Stat != nfs3.OK {
		v, ok := nm.errors.Load(c.Stat)
		if !ok {
			v, _ = nm.errors.LoadOrStore(c.Stat, new(atomic.Uint64))
		}
		v.(*atomic.Uint64).Add(1)
	}
}

// families returns the NFS metrics as they are now.
func (nm *nfsMetrics) families() []family {
	calls := family{name: "rpcrdma_nfs_calls_total", help: "NFSv3 calls handled (NULL aside), by procedure.", typ: counterType}
	lat := family{name: "rpcrdma_nfs_call_duration_seconds", help: "How long NFSv3 calls took to handle, from their arguments to their results, by procedure.",
		typ: histogramType, label: "proc", bounds: latencyBounds[:]}
	for i := range nm.procs {
		p, pm := nfs3.Proc(i), &nm.procs[i]
		h := histogram{labelValue: p.String(), counts: make([]uint64, len(latencyBounds))}
		for i := range h.counts {
			h.counts[i] = pm.counts[i].Load()
			h.count += h.counts[i]
		}
		h.count += pm.counts[len(latencyBounds)].Load()
		if h.count == 0 {
			continue
		}
		h.sum = float64(pm.nanos.Load()) / 1e9
		calls.samples = append(calls.samples, sample{"proc", p.String(), float64(h.count)})
		lat.hists = append(lat.hists, h)
	}
	errs := family{name: "rpcrdma_nfs_errors_total", help: "NFSv3 calls answered with a status other than NFS3_OK, by status.", typ: counterType}
	nm.errors.Range(func(k, v any) bool {
		errs.samples = append(errs.samples, sample{"status", k.(nfs3.Stat).String(), float64(v.(*atomic.Uint64).Load())})
		return true
	})
	slices.SortFunc(errs.samples, func(a, b sample) int { return strings.Compare(a.labelValue, b.labelValue) })
	var st rpc.ServerStats
	for _, rs := range nm.rpcs {
		s := rs.Stats()
		st.RPCMismatch += s.RPCMismatch
		st.AuthError += s.AuthError
		st.ProgUnavail += s.ProgUnavail
		st.ProgMismatch += s.ProgMismatch
		st.ProcUnavail += s.ProcUnavail
		st.GarbageArgs += s.GarbageArgs
		st.SystemErr += s.SystemErr
		st.Dropped += s.Dropped
	}
	refused := family{name: "rpcrdma_rpc_refused_total", help: "RPC calls (NFS and MOUNT) not run, by the answer: denied (RPC_MISMATCH, AUTH_ERROR), not served (PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL), failed (GARBAGE_ARGS, SYSTEM_ERR), or dropped unanswered.", typ: counterType, samples: []sample{
		{"answer", "RPC_MISMATCH", float64(st.RPCMismatch)},
		{"answer", "AUTH_ERROR", float64(st.AuthError)},
		{"answer", "PROG_UNAVAIL", float64(st.ProgUnavail)},
		{"answer", "PROG_MISMATCH", float64(st.ProgMismatch)},
		{"answer", "PROC_UNAVAIL", float64(st.ProcUnavail)},
		{"answer", "GARBAGE_ARGS", float64(st.GarbageArgs)},
		{"answer", "SYSTEM_ERR", float64(st.SystemErr)},
		{"answer", "dropped", float64(st.Dropped)},
	}}
	return []family{calls, lat, errs, refused,
		{name: "rpcrdma_nfs_tcp_connections", help: "NFS and MOUNT connections over TCP open now.", typ: gaugeType, samples: []sample{{value: float64(nm.tcpOpen.Load())}}},
		{name: "rpcrdma_nfs_tcp_connections_total", help: "NFS and MOUNT connections over TCP accepted since start.", typ: counterType, samples: []sample{{value: float64(nm.tcpOpened.Load())}}},
	}
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
