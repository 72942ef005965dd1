package nfs

import (
	"syscall"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"golang.org/x/sys/unix"
)

// TestDevNumbers: a device's attributes carry its major and minor
// numbers, split as the system's major(3) and minor(3) do: /dev/null is 1,
// 3, and a number beyond the old 12-bit major and 20-bit minor comes back
// whole.
func TestDevNumbers(t *testing.T) {
	l, err := NewLocalFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/null", &st); err != nil {
		t.Skipf("no /dev/null: %v", err)
	}
	if got := l.statAttr(&st).Rdev; got != (nfs3.SpecData{Major: 1, Minor: 3}) {
		t.Errorf("/dev/null is %d, %d, want 1, 3", got.Major, got.Minor)
	}
	st.Rdev = unix.Mkdev(1<<20, 1<<31+5)
	if got := l.statAttr(&st).Rdev; got != (nfs3.SpecData{Major: 1 << 20, Minor: 1<<31 + 5}) {
		t.Errorf("device %d, %d came back as %d, %d", 1<<20, 1<<31+5, got.Major, got.Minor)
	}
}

// TestLocalFSStatfs: FSSTAT's figures are statfs(2)'s, in bytes and
// files: the totals as the system gives them, free no more than total,
// available no more than free.
func TestLocalFSStatfs(t *testing.T) {
	dir := t.TempDir()
	fsys, err := NewLocalFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	got, err := fsys.Statfs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var s syscall.Statfs_t
	if err := syscall.Statfs(dir, &s); err != nil {
		t.Fatal(err)
	}
	if got.TotalBytes != s.Blocks*uint64(s.Bsize) || got.TotalFiles != s.Files ||
		got.FreeBytes > got.TotalBytes || got.AvailBytes > got.FreeBytes ||
		got.FreeFiles > got.TotalFiles || got.AvailFiles > got.FreeFiles {
		t.Errorf("Statfs %+v; statfs(2) blocks %d of %d bytes, files %d", got, s.Blocks, s.Bsize, s.Files)
	}
}
