package nfs3

import (
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// FSSTAT, FSINFO and PATHCONF take FHArgs.

// FsstatRes is FSSTAT3res (RFC 1813 Section 3.3.18).
type FsstatRes struct {
	Status                 Stat
	Attr                   PostOpAttr
	TBytes, FBytes, ABytes uint64 // if OK, and the rest
	TFiles, FFiles, AFiles uint64
	Invarsec               uint32
}

// Append appends the encoded results to b.
func (r *FsstatRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Attr.Append(b.XDR)
	if r.Status == OK {
		for _, v := range [...]uint64{r.TBytes, r.FBytes, r.ABytes, r.TFiles, r.FFiles, r.AFiles} {
			b.XDR = xdr.AppendUint64(b.XDR, v)
		}
		b.XDR = xdr.AppendUint32(b.XDR, r.Invarsec)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *FsstatRes) Decode(d *rpc.BodyDecoder) error {
	st := Stat(d.Uint32())
	*r = FsstatRes{Status: st}
	r.Attr.Decode(d)
	if st == OK {
		r.TBytes, r.FBytes, r.ABytes = d.Uint64(), d.Uint64(), d.Uint64()
		r.TFiles, r.FFiles, r.AFiles = d.Uint64(), d.Uint64(), d.Uint64()
		r.Invarsec = d.Uint32()
	}
	return d.Err()
}

// The FSINFO properties bits (RFC 1813 Section 3.3.19).
const (
	FSFLink        = 0x01
	FSFSymlink     = 0x02
	FSFHomogeneous = 0x08
	FSFCanSetTime  = 0x10
)

// FsinfoRes is FSINFO3res (RFC 1813 Section 3.3.19).
type FsinfoRes struct {
	Status                Stat
	Attr                  PostOpAttr
	RTMax, RTPref, RTMult uint32 // if OK, and the rest
	WTMax, WTPref, WTMult uint32
	DTPref                uint32
	MaxFileSize           uint64
	TimeDelta             Time
	Properties            uint32
}

// Append appends the encoded results to b.
func (r *FsinfoRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Attr.Append(b.XDR)
	if r.Status == OK {
		for _, v := range [...]uint32{r.RTMax, r.RTPref, r.RTMult, r.WTMax, r.WTPref, r.WTMult, r.DTPref} {
			b.XDR = xdr.AppendUint32(b.XDR, v)
		}
		b.XDR = xdr.AppendUint64(b.XDR, r.MaxFileSize)
		b.XDR = r.TimeDelta.append(b.XDR)
		b.XDR = xdr.AppendUint32(b.XDR, r.Properties)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *FsinfoRes) Decode(d *rpc.BodyDecoder) error {
	st := Stat(d.Uint32())
	*r = FsinfoRes{Status: st}
	r.Attr.Decode(d)
	if st == OK {
		r.RTMax, r.RTPref, r.RTMult = d.Uint32(), d.Uint32(), d.Uint32()
		r.WTMax, r.WTPref, r.WTMult = d.Uint32(), d.Uint32(), d.Uint32()
		r.DTPref = d.Uint32()
		r.MaxFileSize = d.Uint64()
		r.TimeDelta.decode(d)
		r.Properties = d.Uint32()
	}
	return d.Err()
}

// PathconfRes is PATHCONF3res (RFC 1813 Section 3.3.20).
type PathconfRes struct {
	Status          Stat
	Attr            PostOpAttr
	LinkMax         uint32 // if OK, and the rest
	NameMax         uint32
	NoTrunc         bool
	ChownRestricted bool
	CaseInsensitive bool
	CasePreserving  bool
}

// Append appends the encoded results to b.
func (r *PathconfRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Attr.Append(b.XDR)
	if r.Status == OK {
		b.XDR = xdr.AppendUint32(b.XDR, r.LinkMax)
		b.XDR = xdr.AppendUint32(b.XDR, r.NameMax)
		for _, v := range [...]bool{r.NoTrunc, r.ChownRestricted, r.CaseInsensitive, r.CasePreserving} {
			b.XDR = xdr.AppendBool(b.XDR, v)
		}
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *PathconfRes) Decode(d *rpc.BodyDecoder) error {
	st := Stat(d.Uint32())
	*r = PathconfRes{Status: st}
	r.Attr.Decode(d)
	if st == OK {
		r.LinkMax, r.NameMax = d.Uint32(), d.Uint32()
		r.NoTrunc, r.ChownRestricted = d.Bool(), d.Bool()
		r.CaseInsensitive, r.CasePreserving = d.Bool(), d.Bool()
	}
	return d.Err()
}
