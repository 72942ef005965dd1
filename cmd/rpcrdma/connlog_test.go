package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestConnLog: a flood of connection lines writes its burst, then a few
// lines a second, with lines that count the rest; every connection is
// accounted for.
func TestConnLog(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newConnLog(slog.New(slog.NewTextHandler(&buf, nil)))
	c.now = func() time.Time { return now }
	for i := range 3000 { // 3 s of a thousand connections a second
		now = now.Add(time.Millisecond)
		c.line(slog.LevelInfo, "nfs: connection opened", slog.Int("i", i))
	}
	c.flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) > int(c.burst)+3*int(2*c.rate)+2 {
		t.Errorf("%d lines for 3,000 connections in 3 s", len(lines))
	}
	counted := 0
	for _, l := range lines {
		if strings.Contains(l, "not written") {
			var n int
			for _, f := range strings.Fields(l) {
				if strings.HasPrefix(f, "count=") {
					n = atoiOr0(strings.TrimPrefix(f, "count="))
				}
			}
			counted += n
		} else {
			counted++
		}
	}
	if counted != 3000 {
		t.Errorf("the lines account for %d connections, want 3000:\n%s", counted, buf.String())
	}
	// Debug lines cost nothing when Debug is off.
	buf.Reset()
	c.line(slog.LevelDebug, "nfs: connection closed by a limit")
	if buf.Len() != 0 {
		t.Errorf("a Debug line was written: %q", buf.String())
	}
}

func atoiOr0(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0
		}
		n = n*10 + int(r-'0')
	}
	return n
}
