package nfs

// The file operations of the NFSv4.1 client: each method is one COMPOUND
// (SEQUENCE, PUTFH or PUTROOTFH, the operation, and GETFH or GETATTR
// where the caller wants the result's handle or attributes). Data is
// placed as RFC 8267 Section 4 says: a READ's data lands in the caller's
// buffer (a write chunk), a WRITE's is pulled from it (a read chunk), and
// READDIR and READLINK replies may come in a reply chunk.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// Attrs4 are the attributes the client asks for with a file: what ls -l
// and a copy need (RFC 8881 Section 5.6 and 5.7).
var Attrs4 = nfs4.BitmapOf(nfs4.AttrType, nfs4.AttrChange, nfs4.AttrSize, nfs4.AttrFSID, nfs4.AttrFileID, nfs4.AttrMode,
	nfs4.AttrNumLinks, nfs4.AttrOwner, nfs4.AttrOwnerGroup, nfs4.AttrSpaceUsed, nfs4.AttrTimeAccess,
	nfs4.AttrTimeMetadata, nfs4.AttrTimeModify)

// copyAttr returns a with its slices copied out of the decoder's memory.
func copyAttr(a nfs4.Attr) nfs4.Attr {
	a.Mask = append(nfs4.Bitmap(nil), a.Mask...)
	a.SupportedAttrs = append(nfs4.Bitmap(nil), a.SupportedAttrs...)
	a.SuppattrExclcreat = append(nfs4.Bitmap(nil), a.SuppattrExclcreat...)
	if a.FileHandle != nil {
		a.FileHandle = append(nfs4.FileHandle(nil), a.FileHandle...)
	}
	return a
}

// Getattr returns fh's attributes (Attrs4).
func (c *Client4) Getattr(ctx context.Context, fh nfs4.FileHandle) (nfs4.Attr, error) {
	var ga nfs4.GetattrRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, &nfs4.GetattrArgs{AttrRequest: Attrs4}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &ga}, callOpts{})
	return copyAttr(ga.Attr), err
}

// Lookup returns the handle and attributes of name in dir.
func (c *Client4) Lookup(ctx context.Context, dir nfs4.FileHandle, name string) (nfs4.FileHandle, nfs4.Attr, error) {
	var gfh nfs4.GetFHRes
	var ga nfs4.GetattrRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: dir}, &nfs4.LookupArgs{Name: name}, &nfs4.GetFHArgs{},
		&nfs4.GetattrArgs{AttrRequest: Attrs4}}, []nfs4.ResOp{&nfs4.PutFHRes{}, &nfs4.LookupRes{}, &gfh, &ga}, callOpts{})
	if err != nil {
		return nil, nfs4.Attr{}, err
	}
	return append(nfs4.FileHandle(nil), gfh.FH...), copyAttr(ga.Attr), nil
}

// maxLookups is the most LOOKUPs LookupPath puts in one COMPOUND, within
// the 16 operations the session asks for.
const maxLookups = 10

// LookupPath looks up a slash-separated path from the server's root ("",
// "/": the root), with LOOKUPs in as few COMPOUNDs as the session's
// operation limit allows.
func (c *Client4) LookupPath(ctx context.Context, p string) (nfs4.FileHandle, nfs4.Attr, error) {
	var names []string
	for name := range strings.SplitSeq(path.Clean("/"+p), "/") {
		if name != "" {
			names = append(names, name)
		}
	}
	fh := c.root
	for first := true; first || len(names) > 0; first = false {
		n := min(len(names), maxLookups)
		ops := []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}}
		res := []nfs4.ResOp{&nfs4.PutFHRes{}}
		for _, name := range names[:n] {
			ops = append(ops, &nfs4.LookupArgs{Name: name})
			res = append(res, &nfs4.LookupRes{})
		}
		var gfh nfs4.GetFHRes
		var ga nfs4.GetattrRes
		ops = append(ops, &nfs4.GetFHArgs{}, &nfs4.GetattrArgs{AttrRequest: Attrs4})
		res = append(res, &gfh, &ga)
		if err := c.compound(ctx, ops, res, callOpts{}); err != nil {
			return nil, nfs4.Attr{}, fmt.Errorf("%s: %w", p, err)
		}
		fh = append(nfs4.FileHandle(nil), gfh.FH...)
		names = names[n:]
		if len(names) == 0 {
			return fh, copyAttr(ga.Attr), nil
		}
	}
	return nil, nfs4.Attr{}, errors.New("nfs: unreachable")
}

