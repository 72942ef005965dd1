package nfs

// A Client makes NFSv3 calls over one rpc.Client, so any number of calls
// may be in flight at once on its connection, over TCP or RPC-over-RDMA,
// and a Client from Mount reconnects (rpc.DialClient) and sends calls in
// flight again; the server's reply cache keeps the non-idempotent ones
// from running twice. On RPC-over-RDMA, a READ's data lands directly in
// the caller's buffer (a write chunk), WRITE data is pulled by the server
// from the caller's buffer (a read chunk), and READDIR, READDIRPLUS and
// READLINK replies come in a reply chunk when they may not fit inline, as
// Linux's client arranges them (RFC 8267 Section 4).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// Error is a failing NFS status from one call; the connection is fine.
// errors.Is(err, nfs3.ErrNoEnt) matches it.
type Error struct {
	Proc nfs3.Proc
	Stat nfs3.Stat
}

func (e *Error) Error() string { return "nfs: " + e.Proc.String() + ": " + e.Stat.Describe() }

// Unwrap returns the status.
func (e *Error) Unwrap() error { return e.Stat }

// MountError is a failing MOUNT status.
type MountError struct {
	Path string
	Stat mount.Stat
}

func (e *MountError) Error() string { return "nfs: MNT " + e.Path + ": " + e.Stat.Describe() }

// Unwrap returns the status.
func (e *MountError) Unwrap() error { return e.Stat }

// Dialer makes a new connection to an NFS server, for rpc.DialClient.
type Dialer func(ctx context.Context) (rpc.Transport, error)

// TCP returns a Dialer of TCP connections to addr.
func TCP(addr string) Dialer {
	return func(ctx context.Context) (rpc.Transport, error) { return rpc.DialTCP(ctx, addr, nil) }
}

// RDMA returns a Dialer of RPC-over-RDMA connections to addr over p.
func RDMA(p rdma.Provider, addr string, cfg *rpcrdma.Config) Dialer {
	return func(ctx context.Context) (rpc.Transport, error) { return rpcrdma.Dial(ctx, p, addr, cfg) }
}

// MountConfig says where an export is and how to reach it.
type MountConfig struct {
	// MountAddr is the MOUNT server's TCP address (host:port); RFC 8267
	// Section 6 keeps MOUNT on TCP whatever carries NFS.
	MountAddr string
	// Export is the path to mount.
	Export string
	// Dial connects to the NFS server (TCP or RDMA).
	Dial Dialer
	// Cred is the AUTH_SYS identity of every call; nil selects the
	// process's uid and gid and the host name.
	Cred *rpc.AuthSysParms
	// Reconnect configures reconnection; Dial is taken from above.
	Reconnect rpc.ReconnectConfig
}

// Mount asks cfg.MountAddr's MOUNT server for the export's root handle,
// connects to the NFS server, and asks FSINFO for its transfer sizes. The
// Client owns its connection; Close unmounts and closes it.
func Mount(ctx context.Context, cfg MountConfig) (*Client, error) {
	cred, err := authSys(cfg.Cred)
	if err != nil {
		return nil, err
	}
	root, err := MountRoot(ctx, cfg.MountAddr, cfg.Export, cred)
	if err != nil {
		return nil, err
	}
	rc := cfg.Reconnect
	rc.Dial = cfg.Dial
	if rc.Dial == nil {
		return nil, errors.New("nfs: MountConfig.Dial is nil")
	}
	rcli, err := rpc.DialClient(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("nfs: connecting to the NFS server: %w", err)
	}
	c, err := NewClient(ctx, rcli, root, cred)
	if err != nil {
		rcli.Close()
		return nil, err
	}
	c.mountAddr, c.export = cfg.MountAddr, cfg.Export
	return c, nil
}

