//go:build linux && cgo && verbs

package verbs

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// The tests need an RDMA device: -verbs.addr (or RPCRDMA_VERBS_ADDR) is an
// IP address of the device under test (rdma_cm chooses the device by
// address; a device connects to itself through it), and -verbs.device (or
// RPCRDMA_VERBS_DEVICE), if set, names the device, which is then checked.
// In the lab guest (see TestGuest) with neither set, the tests run on both
// of its devices. Elsewhere they skip.
var (
	flagAddr   = flag.String("verbs.addr", os.Getenv("RPCRDMA_VERBS_ADDR"), "IP address of the RDMA device under test")
	flagDevice = flag.String("verbs.device", os.Getenv("RPCRDMA_VERBS_DEVICE"), "name of the RDMA device under test")
)

// target is a device under test.
type target struct{ addr, device string }

// targets returns the devices under test, or skips t.
func targets(t testing.TB) []target {
	switch {
	case *flagAddr != "":
		return []target{{*flagAddr, *flagDevice}}
	case lab.InGuest():
		return []target{{lab.GuestRxeIP, "rxe0"}, {lab.GuestSiwIP, "siw0"}}
	}
	t.Skip("no RDMA device to test: set -verbs.addr or RPCRDMA_VERBS_ADDR to a device's IP address (TestGuest runs these tests in the lab guest)")
	return nil
}

// forTargets runs f as a subtest per device under test.
func forTargets(t *testing.T, f func(*testing.T, target)) {
	for _, tg := range targets(t) {
		t.Run(tg.device, func(t *testing.T) { f(t, tg) })
	}
}

// newProvider returns a provider for tests and checks at the end that it
// gave back every object and file descriptor.
func newProvider(t testing.TB, tg target, opts Options) *Provider {
	t.Helper()
	if opts.Device == "" {
		opts.Device = tg.device
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("new provider: %v", err)
	}
	// librdmacm opens every device once, on first use, and keeps it open:
	// use it once before counting.
	ln, err := p.Listen(t.Context(), tg.addr+":0")
	if err != nil {
		t.Fatalf("listen %s: %v", tg.addr, err)
	}
	ln.Close()
	// So does rdma_get_devices, for every device at once, the first time
	// a shared receive queue is made: make one before counting too (the
	// conformance suite's SharedRecv cases would otherwise open the other
	// device's context, when they are the first in the process to).
	q, err := p.NewSharedRecvQueue(rdma.SharedRecvConfig{})
	if err != nil {
		t.Fatalf("new shared receive queue: %v", err)
	}
	q.Close()
	fds := openFDs(t)
	t.Cleanup(func() {
		if r := p.Resources(); r != (Resources{}) {
			t.Errorf("resources still held: %+v", r)
		}
		// The device context that librdmacm opens once per device stays
		// open; everything per connection must be gone.
		if now := openFDs(t); len(now) > len(fds) {
			var extra []string
			for fd, target := range now {
				if _, ok := fds[fd]; !ok {
					extra = append(extra, fd+" -> "+target)
				}
			}
			slices.Sort(extra)
			t.Errorf("%d file descriptors open, %d before; new: %s", len(now), len(fds), strings.Join(extra, ", "))
		}
	})
	return p
}

// openFDs returns the process's open file descriptors and what each
// refers to.
func openFDs(t testing.TB) map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count fds: %v", err)
	}
	fds := make(map[string]string, len(ents))
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fds[e.Name()] = target
	}
	return fds
}

func conformanceConfig(t *testing.T, tg target, opts Options) rdmatest.Config {
	p := newProvider(t, tg, opts)
	var skip map[string]string
	if strings.HasPrefix(p.Options().Device, "siw") {
		skip = map[string]string{
			// siw_qp_sq_proc (drivers/infiniband/sw/siw/siw_qp_tx.c)
			// resolves a Read Response's source with
			// siw_check_sgl_tx(pd, wqe, 0): no permission is checked,
			// so a Read of a region without remote read succeeds.
			"ReadRights": "Linux siw does not check the remote read right of an RDMA Read's source",
		}
	}
	return rdmatest.Config{
		Skip:     skip,
		Provider: p, ListenAddr: tg.addr + ":0",
		// A case that ends a connection waits for both sides to hear
		// of it; the side that did nothing wrong hears it from rdma_cm
		// (the peer's disconnect), which in the lab guest, under TCG,
		// can take seconds. (The waits of more than 20 s once seen here,
		// rxe0 in busy-poll mode, were a Wait that slept through the
		// end: TestWaitAfterEnd.)
		Timeout: time.Minute, NoTerminate: true, NoSolicitedFlag: true, RekeyAnyIndex: true,
	}
}

func TestConformance(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		rdmatest.TestProvider(t, conformanceConfig(t, tg, Options{}))
	})
}

func TestConformanceBusyPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite again, busy-polling")
	}
	forTargets(t, func(t *testing.T, tg target) {
		rdmatest.TestProvider(t, conformanceConfig(t, tg, Options{BusyPoll: 100 * time.Microsecond}))
	})
}

// TestConformancePollOnly runs the suite with a negative Options.BusyPoll:
// Wait never sleeps, yet it must still return when its context is done,
// when the connection ends and after Close.
func TestConformancePollOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite again, polling only")
	}
	forTargets(t, func(t *testing.T, tg target) {
		rdmatest.TestProvider(t, conformanceConfig(t, tg, Options{BusyPoll: -1}))
	})
}
