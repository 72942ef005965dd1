package rpcrdma_test

import (
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestVerbsGuest builds this package's tests with -tags verbs and runs
// TestVerbsLinuxNFS in the lab guest: our requester over the verbs
// provider against knfsd on rxe0 (RoCE v2) and on siw0 (iWARP). It skips
// without the lab VM.
func TestVerbsGuest(t *testing.T) {
	if lab.InGuest() {
		t.Skip("already in the guest")
	}
	out := lab.RunTestBinary(t, ".", []string{"verbs"}, "-test.run", "^TestVerbsLinuxNFS$", "-test.v")
	for _, want := range []string{"--- PASS: TestVerbsLinuxNFS/rxe0", "--- PASS: TestVerbsLinuxNFS/siw0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the guest's output:\n%s", want, out)
		}
	}
}
