package rpc

import (
	"log/slog"
	"os"
	"testing"
)

// TestMain discards what the package's Servers log by default: many tests
// provoke handler errors and panics on purpose, and a Server with no
// ServerOptions.Logger logs those to slog.Default (with a stack for each
// panic), which would bury go test's output. TestDefaultLoggerReportsFailures
// installs its own default to check that logging.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}
