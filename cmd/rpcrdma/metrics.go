package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// serverMetrics exposes a server's counters to Prometheus, in its text
// exposition format (version 0.0.4), written here with the standard
// library: a handful of counters and gauges do not need a client library,
// and that library's dependencies (protobuf among them) would otherwise
// enter the module graph of every program that imports this module's
// packages. Per-connection counters are read from the live connections at
// scrape time; those of connections that have closed are folded into
// totals, so every counter only grows.
type serverMetrics struct {
	provider *iwarp.Provider
	// listener, when set (setListener), is where the limits that act before a
	// connection exists (MaxConns, MaxConnsPerAddr, the shared pool) are
	// counted, with those closing one, and where the memory its calls
	// hold is; otherwise the limits come from the connections.
	listener atomic.Pointer[rpcrdma.Listener]

	mu     sync.Mutex
	conns  map[*rpcrdma.Conn]struct{}
	closed rpcrdma.StatsSnapshot // sums over closed connections
	opened uint64
	calls  map[string]*atomic.Uint64 // by procedure name; filled by wrap before serving
	// more, if set before serving, returns families a command adds
	// (nfs serve's NFS procedures), written after these.
	more func() []family

	ln  net.Listener
	srv *http.Server
}

func newServerMetrics(p *iwarp.Provider) *serverMetrics {
	return &serverMetrics{provider: p, conns: map[*rpcrdma.Conn]struct{}{}, calls: map[string]*atomic.Uint64{}}
}

// metricType is a Prometheus metric type, as the TYPE line names it.
type metricType string

const (
	counterType   metricType = "counter"
	gaugeType     metricType = "gauge"
	histogramType metricType = "histogram"
)

// family is one metric: its name, HELP text, type and samples; a
// histogram's are in hists, by the value of its label, with the upper
// bounds of its buckets in bounds.
type family struct {
	name, help string
	typ        metricType
	samples    []sample
	label      string    // histograms: the label telling hists apart
	bounds     []float64 // histograms: the buckets' upper bounds, ascending
	hists      []histogram
}

// histogram is one labelled histogram of a family: counts[i] is the
// number of observations at most bounds[i] (not cumulative), the
// observations above the last bound being count less their sum.
type histogram struct {
	labelValue string
	counts     []uint64
	count      uint64
	sum        float64
}

// sample is one value of a family, with at most one label.
type sample struct {
	label, labelValue string // label "" for none
	value             float64
}

// setListener makes the metrics report l's limits and memory.
func (m *serverMetrics) setListener(l *rpcrdma.Listener) { m.listener.Store(l) }

// connTotals are the counters summed over every connection, the closed
// ones' included, and the gauges summed over the open ones, read at one
// instant.
type connTotals struct {
	sum                    rpcrdma.StatsSnapshot
	live, granted, pending int
	registered             int64
	opened                 uint64
	procs                  []string // the procedures counted in calls, sorted
}

// totals reads the connections' counters under m.mu.
func (m *serverMetrics) totals() connTotals {
	m.mu.Lock()
	t := connTotals{sum: m.closed}
	for c := range m.conns {
		s := c.Stats()
		t.sum.Add(&s)
		t.registered += s.Registered
		t.pending += s.CallsPending
		t.granted += int(c.Info().Credits)
		t.live++
	}
	t.opened = m.opened
	t.procs = make([]string, 0, len(m.calls))
	for name := range m.calls {
		t.procs = append(t.procs, name)
	}
	m.mu.Unlock()
	slices.Sort(t.procs)
	return t
}

// single returns a family of one sample with no label.
func single(name, help string, typ metricType, v float64) family {
	return family{name: name, help: help, typ: typ, samples: []sample{{value: v}}}
}

