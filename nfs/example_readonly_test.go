package nfs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"testing/fstest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// helloFS is a read-only FS of one directory holding one file, in
// memory. Embedding nfs.ReadOnlyFS answers every change with
// NFS3ERR_ROFS, so it implements only Root, Getattr, Lookup, ReadAt and
// ReadDir. Inode 1 is the directory, 2 the file.
type helloFS struct {
	nfs.ReadOnlyFS
	files fstest.MapFS
}

func (h helloFS) Root() uint64 { return 1 }

func (h helloFS) Getattr(_ context.Context, ino uint64) (nfs3.Attr, error) {
	name := map[uint64]string{1: ".", 2: "hello.txt"}[ino]
	if name == "" {
		return nfs3.Attr{}, nfs3.ErrStale
	}
	fi, err := fs.Stat(h.files, name)
	if err != nil {
		return nfs3.Attr{}, err
	}
	a := nfs.AttrOf(fi) // type, mode, size and times from the FileInfo
	a.FileID = ino
	return a, nil
}

func (h helloFS) Lookup(_ context.Context, dir uint64, name string) (uint64, error) {
	switch name {
	case ".", "..":
		return 1, nil
	case "hello.txt":
		return 2, nil
	}
	return 0, nfs3.ErrNoEnt
}

func (h helloFS) ReadAt(_ context.Context, ino uint64, p []byte, off int64) (int, bool, error) {
	data := h.files["hello.txt"].Data
	if ino != 2 {
		return 0, false, nfs3.ErrIsDir
	}
	if off >= int64(len(data)) {
		return 0, true, nil
	}
	n := copy(p, data[off:])
	return n, off+int64(n) == int64(len(data)), nil
}

func (h helloFS) ReadDir(_ context.Context, dir, cookie uint64, emit func(name string, ino, next uint64) bool) (bool, error) {
	if cookie == 0 && !emit("hello.txt", 2, 1) {
		return false, nil
	}
	return true, nil
}

// ExampleReadOnlyFS serves a small FS of your own, which implements only
// what reading takes, over TCP, and reads its file back.
func ExampleReadOnlyFS() {
	ctx := context.Background()
	fsys := helloFS{files: fstest.MapFS{"hello.txt": {
		Data: []byte("hello from memory\n"), Mode: 0o444, ModTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
	}}}
	srv, err := nfs.NewServer(nfs.ServerConfig{Exports: []nfs.Export{{Path: "/mem", FS: fsys, ReadOnly: true}}})
	if err != nil {
		log.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	rs := srv.NewRPCServer(true, nil) // NFS and MOUNT on one TCP port
	go rs.ServeListener(l)
	defer rs.Shutdown(ctx)

	c, err := nfs.Mount(ctx, nfs.MountConfig{MountAddr: l.Addr().String(), Export: "/mem", Dial: nfs.TCP(l.Addr().String())})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fh, attr, err := c.LookupPath(ctx, "hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, attr.Size)
	n, err := c.ReadAt(ctx, fh, buf, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", buf[:n])
	fmt.Println("modified", attr.Mtime.Time().UTC())
	_, err = c.Create(ctx, c.Root(), "new.txt", nfs3.Unchecked, nfs3.SetAttr{})
	fmt.Println("create is refused:", errors.Is(err, nfs3.ErrROFS))
	st := c.Stats()
	fmt.Println("bytes read:", st.BytesRead, "NFS3ERR_ROFS answers:", st.Errors[nfs3.ErrROFS])
	// Output:
	// hello from memory
	// modified 2024-01-02 03:04:05 +0000 UTC
	// create is refused: true
	// bytes read: 18 NFS3ERR_ROFS answers: 1
}
