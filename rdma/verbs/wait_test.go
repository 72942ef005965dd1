//go:build linux && cgo && verbs

package verbs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestWaitAfterEnd: a Wait that goes to sleep on the completion channel
// just after the connection has ended, with nothing outstanding, returns
// the end at once. The end's kick is a read deadline that the sleeping
// Wait clears first, so the end must be looked at after that; a Wait
// that missed it slept until its ctx ended, as no completion was left to
// wake it (the conformance suite's SendNoRecv on rxe0, spinning first,
// hung a few times in a thousand runs so). The race is forced here: the end
// comes between the Wait's look at the connection and its sleep.
func TestWaitAfterEnd(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		rdmatest.CheckGoroutines(t)
		p := newProvider(t, tg, Options{})
		cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
		a, _ := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
		c := a.(*Conn)
		end := errors.New("ended by the test")
		c.mu.Lock()
		c.endLocked(end)
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		c.leader.Lock()
		start := time.Now()
		c.awaitChannel(ctx)
		c.leader.Unlock()
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("awaitChannel on an ended connection with nothing outstanding slept %v", d)
		}
		n, err := c.Wait(ctx, make([]rdma.Completion, 1))
		if n != 0 || !errors.Is(err, end) {
			t.Fatalf("Wait after the end: %d completions, %v; want 0, %v", n, err, end)
		}
	})
}
