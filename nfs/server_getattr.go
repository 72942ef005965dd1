package nfs

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

func (s *Server) getattr(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.GetattrRes
	_, _, r.Attr, r.Status = s.openAttr(ctx, c, a.FH)
	return reply(nfs3.ProcGetattr, 0, &r)
}

func (s *Server) setattr(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.SetattrArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.WccRes
	r.Status = func() nfs3.Stat {
		o, ino, before, st := s.openAttr(ctx, c, a.FH)
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

func (s *Server) access(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.AccessArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.AccessRes
	o, _, at, st := s.openAttr(ctx, c, a.FH)
	if st == nfs3.OK {
		r.Attr = nfs3.PostOpAttr{Present: true, Attr: at}
		r.Access = access(&at, &o.cr, a.Access, o.ex.ReadOnly)
	}
	r.Status = st
	return reply(nfs3.ProcAccess, 0, &r)
}
