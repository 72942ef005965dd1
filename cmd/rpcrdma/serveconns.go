package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// rdmaConns follows the connections rpcrdma.Serve accepts, through the
// Listener's Config.ConnState: it calls opened for each connection
// established and closed when that connection has closed, with how long
// it lasted, and counts the open ones in wg. A handshake that fails is
// left to the Listener, which counts and logs the limits that act.
type rdmaConns struct {
	wg     *sync.WaitGroup
	open   *openConns[*rpcrdma.Conn]
	opened func(c *rpcrdma.Conn)
	closed func(c *rpcrdma.Conn, d time.Duration)
}

func newRDMAConns(wg *sync.WaitGroup, opened func(*rpcrdma.Conn), closed func(*rpcrdma.Conn, time.Duration)) *rdmaConns {
	return &rdmaConns{wg: wg, open: newOpenConns[*rpcrdma.Conn](wg), opened: opened, closed: closed}
}

// state is the Listener's Config.ConnState.
func (f *rdmaConns) state(c *rpcrdma.Conn, s rpcrdma.ConnState) {
	switch s {
	case rpcrdma.StateEstablished:
		f.open.opened(c)
		f.opened(c)
	case rpcrdma.StateClosed:
		f.open.closed(c, func(d time.Duration) { f.closed(c, d) })
	}
}

// openConns keeps when each open connection of a server opened, for its
// connection state hook to say how long the connection lasted, and
// counts the open ones in wg, for the server's end to wait for the hook
// to be done with them.
type openConns[C comparable] struct {
	wg    *sync.WaitGroup
	mu    sync.Mutex
	since map[C]time.Time
}

func newOpenConns[C comparable](wg *sync.WaitGroup) *openConns[C] {
	return &openConns[C]{wg: wg, since: make(map[C]time.Time)}
}

// opened records c as open from now on.
func (o *openConns[C]) opened(c C) {
	o.mu.Lock()
	o.since[c] = time.Now()
	o.mu.Unlock()
	o.wg.Add(1)
}

// closed calls f with how long c was open, then counts c out of wg; it
// does nothing for a connection opened did not record.
func (o *openConns[C]) closed(c C, f func(d time.Duration)) {
	o.mu.Lock()
	start, ok := o.since[c]
	delete(o.since, c)
	o.mu.Unlock()
	if ok {
		f(time.Since(start))
		o.wg.Done()
	}
}

// serve serves srv on l, whose Config.ConnState is f.state, until l is
// closed or srv shut down (nil) or l fails (its error). The connections
// it accepted may still be open; f.wg counts them.
func (f *rdmaConns) serve(l *rpcrdma.Listener, srv *rpc.Server) error {
	return servedErr(rpcrdma.Serve(context.Background(), l, srv))
}

// servedErr is what a server's serving of a listener ended with, err:
// nil when the listener was closed or the server shut down, as the
// command does to stop, err otherwise.
func servedErr(err error) error {
	if errors.Is(err, net.ErrClosed) || errors.Is(err, rpc.ErrServerClosed) {
		return nil
	}
	return err
}

// serveConns returns serve's connection follower: each connection
// counted in m and logged at Debug level, open and closed (logClosed).
func serveConns(m *serverMetrics, log *slog.Logger) *rdmaConns {
	return newRDMAConns(new(sync.WaitGroup), func(c *rpcrdma.Conn) {
		m.add(c)
		in := c.Info()
		log.Debug("connection", "remote", in.Remote, "peer_private_data", in.PeerPrivateData, "send_inline", in.SendInline, "credits", in.Credits)
	}, func(c *rpcrdma.Conn, _ time.Duration) {
		m.remove(c)
		logClosed(log, c.RemoteAddr(), c.Err())
	})
}

// serveLoop is f.serve, then a wait for the connections to close.
func serveLoop(l *rpcrdma.Listener, srv *rpc.Server, f *rdmaConns) error {
	err := f.serve(l, srv)
	f.wg.Wait()
	return err
}

// nfsRDMAConns returns nfs serve's follower of its RPC-over-RDMA
// connections, counted in conns with its TCP ones: each followed in m
// and logged open and closed (logNFSClosed) by log.
func nfsRDMAConns(m *serverMetrics, log *connLog, conns *sync.WaitGroup) *rdmaConns {
	return newRDMAConns(conns, func(c *rpcrdma.Conn) {
		m.add(c)
		in := c.Info()
		log.line(slog.LevelInfo, "nfs: connection opened", slog.String("transport", "rdma"), slog.Any("remote", in.Remote),
			slog.Int("send_inline", in.SendInline), slog.Int("recv_inline", in.RecvInline), slog.Any("credits", in.Credits))
	}, func(c *rpcrdma.Conn, d time.Duration) {
		m.remove(c)
		var vers []slog.Attr
		if c.Stats().CallsReceived > 0 {
			// The version the client's calls came in, known once one has.
			vers = append(vers, slog.Any("rpcrdma_version", c.Info().Version))
		}
		logNFSClosed(log, "rdma", c.RemoteAddr(), d, c.Err(), vers...)
	})
}
