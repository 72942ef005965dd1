package nfs

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// mapFS is a small FS over a flat fstest.MapFS: the root is inode 1, the
// files in name order 2, 3, ... ReadOnlyFS answers the rest. hold, if
// set, is called before each read.
type mapFS struct {
	ReadOnlyFS
	files fstest.MapFS
	names []string
	hold  func()
}

func newMapFS(files fstest.MapFS) *mapFS {
	return &mapFS{files: files, names: slices.Sorted(maps.Keys(files))}
}

func (m *mapFS) name(ino uint64) (string, error) {
	switch {
	case ino == 1:
		return ".", nil
	case ino >= 2 && ino-2 < uint64(len(m.names)):
		return m.names[ino-2], nil
	}
	return "", nfs3.ErrStale
}

func (m *mapFS) Root() uint64 { return 1 }

func (m *mapFS) Getattr(_ context.Context, ino uint64) (nfs3.Attr, error) {
	name, err := m.name(ino)
	if err != nil {
		return nfs3.Attr{}, err
	}
	fi, err := fs.Stat(m.files, name)
	if err != nil {
		return nfs3.Attr{}, err
	}
	a := AttrOf(fi)
	a.FileID = ino
	return a, nil
}

func (m *mapFS) Lookup(_ context.Context, dir uint64, name string) (uint64, error) {
	if name == "." || name == ".." {
		return 1, nil
	}
	if i, ok := slices.BinarySearch(m.names, name); ok {
		return uint64(i) + 2, nil
	}
	return 0, nfs3.ErrNoEnt
}

func (m *mapFS) ReadAt(_ context.Context, ino uint64, p []byte, off int64) (int, bool, error) {
	if m.hold != nil {
		m.hold()
	}
	name, err := m.name(ino)
	if err != nil {
		return 0, false, err
	}
	data := m.files[name].Data
	if off >= int64(len(data)) {
		return 0, true, nil
	}
	n := copy(p, data[off:])
	return n, off+int64(n) == int64(len(data)), nil
}

func (m *mapFS) ReadDir(_ context.Context, dir, cookie uint64, emit func(name string, ino, next uint64) bool) (bool, error) {
	if cookie > uint64(len(m.names)) {
		return false, nfs3.ErrBadCookie
	}
	for i := cookie; i < uint64(len(m.names)); i++ {
		if !emit(m.names[i], i+2, i+1) {
			return false, nil
		}
	}
	return true, nil
}

