package nfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// TestLinux41 runs the NFSv4.1 client against knfsd in the lab VM, over
// TCP and over RPC-over-RDMA (the software iWARP to the guest's siw):
// a session, then every file operation, with 1 MiB READ and WRITE whose
// data is checked and whose placement the connection's counters confirm.
func TestLinux41(t *testing.T) {
	p, addr := knfsdSiw(t)
	for _, tr := range []string{"tcp", "rdma"} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var conns []*rpcrdma.Conn
			dial := TCP(lab.NFSTCPAddr)
			if tr == "rdma" {
				dial = func(ctx context.Context) (rpc.Transport, error) {
					c, err := rpcrdma.Dial(ctx, p, addr, nil)
					if err == nil {
						conns = append(conns, c)
					}
					return c, err
				}
			}
			c, err := Mount4(ctx, Config4{Dial: dial, Conns: 4, Cred: &rpc.AuthSysParms{MachineName: "go-rpcrdma-test"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			in := c.Info()
			t.Logf("session: %d slots, fore %+v, lease %v, owner %q, impl %q, max read %d write %d",
				in.Slots, in.Fore, in.Lease, in.ServerOwner, in.Implementation, in.MaxRead, in.MaxWrite)
			if in.MaxRead < 1<<20 || in.MaxWrite < 1<<20 {
				t.Errorf("max read %d, write %d: want 1 MiB", in.MaxRead, in.MaxWrite)
			}
			exercise41(t, ctx, c, tr)
			if tr == "rdma" && len(conns) < 4 {
				t.Errorf("%d RDMA connections in the session, want 4", len(conns))
			}
			if tr == "rdma" {
				var s rpcrdma.StatsSnapshot
				for _, cn := range conns {
					cs := cn.Stats()
					s.Add(&cs)
				}
				// 1 MiB READs land in write chunks, 1 MiB WRITEs go in read
				// chunks, READDIR of 1,000 entries comes in reply chunks.
				if s.WriteChunks < 4 || s.ReadChunks < 4 || s.ReplyChunks < 1 {
					t.Errorf("chunks: write %d, read %d, reply %d", s.WriteChunks, s.ReadChunks, s.ReplyChunks)
				}
			}
		})
	}
}

