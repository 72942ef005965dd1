// Package leaktest fails a test whose goroutines outlive it: the one
// goroutine leak check of the repository's tests (rdmatest.CheckGoroutines
// is this check; package rpc's tests can use Check directly).
package leaktest

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// leakWait bounds how long Check waits for goroutines to exit: long enough
// for a goroutine that is ending to be scheduled on a loaded machine under
// -race; a test that leaks nothing does not wait for it.
const leakWait = 5 * time.Second

// Check records the goroutines running now and, when t and the cleanups
// registered after Check have finished, fails t if goroutines started
// since are still running after a bounded wait (five seconds). Goroutines
// started by package testing or the runtime are ignored. Call it first in
// a test, so that its cleanup runs last. It must not be used in parallel
// tests, whose goroutines it would count.
func Check(t testing.TB) { check(t, leakWait) }

func check(t testing.TB, wait time.Duration) {
	before := make(map[string]bool)
	for _, g := range goroutines() {
		before[g.id] = true
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(wait)
		for {
			var leaked []string
			for _, g := range goroutines() {
				if !before[g.id] && !g.ignored() {
					leaked = append(leaked, g.stack)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines leaked:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

type goroutine struct {
	id    string // "goroutine 42"
	stack string
}

// ignored reports goroutines that the test framework or runtime start.
func (g goroutine) ignored() bool {
	i := strings.LastIndex(g.stack, "\ncreated by ")
	if i < 0 {
		return true // the main goroutine
	}
	creator := g.stack[i+len("\ncreated by "):]
	for _, p := range []string{"testing.", "runtime.", "os/signal.", "time.goFunc"} {
		if strings.HasPrefix(creator, p) {
			return true
		}
	}
	return false
}

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
	for _, s := range strings.Split(string(buf), "\n\n") {
		id, _, ok := strings.Cut(s, " [")
		if !ok || !strings.HasPrefix(id, "goroutine ") {
			continue
		}
		gs = append(gs, goroutine{id: id, stack: s})
	}
	return gs
}
