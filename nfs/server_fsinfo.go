package nfs

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

func (s *Server) fsstat(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.FsstatRes
	r.Status = func() nfs3.Stat {
		o, ino, st := s.openPostOp(ctx, c, a.FH, &r.Attr)
		if st != nfs3.OK {
			return st
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

// openPostOp is open for FSSTAT, FSINFO and PATHCONF, whose results carry
// the object's attributes (into attr) and which fail without them.
func (s *Server) openPostOp(ctx context.Context, c *rpc.Call, fh nfs3.FileHandle, attr *nfs3.PostOpAttr) (op, uint64, nfs3.Stat) {
	o, ino, st := s.open(ctx, c, fh)
	if st != nfs3.OK {
		return o, ino, st
	}
	if *attr = o.postOp(ino); !attr.Present {
		return o, ino, o.attrErr(ino)
	}
	return o, ino, nfs3.OK
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
	if _, _, r.Status = s.openPostOp(ctx, c, a.FH, &r.Attr); r.Status == nfs3.OK {
		r.RTMax, r.RTPref, r.RTMult = s.maxIO, s.maxIO, 4096
		r.WTMax, r.WTPref, r.WTMult = s.maxIO, s.maxIO, 4096
		r.DTPref = 64 << 10
		r.MaxFileSize = 1<<63 - 1
		r.TimeDelta = nfs3.Time{Nseconds: 1}
		r.Properties = nfs3.FSFLink | nfs3.FSFSymlink | nfs3.FSFHomogeneous | nfs3.FSFCanSetTime
	}
	return reply(nfs3.ProcFsinfo, 0, &r)
}

func (s *Server) pathconf(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.FHArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.PathconfRes
	if _, _, r.Status = s.openPostOp(ctx, c, a.FH, &r.Attr); r.Status == nfs3.OK {
		r.LinkMax, r.NameMax = 32000, 255
		r.NoTrunc, r.ChownRestricted, r.CasePreserving = true, true, true
	}
	return reply(nfs3.ProcPathconf, 0, &r)
}
