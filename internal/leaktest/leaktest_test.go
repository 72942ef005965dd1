package leaktest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps cleanups and errors to itself.
type recorder struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

func (r *recorder) finish() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestCheckFindsLeak(t *testing.T) {
	r := &recorder{TB: t}
	check(r, 50*time.Millisecond)
	stop := make(chan struct{})
	go leakyHelper(stop)
	r.finish()
	close(stop)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "1 goroutines leaked") || !strings.Contains(r.errs[0], "leakyHelper") {
		t.Fatalf("errors %q, want one naming leakyHelper", r.errs)
	}
}

func TestCheckWaits(t *testing.T) {
	r := &recorder{TB: t}
	check(r, 2*time.Second)
	stop := make(chan struct{})
	go leakyHelper(stop)
	time.AfterFunc(30*time.Millisecond, func() { close(stop) })
	r.finish()
	if len(r.errs) != 0 {
		t.Fatalf("a goroutine that exits within the wait was reported: %q", r.errs)
	}
}

func leakyHelper(stop chan struct{}) { <-stop }
