//go:build linux && cgo && verbs

package verbs

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// The tests need an RDMA device. RPCRDMA_VERBS_ADDR is an IP address of
// the device under test (rdma_cm chooses the device by address; loopback
// over one device works on rxe and siw), and RPCRDMA_VERBS_DEVICE, if set,
// names the device, which is then checked. Without them the tests skip.
func testAddr(t testing.TB) (string, string) {
	addr := os.Getenv("RPCRDMA_VERBS_ADDR")
	if addr == "" {
		t.Skip("RPCRDMA_VERBS_ADDR is not set: no RDMA device to test (see rdma/verbs docs)")
	}
	return addr, os.Getenv("RPCRDMA_VERBS_DEVICE")
}

// newProvider returns a provider for tests and checks at the end that it
// gave back every object and file descriptor.
func newProvider(t testing.TB, opts Options) *Provider {
	t.Helper()
	_, dev := testAddr(t)
	if opts.Device == "" {
		opts.Device = dev
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("new provider: %v", err)
	}
	// librdmacm opens every device once, on first use, and keeps it open:
	// use it once before counting.
	addr, _ := testAddr(t)
	ln, err := p.Listen(t.Context(), addr+":0")
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	ln.Close()
	fds := countFDs(t)
	t.Cleanup(func() {
		if r := p.Resources(); r != (Resources{}) {
			t.Errorf("resources still held: %+v", r)
		}
		// The device context that librdmacm opens once per device stays
		// open; everything per connection must be gone.
		if n := countFDs(t); n > fds {
			t.Errorf("%d file descriptors open, %d before", n, fds)
		}
	})
	return p
}

func countFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count fds: %v", err)
	}
	return len(ents)
}

func conformanceConfig(t *testing.T, opts Options) rdmatest.Config {
	addr, _ := testAddr(t)
	p := newProvider(t, opts)
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
		Provider: p, ListenAddr: addr + ":0",
		Timeout: 20 * time.Second, NoTerminate: true, NoSolicitedFlag: true, RekeyAnyIndex: true,
	}
}

func TestConformance(t *testing.T) {
	rdmatest.TestProvider(t, conformanceConfig(t, Options{}))
}

func TestConformanceBusyPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite again, busy-polling")
	}
	rdmatest.TestProvider(t, conformanceConfig(t, Options{BusyPoll: 100 * time.Microsecond}))
}
