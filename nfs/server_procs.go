package nfs

import (
	"context"
	"strings"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// args decodes a procedure's arguments, which must fill the call.
func args(c *rpc.Call, a interface{ Decode(*rpc.BodyDecoder) error }) error {
	d := c.Decoder()
	if a.Decode(d) != nil || d.Done() != nil {
		return rpc.ErrGarbageArgs
	}
	return nil
}

// reply encodes results for p.
func reply(p nfs3.Proc, count uint32, r interface{ Append(*rpc.Body) }) (rpc.Body, error) {
	b := rpc.Body{XDR: make([]byte, 0, min(p.ReplySize(count), 64<<10))}
	r.Append(&b)
	return b, nil
}

// op is one call on one export, as its caller.
type op struct {
	s    *Server
	ctx  context.Context
	ex   *export
	cr   Cred
	call *rpc.Call // for logs
}

// open checks fh and returns the call's op and the inode fh names.
func (s *Server) open(ctx context.Context, c *rpc.Call, fh nfs3.FileHandle) (op, uint64, nfs3.Stat) {
	ex, ino, st := s.resolve(fh)
	if st != nfs3.OK {
		return op{}, 0, st
	}
	return op{s: s, ctx: ctx, ex: ex, cr: ex.cred(c), call: c}, ino, nfs3.OK
}

// withCred makes the caller's identity visible to the FS (CredFrom), for
// the calls that create files; the others do without the allocation.
func (o *op) withCred() {
	cr := o.cr
	o.ctx = context.WithValue(o.ctx, credKey{}, &cr)
}

// attr returns the attributes of ino.
func (o *op) attr(ino uint64) (nfs3.Attr, nfs3.Stat) {
	a, err := o.ex.FS.Getattr(o.ctx, ino)
	if err != nil {
		return a, o.errStat(err, ino, "")
	}
	return a, nfs3.OK
}

// postOp returns ino's attributes if the FS gives them.
func (o *op) postOp(ino uint64) nfs3.PostOpAttr {
	a, st := o.attr(ino)
	return nfs3.PostOpAttr{Present: st == nfs3.OK, Attr: a}
}

// wcc returns wcc_data for a change with before its prior attributes.
func (o *op) wcc(ino uint64, before *nfs3.Attr) nfs3.WccData {
	w := nfs3.WccData{After: o.postOp(ino)}
	if before != nil {
		w.BeforePresent = true
		w.Before = nfs3.WccAttr{Size: before.Size, Mtime: before.Mtime, Ctime: before.Ctime}
	}
	return w
}

func (o *op) handle(ino uint64) nfs3.FileHandle { return o.ex.key.handle(nil, ino) }

// dirFor checks that dir is a directory cr may search and change (want
// adds write), and returns its attributes.
func (o *op) dirFor(dir uint64, change bool) (nfs3.Attr, nfs3.Stat) {
	a, st := o.attr(dir)
	if st != nfs3.OK {
		return a, st
	}
	if a.Type != nfs3.TypeDir {
		return a, nfs3.ErrNotDir
	}
	want := uint32(nfs3.AccessLookup)
	if change {
		if o.ex.ReadOnly {
			return a, nfs3.ErrROFS
		}
		want |= nfs3.AccessModify
	}
	return a, may(&a, &o.cr, want, false)
}

// nameStat checks a name a call creates, removes or renames: not empty,
// not "." or "..", no '/' or NUL, at most 255 bytes (NAME_MAX). dot is
// the status for "." and "..", which differs by procedure in knfsd.
func nameStat(name string, dot nfs3.Stat) nfs3.Stat {
	switch {
	case name == "." || name == "..":
		return dot
	case name == "" || strings.ContainsAny(name, "/\x00"):
		return nfs3.ErrAcces
	case len(name) > 255:
		return nfs3.ErrNameTooLong
	}
	return nfs3.OK
}

func (s *Server) nfsHandlers() [nfs3.NumProcs]rpc.Handler {
	return [nfs3.NumProcs]rpc.Handler{
		nfs3.ProcGetattr: s.getattr, nfs3.ProcSetattr: s.setattr, nfs3.ProcLookup: s.lookup,
		nfs3.ProcAccess: s.access, nfs3.ProcReadlink: s.readlink, nfs3.ProcRead: s.read,
		nfs3.ProcWrite: s.write, nfs3.ProcCreate: s.create, nfs3.ProcMkdir: s.mkdir,
		nfs3.ProcSymlink: s.symlink, nfs3.ProcMknod: s.mknod, nfs3.ProcRemove: s.remove,
		nfs3.ProcRmdir: s.rmdir, nfs3.ProcRename: s.rename, nfs3.ProcLink: s.link,
		nfs3.ProcReaddir: s.readdir, nfs3.ProcReaddirplus: s.readdirplus, nfs3.ProcFsstat: s.fsstat,
		nfs3.ProcFsinfo: s.fsinfo, nfs3.ProcPathconf: s.pathconf, nfs3.ProcCommit: s.commit,
	}
}

func (s *Server) getattr(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.GetattrRes
	o, ino, st := s.open(ctx, c, a.FH)
	if st == nfs3.OK {
		r.Attr, st = o.attr(ino)
	}
	r.Status = st
	return reply(nfs3.ProcGetattr, 0, &r)
}

func (s *Server) setattr(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.SetattrArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.WccRes
	r.Status = func() nfs3.Stat {
		o, ino, st := s.open(ctx, c, a.FH)
		if st != nfs3.OK {
			return st
		}
		before, st := o.attr(ino)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.Wcc = o.wcc(ino, &before) }()
		if o.ex.ReadOnly {
			return nfs3.ErrROFS
		}
		if a.Check && a.Ctime != before.Ctime {
			return nfs3.ErrNotSync
		}
		if st := setattrPerm(&before, &o.cr, &a.Attr); st != nfs3.OK {
			return st
		}
		if a.Attr.SetSize && before.Type != nfs3.TypeReg {
			if before.Type == nfs3.TypeDir {
				return nfs3.ErrIsDir
			}
			return nfs3.ErrInval
		}
		o.withCred()
		_, err := o.ex.FS.Setattr(o.ctx, ino, &a.Attr)
		return o.errStat(err, ino, "")
	}()
	return reply(nfs3.ProcSetattr, 0, &r)
}

