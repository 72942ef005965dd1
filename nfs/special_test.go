package nfs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// TestSpecialFiles: a FIFO in the export, put there on the server's host
// (MKNOD is refused), is never opened on a client's behalf: READ, WRITE,
// COMMIT and READDIR of it, and CREATE over its name, answer at once with
// a status, where opening it to read would block the server until some
// process opened it to write (knfsd checks a file's type before opening
// it, RFC 1813 Section 3.3.6: READ of a non-regular file is INVAL).
func TestSpecialFiles(t *testing.T) {
	e := newEnv(t, "tcp")
	fifo := filepath.Join(e.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Whatever happens, release a server goroutine stuck opening the
	// FIFO to read, so that the server can close: an open for reading
	// and writing never blocks, and pairs with it.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			time.Sleep(10 * time.Millisecond)
			f.Close()
		}
	})
	c := e.mount(t, "/export")
	root := c.Root()
	fh, a, err := c.Lookup(ctxT(t), root, "fifo")
	if err != nil || a.Type != nfs3.TypeFIFO {
		t.Fatalf("LOOKUP fifo: %+v %v", a, err)
	}
	quick := func(what string, f func(ctx context.Context) error, want nfs3.Stat) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		wantStat(t, what, f(ctx), want)
	}
	quick("READ of a FIFO", func(ctx context.Context) error {
		_, err := c.ReadAt(ctx, fh, make([]byte, 8), 0)
		return err
	}, nfs3.ErrInval)
	quick("WRITE to a FIFO", func(ctx context.Context) error {
		_, _, _, err := c.Write(ctx, fh, []byte("x"), 0, nfs3.FileSync)
		return err
	}, nfs3.ErrInval)
	quick("COMMIT of a FIFO", func(ctx context.Context) error {
		_, err := c.Commit(ctx, fh)
		return err
	}, nfs3.ErrInval)
	quick("READDIR of a FIFO", func(ctx context.Context) error {
		_, err := c.ReadDir(ctx, fh)
		return err
	}, nfs3.ErrNotDir)
	quick("CREATE UNCHECKED over a FIFO", func(ctx context.Context) error {
		_, err := c.Create(ctx, root, "fifo", nfs3.Unchecked, nfs3.SetAttr{})
		return err
	}, nfs3.ErrExist)
	quick("SETATTR size of a FIFO", func(ctx context.Context) error {
		_, err := c.Setattr(ctx, fh, nfs3.SetAttr{SetSize: true, Size: 0}, nil)
		return err
	}, nfs3.ErrInval)
	quick("GETATTR of a FIFO", func(ctx context.Context) error {
		_, err := c.Getattr(ctx, fh)
		return err
	}, nfs3.OK)
}
