package verbs_test

import (
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestGuest builds this package's tests with -tags verbs on the host and
// runs them in the lab guest, where rxe0 (Soft-RoCE) and siw0 (soft-iWARP)
// are: the conformance suite on each device, in event and busy-poll
// modes, with the leak checks, and the hostile cases (a peer killed, a
// peer beyond its credits), the access an iWARP Read sink is
// registered with, and asynchronous events. It skips without the lab VM.
func TestGuest(t *testing.T) {
	if lab.InGuest() {
		t.Skip("already in the guest")
	}
	out := lab.RunTestBinary(t, ".", []string{"verbs"}, "-test.run", "^Test(Conformance|PeerKilled|HostileCredits|ReadSinkAccess|AsyncEvents)", "-test.v")
	for _, want := range []string{"--- PASS: TestConformance/rxe0", "--- PASS: TestConformance/siw0",
		"--- PASS: TestConformanceBusyPoll/rxe0", "--- PASS: TestConformanceBusyPoll/siw0",
		"--- PASS: TestPeerKilled/rxe0", "--- PASS: TestPeerKilled/siw0",
		"--- PASS: TestHostileCredits/rxe0", "--- PASS: TestHostileCredits/siw0",
		"--- PASS: TestReadSinkAccess/rxe0", "--- PASS: TestReadSinkAccess/siw0",
		"--- PASS: TestAsyncEvents/rxe0", "--- PASS: TestAsyncEvents/siw0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the guest's output:\n%s", want, out)
		}
	}
}