// setattrPerm decides as the kernel's setattr_prepare: only root changes
// the owner; the owner (or root) changes the mode, the group (to one of
// the owner's) and times set to given values; write permission suffices
// for the size and for times set to the server's clock.
func setattrPerm(a *nfs3.Attr, cr *Cred, s *nfs3.SetAttr) nfs3.Stat {
	owner := cr.UID == 0 || cr.UID == a.UID
	if s.SetUID && s.UID != a.UID && cr.UID != 0 {
		return nfs3.ErrPerm
	}
	if s.SetGID && s.GID != a.GID && cr.UID != 0 && (!owner || (s.GID != cr.GID && !containsGID(cr.GIDs, s.GID))) {
		return nfs3.ErrPerm
	}
	if s.SetMode && !owner {
		return nfs3.ErrPerm
	}
	if (s.SetAtime == nfs3.SetToClientTime || s.SetMtime == nfs3.SetToClientTime) && !owner {
		return nfs3.ErrPerm
	}
	if s.SetSize || s.SetAtime == nfs3.SetToServerTime || s.SetMtime == nfs3.SetToServerTime {
		if !owner && may(a, cr, nfs3.AccessModify, false) != nfs3.OK {
			return nfs3.ErrAcces
		}
	}
	return nfs3.OK
}

func containsGID(gids []uint32, g uint32) bool {
	for _, x := range gids {
		if x == g {
			return true
		}
	}
	return false
}

func (s *Server) lookup(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.DirOpArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.LookupRes
	r.Status = func() nfs3.Stat {
		o, dir, st := s.open(ctx, c, a.Dir)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.DirAttr = o.postOp(dir) }()
		if _, st := o.dirFor(dir, false); st != nfs3.OK {
			return st
		}
		switch {
		case a.Name == "":
			return nfs3.ErrNoEnt
		case a.Name == "." || a.Name == "..":
		default:
			if st := nameStat(a.Name, nfs3.OK); st != nfs3.OK {
				return st
			}
		}
		ino, err := o.ex.FS.Lookup(o.ctx, dir, a.Name)
		if err != nil {
			return o.errStat(err, dir, a.Name)
		}
		r.FH = o.handle(ino)
		r.Attr = o.postOp(ino)
		return nfs3.OK
	}()
	return reply(nfs3.ProcLookup, 0, &r)
}

