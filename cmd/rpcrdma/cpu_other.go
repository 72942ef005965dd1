//go:build !unix

package main

import "time"

// processCPU reports no CPU time where getrusage is not available.
func processCPU() (time.Duration, bool) { return 0, false }