func authSys(p *rpc.AuthSysParms) (rpc.OpaqueAuth, error) {
	if p == nil {
		host, _ := os.Hostname()
		if len(host) > rpc.MaxMachineName {
			host = host[:rpc.MaxMachineName]
		}
		p = &rpc.AuthSysParms{MachineName: host, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	}
	return p.Cred()
}

// MountRoot calls MNT for export on the MOUNT server at addr over TCP and
// returns the export's root handle.
func MountRoot(ctx context.Context, addr, export string, cred rpc.OpaqueAuth) (nfs3.FileHandle, error) {
	t, err := rpc.DialTCP(ctx, addr, nil)
	if err != nil {
		return nil, fmt.Errorf("nfs: connecting to the MOUNT server: %w", err)
	}
	mc := rpc.NewClient(t)
	defer mc.Close()
	var r mount.MntRes
	if err := mountCall(ctx, mc, mount.ProcMnt, mount.DirPath(export), &r, cred); err != nil {
		return nil, err
	}
	if r.Status != mount.OK {
		return nil, &MountError{Path: export, Stat: r.Status}
	}
	return append(nfs3.FileHandle(nil), r.FH...), nil
}

// mountCall makes one MOUNT call.
func mountCall(ctx context.Context, mc *rpc.Client, p mount.Proc, a interface{ Append(*rpc.Body) }, r interface {
	Decode(*rpc.BodyDecoder) error
}, cred rpc.OpaqueAuth) error {
	var b rpc.Body
	if a != nil {
		a.Append(&b)
	}
	rep, err := mc.Call(ctx, &rpc.Request{Prog: mount.Program, Vers: mount.Version, Proc: uint32(p), Cred: cred, Args: b})
	if err != nil {
		return fmt.Errorf("nfs: MOUNT %v: %w", p, err)
	}
	if r == nil {
		return nil
	}
	d := rpc.NewBodyDecoder(rep.Results)
	if err := r.Decode(&d); err != nil {
		return fmt.Errorf("nfs: MOUNT %v reply: %w", p, err)
	}
	return nil
}

// Exports lists the exports of the MOUNT server at addr (EXPORT).
func Exports(ctx context.Context, addr string) ([]mount.ExportNode, error) {
	t, err := rpc.DialTCP(ctx, addr, nil)
	if err != nil {
		return nil, fmt.Errorf("nfs: connecting to the MOUNT server: %w", err)
	}
	mc := rpc.NewClient(t)
	defer mc.Close()
	var r mount.ExportRes
	if err := mountCall(ctx, mc, mount.ProcExport, nil, &r, rpc.OpaqueAuth{}); err != nil {
		return nil, err
	}
	return r.Exports, nil
}

// Client is an NFSv3 client of one export. Its methods are safe for
// concurrent use and may all be in flight at once.
type Client struct {
	rc   *rpc.Client
	cred rpc.OpaqueAuth
	root nfs3.FileHandle
	info nfs3.FsinfoRes

	mountAddr, export string

	stats clientCounters // client_stats.go
}

// NewClient returns a Client of the export whose root handle is root,
// making calls with cred over rc, after asking FSINFO for the server's
// transfer sizes. The Client owns rc.
func NewClient(ctx context.Context, rc *rpc.Client, root nfs3.FileHandle, cred rpc.OpaqueAuth) (*Client, error) {
	c := &Client{rc: rc, cred: cred, root: root}
	info, err := c.FSInfo(ctx, root)
	if err != nil {
		return nil, err
	}
	if info.RTMax == 0 || info.WTMax == 0 {
		return nil, fmt.Errorf("nfs: FSINFO gives rtmax %d, wtmax %d", info.RTMax, info.WTMax)
	}
	c.info = info
	return c, nil
}

// Root returns the export's root handle.
func (c *Client) Root() nfs3.FileHandle { return c.root }

// MaxRead and MaxWrite are the largest READ and WRITE a call carries: the
// server's preferred sizes (FSINFO rtpref, wtpref) within its maxima and
// nfs3.MaxData.
func (c *Client) MaxRead() int {
	return int(min(max(c.info.RTPref, 4096), c.info.RTMax, nfs3.MaxData))
}

// MaxWrite: see MaxRead.
func (c *Client) MaxWrite() int {
	return int(min(max(c.info.WTPref, 4096), c.info.WTMax, nfs3.MaxData))
}

// RPC returns the rpc.Client the calls go through, for its statistics.
func (c *Client) RPC() *rpc.Client { return c.rc }

// Close tells the MOUNT server the export is no longer mounted (UMNT,
// advisory, errors ignored) if the Client came from Mount, and closes the
// connection; calls in flight fail.
func (c *Client) Close() error {
	if c.mountAddr != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5e9)
		if t, err := rpc.DialTCP(ctx, c.mountAddr, nil); err == nil {
			mc := rpc.NewClient(t)
			mountCall(ctx, mc, mount.ProcUmnt, mount.DirPath(c.export), nil, c.cred)
			mc.Close()
		}
		cancel()
	}
	return c.rc.Close()
}