// serveMapFS serves fsys at /export (not marked read-only, so that the
// FS's own answers show) over TCP for MOUNT and the loopback provider
// for NFS, and mounts it; conns gets each RDMA connection the client
// makes.
func serveMapFS(t *testing.T, fsys FS, conns chan<- *rpcrdma.Conn) *Client {
	t.Helper()
	ctx := ctxT(t)
	srv, err := NewServer(ServerConfig{Exports: []Export{{Path: "/export", FS: fsys}}})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mountd := srv.NewRPCServer(true, nil)
	go mountd.ServeListener(tl)
	t.Cleanup(func() { mountd.Close() })
	p := loopback.New()
	l, err := rpcrdma.Listen(ctx, p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := srv.NewRPCServer(false, nil)
	served := make(chan struct{})
	go func() { rpcrdma.Serve(context.Background(), l, rs); close(served) }()
	t.Cleanup(func() { l.Close(); rs.Close(); <-served })
	dial := func(ctx context.Context) (rpc.Transport, error) {
		c, err := rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
		if err == nil && conns != nil {
			conns <- c
		}
		return c, err
	}
	c, err := Mount(ctx, MountConfig{MountAddr: tl.Addr().String(), Export: "/export", Dial: dial,
		Cred: &rpc.AuthSysParms{MachineName: "test", UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReadOnlyFS: an FS that implements only reading, with ReadOnlyFS
// embedded, is served: files are looked up, listed and read, and every
// change is answered NFS3ERR_ROFS by the FS itself (the export is not
// marked read-only), FSSTAT with zeros.
func TestReadOnlyFS(t *testing.T) {
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	fsys := newMapFS(fstest.MapFS{
		"a.txt": {Data: []byte("alpha"), Mode: 0o644, ModTime: mtime},
		"b.txt": {Data: []byte("bravo!"), Mode: 0o444, ModTime: mtime},
	})
	var _ FS = fsys
	c := serveMapFS(t, fsys, nil)
	ctx := ctxT(t)
	fh, a, err := c.LookupPath(ctx, "b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if a.Type != nfs3.TypeReg || a.Size != 6 || a.FileID != 3 || a.Mtime != nfs3.TimeOf(mtime) {
		t.Errorf("b.txt attributes %+v", a)
	}
	buf := make([]byte, 6)
	if n, err := c.ReadAt(ctx, fh, buf, 0); err != nil || string(buf[:n]) != "bravo!" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	ents, err := c.ReadDir(ctx, c.Root())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if !slices.Contains(names, "a.txt") || !slices.Contains(names, "b.txt") {
		t.Errorf("READDIR gave %v", names)
	}
	root := c.Root()
	changes := map[string]error{}
	_, changes["SETATTR"] = c.Setattr(ctx, fh, nfs3.SetAttr{SetMode: true, Mode: 0o600}, nil)
	_, changes["WRITE"] = c.WriteAt(ctx, fh, []byte("x"), 0)
	_, changes["CREATE"] = c.Create(ctx, root, "new", nfs3.Unchecked, nfs3.SetAttr{})
	_, changes["MKDIR"] = c.Mkdir(ctx, root, "dir", nfs3.SetAttr{})
	_, changes["SYMLINK"] = c.Symlink(ctx, root, "link", "a.txt", nfs3.SetAttr{})
	changes["LINK"] = c.Link(ctx, fh, root, "hard")
	changes["REMOVE"] = c.Remove(ctx, root, "a.txt")
	changes["RMDIR"] = c.Rmdir(ctx, root, "a.txt")
	changes["RENAME"] = c.Rename(ctx, root, "a.txt", root, "c.txt")
	for proc, err := range changes {
		if !errors.Is(err, nfs3.ErrROFS) {
			t.Errorf("%s: %v, want NFS3ERR_ROFS", proc, err)
		}
	}
	if _, err := c.Commit(ctx, fh); err != nil {
		t.Errorf("COMMIT: %v", err)
	}
	if st, err := c.FSStat(ctx, root); err != nil || st.TBytes != 0 {
		t.Errorf("FSSTAT: %+v, %v", st, err)
	}
}

// TestClientStats: a Client counts its calls by procedure, the statuses
// other than NFS3_OK, the calls that got none, the bytes read and
// written, and the calls its rpc.Client sent again after a lost
// connection (a READ in progress when the connection is cut).
func TestClientStats(t *testing.T) {
	data := []byte("0123456789abcdef")
	fsys := newMapFS(fstest.MapFS{"f": {Data: data, Mode: 0o644}})
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	fsys.hold = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	conns := make(chan *rpcrdma.Conn, 4)
	c := serveMapFS(t, fsys, conns)
	first := <-conns
	ctx := ctxT(t)
	fh, _, err := c.LookupPath(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Lookup(ctx, c.Root(), "missing"); !errors.Is(err, nfs3.ErrNoEnt) {
		t.Fatalf("LOOKUP of a missing name: %v", err)
	}
	if _, err := c.WriteAt(ctx, fh, []byte("x"), 0); !errors.Is(err, nfs3.ErrROFS) {
		t.Fatalf("WRITE: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Getattr(cancelled, fh); err == nil {
		t.Fatal("GETATTR with a cancelled context succeeded")
	}
	before := c.Stats()

	// The first READ waits in the FS while its connection is cut; the
	// rpc.Client sends it again on a new one.
	read := make(chan error, 1)
	buf := make([]byte, len(data))
	go func() {
		_, err := c.ReadAt(ctx, fh, buf, 0)
		read <- err
	}()
	<-entered
	first.Close()
	close(release)
	if err := <-read; err != nil || string(buf) != string(data) {
		t.Fatalf("READ across a reconnection: %q, %v", buf, err)
	}

	s := c.Stats()
	if s.Calls[nfs3.ProcLookup] != 2 || s.Calls[nfs3.ProcWrite] != 1 || s.Calls[nfs3.ProcRead] != 1 {
		t.Errorf("calls %v, want 2 LOOKUP, 1 WRITE, 1 READ", s.Calls)
	}
	if s.Total() != before.Total()+1 {
		t.Errorf("Total %d after one more call, was %d", s.Total(), before.Total())
	}
	if s.Errors[nfs3.ErrNoEnt] != 1 || s.Errors[nfs3.ErrROFS] != 1 || len(s.Errors) != 2 {
		t.Errorf("errors %v, want one NFS3ERR_NOENT and one NFS3ERR_ROFS", s.Errors)
	}
	if s.Failed != 1 {
		t.Errorf("%d calls failed without a status, want 1 (the cancelled GETATTR)", s.Failed)
	}
	if s.BytesRead != uint64(len(data)) || s.BytesWritten != 0 {
		t.Errorf("bytes read %d, written %d; want %d, 0", s.BytesRead, s.BytesWritten, len(data))
	}
	if s.Retransmits != 1 || s.Retransmits != c.RPC().Stats().Retransmits {
		t.Errorf("retransmits %d (rpc layer %d), want 1", s.Retransmits, c.RPC().Stats().Retransmits)
	}
}

// TestAttrOf: fattr3 from an fs.FileInfo without a stat(2) result (the
// mode's type and permission bits, size, times from ModTime) and from
// os.Lstat (owner, links, inode and times from stat(2)).
func TestAttrOf(t *testing.T) {
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	files := fstest.MapFS{
		"reg":  {Data: []byte("12345"), Mode: 0o640 | fs.ModeSetuid | fs.ModeSetgid, ModTime: mtime},
		"dir":  {Mode: fs.ModeDir | 0o755 | fs.ModeSticky, ModTime: mtime},
		"lnk":  {Data: []byte("reg"), Mode: fs.ModeSymlink | 0o777},
		"blk":  {Mode: fs.ModeDevice | 0o600},
		"chr":  {Mode: fs.ModeDevice | fs.ModeCharDevice | 0o600},
		"fifo": {Mode: fs.ModeNamedPipe | 0o600},
		"sock": {Mode: fs.ModeSocket | 0o600},
		"old":  {Mode: 0o644, ModTime: time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)},
	}
	want := map[string]nfs3.Attr{
		"reg": {Type: nfs3.TypeReg, Mode: 0o6640, Nlink: 1, Size: 5, Used: 5,
			Atime: nfs3.TimeOf(mtime), Mtime: nfs3.Time{Seconds: 1704164645, Nseconds: 6}, Ctime: nfs3.TimeOf(mtime)},
		"dir": {Type: nfs3.TypeDir, Mode: 0o1755, Nlink: 2,
			Atime: nfs3.TimeOf(mtime), Mtime: nfs3.TimeOf(mtime), Ctime: nfs3.TimeOf(mtime)},
		"lnk":  {Type: nfs3.TypeLnk, Mode: 0o777, Nlink: 1, Size: 3, Used: 3},
		"blk":  {Type: nfs3.TypeBlk, Mode: 0o600, Nlink: 1},
		"chr":  {Type: nfs3.TypeChr, Mode: 0o600, Nlink: 1},
		"fifo": {Type: nfs3.TypeFIFO, Mode: 0o600, Nlink: 1},
		"sock": {Type: nfs3.TypeSock, Mode: 0o600, Nlink: 1},
		"old":  {Type: nfs3.TypeReg, Mode: 0o644, Nlink: 1}, // before 1970: time zero
	}
	for name, w := range want {
		fi, err := fs.Lstat(files, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := AttrOf(fi); got != w {
			t.Errorf("%s: AttrOf = %+v\nwant %+v", name, got, w)
		}
	}

	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	a := AttrOf(fi)
	if a.Type != nfs3.TypeReg || a.Mode != 0o640 || a.Size != 5 || a.Nlink != 1 || a.FileID != inoOf(fi) ||
		a.UID != uint32(os.Getuid()) || a.Mtime != nfs3.TimeOf(mtime) || a.Atime != nfs3.TimeOf(mtime) {
		t.Errorf("AttrOf(os.Lstat) = %+v", a)
	}
}