// Access returns which of the ACCESS bits want the caller has on fh
// (RFC 8881 Section 18.1).
func (c *Client4) Access(ctx context.Context, fh nfs4.FileHandle, want uint32) (uint32, error) {
	var r nfs4.AccessRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, &nfs4.AccessArgs{Access: want}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &r}, callOpts{})
	return r.Access, err
}

// Readlink returns the target of the symbolic link fh; the reply may come
// in a reply chunk.
func (c *Client4) Readlink(ctx context.Context, fh nfs4.FileHandle) (string, error) {
	var r nfs4.ReadlinkRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, &nfs4.ReadlinkArgs{}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &r}, callOpts{maxReply: nfs4.MaxPath + 1024})
	return strings.Clone(r.Link), err
}

// ReadDir lists dir with attributes (Attrs4) and handles, with as many
// READDIRs as it takes; the reply comes in a reply chunk where it may
// not fit inline. The names and attributes are the caller's.
func (c *Client4) ReadDir(ctx context.Context, dir nfs4.FileHandle) ([]nfs4.Entry, error) {
	var all []nfs4.Entry
	mask := append(append(nfs4.Bitmap(nil), Attrs4...), 0, 0)[:len(Attrs4)]
	mask = mask.With(nfs4.AttrFileHandle).With(nfs4.AttrRdattrError)
	maxCount := uint32(min(c.MaxRead(), 256<<10))
	a := nfs4.ReaddirArgs{DirCount: maxCount / 4, MaxCount: maxCount, AttrRequest: mask}
	for range maxDirPages {
		var r nfs4.ReaddirRes
		err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: dir}, &a}, []nfs4.ResOp{&nfs4.PutFHRes{}, &r},
			callOpts{maxReply: int(maxCount) + 1024})
		if err != nil {
			return all, err
		}
		for _, e := range r.Entries {
			e.Attr = copyAttr(e.Attr)
			all = append(all, e)
		}
		if r.EOF {
			return all, nil
		}
		if len(r.Entries) == 0 {
			return all, errors.New("nfs: READDIR returned no entries and no eof")
		}
		a.Cookie, a.CookieVerf = r.Entries[len(r.Entries)-1].Cookie, r.CookieVerf
	}
	return all, errors.New("nfs: READDIR: directory longer than the pages a listing may take")
}

// Read makes one READ of len(p) bytes (at most MaxRead) at off into p
// with stateid (nfs4.AnonymousStateID outside an OPEN) and returns the
// bytes read and whether they reach the end of the file. Over
// RPC-over-RDMA the server writes the data straight into p, which must
// not be touched until Read returns.
func (c *Client4) Read(ctx context.Context, fh nfs4.FileHandle, sid nfs4.StateID, p []byte, off uint64) (int, bool, error) {
	if len(p) > c.MaxRead() {
		p = p[:c.MaxRead()]
	}
	r := nfs4.ReadRes{Buf: p}
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, &nfs4.ReadArgs{StateID: sid, Offset: off, Count: uint32(len(p))}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &r}, callOpts{resultBufs: [][]byte{p}})
	if err != nil {
		return 0, false, err
	}
	return len(r.Data), r.EOF, nil
}

