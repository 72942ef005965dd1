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

// openAttr is open followed by the attributes of the inode fh names, which
// most procedures check first, and those that change it report as the
// wcc_data's before.
func (s *Server) openAttr(ctx context.Context, c *rpc.Call, fh nfs3.FileHandle) (op, uint64, nfs3.Attr, nfs3.Stat) {
	o, ino, st := s.open(ctx, c, fh)
	if st != nfs3.OK {
		return o, ino, nfs3.Attr{}, st
	}
	at, st := o.attr(ino)
	return o, ino, at, st
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

// nfsHandlers returns the NFSv3 procedures' handlers by procedure
// number. Each procedure is in the file of the server named as nfs/nfs3's
// file of its arguments and results: server_getattr.go (GETATTR,
// SETATTR, ACCESS), server_lookup.go, server_io.go, server_create.go,
// server_remove.go (REMOVE, RMDIR, RENAME, LINK), server_readdir.go and
// server_fsinfo.go (FSSTAT, FSINFO, PATHCONF); this file has what they
// share.
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