// exercise41 runs every operation the client has against the server.
func exercise41(t *testing.T, ctx context.Context, c *Client4, tag string) {
	t.Helper()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	if _, err := c.SecinfoNoName(ctx); err != nil {
		t.Errorf("SECINFO_NO_NAME: %v", err)
	}
	root := c.Root()
	dirName := fmt.Sprintf("go41-%s-%d", tag, time.Now().UnixNano())
	dir, err := c.Mkdir(ctx, root, dirName, nfs4.SetAttr{SetMode: true, Mode: 0o755})
	must("CREATE dir", err)
	defer c.Remove(context.WithoutCancel(ctx), root, dirName)

	f, err := c.Open(ctx, dir, "data", OpenOptions{Access: nfs4.ShareAccessBoth, Create: true, Exclusive: true,
		Attr: nfs4.SetAttr{SetMode: true, Mode: 0o644}})
	must("OPEN create", err)
	data := randomBytes(4<<20 + 123)
	var verf nfs4.Verifier
	for off := 0; off < len(data); {
		n, _, v, err := f.WriteAt(ctx, data[off:], uint64(off), nfs4.Unstable)
		must("WRITE", err)
		if off == 0 {
			verf = v
		} else if v != verf {
			t.Fatal("the write verifier changed")
		}
		off += n
	}
	cv, err := c.Commit(ctx, f.FH)
	must("COMMIT", err)
	if cv != verf {
		t.Error("COMMIT's verifier is not WRITE's")
	}
	got := make([]byte, len(data))
	for off := 0; off < len(got); {
		n, eof, err := f.ReadAt(ctx, got[off:], uint64(off))
		must("READ", err)
		off += n
		if eof || n == 0 {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("READ does not give back what WRITE wrote")
	}
	must("CLOSE", f.Close(ctx))

	fh, a, err := c.LookupPath(ctx, dirName+"/data")
	must("LOOKUP path", err)
	if a.Size != uint64(len(data)) || a.Type != nfs4.TypeReg || a.Mode&0o777 != 0o644 {
		t.Errorf("attributes: size %d type %v mode %o", a.Size, a.Type, a.Mode)
	}
	if acc, err := c.Access(ctx, fh, 0x3f); err != nil || acc == 0 {
		t.Errorf("ACCESS: %#x %v", acc, err)
	}
	// Reading with the anonymous stateid, as a bench may.
	buf := make([]byte, 4096)
	if n, _, err := c.Read(ctx, fh, nfs4.AnonymousStateID, buf, 1<<20); err != nil || !bytes.Equal(buf[:n], data[1<<20:1<<20+4096]) {
		t.Errorf("READ with the anonymous stateid: %d %v", n, err)
	}
	_, err = c.Symlink(ctx, dir, "link", "data", nfs4.SetAttr{})
	must("CREATE link", err)
	lfh, la, err := c.Lookup(ctx, dir, "link")
	must("LOOKUP link", err)
	if target, err := c.Readlink(ctx, lfh); err != nil || target != "data" || la.Type != nfs4.TypeLnk {
		t.Errorf("READLINK: %q %v (%v)", target, err, la.Type)
	}
	must("LINK", c.Link(ctx, fh, dir, "hard"))
	must("RENAME", c.Rename(ctx, dir, "hard", dir, "hard2"))
	must("SETATTR", c.Setattr(ctx, fh, nfs4.AnonymousStateID, nfs4.SetAttr{SetMode: true, Mode: 0o600}))
	if a, err := c.Getattr(ctx, fh); err != nil || a.Mode&0o777 != 0o600 || a.NumLinks != 2 {
		t.Errorf("GETATTR after SETATTR and LINK: mode %o links %d %v", a.Mode, a.NumLinks, err)
	}
	sub, err := c.Mkdir(ctx, dir, "many", nfs4.SetAttr{})
	must("CREATE many", err)
	for i := range 1000 {
		g, err := c.Open(ctx, sub, fmt.Sprintf("entry-with-a-longish-name-%04d", i), OpenOptions{Access: nfs4.ShareAccessWrite, Create: true})
		must("OPEN many", err)
		must("CLOSE many", g.Close(ctx))
	}
	ents, err := c.ReadDir(ctx, sub)
	must("READDIR", err)
	if len(ents) != 1000 {
		t.Errorf("READDIR: %d entries, want 1000", len(ents))
	}
	for _, e := range ents {
		must("REMOVE many", c.Remove(ctx, sub, e.Name))
	}
	ents, err = c.ReadDir(ctx, dir)
	must("READDIR dir", err)
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name] = true
	}
	if !names["data"] || !names["link"] || !names["hard2"] || !names["many"] {
		t.Errorf("READDIR: %v", names)
	}
	for _, n := range []string{"many", "link", "hard2", "data"} {
		must("REMOVE "+n, c.Remove(ctx, dir, n))
	}
	if _, _, err := c.Lookup(ctx, dir, "data"); !errors.Is(err, nfs4.ErrNoEnt) {
		t.Errorf("LOOKUP after REMOVE: %v", err)
	}
}

// TestLinux41Delegation: over RDMA the session's backchannel is the
// connection itself (RFC 8167); knfsd grants a read delegation, the
// client reads from its cache while it holds it, and when the guest's
// own processes write the file, knfsd recalls it with CB_RECALL, which
// the library serves: it returns the delegation, the guest's write
// completes, and the next read sees the new bytes.
//
// With cut, the connection is cut first: the client reconnects, knfsd
// says the callback path is down, and the client binds the backchannel
// to the new connection (BIND_CONN_TO_SESSION) before the recall comes.
func TestLinux41Delegation(t *testing.T) {
	for _, cut := range []bool{false, true} {
		t.Run(fmt.Sprintf("cut=%v", cut), func(t *testing.T) { linux41Delegation(t, cut) })
	}
}

