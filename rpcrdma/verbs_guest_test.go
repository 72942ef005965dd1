package rpcrdma_test

import (
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestVerbsGuest builds this package's tests with -tags verbs and runs
// them in the lab guest: TestVerbsLinuxNFS (our requester over the verbs
// provider against knfsd) and TestVerbsGuestClientMount (the kernel's NFS
// client against our responder over verbs), each on rxe0 (RoCE v2) and
// siw0 (iWARP). It skips without the lab VM.
func TestVerbsGuest(t *testing.T) {
	if lab.InGuest() {
		t.Skip("already in the guest")
	}
	out := lab.RunTestBinary(t, ".", []string{"verbs"}, "-test.run", "^TestVerbs(LinuxNFS|GuestClientMount)$", "-test.v")
	for _, want := range []string{"--- PASS: TestVerbsLinuxNFS/rxe0", "--- PASS: TestVerbsLinuxNFS/siw0",
		"--- PASS: TestVerbsGuestClientMount/rxe0", "--- PASS: TestVerbsGuestClientMount/siw0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the guest's output:\n%s", want, out)
		}
	}
}
