package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// TestNoDataFS: READ counts stop at the file's end as a real read's do,
// and neither READ nor WRITE touches the file's data.
func TestNoDataFS(t *testing.T) {
	dir := t.TempDir()
	want := []byte("0123456789")
	if err := os.WriteFile(filepath.Join(dir, "f"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	local, err := nfs.NewLocalFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	fsys := noDataFS{local}
	ctx := context.Background()
	ino, err := fsys.Lookup(ctx, fsys.Root(), "f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	for _, tc := range []struct {
		off int64
		n   int
		eof bool
	}{{0, 8, false}, {2, 8, true}, {6, 4, true}, {10, 0, true}, {20, 0, true}} {
		n, eof, err := fsys.ReadAt(ctx, ino, buf, tc.off)
		if err != nil || n != tc.n || eof != tc.eof {
			t.Errorf("ReadAt at %d: %d, %v, %v; want %d, %v", tc.off, n, eof, err, tc.n, tc.eof)
		}
	}
	if string(buf) != string(make([]byte, 8)) {
		t.Errorf("ReadAt filled the buffer: %q", buf)
	}
	if _, err := fsys.WriteAt(ctx, ino, []byte("xxxx"), 0, nfs3.Unstable); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "f")); string(got) != string(want) {
		t.Errorf("file after WriteAt: %q, want %q", got, want)
	}
	if _, _, err := fsys.ReadAt(ctx, ino+12345, buf, 0); err == nil {
		t.Error("ReadAt of an unknown inode succeeded")
	}
}