func (s *Server) access(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.AccessArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.AccessRes
	o, ino, st := s.open(ctx, c, a.FH)
	if st == nfs3.OK {
		var at nfs3.Attr
		if at, st = o.attr(ino); st == nfs3.OK {
			r.Attr = nfs3.PostOpAttr{Present: true, Attr: at}
			r.Access = access(&at, &o.cr, a.Access, o.ex.ReadOnly)
		}
	}
	r.Status = st
	return reply(nfs3.ProcAccess, 0, &r)
}

func (s *Server) readlink(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.ReadlinkRes
	r.Status = func() nfs3.Stat {
		o, ino, st := s.open(ctx, c, a.FH)
		if st != nfs3.OK {
			return st
		}
		at, st := o.attr(ino)
		if st != nfs3.OK {
			return st
		}
		r.Attr = nfs3.PostOpAttr{Present: true, Attr: at}
		if at.Type != nfs3.TypeLnk {
			return nfs3.ErrInval
		}
		p, err := o.ex.FS.Readlink(o.ctx, ino)
		if err != nil {
			return o.errStat(err, ino, "")
		}
		if len(p) > nfs3.MaxPath {
			return nfs3.ErrNameTooLong
		}
		r.Path = p
		return nfs3.OK
	}()
	return reply(nfs3.ProcReadlink, 0, &r)
}

// dataStat checks that a is a regular file for READ, WRITE and COMMIT.
func dataStat(a *nfs3.Attr) nfs3.Stat {
	switch a.Type {
	case nfs3.TypeReg:
		return nfs3.OK
	case nfs3.TypeDir:
		return nfs3.ErrIsDir
	}
	return nfs3.ErrInval
}

func (s *Server) read(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	st := s.getRead()
	a, r := &st.a, &st.r
	if err := args(c, a); err != nil {
		st.release(rpc.Body{})
		return rpc.Body{}, err
	}
	c.AfterReply = st.done // the reply points into st
	r.Status = func() nfs3.Stat {
		o, ino, stat := s.open(ctx, c, a.FH)
		if stat != nfs3.OK {
			return stat
		}
		at, stat := o.attr(ino)
		if stat != nfs3.OK {
			return stat
		}
		r.Attr = nfs3.PostOpAttr{Present: true, Attr: at}
		if stat := dataStat(&at); stat != nfs3.OK {
			return stat
		}
		if stat := may(&at, &o.cr, nfs3.AccessRead, true); stat != nfs3.OK {
			return stat
		}
		if a.Offset > 1<<63-1 {
			return nfs3.ErrInval
		}
		want := min(a.Count, s.maxIO)
		st.buf = s.takeBuf(int(want))
		buf := st.buf[:want]
		n, eof, err := o.ex.FS.ReadAt(o.ctx, ino, buf, int64(a.Offset))
		if err != nil {
			return o.errStat(err, ino, "")
		}
		// The reply's attributes are at's, so its EOF agrees with them
		// (FS.ReadAt).
		r.Count, r.EOF, r.Data = uint32(n), eof || a.Offset+uint64(n) >= at.Size, buf[:n]
		return nfs3.OK
	}()
	b := rpc.Body{XDR: st.xdr[:0], Items: st.items[:0]}
	r.Append(&b)
	return b, nil
}