// call makes one NFS call and decodes its results with dec (or r).
func (c *Client) call(ctx context.Context, p nfs3.Proc, a interface{ Append(*rpc.Body) }, count uint32,
	bufs [][]byte, dec func(*rpc.BodyDecoder) error) error {
	var b rpc.Body
	a.Append(&b)
	rep, err := c.rc.Call(ctx, &rpc.Request{Prog: nfs3.Program, Vers: nfs3.Version, Proc: uint32(p),
		Cred: c.cred, Args: b, ResultBufs: bufs, MaxReply: p.ReplySize(count)})
	c.stats.called(p, rep.Results.XDR, err)
	if err != nil {
		return fmt.Errorf("nfs: %v: %w", p, err)
	}
	d := rpc.NewBodyDecoder(rep.Results)
	if err := dec(&d); err != nil {
		return fmt.Errorf("nfs: %v reply: %w", p, err)
	}
	return nil
}

// stat turns a status into the call's error.
func stat(p nfs3.Proc, st nfs3.Stat) error {
	if st == nfs3.OK {
		return nil
	}
	return &Error{Proc: p, Stat: st}
}

// Null calls NFS procedure 0.
func (c *Client) Null(ctx context.Context) error {
	err := c.rc.Null(ctx, nfs3.Program, nfs3.Version)
	c.stats.called(nfs3.ProcNull, nil, err)
	return err
}

// Getattr returns fh's attributes.
func (c *Client) Getattr(ctx context.Context, fh nfs3.FileHandle) (nfs3.Attr, error) {
	var r nfs3.GetattrRes
	if err := c.call(ctx, nfs3.ProcGetattr, &nfs3.FHArgs{FH: fh}, 0, nil, r.Decode); err != nil {
		return nfs3.Attr{}, err
	}
	return r.Attr, stat(nfs3.ProcGetattr, r.Status)
}

// Setattr sets fh's attributes as a says; with guard, only if its ctime
// is still ctime (NFS3ERR_NOT_SYNC otherwise).
func (c *Client) Setattr(ctx context.Context, fh nfs3.FileHandle, a nfs3.SetAttr, guard *nfs3.Time) (nfs3.WccData, error) {
	args := nfs3.SetattrArgs{FH: fh, Attr: a}
	if guard != nil {
		args.Check, args.Ctime = true, *guard
	}
	var r nfs3.WccRes
	if err := c.call(ctx, nfs3.ProcSetattr, &args, 0, nil, r.Decode); err != nil {
		return nfs3.WccData{}, err
	}
	return r.Wcc, stat(nfs3.ProcSetattr, r.Status)
}

// Lookup returns the handle and attributes of name in dir. The handle is
// the caller's.
func (c *Client) Lookup(ctx context.Context, dir nfs3.FileHandle, name string) (nfs3.FileHandle, nfs3.Attr, error) {
	var r nfs3.LookupRes
	if err := c.call(ctx, nfs3.ProcLookup, &nfs3.DirOpArgs{Dir: dir, Name: name}, 0, nil, r.Decode); err != nil {
		return nil, nfs3.Attr{}, err
	}
	if err := stat(nfs3.ProcLookup, r.Status); err != nil {
		return nil, nfs3.Attr{}, err
	}
	fh := append(nfs3.FileHandle(nil), r.FH...)
	if !r.Attr.Present {
		a, err := c.Getattr(ctx, fh)
		return fh, a, err
	}
	return fh, r.Attr.Attr, nil
}

