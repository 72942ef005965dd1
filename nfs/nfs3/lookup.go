package nfs3

import (
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// DirOpArgs, the arguments of LOOKUP, REMOVE and RMDIR (LOOKUP3args,
// REMOVE3args, RMDIR3args: RFC 1813 Sections 3.3.3, 3.3.12, 3.3.13), are
// in attr.go; these methods make them an argument type.

// Append appends the encoded arguments to b.
func (a *DirOpArgs) Append(b *rpc.Body) { b.XDR = a.append(b.XDR) }

// Decode decodes the arguments and returns d's sticky error.
func (a *DirOpArgs) Decode(d *rpc.BodyDecoder) error {
	a.decode(d)
	return d.Err()
}

// LookupRes is LOOKUP3res (RFC 1813 Section 3.3.3).
type LookupRes struct {
	Status  Stat
	FH      FileHandle // if OK
	Attr    PostOpAttr // if OK
	DirAttr PostOpAttr
}

// Append appends the encoded results to b.
func (r *LookupRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	if r.Status == OK {
		b.XDR = appendFH(b.XDR, r.FH)
		b.XDR = r.Attr.Append(b.XDR)
	}
	b.XDR = r.DirAttr.Append(b.XDR)
}

// Decode decodes the results and returns d's sticky error.
func (r *LookupRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.FH, r.Attr = nil, PostOpAttr{}
	if r.Status == OK {
		r.FH = decodeFH(d)
		r.Attr.Decode(d)
	}
	return r.DirAttr.Decode(d)
}

// ReadlinkRes is READLINK3res (RFC 1813 Section 3.3.5). The path is
// DDP-eligible (RFC 8267 Section 4).
type ReadlinkRes struct {
	Status Stat
	Attr   PostOpAttr
	Path   string // if OK
}

// Append appends the encoded results to b; the path's bytes are held
// apart as a DDP-eligible item.
func (r *ReadlinkRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Attr.Append(b.XDR)
	if r.Status == OK {
		b.AppendDDPOpaque([]byte(r.Path))
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *ReadlinkRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.Attr.Decode(d)
	r.Path = ""
	if r.Status == OK {
		r.Path = string(d.DDPOpaque(MaxPath))
	}
	return d.Err()
}
