package nfs

import (
	"syscall"
	"testing"
)

// TestDevNumbers: a device number splits as glibc's gnu_dev_major and
// gnu_dev_minor do, the 12-bit major and 20-bit minor of the old layout
// and the wider numbers beyond them; /dev/null is 1, 3.
func TestDevNumbers(t *testing.T) {
	makedev := func(major, minor uint64) uint64 {
		return minor&0xff | major&0xfff<<8 | minor&^0xff<<12 | major&^0xfff<<32
	}
	for _, c := range []struct{ major, minor uint32 }{{1, 3}, {8, 17}, {259, 65536}, {4095, 1 << 20}, {1 << 20, 1<<31 + 5}} {
		if ma, mi := devNumbers(makedev(uint64(c.major), uint64(c.minor))); ma != c.major || mi != c.minor {
			t.Errorf("devNumbers(makedev(%d, %d)) = %d, %d", c.major, c.minor, ma, mi)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/null", &st); err != nil {
		t.Skipf("no /dev/null: %v", err)
	}
	if ma, mi := devNumbers(st.Rdev); ma != 1 || mi != 3 {
		t.Errorf("/dev/null is %d, %d, want 1, 3", ma, mi)
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
