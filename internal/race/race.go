//go:build race

// Package race reports whether the race detector is on: under it,
// sync.Pool drops values at random, so allocation counts mean nothing.
package race

// Enabled is true when built with -race.
const Enabled = true
