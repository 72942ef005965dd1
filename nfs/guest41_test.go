package nfs

import (
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
)

// TestGuest41 builds this package's tests with -tags verbs and runs
// TestVerbs41 in the lab guest: the NFSv4.1 client over the verbs
// provider against knfsd on rxe0 and siw0. It skips without the lab VM.
func TestGuest41(t *testing.T) {
	if lab.InGuest() {
		t.Skip("already in the guest")
	}
	out := lab.RunTestBinary(t, ".", []string{"verbs"}, "-test.run", "^TestVerbs41$", "-test.v")
	for _, want := range []string{"--- PASS: TestVerbs41/rxe0", "--- PASS: TestVerbs41/siw0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the guest's output:\n%s", want, out)
		}
	}
}
