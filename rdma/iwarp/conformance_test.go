package iwarp

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// newProvider returns a provider for tests.
func newProvider(t testing.TB, opts Options) *Provider {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatalf("new provider: %v", err)
	}
	t.Cleanup(func() {
		if n := p.Registered(); n != 0 {
			t.Errorf("%d memory regions still registered", n)
		}
	})
	return p
}

func conformance(t *testing.T, opts Options) {
	p := newProvider(t, opts)
	rdmatest.TestProvider(t, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0", Timeout: 10 * time.Second})
}

func TestConformanceCRC(t *testing.T) { conformance(t, Options{CRC: CRCRequire}) }

// TestConformanceDirect runs the cases with every Wait a direct section
// (rdma.DirectIO): the socket work on the waiting goroutine.
func TestConformanceDirect(t *testing.T) {
	for _, crc := range []CRCPolicy{CRCFollow, CRCRequire} {
		t.Run(crc.String(), func(t *testing.T) {
			p := newProvider(t, Options{CRC: crc})
			rdmatest.TestProvider(t, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0", Timeout: 10 * time.Second, Direct: true})
		})
	}
}

func TestConformanceNoCRC(t *testing.T) { conformance(t, Options{CRC: CRCFollow}) }

// TestConformanceSiwDelay runs with the first-send delay a Linux siw
// responder needs.
func TestConformanceSiwDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("the first-send delay makes this run slow")
	}
	p, err := New(Options{FirstSendDelay: SiwFirstSendDelay})
	if err != nil {
		t.Fatal(err)
	}
	rdmatest.TestProvider(t, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0", Timeout: 10 * time.Second})
}

// TestConformanceRev1 runs the suite with MPA Rev 1, which has no IRD/ORD
// exchange, so the Limits case, which checks RFC 6581 negotiation, cannot
// pass; the suite runs in a child process that skips that case.
func TestConformanceRev1(t *testing.T) {
	if os.Getenv("IWARP_REV1_CHILD") == "1" {
		conformance(t, Options{Revision: 1, CRC: CRCRequire})
		return
	}
	if testing.Short() {
		t.Skip("runs the suite in a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceRev1$", "-test.skip=^TestConformanceRev1/Limits$", "-test.v")
	cmd.Env = append(os.Environ(), "IWARP_REV1_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rev 1 suite: %v\n%s", err, out)
	}
	t.Logf("rev 1 suite passed (Limits skipped)")
}
