//go:build linux && cgo && verbs

package verbs

import (
	"context"
	"errors"
	"runtime"
	"strings"
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

// TestDeferredPostFails: send-queue work that Prepare posted is held
// until the connection is established; if posting it then fails, the
// connection ends and that work request and the ones after it complete
// flushed, in posting order, so that a Wait sees the ended connection
// with nothing outstanding and returns. Before, they stayed counted as
// outstanding with no completion to come, and Wait slept until its ctx
// ended. The post is made to fail by releasing the second Send's region
// in Prepare, after posting it.
func TestDeferredPostFails(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		rdmatest.CheckGoroutines(t)
		p := newProvider(t, tg, Options{})
		cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
		prep := func(c rdma.Conn) error {
			for id := uint64(1); id <= 3; id++ {
				m, err := c.Alloc(64, 0)
				if err != nil {
					return err
				}
				wr := rdma.WorkRequest{ID: id, Op: rdma.OpSend, Local: []rdma.SGE{{MR: m, Length: 64}}}
				if err := c.PostSend(&wr); err != nil {
					return err
				}
				if id == 2 {
					if err := m.Release(); err != nil {
						return err
					}
				}
			}
			return nil
		}
		_, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{Prepare: prep})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var got []rdma.Completion
		cs := make([]rdma.Completion, 4)
		for {
			n, err := b.Wait(ctx, cs)
			got = append(got, cs[:n]...)
			if err != nil {
				if ctx.Err() != nil || !errors.Is(err, rdma.ErrConnectionLost) {
					t.Fatalf("Wait: %v after completions %+v; want the connection's end, with the three Sends completed", err, got)
				}
				break
			}
		}
		if len(got) != 3 {
			t.Fatalf("completions %+v; want the three Sends'", got)
		}
		for i, c := range got {
			if c.ID != uint64(i+1) || c.Op != rdma.OpSend {
				t.Errorf("completion %d: %+v; want Send %d", i, c, i+1)
			}
			if i > 0 && c.Status != rdma.StatusFlushed {
				t.Errorf("completion %d: status %v; want flushed", i, c.Status)
			}
		}
	})
}

// TestCloseLeavesNoGoroutine: when Close returns, none of the
// connection's goroutines runs, the rdma_cm loop nor the one its end
// starts to wake the Waits (endLocked): Close waits for both. The check
// is made at once, with no grace, on many connections: a goroutine that
// Close did not wait for would be seen in some of them.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		rdmatest.CheckGoroutines(t)
		p := newProvider(t, tg, Options{})
		cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
		for i := range 20 {
			a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
			a.Close()
			b.Close()
			if g := connGoroutine(); g != "" {
				t.Fatalf("connection %d: a goroutine of a closed connection runs when Close has returned:\n%s", i, g)
			}
		}
	})
}

// connGoroutine returns the stack of a goroutine running a method of a
// Conn, or "". One whose top frame is runtime.goexit1 has returned from
// its function and is being torn down (its stack still names the Conn
// method that started it): it runs nothing of the Conn's any more.
func connGoroutine() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		lines := strings.SplitN(g, "\n", 3)
		if len(lines) > 1 && strings.HasPrefix(lines[1], "runtime.goexit1(") {
			continue
		}
		if strings.Contains(g, "verbs.(*Conn).") && !strings.Contains(g, "TestCloseLeavesNoGoroutine") {
			return g
		}
	}
	return ""
}