// Write makes one WRITE of p (at most MaxWrite bytes) at off with
// stateid and returns the bytes written, how stable they are and the
// write verifier. Over RPC-over-RDMA the server reads the data straight
// from p.
func (c *Client4) Write(ctx context.Context, fh nfs4.FileHandle, sid nfs4.StateID, p []byte, off uint64, stable nfs4.StableHow) (int, nfs4.StableHow, nfs4.Verifier, error) {
	if len(p) > c.MaxWrite() {
		p = p[:c.MaxWrite()]
	}
	var r nfs4.WriteRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, &nfs4.WriteArgs{StateID: sid, Offset: off, Stable: stable, Data: p}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &r}, callOpts{})
	if err != nil {
		return 0, 0, nfs4.Verifier{}, err
	}
	if int(r.Count) > len(p) {
		return 0, 0, nfs4.Verifier{}, fmt.Errorf("nfs: WRITE of %d bytes answered count %d", len(p), r.Count)
	}
	return int(r.Count), r.Committed, r.Verifier, nil
}

// Commit makes fh's unstable writes stable and returns the verifier;
// it sends first what files of fh open under a write delegation keep
// (File4.WriteAt).
func (c *Client4) Commit(ctx context.Context, fh nfs4.FileHandle) (nfs4.Verifier, error) {
	if err := c.flushHandle(ctx, fh); err != nil {
		return nfs4.Verifier{}, err
	}
	return c.commit(ctx, fh)
}

// commit is one COMMIT of fh.
func (c *Client4) commit(ctx context.Context, fh nfs4.FileHandle) (nfs4.Verifier, error) {
	var r nfs4.CommitRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, &nfs4.CommitArgs{}}, []nfs4.ResOp{&nfs4.PutFHRes{}, &r}, callOpts{})
	return r.Verifier, err
}

// Mkdir makes a directory (CREATE of NF4DIR) and returns its handle.
func (c *Client4) Mkdir(ctx context.Context, dir nfs4.FileHandle, name string, a nfs4.SetAttr) (nfs4.FileHandle, error) {
	return c.create(ctx, dir, &nfs4.CreateArgs{Type: nfs4.TypeDir, Name: name, Attr: a})
}

// Symlink makes a symbolic link to target (CREATE of NF4LNK) and returns
// its handle.
func (c *Client4) Symlink(ctx context.Context, dir nfs4.FileHandle, name, target string, a nfs4.SetAttr) (nfs4.FileHandle, error) {
	return c.create(ctx, dir, &nfs4.CreateArgs{Type: nfs4.TypeLnk, LinkData: target, Name: name, Attr: a})
}

func (c *Client4) create(ctx context.Context, dir nfs4.FileHandle, a *nfs4.CreateArgs) (nfs4.FileHandle, error) {
	var gfh nfs4.GetFHRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: dir}, a, &nfs4.GetFHArgs{}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &nfs4.CreateRes{}, &gfh}, callOpts{})
	return append(nfs4.FileHandle(nil), gfh.FH...), err
}

// Remove removes name, a file or an empty directory, from dir.
func (c *Client4) Remove(ctx context.Context, dir nfs4.FileHandle, name string) error {
	return c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: dir}, &nfs4.RemoveArgs{Name: name}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &nfs4.RemoveRes{}}, callOpts{})
}

// Rename moves fromName in fromDir to toName in toDir.
func (c *Client4) Rename(ctx context.Context, fromDir nfs4.FileHandle, fromName string, toDir nfs4.FileHandle, toName string) error {
	return c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fromDir}, &nfs4.SaveFHArgs{}, &nfs4.PutFHArgs{FH: toDir},
		&nfs4.RenameArgs{OldName: fromName, NewName: toName}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &nfs4.SaveFHRes{}, &nfs4.PutFHRes{}, &nfs4.RenameRes{}}, callOpts{})
}

// Link makes name in dir another name of fh.
func (c *Client4) Link(ctx context.Context, fh, dir nfs4.FileHandle, name string) error {
	return c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, &nfs4.SaveFHArgs{}, &nfs4.PutFHArgs{FH: dir},
		&nfs4.LinkArgs{NewName: name}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &nfs4.SaveFHRes{}, &nfs4.PutFHRes{}, &nfs4.LinkRes{}}, callOpts{})
}

// Setattr sets fh's attributes as a says, under stateid when it sets the
// size of an open file (nfs4.AnonymousStateID otherwise).
func (c *Client4) Setattr(ctx context.Context, fh nfs4.FileHandle, sid nfs4.StateID, a nfs4.SetAttr) error {
	return c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, &nfs4.SetattrArgs{StateID: sid, Attr: a}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &nfs4.SetattrRes{}}, callOpts{})
}