// families returns the metrics as they are now, in a fixed order.
func (m *serverMetrics) families() []family {
	t := m.totals()
	ln := m.listener.Load()
	var ls rpcrdma.ListenerStats
	if ln != nil {
		ls = ln.Stats()
	}
	calls := family{name: "rpcrdma_calls_total", help: "RPC calls handled, by program procedure.", typ: counterType}
	for _, name := range t.procs {
		calls.samples = append(calls.samples, sample{"proc", name, float64(m.calls[name].Load())})
	}
	fams := []family{calls}
	fams = append(fams, dataFamilies(&t.sum)...)
	fams = append(fams, discardFamilies(&t.sum, ln, &ls)...)
	if ln != nil {
		fams = append(fams, single("rpcrdma_memory_bytes", "Bytes the calls in progress hold now, from the server's memory budget (Bounds.ServerMemory).", gaugeType, float64(ls.Memory)))
	}
	if m.provider != nil {
		ps := m.provider.Stats()
		fams = append(fams, family{name: "rpcrdma_iwarp_terminates_total", help: "RDMAP Terminate messages, sent (a violation detected here) or received.", typ: counterType, samples: []sample{
			{"direction", "sent", float64(ps.TerminatesSent)},
			{"direction", "received", float64(ps.TerminatesRecv)},
		}})
	}
	fams = append(fams,
		single("rpcrdma_connections", "Connections open now.", gaugeType, float64(t.live)),
		single("rpcrdma_connections_total", "Connections accepted since start.", counterType, float64(t.opened)),
		single("rpcrdma_registered_bytes", "Memory registered for RDMA now, buffer rings included.", gaugeType, float64(t.registered)),
		single("rpcrdma_credits_granted", "Credits granted, summed over open connections.", gaugeType, float64(t.granted)),
		single("rpcrdma_credits_in_use", "Calls received and not yet answered (credits in use), summed over open connections.", gaugeType, float64(t.pending)),
	)
	if m.more != nil {
		fams = append(fams, m.more()...)
	}
	return fams
}

// dataFamilies are the messages by data path, the bytes by chunk type
// and the RDMA_ERRORs sent and received by code.
func dataFamilies(sum *rpcrdma.StatsSnapshot) []family {
	paths := family{name: "rpcrdma_data_path_total", help: "Messages by the data path that carried them (responder side: read chunks pulled, write chunks filled, replies inline or in a reply chunk, long calls).", typ: counterType, samples: []sample{
		{"path", "inline", float64(sum.Inline)},
		{"path", "read_chunk", float64(sum.ReadChunks)},
		{"path", "write_chunk", float64(sum.WriteChunks)},
		{"path", "reply_chunk", float64(sum.ReplyChunks)},
		{"path", "long_call", float64(sum.LongCalls)},
	}}
	bytes := family{name: "rpcrdma_bytes_total", help: "Bytes moved, by chunk type (inline counts whole Sends, transport headers included).", typ: counterType, samples: []sample{
		{"chunk", "inline", float64(sum.InlineBytes)},
		{"chunk", "read", float64(sum.ReadChunkBytes)},
		{"chunk", "write", float64(sum.WriteChunkBytes)},
		{"chunk", "reply", float64(sum.ReplyChunkBytes)},
	}}
	errSent := family{name: "rpcrdma_errors_sent_total", help: "RDMA_ERROR messages sent, by error code.", typ: counterType}
	errRecv := family{name: "rpcrdma_errors_received_total", help: "RDMA_ERROR messages received, by error code.", typ: counterType}
	for code := range sum.ErrorsSent {
		name := errCodeName(code)
		errSent.samples = append(errSent.samples, sample{"code", name, float64(sum.ErrorsSent[code])})
		errRecv.samples = append(errRecv.samples, sample{"code", name, float64(sum.ErrorsReceived[code])})
	}
	return []family{paths, bytes, errSent, errRecv}
}