func (s *Server) write(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	ws := s.getWrite()
	a, r := &ws.a, &ws.r
	if err := args(c, a); err != nil {
		ws.release(rpc.Body{})
		return rpc.Body{}, err
	}
	c.AfterReply = ws.done // the reply is ws.xdr
	r.Status = func() nfs3.Stat {
		o, ino, st := s.open(ctx, c, a.FH)
		if st != nfs3.OK {
			return st
		}
		before, st := o.attr(ino)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.Wcc = o.wcc(ino, &before) }()
		if o.ex.ReadOnly {
			return nfs3.ErrROFS
		}
		if st := dataStat(&before); st != nfs3.OK {
			return st
		}
		if a.Count > uint32(len(a.Data)) || a.Offset > 1<<63-1 {
			return nfs3.ErrInval
		}
		if st := may(&before, &o.cr, nfs3.AccessModify, true); st != nfs3.OK {
			return st
		}
		data := a.Data[:min(a.Count, s.maxIO)]
		committed, err := o.ex.FS.WriteAt(o.ctx, ino, data, int64(a.Offset), a.Stable)
		if err != nil {
			return o.errStat(err, ino, "")
		}
		r.Count, r.Committed, r.Verf = uint32(len(data)), max(committed, a.Stable), s.verf
		return nfs3.OK
	}()
	b := rpc.Body{XDR: ws.xdr[:0]}
	r.Append(&b)
	return b, nil
}

func (s *Server) commit(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.CommitArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.CommitRes
	r.Status = func() nfs3.Stat {
		o, ino, st := s.open(ctx, c, a.FH)
		if st != nfs3.OK {
			return st
		}
		before, st := o.attr(ino)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.Wcc = o.wcc(ino, &before) }()
		if st := dataStat(&before); st != nfs3.OK {
			return st
		}
		if err := o.ex.FS.Commit(o.ctx, ino); err != nil {
			return o.errStat(err, ino, "")
		}
		r.Verf = s.verf
		return nfs3.OK
	}()
	return reply(nfs3.ProcCommit, 0, &r)
}

// made fills the results of a procedure that made ino as name in dir.
func (o *op) made(r *nfs3.CreateRes, dir uint64, name string, dirBefore *nfs3.Attr, ino uint64, err error) nfs3.Stat {
	r.DirWcc = o.wcc(dir, dirBefore)
	if err != nil {
		return o.errStat(err, dir, name)
	}
	r.FH = nfs3.PostOpFH{Present: true, FH: o.handle(ino)}
	r.Attr = o.postOp(ino)
	return nfs3.OK
}

// makeIn runs the common part of CREATE, MKDIR, SYMLINK and MKNOD: check
// the directory and the name, then call mk.
func (s *Server) makeIn(ctx context.Context, c *rpc.Call, where *nfs3.DirOpArgs, r *nfs3.CreateRes,
	mk func(o *op, dir uint64) (uint64, error)) nfs3.Stat {
	o, dir, st := s.open(ctx, c, where.Dir)
	if st != nfs3.OK {
		return st
	}
	before, st := o.dirFor(dir, true)
	if st == nfs3.OK {
		st = nameStat(where.Name, nfs3.ErrExist)
	}
	if st != nfs3.OK {
		r.DirWcc = o.wcc(dir, nil)
		if before.Type == nfs3.TypeDir {
			r.DirWcc = o.wcc(dir, &before)
		}
		return st
	}
	o.withCred()
	ino, err := mk(&o, dir)
	return o.made(r, dir, where.Name, &before, ino, err)
}

