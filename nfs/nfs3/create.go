package nfs3

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// CreateMode is createmode3 (RFC 1813 Section 3.3.8).
type CreateMode uint32

// The members of createmode3.
const (
	Unchecked CreateMode = 0 // UNCHECKED
	Guarded   CreateMode = 1 // GUARDED
	Exclusive CreateMode = 2 // EXCLUSIVE
)

// String returns the member's name in RFC 1813.
func (m CreateMode) String() string {
	if m <= Exclusive {
		return [...]string{"UNCHECKED", "GUARDED", "EXCLUSIVE"}[m]
	}
	return "createmode3(" + strconv.FormatUint(uint64(m), 10) + ")"
}

// CreateArgs is CREATE3args (RFC 1813 Section 3.3.8).
type CreateArgs struct {
	Where DirOpArgs
	Mode  CreateMode
	Attr  SetAttr // if Unchecked or Guarded
	Verf  Verf    // if Exclusive
}

// Append appends the encoded arguments to b.
func (a *CreateArgs) Append(b *rpc.Body) {
	b.XDR = a.Where.append(b.XDR)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(a.Mode))
	if a.Mode == Exclusive {
		b.XDR = append(b.XDR, a.Verf[:]...)
	} else {
		b.XDR = a.Attr.Append(b.XDR)
	}
}

// Decode decodes the arguments and returns d's sticky error. A mode other
// than the three of createmode3 fails.
func (a *CreateArgs) Decode(d *rpc.BodyDecoder) error {
	a.Where.decode(d)
	a.Mode = CreateMode(d.Uint32())
	a.Attr, a.Verf = SetAttr{}, Verf{}
	switch {
	case d.Err() != nil:
	case a.Mode == Exclusive:
		a.Verf.decode(d)
	case a.Mode <= Guarded:
		a.Attr.Decode(d)
	default:
		d.Fail(errEnum("createmode3"))
	}
	return d.Err()
}

// CreateRes are the results of the procedures that make a file: CREATE3res,
// MKDIR3res, SYMLINK3res and MKNOD3res (RFC 1813 Sections 3.3.8-11).
type CreateRes struct {
	Status Stat
	FH     PostOpFH   // if OK
	Attr   PostOpAttr // if OK
	DirWcc WccData
}

// Append appends the encoded results to b.
func (r *CreateRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	if r.Status == OK {
		b.XDR = r.FH.append(b.XDR)
		b.XDR = r.Attr.Append(b.XDR)
	}
	b.XDR = r.DirWcc.Append(b.XDR)
}

// Decode decodes the results and returns d's sticky error.
func (r *CreateRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.FH, r.Attr = PostOpFH{}, PostOpAttr{}
	if r.Status == OK {
		r.FH.decode(d)
		r.Attr.Decode(d)
	}
	return r.DirWcc.Decode(d)
}

// MkdirArgs is MKDIR3args (RFC 1813 Section 3.3.9).
type MkdirArgs struct {
	Where DirOpArgs
	Attr  SetAttr
}

// Append appends the encoded arguments to b.
func (a *MkdirArgs) Append(b *rpc.Body) {
	b.XDR = a.Where.append(b.XDR)
	b.XDR = a.Attr.Append(b.XDR)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *MkdirArgs) Decode(d *rpc.BodyDecoder) error {
	a.Where.decode(d)
	return a.Attr.Decode(d)
}

// SymlinkArgs is SYMLINK3args (RFC 1813 Section 3.3.10). The path is
// DDP-eligible (RFC 8267 Section 4).
type SymlinkArgs struct {
	Where DirOpArgs
	Attr  SetAttr
	Path  string
}

// Append appends the encoded arguments to b; the path's bytes are held
// apart as a DDP-eligible item.
func (a *SymlinkArgs) Append(b *rpc.Body) {
	b.XDR = a.Where.append(b.XDR)
	b.XDR = a.Attr.Append(b.XDR)
	b.AppendDDPOpaque([]byte(a.Path))
}

// Decode decodes the arguments and returns d's sticky error.
func (a *SymlinkArgs) Decode(d *rpc.BodyDecoder) error {
	a.Where.decode(d)
	a.Attr.Decode(d)
	a.Path = string(d.DDPOpaque(MaxPath))
	return d.Err()
}

// MknodArgs is MKNOD3args (RFC 1813 Section 3.3.11): mknoddata3 is a union
// on Type, with Attr for NF3CHR, NF3BLK, NF3SOCK and NF3FIFO and Spec for
// NF3CHR and NF3BLK; other types carry nothing.
type MknodArgs struct {
	Where DirOpArgs
	Type  FType
	Attr  SetAttr
	Spec  SpecData
}

// Append appends the encoded arguments to b.
func (a *MknodArgs) Append(b *rpc.Body) {
	b.XDR = a.Where.append(b.XDR)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(a.Type))
	switch a.Type {
	case TypeChr, TypeBlk:
		b.XDR = a.Attr.Append(b.XDR)
		b.XDR = xdr.AppendUint32(b.XDR, a.Spec.Major)
		b.XDR = xdr.AppendUint32(b.XDR, a.Spec.Minor)
	case TypeSock, TypeFIFO:
		b.XDR = a.Attr.Append(b.XDR)
	}
}

// Decode decodes the arguments and returns d's sticky error.
func (a *MknodArgs) Decode(d *rpc.BodyDecoder) error {
	a.Where.decode(d)
	a.Type = decodeFType(d)
	a.Attr, a.Spec = SetAttr{}, SpecData{}
	switch a.Type {
	case TypeChr, TypeBlk:
		a.Attr.Decode(d)
		a.Spec.Major = d.Uint32()
		a.Spec.Minor = d.Uint32()
	case TypeSock, TypeFIFO:
		a.Attr.Decode(d)
	}
	return d.Err()
}