// LookupPath looks up a slash-separated path from the root, one LOOKUP
// per component ("" and "/" are the root). A failed LOOKUP's error names
// the path as the server's root sees it: under the export mounted
// (Client.Name).
func (c *Client) LookupPath(ctx context.Context, p string) (nfs3.FileHandle, nfs3.Attr, error) {
	fh := c.root
	a, err := c.Getattr(ctx, fh)
	if err != nil {
		return nil, a, err
	}
	for name := range strings.SplitSeq(path.Clean("/"+p), "/") {
		if name == "" {
			continue
		}
		if fh, a, err = c.Lookup(ctx, fh, name); err != nil {
			return nil, a, fmt.Errorf("%s: %w", c.Name(p), err)
		}
	}
	return fh, a, nil
}

// Name returns the slash-separated path p inside the export as the
// server's root sees it: "/export/dir/f" for "dir/f" under the export
// "/export" that Mount mounted; p itself, made absolute, for a Client
// made with NewClient, which knows no export.
func (c *Client) Name(p string) string { return path.Join("/", c.export, p) }

// Access returns which of the ACCESS bits want the caller has on fh.
func (c *Client) Access(ctx context.Context, fh nfs3.FileHandle, want uint32) (uint32, error) {
	var r nfs3.AccessRes
	if err := c.call(ctx, nfs3.ProcAccess, &nfs3.AccessArgs{FH: fh, Access: want}, 0, nil, r.Decode); err != nil {
		return 0, err
	}
	return r.Access, stat(nfs3.ProcAccess, r.Status)
}

// Readlink returns the target of the symbolic link fh.
func (c *Client) Readlink(ctx context.Context, fh nfs3.FileHandle) (string, error) {
	var r nfs3.ReadlinkRes
	if err := c.call(ctx, nfs3.ProcReadlink, &nfs3.FHArgs{FH: fh}, 0, nil, r.Decode); err != nil {
		return "", err
	}
	return r.Path, stat(nfs3.ProcReadlink, r.Status)
}

// Read makes one READ of len(p) bytes (at most MaxRead) at off into p and
// returns the bytes read and whether they reach the end of the file. Over
// RPC-over-RDMA the server writes the data straight into p. p must not
// be touched until Read returns.
func (c *Client) Read(ctx context.Context, fh nfs3.FileHandle, p []byte, off uint64) (int, bool, error) {
	if len(p) > c.MaxRead() {
		p = p[:c.MaxRead()]
	}
	var r nfs3.ReadRes
	err := c.call(ctx, nfs3.ProcRead, &nfs3.ReadArgs{FH: fh, Offset: off, Count: uint32(len(p))}, 0, [][]byte{p},
		func(d *rpc.BodyDecoder) error { return r.DecodeInto(d, p) })
	if err != nil {
		return 0, false, err
	}
	if r.Status == nfs3.OK {
		c.stats.read.Add(uint64(len(r.Data)))
	}
	return len(r.Data), r.EOF, stat(nfs3.ProcRead, r.Status)
}

// ReadAt reads len(p) bytes at off into p with as many READs as it takes,
// one after the other, and returns the bytes read; fewer than len(p) only
// with an error, io.EOF at the end of the file.
func (c *Client) ReadAt(ctx context.Context, fh nfs3.FileHandle, p []byte, off uint64) (int, error) {
	done := 0
	for done < len(p) {
		n, eof, err := c.Read(ctx, fh, p[done:], off+uint64(done))
		done += n
		if err != nil {
			return done, err
		}
		if done < len(p) && (eof || n == 0) {
			return done, io.EOF
		}
	}
	return done, nil
}

// Write makes one WRITE of p (at most MaxWrite bytes) at off and returns
// the bytes written, how stable they are, and the server's write
// verifier (a change means unstable data may be lost: write it again).
// Over RPC-over-RDMA the server reads the data straight from p.
func (c *Client) Write(ctx context.Context, fh nfs3.FileHandle, p []byte, off uint64, stable nfs3.StableHow) (int, nfs3.StableHow, nfs3.Verf, error) {
	if len(p) > c.MaxWrite() {
		p = p[:c.MaxWrite()]
	}
	var r nfs3.WriteRes
	err := c.call(ctx, nfs3.ProcWrite, &nfs3.WriteArgs{FH: fh, Offset: off, Count: uint32(len(p)), Stable: stable, Data: p}, 0, nil, r.Decode)
	if err != nil {
		return 0, 0, nfs3.Verf{}, err
	}
	if err := stat(nfs3.ProcWrite, r.Status); err != nil {
		return 0, 0, nfs3.Verf{}, err
	}
	if int(r.Count) > len(p) {
		return 0, 0, nfs3.Verf{}, fmt.Errorf("nfs: WRITE of %d bytes answered count %d", len(p), r.Count)
	}
	c.stats.written.Add(uint64(r.Count))
	return int(r.Count), r.Committed, r.Verf, nil
}