func linux41Delegation(t *testing.T, cut bool) {
	p, addr := knfsdSiw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var conns []*rpcrdma.Conn
	dial := func(ctx context.Context) (rpc.Transport, error) {
		cn, err := rpcrdma.Dial(ctx, p, addr, &rpcrdma.Config{BackwardCredits: 4})
		if err == nil {
			mu.Lock()
			conns = append(conns, cn)
			mu.Unlock()
		}
		return cn, err
	}
	c, err := Mount4(ctx, Config4{Dial: dial, Cred: &rpc.AuthSysParms{MachineName: "go-rpcrdma-test"},
		Reconnect: rpc.ReconnectConfig{MinBackoff: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Info().Backchannel {
		t.Fatal("knfsd did not grant the backchannel on the connection")
	}
	if cut {
		// Non-idempotent calls in flight while the connection is cut:
		// each is sent again on the same slot and sequence ID, so knfsd
		// answers a retry from its reply cache and none fails with
		// NFS4ERR_EXIST, as a second run of its CREATE would.
		base := fmt.Sprintf("cut41-%d", time.Now().UnixNano())
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Go(func() {
				_, err := c.Mkdir(ctx, c.Root(), fmt.Sprintf("%s-%d", base, i), nfs4.SetAttr{})
				errs <- err
			})
		}
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		conns[0].RDMA().Close() // no warning
		mu.Unlock()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("CREATE across the cut: %v", err)
			}
		}
		defer lab.Run(t, "rmdir /export/"+base+"-*", lab.CmdTimeout)
		if st := c.conns[0].Stats(); st.Retransmits == 0 {
			t.Logf("no call was in flight at the cut (client stats %+v)", st)
		}
		for deadline := time.Now().Add(60 * time.Second); c.rebound.Load() == 0 && time.Now().Before(deadline); {
			c.compound(ctx, nil, nil, callOpts{}) // a SEQUENCE: reconnects, and hears the path is down
			time.Sleep(200 * time.Millisecond)
		}
		if c.rebound.Load() == 0 {
			t.Fatal("the backchannel was not bound to the new connection")
		}
	}
	name := fmt.Sprintf("deleg41-%d.txt", time.Now().UnixNano())
	guestHello(t, name)
	f := openDelegated(t, ctx, c, name, 90*time.Second)
	buf := make([]byte, 6)
	for range 2 {
		if n, _, err := f.ReadAt(ctx, buf, 0); err != nil || string(buf[:n]) != "hello\n" {
			t.Fatalf("READ under the delegation: %q %v", buf[:n], err)
		}
	}
	if in := c.Info(); in.CacheHits < 1 {
		t.Errorf("the second read went to the server: %+v", in)
	}
	// The guest's write conflicts with the delegation: knfsd recalls it
	// and holds the write until it comes back.
	if out, rc := lab.Run(t, "timeout 50 sh -c 'echo world >> /export/"+name+"'", lab.CmdTimeout); rc != 0 {
		t.Fatalf("the guest's write did not complete (the recall was not answered?): %d %s", rc, out)
	}
	for deadline := time.Now().Add(30 * time.Second); f.Delegated() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if f.Delegated() || c.Info().Recalls < 1 {
		t.Fatalf("the delegation was not recalled and returned: delegated %v, %+v", f.Delegated(), c.Info())
	}
	got := make([]byte, 64)
	n, _, err := f.ReadAt(ctx, got, 0)
	if err != nil || string(got[:n]) != "hello\nworld\n" {
		t.Errorf("after the recall, READ gives %q %v", got[:n], err)
	}
	if err := f.Close(ctx); err != nil {
		t.Error(err)
	}
}

