package nfs

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// testEnv is a Server exporting temporary directories, reachable over TCP
// (MOUNT and NFS) and over RPC-over-RDMA (NFS).
type testEnv struct {
	dir, roDir string // the exported directories
	outside    string // a directory beside them, which nothing may touch
	srv        *Server
	mountAddr  string
	tcp        *rpc.Server
	rdmaSrv    *rpc.Server
	provider   rdma.Provider
	rdmaAddr   string

	mu    sync.Mutex
	conns []*rpcrdma.Conn // the client side of RDMA connections
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func newEnv(t testing.TB, provider string) *testEnv {
	t.Helper()
	base := t.TempDir()
	e := &testEnv{dir: filepath.Join(base, "export"), roDir: filepath.Join(base, "ro"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{e.dir, e.roDir, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(e.outside, "secret"), []byte("outside"), 0o644)
	os.WriteFile(filepath.Join(e.roDir, "ro.txt"), []byte("read only"), 0o644)
	e.start(t, testSecret)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch provider {
	case "tcp":
	case "loopback":
		e.provider = loopback.New()
	case "iwarp":
		p, err := iwarp.New(iwarp.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.provider = p
	}
	if e.provider != nil {
		addr := ""
		if provider == "iwarp" {
			addr = "127.0.0.1:0"
		}
		l, err := rpcrdma.Listen(ctx, e.provider, addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.rdmaSrv = e.srv.NewRPCServer(false, nil)
		e.rdmaAddr = l.Addr().String()
		done := make(chan struct{})
		go func() { rpcrdma.Serve(context.Background(), l, e.rdmaSrv); close(done) }()
		t.Cleanup(func() { l.Close(); e.rdmaSrv.Close(); <-done })
	}
	return e
}

// start starts the Server and its TCP side with secret.
func (e *testEnv) start(t testing.TB, secret []byte) {
	t.Helper()
	fsys, err := NewLocalFS(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := NewLocalFS(e.roDir)
	if err != nil {
		t.Fatal(err)
	}
	e.srv, err = NewServer(ServerConfig{Secret: secret, Exports: []Export{
		{Path: "/export", FS: fsys}, {Path: "/export-ro", FS: ro, ReadOnly: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp := e.srv.NewRPCServer(true, nil)
	e.tcp, e.mountAddr = tcp, l.Addr().String()
	done := make(chan struct{})
	go func() { tcp.ServeListener(l); close(done) }()
	t.Cleanup(func() { tcp.Close(); <-done; fsys.Close(); ro.Close() })
}

// mount mounts export over the environment's transport.
func (e *testEnv) mount(t testing.TB, export string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := TCP(e.mountAddr)
	if e.provider != nil {
		dial = func(ctx context.Context) (rpc.Transport, error) {
			c, err := rpcrdma.Dial(ctx, e.provider, e.rdmaAddr, nil)
			if err == nil {
				e.mu.Lock()
				e.conns = append(e.conns, c)
				e.mu.Unlock()
			}
			return c, err
		}
	}
	c, err := Mount(ctx, MountConfig{MountAddr: e.mountAddr, Export: export, Dial: dial,
		Cred: &rpc.AuthSysParms{MachineName: "test", UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *testEnv) rdmaStats() rpcrdma.StatsSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	var s rpcrdma.StatsSnapshot
	for _, c := range e.conns {
		cs := c.Stats()
		s.WriteChunks += cs.WriteChunks
		s.ReadChunks += cs.ReadChunks
		s.ReplyChunks += cs.ReplyChunks
	}
	return s
}

func forEachTransport(t *testing.T, f func(t *testing.T, e *testEnv)) {
	for _, tr := range []string{"tcp", "loopback", "iwarp"} {
		t.Run(tr, func(t *testing.T) { f(t, newEnv(t, tr)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantStat(t *testing.T, what string, err error, st nfs3.Stat) {
	t.Helper()
	if st == nfs3.OK {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return
	}
	if !errors.Is(err, st) {
		t.Fatalf("%s: %v, want %v", what, err, st)
	}
}

// TestProcedures runs every NFSv3 procedure through the Client against the
// Server and checks the results against the exported directory.
func TestProcedures(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *testEnv) {
		ctx := ctxT(t)
		c := e.mount(t, "/export")
		root := c.Root()
		wantStat(t, "NULL", c.Null(ctx), nfs3.OK)
		ra, err := c.Getattr(ctx, root)
		wantStat(t, "GETATTR root", err, nfs3.OK)
		if ra.Type != nfs3.TypeDir {
			t.Fatalf("root is %v", ra.Type)
		}

		// CREATE, WRITE, READ, COMMIT: 3 MiB and a bit, several calls each.
		fh, err := c.Create(ctx, root, "data", nfs3.Guarded, nfs3.SetAttr{SetMode: true, Mode: 0o640})
		wantStat(t, "CREATE", err, nfs3.OK)
		_, err = c.Create(ctx, root, "data", nfs3.Guarded, nfs3.SetAttr{})
		wantStat(t, "CREATE GUARDED again", err, nfs3.ErrExist)
		data := make([]byte, 3<<20+12345)
		for i := range data {
			data[i] = byte(i*7 + i>>12)
		}
		n, err := c.WriteAt(ctx, fh, data, 0)
		wantStat(t, "WRITE", err, nfs3.OK)
		if n != len(data) {
			t.Fatalf("wrote %d", n)
		}
		_, committed, verf, err := c.Write(ctx, fh, data[:10], 0, nfs3.Unstable)
		wantStat(t, "WRITE UNSTABLE", err, nfs3.OK)
		cv, err := c.Commit(ctx, fh)
		wantStat(t, "COMMIT", err, nfs3.OK)
		if committed != nfs3.Unstable || cv != verf {
			t.Errorf("unstable write committed %v verf %x, COMMIT verf %x", committed, verf, cv)
		}
		if got, _ := os.ReadFile(filepath.Join(e.dir, "data")); !bytes.Equal(got, data) {
			t.Fatalf("the file holds %d bytes, not what was written", len(got))
		}
		back := make([]byte, len(data)+100)
		n, err = c.ReadAt(ctx, fh, back, 0)
		if n != len(data) || !bytes.Equal(back[:n], data) {
			t.Fatalf("read back %d bytes (%v), not what was written", n, err)
		}
		nr, eof, err := c.Read(ctx, fh, back[:100], uint64(len(data)-50))
		if err != nil || nr != 50 || !eof {
			t.Fatalf("READ at the end: %d eof %v %v", nr, eof, err)
		}
		// A READ that ends exactly at the end of the file says so (the
		// server's check against the size), one just short of it not.
		if nr, eof, err = c.Read(ctx, fh, back[:50], uint64(len(data)-50)); err != nil || nr != 50 || !eof {
			t.Fatalf("READ ending at the end: %d eof %v %v", nr, eof, err)
		}
		if nr, eof, err = c.Read(ctx, fh, back[:49], uint64(len(data)-50)); err != nil || nr != 49 || eof {
			t.Fatalf("READ ending before the end: %d eof %v %v", nr, eof, err)
		}
		a, err := c.Getattr(ctx, fh)
		if err != nil || a.Size != uint64(len(data)) || a.Mode != 0o640 || a.Type != nfs3.TypeReg {
			t.Fatalf("GETATTR: %+v %v", a, err)
		}

		// SETATTR: truncate and chmod; a guard that fails.
		_, err = c.Setattr(ctx, fh, nfs3.SetAttr{SetSize: true, Size: 100, SetMode: true, Mode: 0o600}, &a.Ctime)
		wantStat(t, "SETATTR", err, nfs3.OK)
		if fi, _ := os.Stat(filepath.Join(e.dir, "data")); fi.Size() != 100 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("after SETATTR: %v %v", fi.Size(), fi.Mode())
		}
		_, err = c.Setattr(ctx, fh, nfs3.SetAttr{SetSize: true}, &nfs3.Time{Seconds: 1})
		wantStat(t, "SETATTR with a stale guard", err, nfs3.ErrNotSync)

		// ACCESS.
		got, err := c.Access(ctx, fh, nfs3.AccessRead|nfs3.AccessModify|nfs3.AccessExecute)
		wantStat(t, "ACCESS", err, nfs3.OK)
		if os.Getuid() != 0 && got != nfs3.AccessRead|nfs3.AccessModify {
			t.Errorf("ACCESS on a 0600 file of ours: %#x", got)
		}

		// MKDIR, SYMLINK, READLINK, LINK, LOOKUP.
		sub, err := c.Mkdir(ctx, root, "sub", nfs3.SetAttr{SetMode: true, Mode: 0o755})
		wantStat(t, "MKDIR", err, nfs3.OK)
		_, err = c.Mkdir(ctx, root, "sub", nfs3.SetAttr{})
		wantStat(t, "MKDIR again", err, nfs3.ErrExist)
		lnk, err := c.Symlink(ctx, sub, "lnk", "../data", nfs3.SetAttr{})
		wantStat(t, "SYMLINK", err, nfs3.OK)
		target, err := c.Readlink(ctx, lnk)
		if err != nil || target != "../data" {
			t.Fatalf("READLINK: %q %v", target, err)
		}
		_, err = c.Readlink(ctx, fh)
		wantStat(t, "READLINK of a file", err, nfs3.ErrInval)
		wantStat(t, "LINK", c.Link(ctx, fh, sub, "hard"), nfs3.OK)
		hfh, ha, err := c.Lookup(ctx, sub, "hard")
		wantStat(t, "LOOKUP", err, nfs3.OK)
		if ha.FileID != a.FileID || ha.Nlink != 2 || !bytes.Equal(hfh, fh) {
			t.Errorf("hard link: %+v, handle %x vs %x", ha, hfh, fh)
		}
		_, _, err = c.Lookup(ctx, root, "missing")
		wantStat(t, "LOOKUP missing", err, nfs3.ErrNoEnt)
		_, _, err = c.Lookup(ctx, fh, "x")
		wantStat(t, "LOOKUP in a file", err, nfs3.ErrNotDir)
		long := string(bytes.Repeat([]byte{'n'}, 256))
		_, err = c.Create(ctx, root, long, nfs3.Unchecked, nfs3.SetAttr{})
		wantStat(t, "CREATE a 256-byte name", err, nfs3.ErrNameTooLong)
		pfh, _, err := c.LookupPath(ctx, "/sub/..")
		if err != nil || !bytes.Equal(pfh, root) {
			t.Errorf("LOOKUP sub/..: %x %v", pfh, err)
		}

		// READDIR and READDIRPLUS, over several pages.
		for i := range 300 {
			_, err := c.Create(ctx, sub, "file-with-a-longish-name-"+string(rune('a'+i%26))+string(rune('a'+i/26)), nfs3.Unchecked, nfs3.SetAttr{})
			wantStat(t, "CREATE many", err, nfs3.OK)
		}
		ents, err := c.ReadDir(ctx, sub)
		wantStat(t, "READDIR", err, nfs3.OK)
		plus, err := c.ReadDirPlus(ctx, sub)
		wantStat(t, "READDIRPLUS", err, nfs3.OK)
		want, _ := os.ReadDir(filepath.Join(e.dir, "sub"))
		if len(ents) != len(want)+2 || len(plus) != len(want)+2 {
			t.Fatalf("READDIR %d, READDIRPLUS %d entries, want %d", len(ents), len(plus), len(want)+2)
		}
		for i, w := range want {
			if ents[i+2].Name != w.Name() || plus[i+2].Name != w.Name() {
				t.Fatalf("entry %d: %q/%q, want %q", i, ents[i+2].Name, plus[i+2].Name, w.Name())
			}
			p := plus[i+2]
			if !p.Attr.Present || !p.FH.Present || p.Attr.Attr.FileID != p.FileID {
				t.Fatalf("READDIRPLUS entry %+v", p)
			}
		}
		if ents[0].Name != "." || ents[1].Name != ".." {
			t.Errorf("first entries %q %q", ents[0].Name, ents[1].Name)
		}

		// RENAME, REMOVE, RMDIR and their errors.
		wantStat(t, "RENAME", c.Rename(ctx, sub, "lnk", root, "lnk2"), nfs3.OK)
		if _, err := os.Lstat(filepath.Join(e.dir, "lnk2")); err != nil {
			t.Fatal(err)
		}
		wantStat(t, "RMDIR a full directory", c.Rmdir(ctx, root, "sub"), nfs3.ErrNotEmpty)
		wantStat(t, "REMOVE a directory", c.Remove(ctx, root, "sub"), nfs3.ErrIsDir)
		wantStat(t, "RMDIR a file", c.Rmdir(ctx, root, "data"), nfs3.ErrNotDir)
		wantStat(t, "REMOVE", c.Remove(ctx, root, "lnk2"), nfs3.OK)
		wantStat(t, "REMOVE missing", c.Remove(ctx, root, "lnk2"), nfs3.ErrNoEnt)
		wantStat(t, "REMOVE .", c.Remove(ctx, root, "."), nfs3.ErrAcces)
		os.RemoveAll(filepath.Join(e.dir, "sub"))
		_, err = c.Getattr(ctx, sub)
		wantStat(t, "GETATTR of a removed directory", err, nfs3.ErrStale)
		_, err = c.Mknod(ctx, root, "fifo", nfs3.TypeFIFO, nfs3.SetAttr{}, nfs3.SpecData{})
		wantStat(t, "MKNOD", err, nfs3.ErrNotSupp)

		// FSSTAT, FSINFO, PATHCONF.
		fs, err := c.FSStat(ctx, root)
		if err != nil || fs.TBytes == 0 {
			t.Errorf("FSSTAT: %+v %v", fs, err)
		}
		fi, err := c.FSInfo(ctx, root)
		if err != nil || fi.RTMax != 1<<20 || fi.WTMax != 1<<20 {
			t.Errorf("FSINFO: %+v %v", fi, err)
		}
		pc, err := c.PathConf(ctx, root)
		if err != nil || pc.NameMax != 255 || !pc.NoTrunc {
			t.Errorf("PATHCONF: %+v %v", pc, err)
		}

		// Over RDMA, READ data went by write chunks, WRITE data by read
		// chunks, and READDIRPLUS replies by reply chunks.
		if e.provider != nil {
			st := e.rdmaStats()
			if st.WriteChunks == 0 || st.ReadChunks == 0 || st.ReplyChunks == 0 {
				t.Errorf("chunks: %d write, %d read, %d reply", st.WriteChunks, st.ReadChunks, st.ReplyChunks)
			}
		}
	})
}

// TestParallel runs many READs and WRITEs at once on one connection.
func TestParallel(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *testEnv) {
		ctx := ctxT(t)
		c := e.mount(t, "/export")
		const workers, size = 16, 256 << 10
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				name := "p" + string(rune('a'+w))
				fh, err := c.Create(ctx, c.Root(), name, nfs3.Unchecked, nfs3.SetAttr{})
				if err != nil {
					errs <- err
					return
				}
				data := bytes.Repeat([]byte{byte(w)}, size)
				if _, err := c.WriteAt(ctx, fh, data, 0); err != nil {
					errs <- err
					return
				}
				got := make([]byte, size)
				if _, err := c.ReadAt(ctx, fh, got, 0); err != nil || !bytes.Equal(got, data) {
					errs <- errors.New(name + ": read back other data")
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestMount(t *testing.T) {
	e := newEnv(t, "tcp")
	ctx := ctxT(t)
	ex, err := Exports(ctx, e.mountAddr)
	if err != nil || len(ex) != 2 || ex[0].Dir != "/export" || ex[1].Dir != "/export-ro" {
		t.Fatalf("EXPORT: %+v %v", ex, err)
	}
	cred, _ := authSys(&rpc.AuthSysParms{MachineName: "m"})
	_, err = MountRoot(ctx, e.mountAddr, "/nope", cred)
	if !errors.Is(err, mount.ErrNoEnt) {
		t.Errorf("MNT /nope: %v", err)
	}
	os.Mkdir(filepath.Join(e.dir, "d"), 0o755)
	os.WriteFile(filepath.Join(e.dir, "f"), nil, 0o644)
	if _, err := MountRoot(ctx, e.mountAddr, "/export/d", cred); err != nil {
		t.Errorf("MNT a subdirectory: %v", err)
	}
	if _, err := MountRoot(ctx, e.mountAddr, "/export/f", cred); !errors.Is(err, mount.ErrNotDir) {
		t.Errorf("MNT a file: %v", err)
	}
	if _, err := MountRoot(ctx, e.mountAddr, "/export/d/../../outside", cred); !errors.Is(err, mount.ErrAcces) {
		t.Errorf("MNT with ..: %v", err)
	}
	if _, err := MountRoot(ctx, e.mountAddr, "/exportx", cred); !errors.Is(err, mount.ErrNoEnt) {
		t.Errorf("MNT a longer name: %v", err)
	}
	t2, _ := rpc.DialTCP(ctx, e.mountAddr, nil)
	mc := rpc.NewClient(t2)
	defer mc.Close()
	var d mount.DumpRes
	if err := mountCall(ctx, mc, mount.ProcDump, nil, &d, cred); err != nil || len(d.Mounts) != 1 || d.Mounts[0] != (mount.MountBody{Hostname: "m", Directory: "/export/d"}) {
		t.Errorf("DUMP: %+v %v", d, err)
	}
	mountCall(ctx, mc, mount.ProcUmntall, nil, nil, cred)
	if err := mountCall(ctx, mc, mount.ProcDump, nil, &d, cred); err != nil || len(d.Mounts) != 0 {
		t.Errorf("DUMP after UMNTALL: %+v %v", d, err)
	}
}

func TestReadOnlyExport(t *testing.T) {
	e := newEnv(t, "tcp")
	ctx := ctxT(t)
	c := e.mount(t, "/export-ro")
	fh, _, err := c.Lookup(ctx, c.Root(), "ro.txt")
	wantStat(t, "LOOKUP", err, nfs3.OK)
	_, _, _, err = c.Write(ctx, fh, []byte("x"), 0, nfs3.FileSync)
	wantStat(t, "WRITE", err, nfs3.ErrROFS)
	_, err = c.Create(ctx, c.Root(), "new", nfs3.Unchecked, nfs3.SetAttr{})
	wantStat(t, "CREATE", err, nfs3.ErrROFS)
	_, err = c.Setattr(ctx, fh, nfs3.SetAttr{SetSize: true}, nil)
	wantStat(t, "SETATTR", err, nfs3.ErrROFS)
	wantStat(t, "REMOVE", c.Remove(ctx, c.Root(), "ro.txt"), nfs3.ErrROFS)
	wantStat(t, "RENAME", c.Rename(ctx, c.Root(), "ro.txt", c.Root(), "x"), nfs3.ErrROFS)
	got, err := c.Access(ctx, fh, nfs3.AccessRead|nfs3.AccessModify|nfs3.AccessExtend)
	if err != nil || got != nfs3.AccessRead {
		t.Errorf("ACCESS: %#x %v", got, err)
	}
	buf := make([]byte, 100)
	if n, err := c.ReadAt(ctx, fh, buf[:9], 0); err != nil || string(buf[:n]) != "read only" {
		t.Errorf("READ: %q %v", buf[:n], err)
	}
}

// TestHandlesSurviveRestart: a handle from one Server works on another
// with the same secret and exports, and is STALE under another secret.
func TestHandlesSurviveRestart(t *testing.T) {
	e := newEnv(t, "tcp")
	ctx := ctxT(t)
	os.MkdirAll(filepath.Join(e.dir, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(e.dir, "a", "b", "f"), []byte("kept"), 0o644)
	c := e.mount(t, "/export")
	fh, _, err := c.LookupPath(ctx, "a/b/f")
	wantStat(t, "LOOKUP", err, nfs3.OK)

	for _, tc := range []struct {
		secret []byte
		want   nfs3.Stat
	}{{testSecret, nfs3.OK}, {[]byte("another secret"), nfs3.ErrStale}} {
		e.start(t, tc.secret) // a new Server, LocalFS and port
		rc, err := rpc.DialClient(ctx, rpc.ReconnectConfig{Dial: TCP(e.mountAddr)})
		if err != nil {
			t.Fatal(err)
		}
		root, _ := e.srv.RootHandle("/export")
		c2, err := NewClient(ctx, rc, root, c.cred)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		_, err = c2.ReadAt(ctx, fh, buf, 0)
		wantStat(t, "READ after a restart", err, tc.want)
		if tc.want == nfs3.OK && string(buf) != "kept" {
			t.Errorf("read %q", buf)
		}
		c2.Close()
	}
}

// rawCall sends args to NFS procedure p and returns the results, or the
// call's error.
func rawCall(ctx context.Context, c *Client, p nfs3.Proc, args []byte) (*rpc.BodyDecoder, error) {
	rep, err := c.rc.Call(ctx, &rpc.Request{Prog: nfs3.Program, Vers: nfs3.Version, Proc: uint32(p), Cred: c.cred,
		Args: rpc.Body{XDR: args}, MaxReply: 1 << 20})
	if err != nil {
		return nil, err
	}
	d := rpc.NewBodyDecoder(rep.Results)
	return &d, nil
}

// TestHostile: forged and foreign handles, escapes through "..", symbolic
// links and names, huge counts, truncated and oversize arguments. Each
// gets its status or GARBAGE_ARGS; nothing outside the export changes; the
// server keeps serving.
func TestHostile(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *testEnv) {
		ctx := ctxT(t)
		before := snapshot(t, filepath.Dir(e.dir), e.dir)
		os.WriteFile(filepath.Join(e.dir, "f"), []byte("inside"), 0o644)
		os.Symlink(e.outside, filepath.Join(e.dir, "out-abs"))
		os.Symlink("../outside", filepath.Join(e.dir, "out-rel"))
		os.Symlink("../outside/secret", filepath.Join(e.dir, "secret-link"))
		c := e.mount(t, "/export")
		ro := e.mount(t, "/export-ro")
		root := c.Root()
		fh, _, err := c.Lookup(ctx, root, "f")
		wantStat(t, "LOOKUP f", err, nfs3.OK)

		// Forged handles: every bit of a real one flipped in turn, a
		// truncated one, one of another export with this export's id.
		for i := range len(fh) * 8 {
			forged := slices.Clone(fh)
			forged[i/8] ^= 1 << (i % 8)
			_, err := c.Getattr(ctx, forged)
			if !errors.Is(err, nfs3.ErrStale) && !errors.Is(err, nfs3.ErrBadHandle) {
				t.Fatalf("handle with bit %d flipped: %v", i, err)
			}
		}
		_, err = c.Getattr(ctx, fh[:len(fh)-1])
		wantStat(t, "short handle", err, nfs3.ErrBadHandle)
		foreign := slices.Clone(ro.Root())
		copy(foreign[1:5], root[1:5]) // claim the rw export
		_, err = c.Getattr(ctx, foreign)
		wantStat(t, "read-only export's handle relabelled", err, nfs3.ErrStale)
		_, err = c.Create(ctx, ro.Root(), "x", nfs3.Unchecked, nfs3.SetAttr{})
		wantStat(t, "CREATE in the read-only export's root", err, nfs3.ErrROFS)

		// Escapes: ".." at the root stays there; names with '/'; symbolic
		// links are data, never followed.
		up, _, err := c.Lookup(ctx, root, "..")
		if err != nil || !bytes.Equal(up, root) {
			t.Errorf("LOOKUP .. at the root: %x %v", up, err)
		}
		for _, name := range []string{"../outside", "out-abs/secret", "a\x00b"} {
			_, _, err = c.Lookup(ctx, root, name)
			wantStat(t, "LOOKUP "+name, err, nfs3.ErrAcces)
			_, err = c.Create(ctx, root, name, nfs3.Unchecked, nfs3.SetAttr{})
			wantStat(t, "CREATE "+name, err, nfs3.ErrAcces)
		}
		for _, name := range []string{"out-abs", "out-rel", "secret-link"} {
			lfh, la, err := c.Lookup(ctx, root, name)
			if err != nil || la.Type != nfs3.TypeLnk {
				t.Fatalf("LOOKUP %s: %+v %v", name, la, err)
			}
			_, _, err = c.Lookup(ctx, lfh, "secret")
			wantStat(t, "LOOKUP through "+name, err, nfs3.ErrNotDir)
			_, err = c.ReadAt(ctx, lfh, make([]byte, 7), 0)
			wantStat(t, "READ "+name, err, nfs3.ErrInval)
			_, _, _, err = c.Write(ctx, lfh, []byte("pwned"), 0, nfs3.FileSync)
			wantStat(t, "WRITE "+name, err, nfs3.ErrInval)
			_, err = c.Create(ctx, lfh, "new", nfs3.Unchecked, nfs3.SetAttr{})
			wantStat(t, "CREATE in "+name, err, nfs3.ErrNotDir)
			_, err = c.Setattr(ctx, lfh, nfs3.SetAttr{SetMode: true, Mode: 0o777}, nil)
			if err == nil {
				if fi, _ := os.Stat(filepath.Join(e.outside, "secret")); fi.Mode().Perm() != 0o644 {
					t.Fatalf("SETATTR through %s changed the file outside", name)
				}
			}
		}
		_, err = c.Create(ctx, root, "secret-link", nfs3.Unchecked, nfs3.SetAttr{SetSize: true})
		if err == nil {
			t.Error("CREATE UNCHECKED over a symbolic link to outside succeeded")
		}

		// Huge counts are clamped; a WRITE count beyond its data is INVAL.
		d, err := rawCall(ctx, c, nfs3.ProcRead, appendArgs(&nfs3.ReadArgs{FH: fh, Count: 1<<32 - 1}))
		var rr nfs3.ReadRes
		if err != nil || rr.Decode(d) != nil || rr.Status != nfs3.OK || string(rr.Data) != "inside" {
			t.Errorf("READ of 4 GiB: %+v %v", rr, err)
		}
		d, err = rawCall(ctx, c, nfs3.ProcWrite, appendArgs(&nfs3.WriteArgs{FH: fh, Count: 1 << 30, Data: []byte("x")}))
		var wr nfs3.WriteRes
		if err != nil || wr.Decode(d) != nil || wr.Status != nfs3.ErrInval {
			t.Errorf("WRITE count over its data: %+v %v", wr, err)
		}
		d, err = rawCall(ctx, c, nfs3.ProcReaddirplus, appendArgs(&nfs3.ReaddirplusArgs{Dir: root, DirCount: 1<<32 - 1, MaxCount: 1<<32 - 1}))
		var dr nfs3.ReaddirplusRes
		if err != nil || dr.Decode(d) != nil || dr.Status != nfs3.OK || !dr.EOF {
			t.Errorf("READDIRPLUS of 4 GiB: %v %v", dr.Status, err)
		}
		d, err = rawCall(ctx, c, nfs3.ProcReaddir, appendArgs(&nfs3.ReaddirArgs{Dir: root, Count: 10}))
		var r3 nfs3.ReaddirRes
		if err != nil || r3.Decode(d) != nil || r3.Status != nfs3.ErrTooSmall {
			t.Errorf("READDIR of 10 bytes: %v %v", r3.Status, err)
		}

		// Truncated and oversize arguments: GARBAGE_ARGS.
		rng := rand.New(rand.NewPCG(9, 9))
		for p := nfs3.ProcGetattr; p < nfs3.NumProcs; p++ {
			args := appendArgs(&nfs3.ReadArgs{FH: fh, Offset: 0, Count: 8})
			for _, bad := range [][]byte{args[:rng.IntN(len(fh))], append(slices.Clone(args), make([]byte, 64)...)} {
				_, err := rawCall(ctx, c, p, bad)
				if !errors.Is(err, rpc.ErrGarbageArgs) {
					t.Fatalf("%v with %d bytes of arguments: %v", p, len(bad), err)
				}
			}
		}

		// Still serving, and nothing outside the export changed.
		if _, err := c.Getattr(ctx, root); err != nil {
			t.Fatal(err)
		}
		if after := snapshot(t, filepath.Dir(e.dir), e.dir); !maps2Equal(before, after) {
			t.Errorf("outside the export:\nbefore %v\nafter  %v", before, after)
		}
	})
}

func appendArgs(a interface{ Append(*rpc.Body) }) []byte {
	var b rpc.Body
	a.Append(&b)
	return b.AppendFlat(nil)
}

// snapshot returns every path under base but not under skip, with its
// mode, size and contents.
func snapshot(t testing.TB, base, skip string) map[string]string {
	t.Helper()
	m := make(map[string]string)
	filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if p == skip {
			return filepath.SkipDir
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			v += " " + string(b)
		}
		m[p] = v
		return nil
	})
	return m
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestRootSquash(t *testing.T) {
	ex := &export{Export: Export{RootSquash: true}, anonID: Cred{UID: 65534, GID: 65534}}
	c := &rpc.Call{AuthSys: &rpc.AuthSysParms{UID: 0, GID: 0, GIDs: []uint32{0, 5}}}
	cr := ex.cred(c)
	if cr.UID != 65534 || cr.GID != 65534 || cr.GIDs[0] != 65534 || cr.GIDs[1] != 5 || c.AuthSys.GIDs[0] != 0 {
		t.Errorf("squashed root: %+v (call's %v)", cr, c.AuthSys.GIDs)
	}
	ex.RootSquash = false
	if cr := ex.cred(c); cr.UID != 0 {
		t.Errorf("root without squashing: %+v", cr)
	}
	if cr := ex.cred(&rpc.Call{}); cr.UID != 65534 {
		t.Errorf("AUTH_NONE: %+v", cr)
	}
	// Permission bits as the kernel decides them.
	a := nfs3.Attr{Type: nfs3.TypeReg, Mode: 0o640, UID: 10, GID: 20}
	for _, tc := range []struct {
		cr   Cred
		want uint32
	}{
		{Cred{UID: 10}, nfs3.AccessRead | nfs3.AccessModify | nfs3.AccessExtend},
		{Cred{UID: 11, GID: 20}, nfs3.AccessRead},
		{Cred{UID: 11, GIDs: []uint32{20}}, nfs3.AccessRead},
		{Cred{UID: 11, GID: 21}, 0},
		{Cred{UID: 0}, nfs3.AccessRead | nfs3.AccessModify | nfs3.AccessExtend},
	} {
		if got := access(&a, &tc.cr, 0x3f, false); got != tc.want {
			t.Errorf("%+v: %#x, want %#x", tc.cr, got, tc.want)
		}
	}
	if may(&a, &Cred{UID: 10}, nfs3.AccessModify, true) != nfs3.OK || may(&nfs3.Attr{Mode: 0, UID: 10}, &Cred{UID: 10}, nfs3.AccessModify, false) != nfs3.ErrAcces {
		t.Error("owner override")
	}
}

func TestReplyCacheNonIdempotentOnly(t *testing.T) {
	for p := range nfs3.Proc(nfs3.NumProcs) {
		want := p == nfs3.ProcSetattr || p == nfs3.ProcWrite || p == nfs3.ProcCreate || p == nfs3.ProcMkdir ||
			p == nfs3.ProcSymlink || p == nfs3.ProcMknod || p == nfs3.ProcRemove || p == nfs3.ProcRmdir ||
			p == nfs3.ProcRename || p == nfs3.ProcLink
		if p.Idempotent() == want {
			t.Errorf("%v: Idempotent %v", p, p.Idempotent())
		}
	}
}

// TestVanishingClient: clients that close their connection in the middle
// of WRITEs and READs leave the server serving the others.
func TestVanishingClient(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *testEnv) {
		ctx := ctxT(t)
		c := e.mount(t, "/export")
		fh, err := c.Create(ctx, c.Root(), "v", nfs3.Unchecked, nfs3.SetAttr{})
		wantStat(t, "CREATE", err, nfs3.OK)
		data := make([]byte, 1<<20)
		for i := range 8 {
			var tr rpc.Transport
			if e.provider != nil {
				tr, err = rpcrdma.Dial(ctx, e.provider, e.rdmaAddr, nil)
			} else {
				tr, err = rpc.DialTCP(ctx, e.mountAddr, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			rc := rpc.NewClient(tr)
			gone, err := NewClient(ctx, rc, c.Root(), c.cred)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					if i%2 == 0 {
						gone.Write(ctx, fh, data, 0, nfs3.Unstable)
					} else {
						gone.Read(ctx, fh, make([]byte, 1<<20), 0)
					}
				})
			}
			time.Sleep(time.Duration(i) * time.Millisecond)
			tr.Close()
			wg.Wait()
			rc.Close()
		}
		// (Calls of the vanished clients may still be running: check on
		// another file.)
		fh, err = c.Create(ctx, c.Root(), "w", nfs3.Unchecked, nfs3.SetAttr{})
		wantStat(t, "CREATE after", err, nfs3.OK)
		n, err := c.WriteAt(ctx, fh, []byte("still here"), 0)
		if err != nil || n != 10 {
			t.Fatalf("the server stopped serving others: %d %v", n, err)
		}
		buf := make([]byte, 10)
		if _, err := c.ReadAt(ctx, fh, buf, 0); err != nil || string(buf) != "still here" {
			t.Fatalf("read back %q %v", buf, err)
		}
	})
}
