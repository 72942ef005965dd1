package rpcrdma

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// countingHandler is a slog.Handler that counts the records at Info level
// and above, by message, and keeps the times they were written at.
type countingHandler struct {
	mu    sync.Mutex
	msgs  map[string]int
	times []time.Time
}

func newCountingHandler() *countingHandler { return &countingHandler{msgs: map[string]int{}} }

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs[r.Message]++
	h.times = append(h.times, time.Now())
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// lines returns the records counted, in all.
func (h *countingHandler) lines() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.times)
}

// busiestSecond returns the most records written within any one second.
func (h *countingHandler) busiestSecond() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	most := 0
	for i, t := range h.times {
		n := 0
		for _, u := range h.times[i:] {
			if u.Sub(t) >= time.Second {
				break
			}
			n++
		}
		most = max(most, n)
	}
	return most
}

// TestLimitLogRepeats: on the bubble's clock, one host hitting one limit
// a hundred times a second for 35 seconds is logged once at once, then
// once per interval with the count; the counts add up to every event. A
// key quiet for a whole interval is logged at once again.
func TestLimitLogRepeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newCountingHandler()
		g := newLimitLog(slog.New(h), 10*time.Second)
		remote := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}
		const events = 3500
		for range events {
			g.event(LimitMaxConnsPerAddr, remote)
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(11 * time.Second) // the last interval's count
		synctest.Wait()
		if got := h.msgs["rpcrdma: limit reached"]; got != 1 {
			t.Errorf("%d first lines, want 1", got)
		}
		// 35 s of events and the wait: a count line per 10 s.
		if got := h.msgs["rpcrdma: limit reached again"]; got < 3 || got > 4 {
			t.Errorf("%d count lines over 46 s at a 10 s interval", got)
		}
		time.Sleep(20 * time.Second) // quiet: the key is forgotten
		g.event(LimitMaxConnsPerAddr, remote)
		if got := h.msgs["rpcrdma: limit reached"]; got != 2 {
			t.Errorf("after a quiet interval: %d first lines, want 2", got)
		}
		g.close()
	})
}

// TestLimitLogCounts: the count lines add up to every event not logged
// on its own.
func TestLimitLogCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var told uint64
		h := &recordFunc{f: func(r slog.Record) {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "times" {
					mu.Lock()
					told += a.Value.Uint64()
					mu.Unlock()
				}
				return true
			})
			if r.Message == "rpcrdma: limit reached" {
				mu.Lock()
				told++
				mu.Unlock()
			}
		}}
		g := newLimitLog(slog.New(h), time.Second)
		const events = 777
		for i := range events {
			g.event(EvictIdle, &net.TCPAddr{IP: net.IPv4(192, 0, 2, byte(i%3)), Port: i})
			time.Sleep(7 * time.Millisecond)
		}
		g.close()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if told != events {
			t.Errorf("the lines tell of %d events, want %d", told, events)
		}
	})
}

// recordFunc is a slog.Handler that passes each record to f.
type recordFunc struct{ f func(slog.Record) }

func (h *recordFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (h *recordFunc) Handle(_ context.Context, r slog.Record) error { h.f(r); return nil }
func (h *recordFunc) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h *recordFunc) WithGroup(string) slog.Handler                 { return h }

// TestLimitLogManyHosts: events from thousands of hosts, each of them a
// first, write at most limitLogBurst lines in a clock second, and the hosts beyond
// limitLogKeys share one key.
func TestLimitLogManyHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newCountingHandler()
		g := newLimitLog(slog.New(h), 10*time.Second)
		for i := range 5000 {
			ip := net.ParseIP("2001:db8::" + strconv.FormatInt(int64(i), 16))
			g.event(LimitMaxConnsPerAddr, &net.TCPAddr{IP: ip, Port: 1})
			if i%100 == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		g.mu.Lock()
		keys := len(g.keys)
		g.mu.Unlock()
		// limitLogBurst per clock second: twice that in a second that
		// straddles two.
		if most := h.busiestSecond(); most > 2*limitLogBurst {
			t.Errorf("%d lines in one second, more than %d", most, 2*limitLogBurst)
		}
		g.close()
		if keys > limitLogKeys {
			t.Errorf("%d keys kept, more than %d", keys, limitLogKeys)
		}
		t.Logf("%d lines for 5000 hosts over 35 s", h.lines())
	})
}
