package nfs

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

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
		to, st := o.sameExport(a.To.Dir)
		if st != nfs3.OK {
			return st
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
		dir, st := o.sameExport(a.Link.Dir)
		if st != nfs3.OK {
			return st
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

// sameExport resolves fh, a second handle a call names (RENAME's target
// directory, LINK's), which must be on o's export: NFS3ERR_XDEV otherwise.
func (o *op) sameExport(fh nfs3.FileHandle) (uint64, nfs3.Stat) {
	ex, ino, st := o.s.resolve(fh)
	if st != nfs3.OK {
		return 0, st
	}
	if ex != o.ex {
		return 0, nfs3.ErrXDev
	}
	return ino, nfs3.OK
}
