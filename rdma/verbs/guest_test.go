package verbs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestGuest builds this package's tests with -tags verbs on the host and
// runs them in the lab guest, where rxe0 (Soft-RoCE) and siw0 (soft-iWARP)
// are: the conformance suite on each device, in event, busy-poll and
// polling-only modes, with the leak checks, and the hostile cases (a peer killed, a
// peer beyond its credits), the access an iWARP Read sink is
// registered with, asynchronous events, and Send With Invalidate of a
// registered region (refused on rxe, carried out on siw). The suite
// includes the shared receive queue cases. It skips without the lab VM.
func TestGuest(t *testing.T) {
	if lab.InGuest() {
		t.Skip("already in the guest")
	}
	out := lab.RunTestBinary(t, ".", []string{"verbs"}, "-test.run", "^Test(Conformance|PeerKilled|HostileCredits|ReadSinkAccess|AsyncEvents|SendInvalidate|WaitAfterEnd|DeferredPostFails|CloseLeavesNoGoroutine)", "-test.v")
	for _, dev := range []string{"rxe0", "siw0"} {
		for _, c := range []string{"SharedRecv", "SharedRecvEmpty", "SharedRecvTooLong", "SharedRecvLimit", "SharedRecvClose"} {
			if want := "--- PASS: TestConformance/" + dev + "/" + c + " "; !strings.Contains(out, want) {
				t.Errorf("no %q in the guest's output", want)
			}
		}
	}
	for _, want := range []string{"--- PASS: TestConformance/rxe0", "--- PASS: TestConformance/siw0",
		"--- PASS: TestConformanceBusyPoll/rxe0", "--- PASS: TestConformanceBusyPoll/siw0",
		"--- PASS: TestConformancePollOnly/rxe0", "--- PASS: TestConformancePollOnly/siw0",
		"--- PASS: TestPeerKilled/rxe0", "--- PASS: TestPeerKilled/siw0",
		"--- PASS: TestHostileCredits/rxe0", "--- PASS: TestHostileCredits/siw0",
		"--- PASS: TestReadSinkAccess/rxe0", "--- PASS: TestReadSinkAccess/siw0",
		"--- PASS: TestAsyncEvents/rxe0", "--- PASS: TestAsyncEvents/siw0",
		"--- PASS: TestSendInvalidate/rxe0", "--- PASS: TestSendInvalidate/siw0",
		"--- PASS: TestWaitAfterEnd/rxe0", "--- PASS: TestWaitAfterEnd/siw0",
		"--- PASS: TestDeferredPostFails/rxe0", "--- PASS: TestDeferredPostFails/siw0",
		"--- PASS: TestCloseLeavesNoGoroutine/rxe0", "--- PASS: TestCloseLeavesNoGoroutine/siw0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the guest's output:\n%s", want, out)
		}
	}
}

// TestGuestDeviceRemoval runs TestDeviceRemoval in the lab guest, in a
// process of its own: it deletes rxe0 with connections up and adds it
// again on eth1 within about a second. Other tests that use rxe0 at that
// moment fail; if the binary dies before it adds the device back, this
// test does.
func TestGuestDeviceRemoval(t *testing.T) {
	if lab.InGuest() {
		t.Skip("already in the guest")
	}
	lab.Require(t) // before the cleanup, which needs the guest
	t.Cleanup(func() {
		out, rc := lab.Run(t, "rdma link show rxe0/1 >/dev/null 2>&1 || rdma link add rxe0 type rxe netdev eth1; rdma link show rxe0/1", time.Minute)
		if rc != 0 || !strings.Contains(out, "rxe0") {
			t.Errorf("rxe0 not back in the guest (exit status %d): %s", rc, out)
		}
	})
	out := lab.RunTestBinary(t, ".", []string{"verbs"}, "-test.run", "^TestDeviceRemoval$", "-test.v",
		"-test.timeout", "90s", "-verbs.remove", "rxe0 eth1")
	if !strings.Contains(out, "--- PASS: TestDeviceRemoval") {
		t.Errorf("no PASS in the guest's output:\n%s", out)
	}
}
