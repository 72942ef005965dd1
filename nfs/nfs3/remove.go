package nfs3

import (
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// REMOVE and RMDIR take DirOpArgs and return WccRes.

// RenameArgs is RENAME3args (RFC 1813 Section 3.3.14).
type RenameArgs struct {
	From, To DirOpArgs
}

// Append appends the encoded arguments to b.
func (a *RenameArgs) Append(b *rpc.Body) {
	b.XDR = a.From.append(b.XDR)
	b.XDR = a.To.append(b.XDR)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *RenameArgs) Decode(d *rpc.BodyDecoder) error {
	a.From.decode(d)
	a.To.decode(d)
	return d.Err()
}

// RenameRes is RENAME3res (RFC 1813 Section 3.3.14).
type RenameRes struct {
	Status         Stat
	FromWcc, ToWcc WccData
}

// Append appends the encoded results to b.
func (r *RenameRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.FromWcc.Append(b.XDR)
	b.XDR = r.ToWcc.Append(b.XDR)
}

// Decode decodes the results and returns d's sticky error.
func (r *RenameRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.FromWcc.Decode(d)
	return r.ToWcc.Decode(d)
}

// LinkArgs is LINK3args (RFC 1813 Section 3.3.15).
type LinkArgs struct {
	FH   FileHandle
	Link DirOpArgs
}

// Append appends the encoded arguments to b.
func (a *LinkArgs) Append(b *rpc.Body) {
	b.XDR = appendFH(b.XDR, a.FH)
	b.XDR = a.Link.append(b.XDR)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *LinkArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	a.Link.decode(d)
	return d.Err()
}

// LinkRes is LINK3res (RFC 1813 Section 3.3.15).
type LinkRes struct {
	Status Stat
	Attr   PostOpAttr
	DirWcc WccData
}

// Append appends the encoded results to b.
func (r *LinkRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Attr.Append(b.XDR)
	b.XDR = r.DirWcc.Append(b.XDR)
}

// Decode decodes the results and returns d's sticky error.
func (r *LinkRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.Attr.Decode(d)
	return r.DirWcc.Decode(d)
}