// TestLinux41SameAsV3: the same tree in knfsd's export, read through
// NFSv3 and through NFSv4.1 (both over RDMA, both through Files), gives
// the same names, types, sizes, modes, link targets and bytes.
func TestLinux41SameAsV3(t *testing.T) {
	p, addr := knfsdSiw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := fmt.Sprintf("same41-%d", time.Now().UnixNano())
	script := fmt.Sprintf("cd /export && mkdir -p %[1]s/sub/deeper && cd %[1]s && head -c 1500000 /dev/urandom > big && echo small > sub/small && "+
		"chmod 0640 sub/small && : > empty && ln -s sub/small link && ln -s /nowhere dangling && chmod 0750 sub", dir)
	if out, rc := lab.Run(t, script, lab.CmdTimeout); rc != 0 {
		t.Fatalf("making the tree in the guest: %d %s", rc, out)
	}
	defer lab.Run(t, "rm -rf /export/"+dir, lab.CmdTimeout)
	cred := &rpc.AuthSysParms{MachineName: "go-rpcrdma-test"}
	v3, err := Mount(ctx, MountConfig{MountAddr: lab.MountdAddr, Export: "/export", Dial: RDMA(p, addr, nil), Cred: cred})
	if err != nil {
		t.Fatal(err)
	}
	defer v3.Close()
	v41, err := Mount4(ctx, Config4{Dial: RDMA(p, addr, nil), Cred: cred})
	if err != nil {
		t.Fatal(err)
	}
	defer v41.Close()
	walk := func(fsys Files) map[string]string {
		t.Helper()
		out := map[string]string{}
		var visit func(h Handle, rel string)
		visit = func(h Handle, rel string) {
			ents, err := fsys.List(ctx, h)
			if err != nil {
				t.Fatalf("%s: listing %s: %v", fsys.Version(), rel, err)
			}
			for _, e := range ents {
				p := rel + "/" + e.Name
				s := fmt.Sprintf("%v %o size %d", e.Info.Type, e.Info.Perm, e.Info.Size)
				switch {
				case e.Info.IsDir():
					visit(e.Handle, p)
					s = fmt.Sprintf("%v %o", e.Info.Type, e.Info.Perm) // directory sizes are the server's business
				case e.Info.IsLink():
					target, err := fsys.ReadLink(ctx, e.Handle)
					if err != nil {
						t.Fatal(err)
					}
					s += " -> " + target
				default:
					var buf bytes.Buffer
					if _, err := Download(ctx, fsys, e.Handle, &buf); err != nil {
						t.Fatalf("%s: reading %s: %v", fsys.Version(), p, err)
					}
					s += fmt.Sprintf(" sha256 %x", sha256.Sum256(buf.Bytes()))
				}
				out[p] = s
			}
		}
		h, _, err := fsys.LookupPath(ctx, dir)
		if err != nil {
			t.Fatalf("%s: %v", fsys.Version(), err)
		}
		visit(h, "")
		return out
	}
	a, b := walk(V3Files(v3)), walk(V41Files(v41))
	if len(a) != 7 {
		t.Errorf("NFSv3 saw %d files, want 7: %v", len(a), a)
	}
	for p, s := range a {
		if b[p] != s {
			t.Errorf("%s: NFSv3 %q, NFSv4.1 %q", p, s, b[p])
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			t.Errorf("%s: only NFSv4.1 sees it", p)
		}
	}
}

// knfsdSiw returns a software iWARP provider and the RPC-over-RDMA
// address of the lab guest's knfsd (lab.Knfsd, which skips t unless the
// lab VM runs). The provider holds each connection's first message for
// iwarp.SiwFirstSendDelay: the guest's siw can miss a message that
// comes just after it accepts the connection.
func knfsdSiw(t *testing.T) (*iwarp.Provider, string) {
	t.Helper()
	addr := lab.Knfsd(t)
	p, err := iwarp.New(iwarp.Options{FirstSendDelay: iwarp.SiwFirstSendDelay})
	if err != nil {
		t.Fatal(err)
	}
	return p, addr
}

// guestHello writes "hello\n" to /export/name in the lab guest, for
// knfsd to serve, and removes it when t ends.
func guestHello(t *testing.T, name string) {
	t.Helper()
	if out, rc := lab.Run(t, "echo hello > /export/"+name, lab.CmdTimeout); rc != 0 {
		t.Fatalf("creating the file in the guest: %d %s", rc, out)
	}
	t.Cleanup(func() { lab.Run(t, "rm -f /export/"+name, lab.CmdTimeout) })
}

// openDelegated opens name, in c's root, for reading with a delegation,
// and returns it once knfsd grants one. knfsd grants none while a grace
// period runs (its own and lockd's, up to a minute after boot or a
// restart), refusing the OPEN (NFS4ERR_GRACE) or granting no delegation:
// it opens again each second, failing t after within.
func openDelegated(t *testing.T, ctx context.Context, c *Client4, name string, within time.Duration) *File4 {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(time.Second) {
		f, err := c.Open(ctx, c.Root(), name, OpenOptions{Delegation: true})
		if err != nil && !errors.Is(err, nfs4.ErrGrace) {
			t.Fatal(err)
		}
		if err == nil {
			if f.Delegated() {
				return f
			}
			f.Close(ctx)
		}
		if time.Now().After(deadline) {
			t.Fatalf("knfsd granted no read delegation within %v (the last OPEN: %v)", within, err)
		}
	}
}