func (s *Server) create(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.CreateArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.CreateRes
	r.Status = s.makeIn(ctx, c, &a.Where, &r, func(o *op, dir uint64) (uint64, error) {
		if a.Mode != nfs3.Exclusive {
			return o.ex.FS.Create(o.ctx, dir, a.Where.Name, &a.Attr, a.Mode == nfs3.Guarded)
		}
		// EXCLUSIVE (RFC 1813 Section 3.3.8): keep the verifier in the
		// times, as knfsd does, so that a retransmission finds it and
		// succeeds; the client sets the real attributes with SETATTR.
		verf := nfs3.SetAttr{SetAtime: nfs3.SetToClientTime, SetMtime: nfs3.SetToClientTime,
			Atime:   nfs3.Time{Seconds: be32(a.Verf[:4]) & 0x7fffffff, Nseconds: be32(a.Verf[4:]) % 1e9},
			SetMode: true, Mode: 0}
		verf.Mtime = verf.Atime
		ino, err := o.ex.FS.Create(o.ctx, dir, a.Where.Name, &nfs3.SetAttr{SetMode: true}, true)
		if StatOf(err) == nfs3.ErrExist {
			ino, lerr := o.ex.FS.Lookup(o.ctx, dir, a.Where.Name)
			if lerr != nil {
				return 0, err
			}
			at, st := o.attr(ino)
			if st == nfs3.OK && at.Type == nfs3.TypeReg && at.Mtime == verf.Mtime && at.Atime == verf.Atime {
				return ino, nil
			}
			return 0, err
		}
		if err != nil {
			return 0, err
		}
		verf.SetMode = false
		_, err = o.ex.FS.Setattr(o.ctx, ino, &verf)
		return ino, err
	})
	return reply(nfs3.ProcCreate, 0, &r)
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func (s *Server) mkdir(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.MkdirArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.CreateRes
	r.Status = s.makeIn(ctx, c, &a.Where, &r, func(o *op, dir uint64) (uint64, error) {
		return o.ex.FS.Mkdir(o.ctx, dir, a.Where.Name, &a.Attr)
	})
	return reply(nfs3.ProcMkdir, 0, &r)
}

func (s *Server) symlink(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.SymlinkArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.CreateRes
	r.Status = s.makeIn(ctx, c, &a.Where, &r, func(o *op, dir uint64) (uint64, error) {
		if a.Path == "" || strings.IndexByte(a.Path, 0) >= 0 {
			return 0, nfs3.ErrInval
		}
		return o.ex.FS.Symlink(o.ctx, dir, a.Where.Name, a.Path, &a.Attr)
	})
	return reply(nfs3.ProcSymlink, 0, &r)
}

// mknod: FS has no device or FIFO creation, so every type is refused
// once the directory and name have been checked.
func (s *Server) mknod(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.MknodArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.CreateRes
	r.Status = s.makeIn(ctx, c, &a.Where, &r, func(o *op, dir uint64) (uint64, error) {
		if a.Type == nfs3.TypeReg || a.Type == nfs3.TypeDir || a.Type == nfs3.TypeLnk {
			return 0, nfs3.ErrBadType
		}
		return 0, nfs3.ErrNotSupp
	})
	return reply(nfs3.ProcMknod, 0, &r)
}

// removeIn runs REMOVE and RMDIR.
func (s *Server) removeIn(ctx context.Context, c *rpc.Call, p nfs3.Proc) (rpc.Body, error) {
	var a nfs3.DirOpArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.WccRes
	r.Status = func() nfs3.Stat {
		o, dir, st := s.open(ctx, c, a.Dir)
		if st != nfs3.OK {
			return st
		}
		before, st := o.dirFor(dir, true)
		defer func() {
			if before.Type == nfs3.TypeDir {
				r.Wcc = o.wcc(dir, &before)
			} else {
				r.Wcc = o.wcc(dir, nil)
			}
		}()
		if st != nfs3.OK {
			return st
		}
		dot := nfs3.ErrAcces
		if p == nfs3.ProcRmdir && a.Name == "." {
			dot = nfs3.ErrInval
		} else if p == nfs3.ProcRmdir {
			dot = nfs3.ErrNotEmpty
		}
		if st := nameStat(a.Name, dot); st != nfs3.OK {
			return st
		}
		var err error
		if p == nfs3.ProcRmdir {
			err = o.ex.FS.Rmdir(o.ctx, dir, a.Name)
		} else {
			err = o.ex.FS.Remove(o.ctx, dir, a.Name)
		}
		return o.errStat(err, dir, a.Name)
	}()
	return reply(p, 0, &r)
}

func (s *Server) remove(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	return s.removeIn(ctx, c, nfs3.ProcRemove)
}

func (s *Server) rmdir(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	return s.removeIn(ctx, c, nfs3.ProcRmdir)
}

func (s *Server) rename(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.RenameArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.RenameRes
	r.Status = func() nfs3.Stat {
		o, from, st := s.open(ctx, c, a.From.Dir)
		if st != nfs3.OK {
			return st
		}
		ex2, to, st := s.resolve(a.To.Dir)
		if st != nfs3.OK {
			return st
		}
		if ex2 != o.ex {
			return nfs3.ErrXDev
		}
		fb, st := o.dirFor(from, true)
		if st != nfs3.OK {
			return st
		}
		tb, st := o.dirFor(to, true)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.FromWcc, r.ToWcc = o.wcc(from, &fb), o.wcc(to, &tb) }()
		if st := nameStat(a.From.Name, nfs3.ErrInval); st != nfs3.OK {
			return st
		}
		if st := nameStat(a.To.Name, nfs3.ErrInval); st != nfs3.OK {
			return st
		}
		return o.errStat(o.ex.FS.Rename(o.ctx, from, a.From.Name, to, a.To.Name), from, a.From.Name)
	}()
	return reply(nfs3.ProcRename, 0, &r)
}

