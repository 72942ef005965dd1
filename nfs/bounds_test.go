package nfs

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// TestArgLimit: a WRITE may pull the server's maximum I/O size and its
// pad, a SYMLINK a path; nothing else of NFS or MOUNT pulls anything.
func TestArgLimit(t *testing.T) {
	s, err := NewServer(ServerConfig{MaxIO: 1001})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prog, vers uint32
		proc       nfs3.Proc
		want       int64
	}{
		{nfs3.Program, nfs3.Version, nfs3.ProcWrite, 1004},
		{nfs3.Program, nfs3.Version, nfs3.ProcSymlink, nfs3.MaxPath},
		{nfs3.Program, nfs3.Version, nfs3.ProcRead, -1},
		{nfs3.Program, nfs3.Version, nfs3.ProcGetattr, -1},
		{nfs3.Program, 4, 1, -1},
		{mount.Program, mount.Version, 1, -1},
		{0x20000001, 1, 7, 0},
	} {
		if got := s.ArgLimit(tc.prog, tc.vers, uint32(tc.proc)); got != tc.want {
			t.Errorf("ArgLimit(%d, %d, %d) = %d, want %d", tc.prog, tc.vers, tc.proc, got, tc.want)
		}
	}
}
