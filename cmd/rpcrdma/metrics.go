package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// serverMetrics exposes a server's counters to Prometheus. Per-connection
// counters are read from the live connections at scrape time; those of
// connections that have closed are folded into totals, so every counter
// only grows.
type serverMetrics struct {
	provider *iwarp.Provider

	mu     sync.Mutex
	conns  map[*rpcrdma.Conn]struct{}
	closed rpcrdma.StatsSnapshot // sums over closed connections
	opened uint64

	calls *prometheus.CounterVec

	descs struct {
		paths, bytes, errSent, errRecv, terminates *prometheus.Desc
		conns, connsTotal, registered, granted     *prometheus.Desc
		pending                                    *prometheus.Desc
	}
	ln  net.Listener
	srv *http.Server
}

func newServerMetrics(p *iwarp.Provider) *serverMetrics {
	m := &serverMetrics{provider: p, conns: map[*rpcrdma.Conn]struct{}{}}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rpcrdma_calls_total", Help: "RPC calls handled, by program procedure.",
	}, []string{"proc"})
	d := &m.descs
	d.paths = prometheus.NewDesc("rpcrdma_data_path_total", "Messages by the data path that carried them (responder side: read chunks pulled, write chunks filled, replies inline or in a reply chunk, long calls).", []string{"path"}, nil)
	d.bytes = prometheus.NewDesc("rpcrdma_bytes_total", "Bytes moved, by chunk type (inline counts whole Sends, transport headers included).", []string{"chunk"}, nil)
	d.errSent = prometheus.NewDesc("rpcrdma_errors_sent_total", "RDMA_ERROR messages sent, by error code.", []string{"code"}, nil)
	d.errRecv = prometheus.NewDesc("rpcrdma_errors_received_total", "RDMA_ERROR messages received, by error code.", []string{"code"}, nil)
	d.terminates = prometheus.NewDesc("rpcrdma_iwarp_terminates_total", "RDMAP Terminate messages, sent (a violation detected here) or received.", []string{"direction"}, nil)
	d.conns = prometheus.NewDesc("rpcrdma_connections", "Connections open now.", nil, nil)
	d.connsTotal = prometheus.NewDesc("rpcrdma_connections_total", "Connections accepted since start.", nil, nil)
	d.registered = prometheus.NewDesc("rpcrdma_registered_bytes", "Memory registered for RDMA now, buffer rings included.", nil, nil)
	d.granted = prometheus.NewDesc("rpcrdma_credits_granted", "Credits granted, summed over open connections.", nil, nil)
	d.pending = prometheus.NewDesc("rpcrdma_credits_in_use", "Calls received and not yet answered (credits in use), summed over open connections.", nil, nil)
	return m
}

// Describe implements prometheus.Collector.
func (m *serverMetrics) Describe(ch chan<- *prometheus.Desc) {
	d := &m.descs
	for _, x := range []*prometheus.Desc{d.paths, d.bytes, d.errSent, d.errRecv, d.terminates, d.conns, d.connsTotal, d.registered, d.granted, d.pending} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (m *serverMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	sum := m.closed
	var live, granted, pending int
	var registered int64
	for c := range m.conns {
		s := c.Stats()
		addStats(&sum, s)
		registered += s.Registered
		pending += s.CallsPending
		granted += int(c.Info().Credits)
		live++
	}
	opened := m.opened
	m.mu.Unlock()

	d := &m.descs
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v)
	}
	counter(d.paths, sum.Inline, "inline")
	counter(d.paths, sum.ReadChunks, "read_chunk")
	counter(d.paths, sum.WriteChunks, "write_chunk")
	counter(d.paths, sum.ReplyChunks, "reply_chunk")
	counter(d.paths, sum.LongCalls, "long_call")
	counter(d.bytes, sum.InlineBytes, "inline")
	counter(d.bytes, sum.ReadChunkBytes, "read")
	counter(d.bytes, sum.WriteChunkBytes, "write")
	counter(d.bytes, sum.ReplyChunkBytes, "reply")
	for code := range sum.ErrorsSent {
		name := errCodeName(code)
		counter(d.errSent, sum.ErrorsSent[code], name)
		counter(d.errRecv, sum.ErrorsReceived[code], name)
	}
	if m.provider != nil {
		ps := m.provider.Stats()
		counter(d.terminates, ps.TerminatesSent, "sent")
		counter(d.terminates, ps.TerminatesRecv, "received")
	}
	gauge(d.conns, float64(live))
	counter(d.connsTotal, opened)
	gauge(d.registered, float64(registered))
	gauge(d.granted, float64(granted))
	gauge(d.pending, float64(pending))
}

func errCodeName(code int) string {
	switch wire.ErrorCode(code) {
	case wire.ErrVers:
		return "ERR_VERS"
	case wire.ErrChunk:
		return "ERR_CHUNK"
	case wire.ErrInvalOption:
		return "RDMA_ERR_INVAL_OPTION"
	}
	return "other"
}

// addStats adds the counters of s to sum (gauges are left alone).
func addStats(sum *rpcrdma.StatsSnapshot, s rpcrdma.StatsSnapshot) {
	sum.CallsSent += s.CallsSent
	sum.RepliesReceived += s.RepliesReceived
	sum.CallsReceived += s.CallsReceived
	sum.RepliesSent += s.RepliesSent
	sum.Inline += s.Inline
	sum.ReadChunks += s.ReadChunks
	sum.WriteChunks += s.WriteChunks
	sum.ReplyChunks += s.ReplyChunks
	sum.LongCalls += s.LongCalls
	sum.InlineBytes += s.InlineBytes
	sum.ReadChunkBytes += s.ReadChunkBytes
	sum.WriteChunkBytes += s.WriteChunkBytes
	sum.ReplyChunkBytes += s.ReplyChunkBytes
	for i := range s.ErrorsSent {
		sum.ErrorsSent[i] += s.ErrorsSent[i]
		sum.ErrorsReceived[i] += s.ErrorsReceived[i]
	}
	sum.Dropped += s.Dropped
	sum.RemoteInvalid += s.RemoteInvalid
	sum.VersionFallback += s.VersionFallback
	sum.ReadReplies += s.ReadReplies
}

// add starts following c; remove folds its counters into the totals.
func (m *serverMetrics) add(c *rpcrdma.Conn) {
	m.mu.Lock()
	m.conns[c] = struct{}{}
	m.opened++
	m.mu.Unlock()
}

func (m *serverMetrics) remove(c *rpcrdma.Conn) {
	s := c.Stats()
	m.mu.Lock()
	if _, ok := m.conns[c]; ok {
		delete(m.conns, c)
		addStats(&m.closed, s)
	}
	m.mu.Unlock()
}

// wrap counts calls to the procedure named name.
func (m *serverMetrics) wrap(name string, h rpc.Handler) rpc.Handler {
	c := m.calls.WithLabelValues(name)
	return func(ctx context.Context, call *rpc.Call) (rpc.Body, error) {
		c.Inc()
		return h(ctx, call)
	}
}

// start serves /metrics on addr.
func (m *serverMetrics) start(addr string, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, m.calls)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m.ln = ln
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "err", err)
		}
	}()
	log.Info("metrics on http://" + ln.Addr().String() + "/metrics")
	return nil
}

func (m *serverMetrics) close() {
	if m.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		m.srv.Shutdown(ctx)
	}
}