func (s *Server) link(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.LinkArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.LinkRes
	r.Status = func() nfs3.Stat {
		o, ino, st := s.open(ctx, c, a.FH)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.Attr = o.postOp(ino) }()
		ex2, dir, st := s.resolve(a.Link.Dir)
		if st != nfs3.OK {
			return st
		}
		if ex2 != o.ex {
			return nfs3.ErrXDev
		}
		before, st := o.dirFor(dir, true)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.DirWcc = o.wcc(dir, &before) }()
		if st := nameStat(a.Link.Name, nfs3.ErrExist); st != nfs3.OK {
			return st
		}
		at, st := o.attr(ino)
		if st != nfs3.OK {
			return st
		}
		if at.Type == nfs3.TypeDir {
			return nfs3.ErrIsDir
		}
		return o.errStat(o.ex.FS.Link(o.ctx, ino, dir, a.Link.Name), dir, a.Link.Name)
	}()
	return reply(nfs3.ProcLink, 0, &r)
}

// Directory cookies: 1 follows ".", 2 follows "..", and 2+n follows the
// FS's entry whose cookie is n.
const dotCookies = 2

// listDir lists dir from cookie for READDIR and READDIRPLUS, calling add
// for each entry (with ".", "..") until it returns false, and reports eof.
func (o *op) listDir(dir, cookie uint64, add func(name string, ino, next uint64) bool) (bool, nfs3.Stat) {
	if cookie == 0 && !add(".", dir, 1) {
		return false, nfs3.OK
	}
	if cookie <= 1 {
		parent, err := o.ex.FS.Lookup(o.ctx, dir, "..")
		if err != nil {
			return false, o.errStat(err, dir, "..")
		}
		if !add("..", parent, 2) {
			return false, nfs3.OK
		}
	}
	eof, err := o.ex.FS.ReadDir(o.ctx, dir, max(cookie, dotCookies)-dotCookies, func(name string, ino, next uint64) bool {
		return add(name, ino, next+dotCookies)
	})
	if err != nil {
		return false, o.errStat(err, dir, "")
	}
	return eof, nfs3.OK
}

// readdirBase is what a READDIR3resok or READDIRPLUS3resok holds besides
// its entries: dir_attributes, cookieverf, the end of the list, eof.
const readdirBase = 4 + 84 + 8 + 4 + 4

// readableDir returns OK if dir is a directory the caller may list.
func (o *op) readableDir(dir uint64) nfs3.Stat {
	at, st := o.attr(dir)
	if st != nfs3.OK {
		return st
	}
	if at.Type != nfs3.TypeDir {
		return nfs3.ErrNotDir
	}
	return may(&at, &o.cr, nfs3.AccessRead, false)
}

// dirFill counts a READDIR or READDIRPLUS reply's bytes against the
// client's count (RFC 1813 Sections 3.3.16 and 3.3.17), capped at
// MaxDirCount.
type dirFill struct {
	used, limit int
	full        bool
}

func newDirFill(count uint32) dirFill {
	return dirFill{used: readdirBase, limit: int(min(count, nfs3.MaxDirCount))}
}

// fits reports whether an entry of n bytes still fits, and counts it if so.
func (f *dirFill) fits(n int) bool {
	if f.used+n > f.limit {
		f.full = true
		return false
	}
	f.used += n
	return true
}

// status is the listing's status st, or NFS3ERR_TOOSMALL when the count
// left no room for even one of the entries there were.
func (f *dirFill) status(st nfs3.Stat, entries int) nfs3.Stat {
	if st == nfs3.OK && f.full && entries == 0 {
		return nfs3.ErrTooSmall
	}
	return st
}

