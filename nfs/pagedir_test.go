package nfs

import (
	"errors"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// TestPageDir: a listing asks for each page from the last entry's cookie
// with the last reply's verifier, stops at eof, and fails, keeping the
// entries listed, on a page with neither entries nor eof, an error, or a
// status other than OK.
func TestPageDir(t *testing.T) {
	cookie := func(e *nfs3.Entry) uint64 { return e.Cookie }
	pages := []dirPage[nfs3.Entry]{
		{nfs3.OK, []nfs3.Entry{{Name: "a", Cookie: 3}, {Name: "b", Cookie: 4}}, nfs3.Verf{1}, false},
		{nfs3.OK, []nfs3.Entry{{Name: "c", Cookie: 7}}, nfs3.Verf{2}, true},
	}
	type ask struct {
		cookie uint64
		verf   nfs3.Verf
	}
	var asked []ask
	all, err := pageDir(nfs3.ProcReaddir, cookie, func(c uint64, v nfs3.Verf) (dirPage[nfs3.Entry], error) {
		asked = append(asked, ask{c, v})
		return pages[len(asked)-1], nil
	})
	if err != nil || len(all) != 3 || all[2].Name != "c" {
		t.Fatalf("listing: %v, %v", all, err)
	}
	if want := []ask{{0, nfs3.Verf{}}, {4, nfs3.Verf{1}}}; len(asked) != 2 || asked[0] != want[0] || asked[1] != want[1] {
		t.Errorf("pages asked for %v, want %v", asked, want)
	}

	for _, tc := range []struct {
		name string
		last dirPage[nfs3.Entry]
		err  error
		want string
	}{
		{"empty page", dirPage[nfs3.Entry]{status: nfs3.OK}, nil, "nfs: READDIR returned no entries and no eof"},
		{"call error", dirPage[nfs3.Entry]{}, errors.New("lost"), "lost"},
		{"status", dirPage[nfs3.Entry]{status: nfs3.ErrAcces}, nil, ""},
	} {
		n := 0
		all, err := pageDir(nfs3.ProcReaddir, cookie, func(uint64, nfs3.Verf) (dirPage[nfs3.Entry], error) {
			n++
			if n == 1 {
				return pages[0], nil
			}
			return tc.last, tc.err
		})
		if err == nil || tc.want != "" && err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if len(all) != 2 {
			t.Errorf("%s: %d entries kept, want the first page's 2", tc.name, len(all))
		}
	}
}