// SecinfoNoName returns the security flavors the server accepts for its
// root (SECINFO_NO_NAME of the current handle, RFC 8881 Section 18.45).
func (c *Client4) SecinfoNoName(ctx context.Context) ([]nfs4.SecInfo, error) {
	var r nfs4.SecinfoNoNameRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutRootFHArgs{}, &nfs4.SecinfoNoNameArgs{Style: nfs4.SecinfoStyleCurrentFH}},
		[]nfs4.ResOp{&nfs4.PutRootFHRes{}, &r}, callOpts{})
	return append([]nfs4.SecInfo(nil), r.Flavors...), err
}

// OpenOptions says how Open opens a file.
type OpenOptions struct {
	// Access is OPEN4_SHARE_ACCESS_READ, _WRITE or _BOTH; 0 means READ.
	Access uint32
	// Deny is OPEN4_SHARE_DENY_NONE (0), _READ, _WRITE or _BOTH.
	Deny uint32
	// Create makes the file if it does not exist, with Mode and the
	// other attributes of Attr; Exclusive fails if it exists (GUARDED4).
	Create, Exclusive bool
	Attr              nfs4.SetAttr
	// Delegation asks for a delegation when the session has a
	// backchannel to recall it by (RFC 8881 Section 10.2): a read
	// delegation for a file opened for reading only (and not created), a
	// write delegation for one opened for writing. While the client holds
	// one, ReadAt serves what it has read before from memory, and under a
	// write delegation WriteAt keeps UNSTABLE writes until they must go
	// (client4_deleg.go).
	Delegation bool
}

// File4 is a file opened with OPEN: its handle and open stateid. Its
// methods are safe for concurrent use.
type File4 struct {
	c    *Client4
	FH   nfs4.FileHandle
	Attr nfs4.Attr // at OPEN

	// reopenMu makes one reopen at a time (see reopen).
	reopenMu sync.Mutex

	mu     sync.Mutex
	sid    nfs4.StateID
	owner  []byte
	access uint32
	deny   uint32
	// lost: the server lost the open and the client could not reclaim
	// it (client4_recover.go); the next use opens the file again.
	lost bool

	// The delegation, and what was read under it, by offset.
	deleg     nfs4.StateID
	delegType nfs4.DelegType
	delegated bool
	cache     map[uint64]cachedRead
	cached    int

	// Under a write delegation (client4_deleg.go): the writes the client
	// keeps, the file's size and change attribute as the client sees
	// them, and the size past which it may not keep writes.
	dirty      []dirtyWrite
	dirtyLen   int
	size       uint64
	change     uint64
	spaceLimit uint64
	// flushMu makes one flush at a time, so that a flush that ends has
	// sent every write kept before it began.
	flushMu sync.Mutex
}

// cachedRead is what one READ under a delegation gave.
type cachedRead struct {
	data []byte
	eof  bool
}

// Open opens (and with o.Create makes) name in dir (OPEN with CLAIM_NULL)
// and returns it with its handle and attributes. No delegation is asked
// for. Close the File4 when done.
func (c *Client4) Open(ctx context.Context, dir nfs4.FileHandle, name string, o OpenOptions) (*File4, error) {
	if o.Access == 0 {
		o.Access = nfs4.ShareAccessRead
	}
	f := &File4{c: c, access: o.Access, deny: o.Deny, owner: make([]byte, 16)}
	rand.Read(f.owner)
	args := &nfs4.OpenArgs{ShareAccess: o.Access | c.wantDeleg(o), ShareDeny: o.Deny,
		Owner: nfs4.StateOwner{ClientID: c.clientIDNow(), Owner: f.owner}, Claim: nfs4.ClaimNull, Name: name}
	if o.Create {
		args.Create, args.CreateMode, args.CreateAttr = true, nfs4.Unchecked, o.Attr
		if o.Exclusive {
			args.CreateMode = nfs4.Guarded
		}
	}
	var or nfs4.OpenRes
	var gfh nfs4.GetFHRes
	var ga nfs4.GetattrRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: dir}, args, &nfs4.GetFHArgs{}, &nfs4.GetattrArgs{AttrRequest: Attrs4}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &or, &gfh, &ga}, callOpts{})
	if err != nil {
		return nil, err
	}
	f.FH, f.Attr, f.sid = append(nfs4.FileHandle(nil), gfh.FH...), copyAttr(ga.Attr), or.StateID
	c.track(f)
	f.delegate(or.Delegation)
	return f, nil
}

