package rpc

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// checkLeaks fails t if goroutines started during the test outlive it. Call
// it first in a test, so that its cleanup runs after every other cleanup.
// Tests using it must not run in parallel with others.
func checkLeaks(t testing.TB) {
	before := map[string]bool{}
	for _, g := range goroutines() {
		before[g.id] = true
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			var leaked []string
			for _, g := range goroutines() {
				if !before[g.id] {
					leaked = append(leaked, g.stack)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d leaked goroutines:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

type goroutine struct{ id, stack string }

// goroutines returns every goroutine but the caller's and the testing
// package's own.
func goroutines() []goroutine {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var gs []goroutine
	for i, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if i == 0 || strings.Contains(s, "testing.tRunner") || strings.Contains(s, "testing.(*T).Run") ||
			strings.Contains(s, "testing.runFuzzing") || strings.Contains(s, "signal.signal_recv") {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(s, "goroutine "), " ")
		gs = append(gs, goroutine{id, s})
	}
	return gs
}