// discardFamilies are every drop and rejection by reason, named as
// StatsSnapshot.Counters names them ("dropped_credit_overrun",
// "rejected_chunk"), and the Bounds that acted ("limit_idle"), as the
// listener ln counts them where there is one (every one, those refusing
// a request before any connection exists too), else as the connections
// do.
func discardFamilies(sum *rpcrdma.StatsSnapshot, ln *rpcrdma.Listener, ls *rpcrdma.ListenerStats) []family {
	discarded := family{name: "rpcrdma_discarded_total", help: "Messages received and dropped (reason dropped_*) or rejected with RDMA_ERROR (reason rejected_*), by reason.", typ: counterType}
	limits := family{name: "rpcrdma_limits_total", help: "Connection requests refused and connections closed by one of the server's bounds, by reason.", typ: counterType}
	for _, c := range sum.Counters() {
		switch {
		case strings.HasPrefix(c.Name, "dropped_"), strings.HasPrefix(c.Name, "rejected_"):
			discarded.samples = append(discarded.samples, sample{"reason", c.Name, float64(c.Value)})
		case strings.HasPrefix(c.Name, "limit_") && ln == nil:
			limits.samples = append(limits.samples, sample{"reason", c.Name, float64(c.Value)})
		}
	}
	if ln != nil {
		for r := range rpcrdma.NumReasons {
			if r.IsLimit() {
				limits.samples = append(limits.samples, sample{"reason", r.String(), float64(ls.Limits[r])})
			}
		}
	}
	return []family{discarded, limits}
}

// exposition is the Content-Type of the text format written by
// writeFamilies.
const exposition = "text/plain; version=0.0.4; charset=utf-8"

// writeFamilies writes fams in the Prometheus text exposition format,
// version 0.0.4: for each family a HELP and a TYPE line, then a line per
// sample, label values and HELP text escaped as the format requires.
func writeFamilies(w io.Writer, fams []family) error {
	var b strings.Builder
	for _, f := range fams {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, helpEscaper.Replace(f.help), f.name, f.typ)
		for _, s := range f.samples {
			b.WriteString(f.name)
			if s.label != "" {
				fmt.Fprintf(&b, "{%s=\"%s\"}", s.label, labelEscaper.Replace(s.labelValue))
			}
			b.WriteByte(' ')
			b.WriteString(strconv.FormatFloat(s.value, 'g', -1, 64))
			b.WriteByte('\n')
		}
		for _, h := range f.hists {
			writeHistogram(&b, &f, &h)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHistogram writes h's lines: a cumulative _bucket per bound and
// +Inf, then _sum and _count.
func writeHistogram(b *strings.Builder, f *family, h *histogram) {
	lv := labelEscaper.Replace(h.labelValue)
	var cum uint64
	for i, le := range f.bounds {
		cum += h.counts[i]
		fmt.Fprintf(b, "%s_bucket{%s=\"%s\",le=\"%s\"} %d\n", f.name, f.label, lv, strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	fmt.Fprintf(b, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %d\n", f.name, f.label, lv, h.count)
	fmt.Fprintf(b, "%s_sum{%s=\"%s\"} %s\n", f.name, f.label, lv, strconv.FormatFloat(h.sum, 'g', -1, 64))
	fmt.Fprintf(b, "%s_count{%s=\"%s\"} %d\n", f.name, f.label, lv, h.count)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

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
		m.closed.Add(&s)
	}
	m.mu.Unlock()
}

// wrap counts calls to the procedure named name. It is called while the
// handlers are registered, before serving.
func (m *serverMetrics) wrap(name string, h rpc.Handler) rpc.Handler {
	m.mu.Lock()
	c := m.calls[name]
	if c == nil {
		c = new(atomic.Uint64)
		m.calls[name] = c
	}
	m.mu.Unlock()
	return func(ctx context.Context, call *rpc.Call) (rpc.Body, error) {
		c.Add(1)
		return h(ctx, call)
	}
}

// ServeHTTP writes the metrics.
func (m *serverMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", exposition)
	writeFamilies(w, m.families())
}

// start serves /metrics on addr.
func (m *serverMetrics) start(addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m)
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