// WriteAt writes all of p at off with as many FILE_SYNC WRITEs as it
// takes, one after the other.
func (c *Client) WriteAt(ctx context.Context, fh nfs3.FileHandle, p []byte, off uint64) (int, error) {
	done := 0
	for done < len(p) {
		n, _, _, err := c.Write(ctx, fh, p[done:], off+uint64(done), nfs3.FileSync)
		done += n
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, errors.New("nfs: WRITE made no progress")
		}
	}
	return done, nil
}

// Commit makes fh's unstable writes stable and returns the write verifier.
func (c *Client) Commit(ctx context.Context, fh nfs3.FileHandle) (nfs3.Verf, error) {
	var r nfs3.CommitRes
	if err := c.call(ctx, nfs3.ProcCommit, &nfs3.CommitArgs{FH: fh}, 0, nil, r.Decode); err != nil {
		return nfs3.Verf{}, err
	}
	return r.Verf, stat(nfs3.ProcCommit, r.Status)
}

// made returns the handle from a CREATE, MKDIR, SYMLINK or MKNOD, looking
// it up if the server left it out.
func (c *Client) made(ctx context.Context, p nfs3.Proc, r *nfs3.CreateRes, dir nfs3.FileHandle, name string) (nfs3.FileHandle, error) {
	if err := stat(p, r.Status); err != nil {
		return nil, err
	}
	if r.FH.Present {
		return append(nfs3.FileHandle(nil), r.FH.FH...), nil
	}
	fh, _, err := c.Lookup(ctx, dir, name)
	return fh, err
}

// Create makes a regular file name in dir with attributes a (UNCHECKED or
// GUARDED) and returns its handle.
func (c *Client) Create(ctx context.Context, dir nfs3.FileHandle, name string, mode nfs3.CreateMode, a nfs3.SetAttr) (nfs3.FileHandle, error) {
	var r nfs3.CreateRes
	args := nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: dir, Name: name}, Mode: mode, Attr: a}
	if err := c.call(ctx, nfs3.ProcCreate, &args, 0, nil, r.Decode); err != nil {
		return nil, err
	}
	return c.made(ctx, nfs3.ProcCreate, &r, dir, name)
}

// CreateExclusive makes a file with an EXCLUSIVE CREATE: a retransmission
// with the same verf succeeds, another client's file fails with
// NFS3ERR_EXIST. Set its attributes with Setattr afterwards.
func (c *Client) CreateExclusive(ctx context.Context, dir nfs3.FileHandle, name string, verf nfs3.Verf) (nfs3.FileHandle, error) {
	var r nfs3.CreateRes
	args := nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: dir, Name: name}, Mode: nfs3.Exclusive, Verf: verf}
	if err := c.call(ctx, nfs3.ProcCreate, &args, 0, nil, r.Decode); err != nil {
		return nil, err
	}
	return c.made(ctx, nfs3.ProcCreate, &r, dir, name)
}

// Mkdir makes a directory and returns its handle.
func (c *Client) Mkdir(ctx context.Context, dir nfs3.FileHandle, name string, a nfs3.SetAttr) (nfs3.FileHandle, error) {
	var r nfs3.CreateRes
	if err := c.call(ctx, nfs3.ProcMkdir, &nfs3.MkdirArgs{Where: nfs3.DirOpArgs{Dir: dir, Name: name}, Attr: a}, 0, nil, r.Decode); err != nil {
		return nil, err
	}
	return c.made(ctx, nfs3.ProcMkdir, &r, dir, name)
}

