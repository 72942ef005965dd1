package benchprog

import "testing"

func TestArgLimit(t *testing.T) {
	for _, tc := range []struct {
		prog, vers, proc uint32
		want             int64
	}{
		{Prog, Vers, ProcWrite, MaxData},
		{Prog, Vers, ProcEcho, -1},
		{Prog, Vers, ProcRead, -1},
		{Prog, 2, ProcWrite, -1},
		{100003, 3, 7, 0},
	} {
		if got := ArgLimit(tc.prog, tc.vers, tc.proc); got != tc.want {
			t.Errorf("ArgLimit(%#x, %d, %d) = %d, want %d", tc.prog, tc.vers, tc.proc, got, tc.want)
		}
	}
}
