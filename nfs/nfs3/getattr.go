package nfs3

import (
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// FHArgs are the arguments of the procedures that take one file handle and
// nothing else: GETATTR3args, READLINK3args, FSSTAT3args, FSINFO3args and
// PATHCONF3args (RFC 1813 Sections 3.3.1, 3.3.5, 3.3.18-20).
type FHArgs struct {
	FH FileHandle
}

// Append appends the encoded arguments to b.
func (a *FHArgs) Append(b *rpc.Body) { b.XDR = appendFH(b.XDR, a.FH) }

// Decode decodes the arguments and returns d's sticky error.
func (a *FHArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	return d.Err()
}

// GetattrRes is GETATTR3res (RFC 1813 Section 3.3.1).
type GetattrRes struct {
	Status Stat
	Attr   Attr // if OK
}

// Append appends the encoded results to b.
func (r *GetattrRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	if r.Status == OK {
		b.XDR = r.Attr.Append(b.XDR)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *GetattrRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	if r.Status == OK {
		r.Attr.Decode(d)
	}
	return d.Err()
}

// SetattrArgs is SETATTR3args (RFC 1813 Section 3.3.2).
type SetattrArgs struct {
	FH    FileHandle
	Attr  SetAttr
	Check bool // sattrguard3: set only if the ctime is still Ctime
	Ctime Time
}

// Append appends the encoded arguments to b.
func (a *SetattrArgs) Append(b *rpc.Body) {
	b.XDR = appendFH(b.XDR, a.FH)
	b.XDR = a.Attr.Append(b.XDR)
	b.XDR = xdr.AppendBool(b.XDR, a.Check)
	if a.Check {
		b.XDR = a.Ctime.append(b.XDR)
	}
}

// Decode decodes the arguments and returns d's sticky error.
func (a *SetattrArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	a.Attr.Decode(d)
	a.Ctime = Time{}
	if a.Check = d.Optional(); a.Check {
		a.Ctime.decode(d)
	}
	return d.Err()
}

// WccRes are the results of the procedures that return a status and one
// wcc_data whatever the status: SETATTR3res, REMOVE3res and RMDIR3res (RFC
// 1813 Sections 3.3.2, 3.3.12, 3.3.13).
type WccRes struct {
	Status Stat
	Wcc    WccData
}

// Append appends the encoded results to b.
func (r *WccRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Wcc.Append(b.XDR)
}

// Decode decodes the results and returns d's sticky error.
func (r *WccRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	return r.Wcc.Decode(d)
}

// The ACCESS bits (RFC 1813 Section 3.3.4).
const (
	AccessRead    = 0x01
	AccessLookup  = 0x02
	AccessModify  = 0x04
	AccessExtend  = 0x08
	AccessDelete  = 0x10
	AccessExecute = 0x20
)

// AccessArgs is ACCESS3args (RFC 1813 Section 3.3.4).
type AccessArgs struct {
	FH     FileHandle
	Access uint32
}

// Append appends the encoded arguments to b.
func (a *AccessArgs) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(appendFH(b.XDR, a.FH), a.Access)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *AccessArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	a.Access = d.Uint32()
	return d.Err()
}

// AccessRes is ACCESS3res (RFC 1813 Section 3.3.4).
type AccessRes struct {
	Status Stat
	Attr   PostOpAttr
	Access uint32 // if OK
}

// Append appends the encoded results to b.
func (r *AccessRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Attr.Append(b.XDR)
	if r.Status == OK {
		b.XDR = xdr.AppendUint32(b.XDR, r.Access)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *AccessRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.Attr.Decode(d)
	r.Access = 0
	if r.Status == OK {
		r.Access = d.Uint32()
	}
	return d.Err()
}
