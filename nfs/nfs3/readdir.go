package nfs3

import (
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// ReaddirArgs is READDIR3args (RFC 1813 Section 3.3.16).
type ReaddirArgs struct {
	Dir        FileHandle
	Cookie     uint64
	CookieVerf Verf
	Count      uint32
}

// Append appends the encoded arguments to b.
func (a *ReaddirArgs) Append(b *rpc.Body) {
	b.XDR = appendFH(b.XDR, a.Dir)
	b.XDR = xdr.AppendUint64(b.XDR, a.Cookie)
	b.XDR = append(b.XDR, a.CookieVerf[:]...)
	b.XDR = xdr.AppendUint32(b.XDR, a.Count)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *ReaddirArgs) Decode(d *rpc.BodyDecoder) error {
	a.Dir = decodeFH(d)
	a.Cookie = d.Uint64()
	a.CookieVerf.decode(d)
	a.Count = d.Uint32()
	return d.Err()
}

// Entry is entry3 (RFC 1813 Section 3.3.16), one name of a READDIR reply.
type Entry struct {
	FileID uint64
	Name   string
	Cookie uint64
}

// EncodedLen returns the bytes the entry takes in a reply, with the
// "value follows" word before it: what a server counts against
// READDIR3args.count.
func (e *Entry) EncodedLen() int { return 4 + 8 + xdr.OpaqueLen(len(e.Name)) + 8 }

func (e *Entry) append(b []byte) []byte {
	b = xdr.AppendBool(b, true)
	b = xdr.AppendUint64(b, e.FileID)
	b = xdr.AppendString(b, e.Name)
	return xdr.AppendUint64(b, e.Cookie)
}

func (e *Entry) decode(d *rpc.BodyDecoder) {
	e.FileID = d.Uint64()
	e.Name = d.Str(MaxName)
	e.Cookie = d.Uint64()
}

// ReaddirRes is READDIR3res (RFC 1813 Section 3.3.16).
type ReaddirRes struct {
	Status     Stat
	DirAttr    PostOpAttr
	CookieVerf Verf    // if OK, and the two below
	Entries    []Entry // dirlist3's linked list, in order
	EOF        bool
}

// Append appends the encoded results to b.
func (r *ReaddirRes) Append(b *rpc.Body) {
	b.XDR = appendDirRes(b.XDR, r.Status, &r.DirAttr, r.CookieVerf, r.Entries, r.EOF)
}

// Decode decodes the results and returns d's sticky error. Entries are
// appended to r.Entries[:0], so a caller can reuse the slice.
func (r *ReaddirRes) Decode(d *rpc.BodyDecoder) error {
	r.Status, r.CookieVerf, r.Entries, r.EOF = decodeDirRes(d, &r.DirAttr, r.Entries[:0])
	return d.Err()
}

// ReaddirplusArgs is READDIRPLUS3args (RFC 1813 Section 3.3.17).
type ReaddirplusArgs struct {
	Dir        FileHandle
	Cookie     uint64
	CookieVerf Verf
	DirCount   uint32
	MaxCount   uint32
}

// Append appends the encoded arguments to b.
func (a *ReaddirplusArgs) Append(b *rpc.Body) {
	b.XDR = appendFH(b.XDR, a.Dir)
	b.XDR = xdr.AppendUint64(b.XDR, a.Cookie)
	b.XDR = append(b.XDR, a.CookieVerf[:]...)
	b.XDR = xdr.AppendUint32(b.XDR, a.DirCount)
	b.XDR = xdr.AppendUint32(b.XDR, a.MaxCount)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *ReaddirplusArgs) Decode(d *rpc.BodyDecoder) error {
	a.Dir = decodeFH(d)
	a.Cookie = d.Uint64()
	a.CookieVerf.decode(d)
	a.DirCount = d.Uint32()
	a.MaxCount = d.Uint32()
	return d.Err()
}

// EntryPlus is entryplus3 (RFC 1813 Section 3.3.17).
type EntryPlus struct {
	FileID uint64
	Name   string
	Cookie uint64
	Attr   PostOpAttr
	FH     PostOpFH
}

// EncodedLen returns the bytes the entry takes in a reply, with the
// "value follows" word before it: what a server counts against
// READDIRPLUS3args.maxcount.
func (e *EntryPlus) EncodedLen() int {
	n := 4 + 8 + xdr.OpaqueLen(len(e.Name)) + 8 + 4 + 4
	if e.Attr.Present {
		n += fattrLen
	}
	if e.FH.Present {
		n += xdr.OpaqueLen(len(e.FH.FH))
	}
	return n
}

func (e *EntryPlus) append(b []byte) []byte {
	b = xdr.AppendBool(b, true)
	b = xdr.AppendUint64(b, e.FileID)
	b = xdr.AppendString(b, e.Name)
	b = xdr.AppendUint64(b, e.Cookie)
	b = e.Attr.Append(b)
	return e.FH.append(b)
}

func (e *EntryPlus) decode(d *rpc.BodyDecoder) {
	e.FileID = d.Uint64()
	e.Name = d.Str(MaxName)
	e.Cookie = d.Uint64()
	e.Attr.Decode(d)
	e.FH.decode(d)
}

// ReaddirplusRes is READDIRPLUS3res (RFC 1813 Section 3.3.17).
type ReaddirplusRes struct {
	Status     Stat
	DirAttr    PostOpAttr
	CookieVerf Verf // if OK, and the two below
	Entries    []EntryPlus
	EOF        bool
}

// Append appends the encoded results to b.
func (r *ReaddirplusRes) Append(b *rpc.Body) {
	b.XDR = appendDirRes(b.XDR, r.Status, &r.DirAttr, r.CookieVerf, r.Entries, r.EOF)
}

// Decode decodes the results and returns d's sticky error. Entries are
// appended to r.Entries[:0]; their handles alias the decoder's buffer.
func (r *ReaddirplusRes) Decode(d *rpc.BodyDecoder) error {
	r.Status, r.CookieVerf, r.Entries, r.EOF = decodeDirRes(d, &r.DirAttr, r.Entries[:0])
	return d.Err()
}

// dirEntry is an entry of a directory listing, Entry or EntryPlus, as
// a pointer to it encodes and decodes itself.
type dirEntry[E any] interface {
	*E
	append(b []byte) []byte
	decode(d *rpc.BodyDecoder)
}

// appendDirRes appends READDIR3res or READDIRPLUS3res, which differ only
// in their entries' type (RFC 1813 Sections 3.3.16 and 3.3.17): the
// status, the directory's attributes and, if OK, the cookie verifier,
// the entries as XDR's linked list, and eof.
func appendDirRes[E any, P dirEntry[E]](b []byte, st Stat, dirAttr *PostOpAttr, verf Verf, entries []E, eof bool) []byte {
	b = xdr.AppendUint32(b, uint32(st))
	b = dirAttr.Append(b)
	if st != OK {
		return b
	}
	b = append(b, verf[:]...)
	for i := range entries {
		b = P(&entries[i]).append(b)
	}
	b = xdr.AppendBool(b, false)
	return xdr.AppendBool(b, eof)
}

// decodeDirRes decodes what appendDirRes appends, the directory's
// attributes into dirAttr and the entries appended to entries; d's
// sticky error says whether it could. The verifier, entries and eof are
// zero unless the status is OK.
func decodeDirRes[E any, P dirEntry[E]](d *rpc.BodyDecoder, dirAttr *PostOpAttr, entries []E) (st Stat, verf Verf, _ []E, eof bool) {
	st = Stat(d.Uint32())
	dirAttr.Decode(d)
	if st != OK {
		return st, verf, entries, false
	}
	verf.decode(d)
	// Each entry consumes at least 24 bytes, so the loop ends with the
	// buffer.
	for d.Optional() {
		var e E
		P(&e).decode(d)
		if d.Err() != nil {
			break
		}
		entries = append(entries, e)
	}
	return st, verf, entries, d.Bool()
}
