package main

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// connLog writes a server's connection lines (opened, closed, rejected)
// from a token bucket: a burst of up to burst lines at once, then rate a
// second. Ordinary use, a few clients connecting now and then, is logged
// line by line; under a flood of connections the lines beyond the bucket
// are counted, and the count is logged with the next line written (or
// at flush), so that no flood makes the server write more than a few
// lines a second.
type connLog struct {
	log   *slog.Logger
	burst float64
	rate  float64 // lines a second
	now   func() time.Time

	mu      sync.Mutex
	tokens  float64
	last    time.Time // of the last refill
	dropped int       // lines not written since the last count
	since   time.Time // of the first of them
}

func newConnLog(log *slog.Logger) *connLog {
	return &connLog{log: log, burst: 50, rate: 5, tokens: 50, now: time.Now}
}

// line writes one connection line at level, or counts it.
func (c *connLog) line(level slog.Level, msg string, attrs ...slog.Attr) {
	if !c.log.Enabled(context.Background(), level) {
		return
	}
	c.mu.Lock()
	now := c.now()
	if !c.last.IsZero() {
		c.tokens = min(c.burst, c.tokens+now.Sub(c.last).Seconds()*c.rate)
	}
	c.last = now
	ok := c.tokens >= 1
	if ok {
		c.tokens--
		if c.dropped > 0 && c.tokens >= 1 {
			c.tokens--
			c.flushLocked(now)
		}
	} else if c.dropped++; c.dropped == 1 {
		c.since = now
	}
	c.mu.Unlock()
	if ok {
		c.log.LogAttrs(context.Background(), level, msg, attrs...)
	}
}

// flush logs the count of lines not written, if any.
func (c *connLog) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked(c.now())
}

func (c *connLog) flushLocked(now time.Time) {
	if c.dropped == 0 {
		return
	}
	c.log.Info("nfs: connection lines not written (more than a few a second)", "count", c.dropped,
		"over", now.Sub(c.since).Round(time.Millisecond))
	c.dropped = 0
}
