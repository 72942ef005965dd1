package nfs

import (
	"context"
	"strings"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

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
