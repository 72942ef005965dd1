package nfs4

import (
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// ReaddirArgs is READDIR4args (RFC 8881 Section 18.23): MaxCount bounds
// the whole READDIR4resok, DirCount the cookies and names only.
type ReaddirArgs struct {
	Cookie      uint64
	CookieVerf  Verifier
	DirCount    uint32
	MaxCount    uint32
	AttrRequest Bitmap
}

func (*ReaddirArgs) Op() Op { return OpReaddir }

// Append appends the encoded arguments to b.
func (a *ReaddirArgs) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint64(b.XDR, a.Cookie)
	b.XDR = append(b.XDR, a.CookieVerf[:]...)
	b.XDR = xdr.AppendUint32(b.XDR, a.DirCount)
	b.XDR = xdr.AppendUint32(b.XDR, a.MaxCount)
	b.XDR = a.AttrRequest.append(b.XDR)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *ReaddirArgs) Decode(d *rpc.BodyDecoder) error {
	a.Cookie = d.Uint64()
	a.CookieVerf.decode(d)
	a.DirCount = d.Uint32()
	a.MaxCount = d.Uint32()
	a.AttrRequest = decodeBitmap(d, a.AttrRequest)
	return d.Err()
}

// Entry is entry4 (RFC 8881 Section 18.23), one name of a READDIR reply
// with the attributes asked for.
type Entry struct {
	Cookie uint64
	Name   string
	Attr   Attr
}

// ReaddirRes is READDIR4res (RFC 8881 Section 18.23). Entries is
// dirlist4's linked list in order; the reply's size bounds their number.
type ReaddirRes struct {
	Status     Stat
	CookieVerf Verifier // if OK, and the two below
	Entries    []Entry
	EOF        bool
}

func (*ReaddirRes) Op() Op           { return OpReaddir }
func (r *ReaddirRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *ReaddirRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status != OK {
		return
	}
	b.XDR = append(b.XDR, r.CookieVerf[:]...)
	for i := range r.Entries {
		e := &r.Entries[i]
		b.XDR = xdr.AppendBool(b.XDR, true)
		b.XDR = xdr.AppendUint64(b.XDR, e.Cookie)
		b.XDR = appendString(b.XDR, e.Name)
		b.XDR = e.Attr.Append(b.XDR)
	}
	b.XDR = xdr.AppendBool(b.XDR, false)
	b.XDR = xdr.AppendBool(b.XDR, r.EOF)
}

// Decode decodes the results and returns d's sticky error. Entries are
// appended to r.Entries[:0], so a caller can reuse the slice.
func (r *ReaddirRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.CookieVerf, r.Entries, r.EOF = Verifier{}, r.Entries[:0], false
	if r.Status != OK {
		r.Entries = nil
		return d.Err()
	}
	r.CookieVerf.decode(d)
	// Each entry consumes at least 24 bytes, so the loop ends with the
	// buffer.
	for d.Optional() {
		var e Entry
		e.Cookie = d.Uint64()
		e.Name = d.Str(MaxName)
		if e.Attr.Decode(d) != nil {
			break
		}
		r.Entries = append(r.Entries, e)
	}
	if len(r.Entries) == 0 {
		r.Entries = nil
	}
	r.EOF = d.Bool()
	return d.Err()
}

// ReadlinkArgs is the empty arguments of READLINK (RFC 8881 Section
// 18.24).
type ReadlinkArgs struct{}

func (*ReadlinkArgs) Op() Op                          { return OpReadlink }
func (*ReadlinkArgs) Append(*rpc.Body)                {}
func (*ReadlinkArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// ReadlinkRes is READLINK4res (RFC 8881 Section 18.24). Link is
// DDP-eligible, at most MaxPath bytes.
type ReadlinkRes struct {
	Status Stat
	Link   string // if OK
}

func (*ReadlinkRes) Op() Op           { return OpReadlink }
func (r *ReadlinkRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *ReadlinkRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.AppendDDPOpaque([]byte(r.Link))
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *ReadlinkRes) Decode(d *rpc.BodyDecoder) error {
	*r = ReadlinkRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.Link = string(d.DDPOpaque(MaxPath))
	}
	return d.Err()
}

// CreateArgs is CREATE4args (RFC 8881 Section 18.4): a directory, symbolic
// link or special file named Name in the current directory; regular files
// are made with OPEN. createtype4 is Type with LinkData (NF4LNK, at most
// MaxPath bytes, DDP-eligible) or DevData (NF4BLK, NF4CHR); other types
// have no data, and a server answers those that are not NF4DIR, NF4SOCK or
// NF4FIFO with ErrBadType.
type CreateArgs struct {
	Type     FType
	LinkData string
	DevData  SpecData
	Name     string
	Attr     SetAttr
}

func (*CreateArgs) Op() Op { return OpCreate }