// Symlink makes a symbolic link to target and returns its handle.
func (c *Client) Symlink(ctx context.Context, dir nfs3.FileHandle, name, target string, a nfs3.SetAttr) (nfs3.FileHandle, error) {
	var r nfs3.CreateRes
	args := nfs3.SymlinkArgs{Where: nfs3.DirOpArgs{Dir: dir, Name: name}, Attr: a, Path: target}
	if err := c.call(ctx, nfs3.ProcSymlink, &args, 0, nil, r.Decode); err != nil {
		return nil, err
	}
	return c.made(ctx, nfs3.ProcSymlink, &r, dir, name)
}

// Mknod makes a device, socket or FIFO and returns its handle.
func (c *Client) Mknod(ctx context.Context, dir nfs3.FileHandle, name string, t nfs3.FType, a nfs3.SetAttr, spec nfs3.SpecData) (nfs3.FileHandle, error) {
	var r nfs3.CreateRes
	args := nfs3.MknodArgs{Where: nfs3.DirOpArgs{Dir: dir, Name: name}, Type: t, Attr: a, Spec: spec}
	if err := c.call(ctx, nfs3.ProcMknod, &args, 0, nil, r.Decode); err != nil {
		return nil, err
	}
	return c.made(ctx, nfs3.ProcMknod, &r, dir, name)
}

// Remove removes the non-directory name from dir.
func (c *Client) Remove(ctx context.Context, dir nfs3.FileHandle, name string) error {
	var r nfs3.WccRes
	if err := c.call(ctx, nfs3.ProcRemove, &nfs3.DirOpArgs{Dir: dir, Name: name}, 0, nil, r.Decode); err != nil {
		return err
	}
	return stat(nfs3.ProcRemove, r.Status)
}

// Rmdir removes the empty directory name from dir.
func (c *Client) Rmdir(ctx context.Context, dir nfs3.FileHandle, name string) error {
	var r nfs3.WccRes
	if err := c.call(ctx, nfs3.ProcRmdir, &nfs3.DirOpArgs{Dir: dir, Name: name}, 0, nil, r.Decode); err != nil {
		return err
	}
	return stat(nfs3.ProcRmdir, r.Status)
}

// Rename moves fromName in fromDir to toName in toDir.
func (c *Client) Rename(ctx context.Context, fromDir nfs3.FileHandle, fromName string, toDir nfs3.FileHandle, toName string) error {
	var r nfs3.RenameRes
	args := nfs3.RenameArgs{From: nfs3.DirOpArgs{Dir: fromDir, Name: fromName}, To: nfs3.DirOpArgs{Dir: toDir, Name: toName}}
	if err := c.call(ctx, nfs3.ProcRename, &args, 0, nil, r.Decode); err != nil {
		return err
	}
	return stat(nfs3.ProcRename, r.Status)
}

// Link makes name in dir another name of fh.
func (c *Client) Link(ctx context.Context, fh, dir nfs3.FileHandle, name string) error {
	var r nfs3.LinkRes
	if err := c.call(ctx, nfs3.ProcLink, &nfs3.LinkArgs{FH: fh, Link: nfs3.DirOpArgs{Dir: dir, Name: name}}, 0, nil, r.Decode); err != nil {
		return err
	}
	return stat(nfs3.ProcLink, r.Status)
}

// dirCount is the READDIR count and READDIRPLUS maxcount a Client asks
// for: the server's preference (FSINFO dtpref), at least 4 KiB and at
// most 1 MiB.
func (c *Client) dirCount() uint32 { return min(max(c.info.DTPref, 4096), 1<<20) }

// ReadDir lists dir with as many READDIRs as it takes, "." and ".."
// included if the server sends them.
func (c *Client) ReadDir(ctx context.Context, dir nfs3.FileHandle) ([]nfs3.Entry, error) {
	a := nfs3.ReaddirArgs{Dir: dir, Count: c.dirCount()}
	return pageDir(nfs3.ProcReaddir, func(e *nfs3.Entry) uint64 { return e.Cookie },
		func(cookie uint64, verf nfs3.Verf) (dirPage[nfs3.Entry], error) {
			a.Cookie, a.CookieVerf = cookie, verf
			var r nfs3.ReaddirRes
			err := c.call(ctx, nfs3.ProcReaddir, &a, a.Count, nil, r.Decode)
			return dirPage[nfs3.Entry]{r.Status, r.Entries, r.CookieVerf, r.EOF}, err
		})
}

