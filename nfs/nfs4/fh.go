package nfs4

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// This file has the operations on the current and saved file handles
// (RFC 8881 Section 16.2.3), on names in a directory, and on attributes.
// The operations without arguments have an empty Args type, and those
// whose results are their status alone a Res type with just Status.

// PutRootFHArgs is the empty arguments of PUTROOTFH (RFC 8881 Section
// 18.21).
type PutRootFHArgs struct{}

func (*PutRootFHArgs) Op() Op                          { return OpPutRootFH }
func (*PutRootFHArgs) Append(*rpc.Body)                {}
func (*PutRootFHArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// PutRootFHRes is PUTROOTFH4res (RFC 8881 Section 18.21).
type PutRootFHRes struct{ Status Stat }

func (*PutRootFHRes) Op() Op                            { return OpPutRootFH }
func (r *PutRootFHRes) OpStatus() Stat                  { return r.Status }
func (r *PutRootFHRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *PutRootFHRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// PutFHArgs is PUTFH4args (RFC 8881 Section 18.19). A decoded FH aliases
// the decoder's memory.
type PutFHArgs struct{ FH FileHandle }

func (*PutFHArgs) Op() Op { return OpPutFH }

// Append appends the encoded arguments to b.
func (a *PutFHArgs) Append(b *rpc.Body) { b.XDR = appendFH(b.XDR, a.FH) }

// Decode decodes the arguments and returns d's sticky error.
func (a *PutFHArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	return d.Err()
}

// PutFHRes is PUTFH4res (RFC 8881 Section 18.19).
type PutFHRes struct{ Status Stat }

func (*PutFHRes) Op() Op                            { return OpPutFH }
func (r *PutFHRes) OpStatus() Stat                  { return r.Status }
func (r *PutFHRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *PutFHRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// GetFHArgs is the empty arguments of GETFH (RFC 8881 Section 18.8).
type GetFHArgs struct{}

func (*GetFHArgs) Op() Op                          { return OpGetFH }
func (*GetFHArgs) Append(*rpc.Body)                {}
func (*GetFHArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// GetFHRes is GETFH4res (RFC 8881 Section 18.8). A decoded FH aliases the
// decoder's memory.
type GetFHRes struct {
	Status Stat
	FH     FileHandle // if OK
}

func (*GetFHRes) Op() Op           { return OpGetFH }
func (r *GetFHRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *GetFHRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = appendFH(b.XDR, r.FH)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *GetFHRes) Decode(d *rpc.BodyDecoder) error {
	*r = GetFHRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.FH = decodeFH(d)
	}
	return d.Err()
}

// SaveFHArgs is the empty arguments of SAVEFH (RFC 8881 Section 18.28).
type SaveFHArgs struct{}

func (*SaveFHArgs) Op() Op                          { return OpSaveFH }
func (*SaveFHArgs) Append(*rpc.Body)                {}
func (*SaveFHArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// SaveFHRes is SAVEFH4res (RFC 8881 Section 18.28).
type SaveFHRes struct{ Status Stat }

func (*SaveFHRes) Op() Op                            { return OpSaveFH }
func (r *SaveFHRes) OpStatus() Stat                  { return r.Status }
func (r *SaveFHRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *SaveFHRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// RestoreFHArgs is the empty arguments of RESTOREFH (RFC 8881 Section
// 18.27).
type RestoreFHArgs struct{}

func (*RestoreFHArgs) Op() Op                          { return OpRestoreFH }
func (*RestoreFHArgs) Append(*rpc.Body)                {}
func (*RestoreFHArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// RestoreFHRes is RESTOREFH4res (RFC 8881 Section 18.27).
type RestoreFHRes struct{ Status Stat }

func (*RestoreFHRes) Op() Op                            { return OpRestoreFH }
func (r *RestoreFHRes) OpStatus() Stat                  { return r.Status }
func (r *RestoreFHRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *RestoreFHRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// LookupArgs is LOOKUP4args (RFC 8881 Section 18.13): a name in the
// current directory, which becomes the current file handle.
type LookupArgs struct{ Name string }

func (*LookupArgs) Op() Op { return OpLookup }

// Append appends the encoded arguments to b.
func (a *LookupArgs) Append(b *rpc.Body) { b.XDR = appendString(b.XDR, a.Name) }

// Decode decodes the arguments and returns d's sticky error.
func (a *LookupArgs) Decode(d *rpc.BodyDecoder) error {
	a.Name = d.Str(MaxName)
	return d.Err()
}

// LookupRes is LOOKUP4res (RFC 8881 Section 18.13).
type LookupRes struct{ Status Stat }

func (*LookupRes) Op() Op                            { return OpLookup }
func (r *LookupRes) OpStatus() Stat                  { return r.Status }
func (r *LookupRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *LookupRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// LookupPArgs is the empty arguments of LOOKUPP (RFC 8881 Section 18.14).
type LookupPArgs struct{}

func (*LookupPArgs) Op() Op                          { return OpLookupP }
func (*LookupPArgs) Append(*rpc.Body)                {}
func (*LookupPArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// LookupPRes is LOOKUPP4res (RFC 8881 Section 18.14).
type LookupPRes struct{ Status Stat }

func (*LookupPRes) Op() Op                            { return OpLookupP }
func (r *LookupPRes) OpStatus() Stat                  { return r.Status }
func (r *LookupPRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *LookupPRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// GetattrArgs is GETATTR4args (RFC 8881 Section 18.7): the attributes
// wanted.
type GetattrArgs struct{ AttrRequest Bitmap }

func (*GetattrArgs) Op() Op { return OpGetattr }

// Append appends the encoded arguments to b.
func (a *GetattrArgs) Append(b *rpc.Body) { b.XDR = a.AttrRequest.append(b.XDR) }

// Decode decodes the arguments and returns d's sticky error.
func (a *GetattrArgs) Decode(d *rpc.BodyDecoder) error {
	a.AttrRequest = decodeBitmap(d, a.AttrRequest)
	return d.Err()
}

// GetattrRes is GETATTR4res (RFC 8881 Section 18.7).
type GetattrRes struct {
	Status Stat
	Attr   Attr // if OK
}

func (*GetattrRes) Op() Op           { return OpGetattr }
func (r *GetattrRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *GetattrRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = r.Attr.Append(b.XDR)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *GetattrRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	if r.Status == OK {
		return r.Attr.Decode(d)
	}
	r.Attr = Attr{}
	return d.Err()
}

// The access bits of ACCESS (RFC 8881 Section 18.1).
const (
	Access4Read    = 0x00000001 // ACCESS4_READ
	Access4Lookup  = 0x00000002 // ACCESS4_LOOKUP
	Access4Modify  = 0x00000004 // ACCESS4_MODIFY
	Access4Extend  = 0x00000008 // ACCESS4_EXTEND
	Access4Delete  = 0x00000010 // ACCESS4_DELETE
	Access4Execute = 0x00000020 // ACCESS4_EXECUTE
)

// AccessArgs is ACCESS4args (RFC 8881 Section 18.1).
type AccessArgs struct{ Access uint32 }

func (*AccessArgs) Op() Op { return OpAccess }

// Append appends the encoded arguments to b.
func (a *AccessArgs) Append(b *rpc.Body) { b.XDR = xdr.AppendUint32(b.XDR, a.Access) }

// Decode decodes the arguments and returns d's sticky error.
func (a *AccessArgs) Decode(d *rpc.BodyDecoder) error {
	a.Access = d.Uint32()
	return d.Err()
}

// AccessRes is ACCESS4res (RFC 8881 Section 18.1).
type AccessRes struct {
	Status    Stat
	Supported uint32 // if OK, and Access
	Access    uint32
}

func (*AccessRes) Op() Op           { return OpAccess }
func (r *AccessRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *AccessRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = xdr.AppendUint32(xdr.AppendUint32(b.XDR, r.Supported), r.Access)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *AccessRes) Decode(d *rpc.BodyDecoder) error {
	*r = AccessRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.Supported = d.Uint32()
		r.Access = d.Uint32()
	}
	return d.Err()
}

// SetattrArgs is SETATTR4args (RFC 8881 Section 18.30). StateID is the
// open or delegation stateid when Attr sets the size, and may be the
// anonymous stateid otherwise.
type SetattrArgs struct {
	StateID StateID
	Attr    SetAttr
}

func (*SetattrArgs) Op() Op { return OpSetattr }

// Append appends the encoded arguments to b.
func (a *SetattrArgs) Append(b *rpc.Body) {
	b.XDR = a.StateID.append(b.XDR)
	b.XDR = a.Attr.Append(b.XDR)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *SetattrArgs) Decode(d *rpc.BodyDecoder) error {
	a.StateID.decode(d)
	return a.Attr.Decode(d)
}

// SetattrRes is SETATTR4res (RFC 8881 Section 18.30): a struct, not a
// union, so AttrsSet is there whatever the status.
type SetattrRes struct {
	Status   Stat
	AttrsSet Bitmap
}

func (*SetattrRes) Op() Op           { return OpSetattr }
func (r *SetattrRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *SetattrRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	b.XDR = r.AttrsSet.append(b.XDR)
}

// Decode decodes the results and returns d's sticky error.
func (r *SetattrRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.AttrsSet = decodeBitmap(d, r.AttrsSet)
	return d.Err()
}

// SecinfoStyle is secinfo_style4 (RFC 8881 Section 18.45): whether
// SECINFO_NO_NAME asks about the current file handle or its parent.
type SecinfoStyle uint32

// The members of secinfo_style4.
const (
	SecinfoStyleCurrentFH SecinfoStyle = 0 // SECINFO_STYLE4_CURRENT_FH
	SecinfoStyleParent    SecinfoStyle = 1 // SECINFO_STYLE4_PARENT
)

// String returns the member's name in RFC 8881.
func (s SecinfoStyle) String() string {
	if s <= SecinfoStyleParent {
		return [...]string{"SECINFO_STYLE4_CURRENT_FH", "SECINFO_STYLE4_PARENT"}[s]
	}
	return "secinfo_style4(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// SecinfoNoNameArgs is SECINFO_NO_NAME4args (RFC 8881 Section 18.45).
type SecinfoNoNameArgs struct{ Style SecinfoStyle }

func (*SecinfoNoNameArgs) Op() Op { return OpSecinfoNoName }

// Append appends the encoded arguments to b.
func (a *SecinfoNoNameArgs) Append(b *rpc.Body) { b.XDR = xdr.AppendUint32(b.XDR, uint32(a.Style)) }

// Decode decodes the arguments and returns d's sticky error.
func (a *SecinfoNoNameArgs) Decode(d *rpc.BodyDecoder) error {
	a.Style = SecinfoStyle(decodeEnum(d, uint32(SecinfoStyleParent), "secinfo_style4"))
	return d.Err()
}

// GSSService is rpc_gss_svc_t (RFC 2203 Section 5.3.1, as RFC 8881
// Section 18.29 uses it).
type GSSService uint32

// The members of rpc_gss_svc_t.
const (
	GSSSvcNone      GSSService = 1 // RPC_GSS_SVC_NONE
	GSSSvcIntegrity GSSService = 2 // RPC_GSS_SVC_INTEGRITY
	GSSSvcPrivacy   GSSService = 3 // RPC_GSS_SVC_PRIVACY
)

// String returns the member's name in RFC 2203.
func (s GSSService) String() string {
	if s >= GSSSvcNone && s <= GSSSvcPrivacy {
		return [...]string{"RPC_GSS_SVC_NONE", "RPC_GSS_SVC_INTEGRITY", "RPC_GSS_SVC_PRIVACY"}[s-1]
	}
	return "rpc_gss_svc_t(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// SecInfo is secinfo4 (RFC 8881 Section 18.29): a security flavor, with
// the mechanism OID (at most MaxOID bytes, aliasing the decoder's memory),
// QOP and service for RPCSEC_GSS.
type SecInfo struct {
	Flavor  rpc.AuthFlavor
	OID     []byte // with rpc.RPCSECGSS, and the two below
	QOP     uint32
	Service GSSService
}

// SecinfoNoNameRes is SECINFO_NO_NAME4res, the same as SECINFO4res (RFC
// 8881 Sections 18.45 and 18.29): the flavors in the server's order of
// preference, at most MaxSecParms.
type SecinfoNoNameRes struct {
	Status  Stat
	Flavors []SecInfo // if OK
}

func (*SecinfoNoNameRes) Op() Op           { return OpSecinfoNoName }
func (r *SecinfoNoNameRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *SecinfoNoNameRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status != OK {
		return
	}
	b.XDR = xdr.AppendUint32(b.XDR, uint32(len(r.Flavors)))
	for _, s := range r.Flavors {
		b.XDR = xdr.AppendUint32(b.XDR, uint32(s.Flavor))
		if s.Flavor == rpc.RPCSECGSS {
			b.XDR = xdr.AppendOpaque(b.XDR, s.OID)
			b.XDR = xdr.AppendUint32(b.XDR, s.QOP)
			b.XDR = xdr.AppendUint32(b.XDR, uint32(s.Service))
		}
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *SecinfoNoNameRes) Decode(d *rpc.BodyDecoder) error {
	*r = SecinfoNoNameRes{Status: Stat(d.Uint32())}
	if r.Status != OK {
		return d.Err()
	}
	n := d.Count(MaxSecParms, 4)
	if n > 0 {
		r.Flavors = make([]SecInfo, n)
	}
	for i := range r.Flavors {
		s := &r.Flavors[i]
		s.Flavor = rpc.AuthFlavor(d.Uint32())
		if s.Flavor == rpc.RPCSECGSS {
			s.OID = opaque(d, MaxOID)
			s.QOP = d.Uint32()
			s.Service = GSSService(d.Uint32())
			if d.Err() == nil && (s.Service < GSSSvcNone || s.Service > GSSSvcPrivacy) {
				d.Fail(errEnum("rpc_gss_svc_t"))
			}
		}
	}
	return d.Err()
}
