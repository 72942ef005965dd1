package nfs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// randomBytes returns n bytes of a fixed pseudo-random sequence.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// leftovers lists the temporary files in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tmp []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".part") {
			tmp = append(tmp, e.Name())
		}
	}
	return tmp
}

func TestUploadDownload(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *testEnv) {
		ctx := ctxT(t)
		c := e.mount(t, "/export")
		data := randomBytes(3<<20 + 17)
		mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
		var progress []int64
		n, err := c.Upload(ctx, c.Root(), "f.bin", bytes.NewReader(data), UploadOptions{Mode: 0o640, Mtime: mtime, Atime: mtime,
			Size: int64(len(data)), Progress: func(d int64) { progress = append(progress, d) }})
		if err != nil || n != int64(len(data)) {
			t.Fatalf("Upload: %d %v", n, err)
		}
		if got, _ := os.ReadFile(filepath.Join(e.dir, "f.bin")); !bytes.Equal(got, data) {
			t.Fatalf("the server holds %d bytes, not the %d uploaded", len(got), len(data))
		}
		fi, err := os.Stat(filepath.Join(e.dir, "f.bin"))
		if err != nil || fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mtime) {
			t.Errorf("uploaded file: mode %v mtime %v (%v), want 0640 and %v", fi.Mode(), fi.ModTime(), err, mtime)
		}
		if len(progress) == 0 || progress[len(progress)-1] != int64(len(data)) {
			t.Errorf("progress %v", progress)
		}
		if tmp := leftovers(t, e.dir); tmp != nil {
			t.Errorf("temporary files left: %v", tmp)
		}

		// Replacing, as cp(1) does.
		small := []byte("replaced")
		if _, err := c.Upload(ctx, c.Root(), "f.bin", bytes.NewReader(small), UploadOptions{Size: -1}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(e.dir, "f.bin")); string(got) != "replaced" {
			t.Fatalf("after replacing: %q", got)
		}

		// Download, to a writer and to a local file.
		fh, _, err := c.Lookup(ctx, c.Root(), "f.bin")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if n, err := c.Download(ctx, fh, &buf); err != nil || n != int64(len(small)) || buf.String() != "replaced" {
			t.Errorf("Download: %d %q %v", n, buf.String(), err)
		}
		if got, err := c.ReadFile(ctx, "/f.bin"); err != nil || string(got) != "replaced" {
			t.Errorf("ReadFile: %q %v", got, err)
		}
		local := t.TempDir()
		dst := filepath.Join(local, "back")
		os.WriteFile(dst, []byte("old content"), 0o600)
		if _, err := c.DownloadFile(ctx, fh, dst, DownloadOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(dst); string(got) != "replaced" {
			t.Errorf("DownloadFile: %q", got)
		}
		if tmp := leftovers(t, local); tmp != nil {
			t.Errorf("local temporary files left: %v", tmp)
		}
	})
}

// failingReader yields n bytes, then fails (or runs hook first).
type failingReader struct {
	n    int
	hook func()
}

var errSource = errors.New("the source broke")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		if r.hook != nil {
			r.hook()
			return 0, io.EOF
		}
		return 0, errSource
	}
	n := min(len(p), r.n)
	clear(p[:n])
	r.n -= n
	return n, nil
}

// TestUploadFailureLeavesNothing: whatever makes an upload fail, the name
// keeps what it held and no temporary file is left behind.
func TestUploadFailureLeavesNothing(t *testing.T) {
	e := newEnv(t, "tcp")
	ctx := ctxT(t)
	c := e.mount(t, "/export")
	target := filepath.Join(e.dir, "keep.txt")
	os.WriteFile(target, []byte("precious"), 0o644)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cases := []struct {
		name string
		ctx  context.Context
		r    io.Reader
		o    UploadOptions
		want string // in the error
	}{
		{"source fails", ctx, &failingReader{n: 2 << 20}, UploadOptions{Size: -1}, "the source broke"},
		{"context cancelled", cctx, &failingReader{n: 2 << 20, hook: cancel}, UploadOptions{Size: -1}, "context canceled"},
		{"short source", ctx, strings.NewReader("short"), UploadOptions{Size: 10}, "yielded 5 bytes, not the 10"},
		{"no replace", ctx, strings.NewReader("new"), UploadOptions{Size: -1, NoReplace: true}, "file exists (NFS3ERR_EXIST)"},
		{"over the free space", ctx, strings.NewReader("x"), UploadOptions{Size: 1 << 62}, "free space"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Upload(tc.ctx, c.Root(), "keep.txt", tc.r, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Upload: %v, want an error saying %q", err, tc.want)
			}
			if got, _ := os.ReadFile(target); string(got) != "precious" {
				t.Errorf("the target now holds %q", got)
			}
			if tmp := leftovers(t, e.dir); tmp != nil {
				t.Errorf("temporary files left: %v", tmp)
			}
		})
	}
	if !errors.Is(func() error {
		_, err := c.Upload(ctx, c.Root(), "keep.txt", strings.NewReader("new"), UploadOptions{Size: -1, NoReplace: true})
		return err
	}(), nfs3.ErrExist) {
		t.Error("NoReplace: errors.Is(err, nfs3.ErrExist) is false")
	}

	ro := e.mount(t, "/export-ro")
	if _, err := ro.Upload(ctx, ro.Root(), "new", strings.NewReader("x"), UploadOptions{Size: -1}); !errors.Is(err, nfs3.ErrROFS) ||
		!strings.Contains(err.Error(), "read-only file system (NFS3ERR_ROFS)") {
		t.Errorf("Upload to a read-only export: %v", err)
	}
	if ents, _ := os.ReadDir(e.roDir); len(ents) != 1 {
		t.Errorf("the read-only export holds %d files", len(ents))
	}
}