// maxDirPages bounds the calls one listing makes, against a server that
// never says eof.
const maxDirPages = 1 << 20

// ReadDirPlus lists dir with attributes and handles, with as many
// READDIRPLUSes as it takes. The handles are the caller's.
func (c *Client) ReadDirPlus(ctx context.Context, dir nfs3.FileHandle) ([]nfs3.EntryPlus, error) {
	a := nfs3.ReaddirplusArgs{Dir: dir, MaxCount: c.dirCount(), DirCount: c.dirCount() / 8}
	return pageDir(nfs3.ProcReaddirplus, func(e *nfs3.EntryPlus) uint64 { return e.Cookie },
		func(cookie uint64, verf nfs3.Verf) (dirPage[nfs3.EntryPlus], error) {
			a.Cookie, a.CookieVerf = cookie, verf
			var r nfs3.ReaddirplusRes
			err := c.call(ctx, nfs3.ProcReaddirplus, &a, a.MaxCount, nil, r.Decode)
			for i := range r.Entries {
				r.Entries[i].FH.FH = append(nfs3.FileHandle(nil), r.Entries[i].FH.FH...)
			}
			return dirPage[nfs3.EntryPlus]{r.Status, r.Entries, r.CookieVerf, r.EOF}, err
		})
}

// dirPage is one READDIR or READDIRPLUS reply, as pageDir reads it.
type dirPage[E any] struct {
	status  nfs3.Stat
	entries []E
	verf    nfs3.Verf
	eof     bool
}

// pageDir is what ReadDir and ReadDirPlus do alike: it lists a directory
// with as many calls of proc as it takes, page making one from the
// cookie of the last entry and the verifier of the last reply (zero for
// the first), and returns the entries, those listed before an error too.
// cookie returns an entry's cookie.
func pageDir[E any](proc nfs3.Proc, cookie func(*E) uint64, page func(cookie uint64, verf nfs3.Verf) (dirPage[E], error)) ([]E, error) {
	var all []E
	var at uint64
	var verf nfs3.Verf
	for range maxDirPages {
		p, err := page(at, verf)
		if err != nil {
			return all, err
		}
		if err := stat(proc, p.status); err != nil {
			return all, err
		}
		all = append(all, p.entries...)
		if p.eof {
			return all, nil
		}
		if len(p.entries) == 0 {
			return all, fmt.Errorf("nfs: %v returned no entries and no eof", proc)
		}
		at, verf = cookie(&p.entries[len(p.entries)-1]), p.verf
	}
	return all, fmt.Errorf("nfs: %v: directory longer than the pages a listing may take", proc)
}

// FSStat returns the space and file counts of fh's filesystem.
func (c *Client) FSStat(ctx context.Context, fh nfs3.FileHandle) (nfs3.FsstatRes, error) {
	var r nfs3.FsstatRes
	if err := c.call(ctx, nfs3.ProcFsstat, &nfs3.FHArgs{FH: fh}, 0, nil, r.Decode); err != nil {
		return r, err
	}
	return r, stat(nfs3.ProcFsstat, r.Status)
}

// FSInfo returns the server's limits and preferences for fh's filesystem.
func (c *Client) FSInfo(ctx context.Context, fh nfs3.FileHandle) (nfs3.FsinfoRes, error) {
	var r nfs3.FsinfoRes
	if err := c.call(ctx, nfs3.ProcFsinfo, &nfs3.FHArgs{FH: fh}, 0, nil, r.Decode); err != nil {
		return r, err
	}
	return r, stat(nfs3.ProcFsinfo, r.Status)
}

// PathConf returns fh's POSIX pathconf values.
func (c *Client) PathConf(ctx context.Context, fh nfs3.FileHandle) (nfs3.PathconfRes, error) {
	var r nfs3.PathconfRes
	if err := c.call(ctx, nfs3.ProcPathconf, &nfs3.FHArgs{FH: fh}, 0, nil, r.Decode); err != nil {
		return r, err
	}
	return r, stat(nfs3.ProcPathconf, r.Status)
}