func (s *Server) readdir(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.ReaddirArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.ReaddirRes
	r.Status = func() nfs3.Stat {
		o, dir, st := s.open(ctx, c, a.Dir)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.DirAttr = o.postOp(dir) }()
		if st := o.readableDir(dir); st != nfs3.OK {
			return st
		}
		f := newDirFill(a.Count)
		r.EOF, st = o.listDir(dir, a.Cookie, func(name string, ino, next uint64) bool {
			e := nfs3.Entry{FileID: ino, Name: name, Cookie: next}
			if !f.fits(e.EncodedLen()) {
				return false
			}
			r.Entries = append(r.Entries, e)
			return true
		})
		return f.status(st, len(r.Entries))
	}()
	return reply(nfs3.ProcReaddir, a.Count, &r)
}

func (s *Server) readdirplus(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.ReaddirplusArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.ReaddirplusRes
	r.Status = func() nfs3.Stat {
		o, dir, st := s.open(ctx, c, a.Dir)
		if st != nfs3.OK {
			return st
		}
		defer func() { r.DirAttr = o.postOp(dir) }()
		if st := o.readableDir(dir); st != nfs3.OK {
			return st
		}
		f := newDirFill(a.MaxCount)
		r.EOF, st = o.listDir(dir, a.Cookie, func(name string, ino, next uint64) bool {
			e := nfs3.EntryPlus{FileID: ino, Name: name, Cookie: next, Attr: o.postOp(ino)}
			e.FH = nfs3.PostOpFH{Present: true, FH: o.handle(ino)}
			if !f.fits(e.EncodedLen()) {
				return false
			}
			r.Entries = append(r.Entries, e)
			return true
		})
		return f.status(st, len(r.Entries))
	}()
	return reply(nfs3.ProcReaddirplus, a.MaxCount, &r)
}

func (s *Server) fsstat(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.FsstatRes
	r.Status = func() nfs3.Stat {
		o, ino, st := s.open(ctx, c, a.FH)
		if st != nfs3.OK {
			return st
		}
		if r.Attr = o.postOp(ino); !r.Attr.Present {
			return o.attrErr(ino)
		}
		fs, err := o.ex.FS.Statfs(o.ctx)
		if err != nil {
			return o.errStat(err, ino, "")
		}
		r.TBytes, r.FBytes, r.ABytes = fs.TotalBytes, fs.FreeBytes, fs.AvailBytes
		r.TFiles, r.FFiles, r.AFiles = fs.TotalFiles, fs.FreeFiles, fs.AvailFiles
		return nfs3.OK
	}()
	return reply(nfs3.ProcFsstat, 0, &r)
}

// attrErr returns why ino has no attributes.
func (o *op) attrErr(ino uint64) nfs3.Stat {
	_, st := o.attr(ino)
	if st == nfs3.OK {
		return nfs3.ErrIO
	}
	return st
}

func (s *Server) fsinfo(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.FsinfoRes
	r.Status = func() nfs3.Stat {
		o, ino, st := s.open(ctx, c, a.FH)
		if st != nfs3.OK {
			return st
		}
		if r.Attr = o.postOp(ino); !r.Attr.Present {
			return o.attrErr(ino)
		}
		r.RTMax, r.RTPref, r.RTMult = s.maxIO, s.maxIO, 4096
		r.WTMax, r.WTPref, r.WTMult = s.maxIO, s.maxIO, 4096
		r.DTPref = 64 << 10
		r.MaxFileSize = 1<<63 - 1
		r.TimeDelta = nfs3.Time{Nseconds: 1}
		r.Properties = nfs3.FSFLink | nfs3.FSFSymlink | nfs3.FSFHomogeneous | nfs3.FSFCanSetTime
		return nfs3.OK
	}()
	return reply(nfs3.ProcFsinfo, 0, &r)
}

func (s *Server) pathconf(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.PathconfRes
	r.Status = func() nfs3.Stat {
		o, ino, st := s.open(ctx, c, a.FH)
		if st != nfs3.OK {
			return st
		}
		if r.Attr = o.postOp(ino); !r.Attr.Present {
			return o.attrErr(ino)
		}
		r.LinkMax, r.NameMax = 32000, 255
		r.NoTrunc, r.ChownRestricted, r.CasePreserving = true, true, true
		return nfs3.OK
	}()
	return reply(nfs3.ProcPathconf, 0, &r)
}
