package nfs

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

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
		o, ino, at, stat := s.openAttr(ctx, c, a.FH)
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
		o, ino, before, st := s.openAttr(ctx, c, a.FH)
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
		o, ino, before, st := s.openAttr(ctx, c, a.FH)
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