// OpenFH opens the file fh (OPEN with CLAIM_FH, RFC 8881 Section
// 18.16.3) with o's access and deny; o's create fields are ignored.
func (c *Client4) OpenFH(ctx context.Context, fh nfs4.FileHandle, o OpenOptions) (*File4, error) {
	if o.Access == 0 {
		o.Access = nfs4.ShareAccessRead
	}
	f := &File4{c: c, FH: append(nfs4.FileHandle(nil), fh...), access: o.Access, deny: o.Deny, owner: make([]byte, 16)}
	rand.Read(f.owner)
	args := &nfs4.OpenArgs{ShareAccess: o.Access | nfs4.ShareAccessWantNoDeleg, ShareDeny: o.Deny,
		Owner: nfs4.StateOwner{ClientID: c.clientIDNow(), Owner: f.owner}, Claim: nfs4.ClaimFH}
	var or nfs4.OpenRes
	var ga nfs4.GetattrRes
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: fh}, args, &nfs4.GetattrArgs{AttrRequest: Attrs4}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &or, &ga}, callOpts{})
	if err != nil {
		return nil, err
	}
	f.Attr, f.sid = copyAttr(ga.Attr), or.StateID
	c.track(f)
	return f, nil
}

func (c *Client4) clientIDNow() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clientID
}

// StateID returns the file's open stateid.
func (f *File4) StateID() nfs4.StateID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sid
}

// lostState reports whether err says the open stateid is no longer the
// server's: after it restarted, or the client's lease or ID was lost.
func lostState(err error) bool {
	return errors.Is(err, nfs4.ErrBadStateID) || errors.Is(err, nfs4.ErrExpired) || errors.Is(err, nfs4.ErrStaleStateID) ||
		errors.Is(err, nfs4.ErrAdminRevoked) || errors.Is(err, nfs4.ErrDelegRevoked)
}

// reopen opens the file again by its handle (CLAIM_FH) after its state
// was lost, unless another call or a reclaim (client4_recover.go)
// replaced sid since. It holds no lock a recovery needs while its OPEN
// waits for that recovery to end; during the server's grace period the
// OPEN waits and retries (compound).
func (f *File4) reopen(ctx context.Context, sid nfs4.StateID) error {
	f.reopenMu.Lock()
	defer f.reopenMu.Unlock()
	if err := f.c.waitRecovery(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	cur, access, deny := f.sid, f.access, f.deny
	f.mu.Unlock()
	if cur != sid {
		return nil
	}
	args := &nfs4.OpenArgs{ShareAccess: access | nfs4.ShareAccessWantNoDeleg, ShareDeny: deny,
		Owner: nfs4.StateOwner{ClientID: f.c.clientIDNow(), Owner: f.owner}, Claim: nfs4.ClaimFH}
	var or nfs4.OpenRes
	if err := f.c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: f.FH}, args}, []nfs4.ResOp{&nfs4.PutFHRes{}, &or}, callOpts{}); err != nil {
		return fmt.Errorf("nfs: opening the file again after its state was lost: %w", err)
	}
	f.mu.Lock()
	f.sid, f.lost = or.StateID, false
	f.mu.Unlock()
	f.c.recStats.reopened.Add(1)
	return nil
}