// TestDownloadRefuses: a directory is not downloaded, and a local rename
// that fails leaves the destination as it was and no temporary file.
func TestDownloadRefuses(t *testing.T) {
	e := newEnv(t, "tcp")
	ctx := ctxT(t)
	c := e.mount(t, "/export")
	os.Mkdir(filepath.Join(e.dir, "d"), 0o755)
	os.WriteFile(filepath.Join(e.dir, "f"), []byte("data"), 0o644)
	dh, _, _ := c.Lookup(ctx, c.Root(), "d")
	var buf bytes.Buffer
	if _, err := c.Download(ctx, dh, &buf); !errors.Is(err, nfs3.ErrIsDir) || buf.Len() != 0 {
		t.Errorf("Download of a directory: %v, %d bytes", err, buf.Len())
	}
	local := t.TempDir()
	fh, _, _ := c.Lookup(ctx, c.Root(), "f")
	busy := filepath.Join(local, "busy")
	os.Mkdir(busy, 0o755)
	os.WriteFile(filepath.Join(busy, "inside"), nil, 0o644)
	if _, err := c.DownloadFile(ctx, fh, busy, DownloadOptions{}); err == nil {
		t.Error("DownloadFile onto a directory succeeded")
	}
	if tmp := leftovers(t, local); tmp != nil {
		t.Errorf("local temporary files left: %v", tmp)
	}
	if _, err := os.Stat(filepath.Join(busy, "inside")); err != nil {
		t.Errorf("the directory was replaced: %v", err)
	}
}

func TestCheckSpace(t *testing.T) {
	e := newEnv(t, "tcp")
	ctx := ctxT(t)
	c := e.mount(t, "/export")
	if err := c.CheckSpace(ctx, c.Root(), 1<<20); err != nil {
		t.Errorf("1 MiB: %v", err)
	}
	err := c.CheckSpace(ctx, c.Root(), 1<<62)
	if err == nil || !strings.Contains(err.Error(), "4.0 EiB is over the free space on the server (FSSTAT: ") {
		t.Errorf("4 EiB: %v", err)
	}
	c.info.MaxFileSize = 1 << 30
	if err := c.CheckSpace(ctx, c.Root(), 2<<30); err == nil || !strings.Contains(err.Error(), "2.0 GiB is over the largest file the server allows (FSINFO maxfilesize 1.0 GiB)") {
		t.Errorf("over maxfilesize: %v", err)
	}
}

func TestInExport(t *testing.T) {
	for _, tc := range []struct {
		p, export string
		want      bool
	}{
		{"/export", "/export", true}, {"/export/a/b", "/export", true}, {"/export/", "/export", true},
		{"/exportx", "/export", false}, {"/other", "/export", false}, {"/a", "/", true},
		{"/export/a", "/export/", true}, {"/export/../etc", "/export", false},
	} {
		if got := InExport(tc.p, tc.export); got != tc.want {
			t.Errorf("InExport(%q, %q) = %v", tc.p, tc.export, got)
		}
	}
}

func TestFindExport(t *testing.T) {
	e := newEnv(t, "tcp")
	ctx := ctxT(t)
	if got, err := FindExport(ctx, e.mountAddr, "/export-ro/ro.txt"); err != nil || got != "/export-ro" {
		t.Errorf("FindExport: %q %v", got, err)
	}
	if got, err := FindExport(ctx, e.mountAddr, "/export/x"); err != nil || got != "/export" {
		t.Errorf("FindExport: %q %v", got, err)
	}
	if _, err := FindExport(ctx, e.mountAddr, "/elsewhere"); err == nil || !strings.Contains(err.Error(), "/elsewhere is in none of the exports") {
		t.Errorf("FindExport outside: %v", err)
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 3 << 30: "3.0 GiB", 1 << 62: "4.0 EiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
