package lab

import (
	"os"
	"testing"
)

// VerbsTarget returns the RDMA device a test or benchmark of the verbs
// provider runs on: the IP address in RPCRDMA_VERBS_ADDR and the device
// name in RPCRDMA_VERBS_DEVICE (empty: the device the address belongs
// to), or, in the lab guest without them (InGuest), rxe0 and its
// address GuestRxeIP. Elsewhere it skips tb, saying to set
// RPCRDMA_VERBS_ADDR to want.
func VerbsTarget(tb testing.TB, want string) (ip, device string) {
	tb.Helper()
	ip, device = os.Getenv("RPCRDMA_VERBS_ADDR"), os.Getenv("RPCRDMA_VERBS_DEVICE")
	if ip == "" {
		if !InGuest() {
			tb.Skip("set RPCRDMA_VERBS_ADDR to " + want)
		}
		ip, device = GuestRxeIP, "rxe0"
	}
	return ip, device
}