// withState runs op with the file's stateid, and once more after opening
// the file again if the server lost the state; a file whose state a
// recovery could not reclaim is opened again first.
func (f *File4) withState(ctx context.Context, op func(nfs4.StateID) error) error {
	f.mu.Lock()
	sid, lost := f.sid, f.lost
	f.mu.Unlock()
	if lost {
		if err := f.reopen(ctx, sid); err != nil {
			return err
		}
		sid = f.StateID()
	}
	err := op(sid)
	if !lostState(err) {
		return err
	}
	if rerr := f.reopen(ctx, sid); rerr != nil {
		return rerr
	}
	return op(f.StateID())
}

// ReadAt makes one READ at off into p (at most MaxRead bytes); see
// Client4.Read.
//
// While the file holds a read delegation, a read of a range read before
// under it is served from memory: the server recalls the delegation
// before any other client may change the file (RFC 8881 Section 10.4).
func (f *File4) ReadAt(ctx context.Context, p []byte, off uint64) (n int, eof bool, err error) {
	if err := f.Flush(ctx); err != nil {
		return 0, false, err
	}
	f.mu.Lock()
	if b, ok := f.cache[off]; ok && f.delegated && (len(p) <= len(b.data) || b.eof) {
		n = copy(p, b.data)
		f.mu.Unlock()
		f.c.cacheHits.Add(1)
		return n, b.eof && n == len(b.data), nil
	}
	f.mu.Unlock()
	err = f.withState(ctx, func(sid nfs4.StateID) error {
		n, eof, err = f.c.Read(ctx, f.FH, sid, p, off)
		return err
	})
	if err == nil && (n == len(p) || eof) {
		f.mu.Lock()
		if f.delegated && f.cache != nil && f.cached+n <= maxDelegCache {
			f.cache[off] = cachedRead{data: append([]byte(nil), p[:n]...), eof: eof}
			f.cached += n
		}
		f.mu.Unlock()
	}
	return n, eof, err
}

// WriteAt makes one WRITE of p at off (at most MaxWrite bytes); see
// Client4.Write.
//
// Under a write delegation an UNSTABLE write is kept by the client, not
// sent: WriteAt returns len(p) (at most MaxWrite), UNSTABLE4 and a zero
// verifier, and Flush, Close, ReadAt, the client's Commit of the file's
// handle, or the delegation's recall or return send it later (see
// client4_deleg.go). Other writes send what was kept first.
func (f *File4) WriteAt(ctx context.Context, p []byte, off uint64, stable nfs4.StableHow) (n int, committed nfs4.StableHow, verf nfs4.Verifier, err error) {
	f.mu.Lock()
	if f.cache != nil {
		f.cache, f.cached = map[uint64]cachedRead{}, 0
	}
	f.mu.Unlock()
	if len(p) > f.c.MaxWrite() {
		p = p[:f.c.MaxWrite()]
	}
	if f.keep(p, off, stable) {
		return len(p), nfs4.Unstable, nfs4.Verifier{}, nil
	}
	if err := f.Flush(ctx); err != nil {
		return 0, 0, nfs4.Verifier{}, err
	}
	return f.writeThrough(ctx, p, off, stable)
}

// writeThrough sends one WRITE of p at off with the open stateid.
func (f *File4) writeThrough(ctx context.Context, p []byte, off uint64, stable nfs4.StableHow) (n int, committed nfs4.StableHow, verf nfs4.Verifier, err error) {
	err = f.withState(ctx, func(sid nfs4.StateID) error {
		n, committed, verf, err = f.c.Write(ctx, f.FH, sid, p, off, stable)
		return err
	})
	if err == nil {
		f.wrote(off + uint64(n))
	}
	return n, committed, verf, err
}

// Close sends the writes the file keeps, returns its delegation, if it
// holds one, and releases the open (CLOSE). A state the server already
// lost is no error.
func (f *File4) Close(ctx context.Context) error {
	if err := f.Flush(ctx); err != nil {
		return err
	}
	if err := f.ReturnDelegation(ctx); err != nil {
		return err
	}
	f.c.untrack(f)
	sid := f.StateID()
	err := f.c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: f.FH}, &nfs4.CloseArgs{StateID: sid}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &nfs4.CloseRes{}}, callOpts{})
	if lostState(err) {
		return nil
	}
	return err
}
