package nfs

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

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

func (s *Server) readlink(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.ReadlinkRes
	r.Status = func() nfs3.Stat {
		o, ino, at, st := s.openAttr(ctx, c, a.FH)
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