// Append appends the encoded arguments to b.
func (a *CreateArgs) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(a.Type))
	switch a.Type {
	case TypeLnk:
		b.AppendDDPOpaque([]byte(a.LinkData))
	case TypeBlk, TypeChr:
		b.XDR = xdr.AppendUint32(xdr.AppendUint32(b.XDR, a.DevData.Major), a.DevData.Minor)
	}
	b.XDR = appendString(b.XDR, a.Name)
	b.XDR = a.Attr.Append(b.XDR)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *CreateArgs) Decode(d *rpc.BodyDecoder) error {
	*a = CreateArgs{Type: FType(d.Uint32())}
	switch a.Type {
	case TypeLnk:
		a.LinkData = string(d.DDPOpaque(MaxPath))
	case TypeBlk, TypeChr:
		a.DevData.Major = d.Uint32()
		a.DevData.Minor = d.Uint32()
	}
	a.Name = d.Str(MaxName)
	return a.Attr.Decode(d)
}

// CreateRes is CREATE4res (RFC 8881 Section 18.4).
type CreateRes struct {
	Status  Stat
	CInfo   ChangeInfo // if OK, and AttrSet
	AttrSet Bitmap
}

func (*CreateRes) Op() Op           { return OpCreate }
func (r *CreateRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *CreateRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = r.CInfo.append(b.XDR)
		b.XDR = r.AttrSet.append(b.XDR)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *CreateRes) Decode(d *rpc.BodyDecoder) error {
	*r = CreateRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.CInfo.decode(d)
		r.AttrSet = decodeBitmap(d, nil)
	}
	return d.Err()
}

// RemoveArgs is REMOVE4args (RFC 8881 Section 18.25): a name in the
// current directory.
type RemoveArgs struct{ Name string }

func (*RemoveArgs) Op() Op { return OpRemove }

// Append appends the encoded arguments to b.
func (a *RemoveArgs) Append(b *rpc.Body) { b.XDR = appendString(b.XDR, a.Name) }

// Decode decodes the arguments and returns d's sticky error.
func (a *RemoveArgs) Decode(d *rpc.BodyDecoder) error {
	a.Name = d.Str(MaxName)
	return d.Err()
}

// RemoveRes is REMOVE4res (RFC 8881 Section 18.25).
type RemoveRes struct {
	Status Stat
	CInfo  ChangeInfo // if OK
}

func (*RemoveRes) Op() Op           { return OpRemove }
func (r *RemoveRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *RemoveRes) Append(b *rpc.Body) { appendCInfoRes(b, r.Status, &r.CInfo) }

// Decode decodes the results and returns d's sticky error.
func (r *RemoveRes) Decode(d *rpc.BodyDecoder) error { return decodeCInfoRes(d, &r.Status, &r.CInfo) }

func appendCInfoRes(b *rpc.Body, s Stat, c *ChangeInfo) {
	appendStat(b, s)
	if s == OK {
		b.XDR = c.append(b.XDR)
	}
}

func decodeCInfoRes(d *rpc.BodyDecoder, s *Stat, c *ChangeInfo) error {
	*s, *c = Stat(d.Uint32()), ChangeInfo{}
	if *s == OK {
		c.decode(d)
	}
	return d.Err()
}

// RenameArgs is RENAME4args (RFC 8881 Section 18.26): OldName in the
// saved directory becomes NewName in the current one.
type RenameArgs struct{ OldName, NewName string }

func (*RenameArgs) Op() Op { return OpRename }

// Append appends the encoded arguments to b.
func (a *RenameArgs) Append(b *rpc.Body) {
	b.XDR = appendString(appendString(b.XDR, a.OldName), a.NewName)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *RenameArgs) Decode(d *rpc.BodyDecoder) error {
	a.OldName = d.Str(MaxName)
	a.NewName = d.Str(MaxName)
	return d.Err()
}

// RenameRes is RENAME4res (RFC 8881 Section 18.26).
type RenameRes struct {
	Status         Stat
	Source, Target ChangeInfo // if OK
}

func (*RenameRes) Op() Op           { return OpRename }
func (r *RenameRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *RenameRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = r.Target.append(r.Source.append(b.XDR))
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *RenameRes) Decode(d *rpc.BodyDecoder) error {
	*r = RenameRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.Source.decode(d)
		r.Target.decode(d)
	}
	return d.Err()
}

// LinkArgs is LINK4args (RFC 8881 Section 18.9): the saved file gets the
// name NewName in the current directory.
type LinkArgs struct{ NewName string }

func (*LinkArgs) Op() Op { return OpLink }

// Append appends the encoded arguments to b.
func (a *LinkArgs) Append(b *rpc.Body) { b.XDR = appendString(b.XDR, a.NewName) }

// Decode decodes the arguments and returns d's sticky error.
func (a *LinkArgs) Decode(d *rpc.BodyDecoder) error {
	a.NewName = d.Str(MaxName)
	return d.Err()
}

// LinkRes is LINK4res (RFC 8881 Section 18.9).
type LinkRes struct {
	Status Stat
	CInfo  ChangeInfo // if OK
}

func (*LinkRes) Op() Op           { return OpLink }
func (r *LinkRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *LinkRes) Append(b *rpc.Body) { appendCInfoRes(b, r.Status, &r.CInfo) }

// Decode decodes the results and returns d's sticky error.
func (r *LinkRes) Decode(d *rpc.BodyDecoder) error { return decodeCInfoRes(d, &r.Status, &r.CInfo) }
