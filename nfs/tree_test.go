package nfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTreeRoundTrip: a tree of directories, files and links goes up and
// comes back as it was, modes, times and link targets included.
func TestTreeRoundTrip(t *testing.T) {
	e := newEnv(t, "iwarp")
	ctx := ctxT(t)
	c := e.mount(t, "/export")
	src := filepath.Join(t.TempDir(), "tree")
	mtime := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	big := randomBytes(1<<20 + 3)
	files := map[string][]byte{"a.txt": []byte("a"), "sub/b.bin": big, "sub/deeper/c": nil}
	for _, d := range []string{"sub/deeper", "empty"} {
		os.MkdirAll(filepath.Join(src, d), 0o755)
	}
	for p, b := range files {
		os.WriteFile(filepath.Join(src, p), b, 0o600)
	}
	os.Symlink("../a.txt", filepath.Join(src, "sub/link"))
	os.Symlink("/etc/passwd", filepath.Join(src, "abs"))
	os.Chmod(filepath.Join(src, "sub"), 0o750)
	for _, p := range []string{"a.txt", "sub/b.bin", "sub", "empty"} {
		os.Chtimes(filepath.Join(src, p), mtime, mtime)
	}

	st, err := c.UploadTree(ctx, c.Root(), "tree", src, TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Dirs != 4 || st.Files != 3 || st.Links != 2 || st.Bytes != int64(len(big)+1) {
		t.Errorf("UploadTree: %+v", st)
	}
	check := func(root string) {
		t.Helper()
		for p, b := range files {
			if got, err := os.ReadFile(filepath.Join(root, p)); err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s: %d bytes, %v", p, len(got), err)
			}
		}
		if l, err := os.Readlink(filepath.Join(root, "sub/link")); l != "../a.txt" {
			t.Errorf("sub/link: %q %v", l, err)
		}
		if l, err := os.Readlink(filepath.Join(root, "abs")); l != "/etc/passwd" {
			t.Errorf("abs: %q %v", l, err)
		}
		for p, want := range map[string]os.FileMode{"sub": 0o750 | os.ModeDir, "a.txt": 0o600} {
			if fi, err := os.Lstat(filepath.Join(root, p)); err != nil || fi.Mode() != want {
				t.Errorf("%s: mode %v, want %v (%v)", p, fi.Mode(), want, err)
			}
		}
		for _, p := range []string{"a.txt", "sub/b.bin", "sub", "empty"} {
			if fi, err := os.Stat(filepath.Join(root, p)); err != nil || !fi.ModTime().Equal(mtime) {
				t.Errorf("%s: mtime %v (%v)", p, fi.ModTime(), err)
			}
		}
	}
	check(filepath.Join(e.dir, "tree"))
	if tmp := leftovers(t, filepath.Join(e.dir, "tree", "sub")); tmp != nil {
		t.Errorf("temporary files left: %v", tmp)
	}

	// Again onto itself: files and links replaced, directories merged.
	if _, err := c.UploadTree(ctx, c.Root(), "tree", src, TreeOptions{}); err != nil {
		t.Fatalf("second UploadTree: %v", err)
	}

	fh, _, err := c.LookupPath(ctx, "/tree")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "back")
	var last string
	st, err = c.DownloadTree(ctx, fh, dst, TreeOptions{Progress: func(p string, n int64) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Dirs != 4 || st.Files != 3 || st.Links != 2 || last == "" {
		t.Errorf("DownloadTree: %+v, last progress %q", st, last)
	}
	check(dst)

	// A regular file is not a tree.
	afh, _, _ := c.LookupPath(ctx, "/tree/a.txt")
	if _, err := c.DownloadTree(ctx, afh, filepath.Join(t.TempDir(), "x"), TreeOptions{}); err == nil {
		t.Error("DownloadTree of a file succeeded")
	}
	if _, err := c.UploadTree(ctx, c.Root(), "x", filepath.Join(src, "a.txt"), TreeOptions{}); err == nil {
		t.Error("UploadTree of a file succeeded")
	}
}
