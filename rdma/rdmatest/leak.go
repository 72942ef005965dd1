package rdmatest

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
)

// CheckGoroutines records the goroutines running now and, when t and its
// cleanups registered later have finished, fails t if goroutines started
// since are still running after a bounded wait. It is leaktest.Check, kept
// here for the providers' tests. It must not be used in parallel tests.
func CheckGoroutines(t testing.TB) { leaktest.Check(t) }
