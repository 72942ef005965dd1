package main

import (
	"bufio"
	"context"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// expoSample is a sample line of the text exposition format, parsed.
type expoSample struct {
	name, label, value string // label value unescaped
	v                  float64
}

// expoFamily is what the parser learnt of one metric name.
type expoFamily struct {
	help, typ string
	samples   []expoSample
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseExposition parses the Prometheus text format, version 0.0.4, as
// written by writeFamilies (one label at most), checking its rules: a
// family's HELP and TYPE come once and before its samples, its samples
// are contiguous, names are valid, escapes are the format's.
func parseExposition(t *testing.T, text string) map[string]*expoFamily {
	t.Helper()
	fams := map[string]*expoFamily{}
	var current string
	get := func(name string) *expoFamily {
		if !metricNameRE.MatchString(name) {
			t.Errorf("invalid metric name %q", name)
		}
		f := fams[name]
		if f == nil {
			f = &expoFamily{}
			fams[name] = f
		} else if name != current {
			t.Errorf("metric %s is not contiguous", name)
		}
		current = name
		return f
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			f := get(name)
			if f.help != "" || len(f.samples) > 0 {
				t.Errorf("%s: HELP repeated or after samples", name)
			}
			f.help = unescape(t, help, false)
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			f := get(name)
			if f.typ != "" || len(f.samples) > 0 {
				t.Errorf("%s: TYPE repeated or after samples", name)
			}
			if typ != "counter" && typ != "gauge" {
				t.Errorf("%s: type %q", name, typ)
			}
			f.typ = typ
		case strings.HasPrefix(line, "#"), line == "":
			t.Errorf("unexpected line %q", line)
		default:
			var s expoSample
			rest := line
			if i := strings.IndexAny(rest, "{ "); i >= 0 {
				s.name, rest = rest[:i], rest[i:]
			}
			if strings.HasPrefix(rest, "{") {
				lname, after, ok := strings.Cut(rest[1:], `="`)
				if !ok || !labelNameRE.MatchString(lname) {
					t.Errorf("bad label in %q", line)
					continue
				}
				end := strings.Index(after, `"} `)
				for end > 0 && after[end-1] == '\\' && !strings.HasSuffix(after[:end], `\\`) {
					next := strings.Index(after[end+1:], `"} `)
					if next < 0 {
						end = -1
						break
					}
					end += 1 + next
				}
				if end < 0 {
					t.Errorf("unterminated label value in %q", line)
					continue
				}
				s.label, s.value = lname, unescape(t, after[:end], true)
				rest = after[end+2:]
			}
			v, err := strconv.ParseFloat(strings.TrimPrefix(rest, " "), 64)
			if err != nil || !strings.HasPrefix(rest, " ") {
				t.Errorf("bad value in %q", line)
			}
			s.v = v
			f := fams[s.name]
			if f == nil || f.typ == "" || f.help == "" || current != s.name {
				t.Errorf("sample %q without HELP and TYPE before it", line)
				continue
			}
			f.samples = append(f.samples, s)
		}
	}
	return fams
}

// unescape undoes the format's escapes: \\ and \n, and \" in label values.
func unescape(t *testing.T, s string, label bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if label && c == '"' {
			t.Errorf("unescaped quote in label value %q", s)
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		switch {
		case i < len(s) && s[i] == '\\':
			b.WriteByte('\\')
		case i < len(s) && s[i] == 'n':
			b.WriteByte('\n')
		case label && i < len(s) && s[i] == '"':
			b.WriteByte('"')
		default:
			t.Errorf("bad escape in %q", s)
		}
	}
	return b.String()
}

// TestExpositionEscapes: HELP text and label values with the characters
// the format escapes come back as they were.
func TestExpositionEscapes(t *testing.T) {
	var b strings.Builder
	help := "a \\ backslash,\na newline"
	value := `say "hi" \ then` + "\nleave"
	err := writeFamilies(&b, []family{
		{name: "x_total", help: help, typ: counterType, samples: []sample{{"l", value, 3}, {"l", "", 0.5}}},
		{name: "y", help: "plain", typ: gaugeType, samples: []sample{{value: 1e21}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	fams := parseExposition(t, b.String())
	x, y := fams["x_total"], fams["y"]
	if x == nil || y == nil || len(fams) != 2 {
		t.Fatalf("families %v in\n%s", fams, b.String())
	}
	if x.help != help || x.typ != "counter" || len(x.samples) != 2 || x.samples[0].value != value || x.samples[0].v != 3 || x.samples[1].v != 0.5 {
		t.Errorf("x_total parsed as %+v from\n%s", x, b.String())
	}
	if y.typ != "gauge" || len(y.samples) != 1 || y.samples[0].label != "" || y.samples[0].v != 1e21 {
		t.Errorf("y parsed as %+v from\n%s", y, b.String())
	}
}

// TestMetricsExposition: the /metrics handler answers in the text format
// with every metric, its type and HELP, and counts calls by procedure.
func TestMetricsExposition(t *testing.T) {
	m := newServerMetrics(nil)
	h := m.wrap("NULL", func(context.Context, *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })
	m.wrap("WRITE", func(context.Context, *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })
	for range 3 {
		h(context.Background(), &rpc.Call{})
	}
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	fams := parseExposition(t, rec.Body.String())
	want := map[string]string{
		"rpcrdma_calls_total":           "counter",
		"rpcrdma_data_path_total":       "counter",
		"rpcrdma_bytes_total":           "counter",
		"rpcrdma_errors_sent_total":     "counter",
		"rpcrdma_errors_received_total": "counter",
		"rpcrdma_discarded_total":       "counter",
		"rpcrdma_limits_total":          "counter",
		"rpcrdma_connections":           "gauge",
		"rpcrdma_connections_total":     "counter",
		"rpcrdma_registered_bytes":      "gauge",
		"rpcrdma_credits_granted":       "gauge",
		"rpcrdma_credits_in_use":        "gauge",
	}
	for name, typ := range want {
		f := fams[name]
		if f == nil {
			t.Errorf("no %s", name)
			continue
		}
		if f.typ != typ || f.help == "" || len(f.samples) == 0 {
			t.Errorf("%s: type %q, help %q, %d samples", name, f.typ, f.help, len(f.samples))
		}
		if (typ == "counter") != strings.HasSuffix(name, "_total") {
			t.Errorf("%s: a %s", name, typ)
		}
	}
	if len(fams) != len(want) {
		t.Errorf("%d families, want %d (no provider: no terminates)", len(fams), len(want))
	}
	calls := map[string]float64{}
	for _, s := range fams["rpcrdma_calls_total"].samples {
		calls[s.value] = s.v
	}
	if calls["NULL"] != 3 || calls["WRITE"] != 0 || len(calls) != 2 {
		t.Errorf("calls by procedure: %v", calls)
	}
}

// TestMetricsReasons: every drop and rejection reason of the connections,
// closed and open, is a sample of rpcrdma_discarded_total, with its
// count summed over them.
func TestMetricsReasons(t *testing.T) {
	m := newServerMetrics(nil)
	var a, b rpcrdma.StatsSnapshot
	a.Reasons[rpcrdma.DropCreditOverrun] = 2
	a.Reasons[rpcrdma.RejectChunk] = 1
	b.Reasons[rpcrdma.DropCreditOverrun] = 5
	b.Reasons[rpcrdma.RejectVersion] = 7
	m.closed.Add(&a)
	m.closed.Add(&b)
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams := parseExposition(t, rec.Body.String())
	got := map[string]float64{}
	for _, name := range []string{"rpcrdma_discarded_total", "rpcrdma_limits_total"} {
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s in\n%s", name, rec.Body.String())
		}
		for _, s := range f.samples {
			if s.label != "reason" {
				t.Errorf("sample with label %q, want reason", s.label)
			}
			if _, dup := got[s.value]; dup {
				t.Errorf("reason %q twice", s.value)
			}
			got[s.value] = s.v
		}
	}
	if len(got) != int(rpcrdma.NumReasons) {
		t.Errorf("%d reasons, want %d: %v", len(got), rpcrdma.NumReasons, got)
	}
	for r := range rpcrdma.NumReasons {
		var name string
		switch {
		case r.IsDrop():
			name = "dropped_" + r.String()
		case r.IsLimit():
			name = r.String()
		default:
			name = "rejected_" + strings.TrimPrefix(r.String(), "reject_")
		}
		want := map[rpcrdma.Reason]float64{
			rpcrdma.DropCreditOverrun: 7,
			rpcrdma.RejectChunk:       1,
			rpcrdma.RejectVersion:     7,
		}[r]
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("reason %s: %v (present %v), want %v", name, v, ok, want)
		}
	}
}

// TestMetricsListenerLimits: a limit that refuses a connection request
// acts before any connection exists; the metrics count it from the
// Listener, with the memory its calls hold.
func TestMetricsListenerLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := loopback.New()
	m := newServerMetrics(nil)
	conns := serveConns(m, slog.New(slog.DiscardHandler))
	l, err := rpcrdma.Listen(ctx, p, "", &rpcrdma.Config{Bounds: rpcrdma.Bounds{MaxConns: 1}, ConnState: conns.state})
	if err != nil {
		t.Fatal(err)
	}
	m.setListener(l)
	srv := rpc.NewServer(nil)
	const prog = 0x20000001
	srv.Handle(prog, 1, 0, func(context.Context, *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })
	served := make(chan error, 1)
	go func() { served <- serveLoop(l, srv, conns) }()
	defer func() {
		l.Close()
		srv.Close()
		<-served
	}()
	conn, err := rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := rpc.NewClient(conn)
	defer cli.Close()
	if err := cli.Null(ctx, prog, 1); err != nil {
		t.Fatal(err)
	}
	// At MaxConns the idle first connection is closed to make room.
	c2, err := rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
	if err != nil {
		t.Fatalf("a second connection with MaxConns 1: %v", err)
	}
	defer c2.Close()
	if err := cli.Null(ctx, prog, 1); err == nil {
		t.Fatal("the idle first connection was not closed to make room")
	}
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams := parseExposition(t, rec.Body.String())
	limits := map[string]float64{}
	for _, s := range fams["rpcrdma_limits_total"].samples {
		limits[s.value] = s.v
	}
	for r := range rpcrdma.NumReasons {
		want := 0.0
		if r == rpcrdma.EvictIdle {
			want = 1
		}
		if v, ok := limits[r.String()]; r.IsLimit() && (!ok || v != want) {
			t.Errorf("%s: %v (present %v), want %v", r, v, ok, want)
		}
	}
	if f := fams["rpcrdma_memory_bytes"]; f == nil || f.typ != "gauge" || len(f.samples) != 1 || f.samples[0].v != 0 {
		t.Errorf("rpcrdma_memory_bytes: %+v", f)
	}
}
