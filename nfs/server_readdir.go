package nfs

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

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
	r.Status, r.DirAttr, r.Entries, r.EOF = listing(s, ctx, c, a.Dir, a.Cookie, a.Count,
		func(_ *op, name string, ino, next uint64) nfs3.Entry {
			return nfs3.Entry{FileID: ino, Name: name, Cookie: next}
		})
	return reply(nfs3.ProcReaddir, a.Count, &r)
}

func (s *Server) readdirplus(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var a nfs3.ReaddirplusArgs
	if err := args(c, &a); err != nil {
		return rpc.Body{}, err
	}
	var r nfs3.ReaddirplusRes
	r.Status, r.DirAttr, r.Entries, r.EOF = listing(s, ctx, c, a.Dir, a.Cookie, a.MaxCount,
		func(o *op, name string, ino, next uint64) nfs3.EntryPlus {
			e := nfs3.EntryPlus{FileID: ino, Name: name, Cookie: next, Attr: o.postOp(ino)}
			e.FH = nfs3.PostOpFH{Present: true, FH: o.handle(ino)}
			return e
		})
	return reply(nfs3.ProcReaddirplus, a.MaxCount, &r)
}

// sizedEntry is a READDIR or READDIRPLUS entry, as a pointer to it
// gives its encoded length.
type sizedEntry[E any] interface {
	*E
	EncodedLen() int
}

// listing is what READDIR and READDIRPLUS do alike: it checks that fh is
// a directory the caller may list, and lists it from cookie (listDir) in
// the entries entry makes, as many as fit count bytes (dirFill). It
// returns the status, the directory's attributes after, the entries and
// eof.
func listing[E any, P sizedEntry[E]](s *Server, ctx context.Context, c *rpc.Call, fh nfs3.FileHandle, cookie uint64, count uint32,
	entry func(o *op, name string, ino, next uint64) E) (st nfs3.Stat, dirAttr nfs3.PostOpAttr, entries []E, eof bool) {
	o, dir, st := s.open(ctx, c, fh)
	if st != nfs3.OK {
		return st, dirAttr, nil, false
	}
	defer func() { dirAttr = o.postOp(dir) }()
	if st := o.readableDir(dir); st != nfs3.OK {
		return st, dirAttr, nil, false
	}
	f := newDirFill(count)
	eof, st = o.listDir(dir, cookie, func(name string, ino, next uint64) bool {
		e := entry(&o, name, ino, next)
		if !f.fits(P(&e).EncodedLen()) {
			return false
		}
		entries = append(entries, e)
		return true
	})
	return f.status(st, len(entries)), dirAttr, entries, eof
}
