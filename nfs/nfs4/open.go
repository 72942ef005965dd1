package nfs4

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The share_access bits of OPEN (RFC 8881 Section 18.16.3): the access
// wanted, and NFSv4.1's delegation wants (ShareAccessWant*, in the
// ShareAccessWantDelegMask byte, and the two flags above it).
const (
	ShareAccessRead                          = 0x00000001 // OPEN4_SHARE_ACCESS_READ
	ShareAccessWrite                         = 0x00000002 // OPEN4_SHARE_ACCESS_WRITE
	ShareAccessBoth                          = 0x00000003 // OPEN4_SHARE_ACCESS_BOTH
	ShareAccessWantDelegMask                 = 0x0000ff00 // OPEN4_SHARE_ACCESS_WANT_DELEG_MASK
	ShareAccessWantNoPreference              = 0x00000000 // OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE
	ShareAccessWantReadDeleg                 = 0x00000100 // OPEN4_SHARE_ACCESS_WANT_READ_DELEG
	ShareAccessWantWriteDeleg                = 0x00000200 // OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG
	ShareAccessWantAnyDeleg                  = 0x00000300 // OPEN4_SHARE_ACCESS_WANT_ANY_DELEG
	ShareAccessWantNoDeleg                   = 0x00000400 // OPEN4_SHARE_ACCESS_WANT_NO_DELEG
	ShareAccessWantCancel                    = 0x00000500 // OPEN4_SHARE_ACCESS_WANT_CANCEL
	ShareAccessWantSignalDelegWhenResrcAvail = 0x00010000 // OPEN4_SHARE_ACCESS_WANT_SIGNAL_DELEG_WHEN_RESRC_AVAIL
	ShareAccessWantPushDelegWhenUncontended  = 0x00020000 // OPEN4_SHARE_ACCESS_WANT_PUSH_DELEG_WHEN_UNCONTENDED

	ShareDenyNone  = 0x00000000 // OPEN4_SHARE_DENY_NONE
	ShareDenyRead  = 0x00000001 // OPEN4_SHARE_DENY_READ
	ShareDenyWrite = 0x00000002 // OPEN4_SHARE_DENY_WRITE
	ShareDenyBoth  = 0x00000003 // OPEN4_SHARE_DENY_BOTH
)

// The rflags bits of OPEN4resok (RFC 8881 Section 18.16.3).
const (
	OpenResultConfirm          = 0x00000002 // OPEN4_RESULT_CONFIRM (NFSv4.0 only)
	OpenResultLocktypePosix    = 0x00000004 // OPEN4_RESULT_LOCKTYPE_POSIX
	OpenResultPreserveUnlinked = 0x00000008 // OPEN4_RESULT_PRESERVE_UNLINKED
	OpenResultMayNotifyLock    = 0x00000020 // OPEN4_RESULT_MAY_NOTIFY_LOCK
)

// CreateMode is createmode4 (RFC 8881 Section 18.16): how OPEN creates a
// file.
type CreateMode uint32

// The members of createmode4. NFSv4.1 clients use Exclusive41 rather
// than Exclusive (deprecated), and Guarded on a persistent session.
const (
	Unchecked   CreateMode = 0 // UNCHECKED4
	Guarded     CreateMode = 1 // GUARDED4
	Exclusive   CreateMode = 2 // EXCLUSIVE4
	Exclusive41 CreateMode = 3 // EXCLUSIVE4_1
)

// String returns the member's name in RFC 8881.
func (m CreateMode) String() string {
	if m <= Exclusive41 {
		return [...]string{"UNCHECKED4", "GUARDED4", "EXCLUSIVE4", "EXCLUSIVE4_1"}[m]
	}
	return "createmode4(" + strconv.FormatUint(uint64(m), 10) + ")"
}

// ClaimType is open_claim_type4 (RFC 8881 Section 18.16): what OPEN
// claims the file by.
type ClaimType uint32

// The members of open_claim_type4.
const (
	ClaimNull         ClaimType = 0 // CLAIM_NULL
	ClaimPrevious     ClaimType = 1 // CLAIM_PREVIOUS
	ClaimDelegateCur  ClaimType = 2 // CLAIM_DELEGATE_CUR
	ClaimDelegatePrev ClaimType = 3 // CLAIM_DELEGATE_PREV
	ClaimFH           ClaimType = 4 // CLAIM_FH
	ClaimDelegCurFH   ClaimType = 5 // CLAIM_DELEG_CUR_FH
	ClaimDelegPrevFH  ClaimType = 6 // CLAIM_DELEG_PREV_FH
)

// String returns the member's name in RFC 8881.
func (c ClaimType) String() string {
	if c <= ClaimDelegPrevFH {
		return [...]string{"CLAIM_NULL", "CLAIM_PREVIOUS", "CLAIM_DELEGATE_CUR", "CLAIM_DELEGATE_PREV",
			"CLAIM_FH", "CLAIM_DELEG_CUR_FH", "CLAIM_DELEG_PREV_FH"}[c]
	}
	return "open_claim_type4(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// DelegType is open_delegation_type4 (RFC 8881 Section 18.16).
type DelegType uint32

// The members of open_delegation_type4.
const (
	DelegNone    DelegType = 0 // OPEN_DELEGATE_NONE
	DelegRead    DelegType = 1 // OPEN_DELEGATE_READ
	DelegWrite   DelegType = 2 // OPEN_DELEGATE_WRITE
	DelegNoneExt DelegType = 3 // OPEN_DELEGATE_NONE_EXT
)

// String returns the member's name in RFC 8881.
func (t DelegType) String() string {
	if t <= DelegNoneExt {
		return [...]string{"OPEN_DELEGATE_NONE", "OPEN_DELEGATE_READ", "OPEN_DELEGATE_WRITE",
			"OPEN_DELEGATE_NONE_EXT"}[t]
	}
	return "open_delegation_type4(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// WhyNoDeleg is why_no_delegation4 (RFC 8881 Section 18.16): why a server
// that was asked for a delegation granted none.
type WhyNoDeleg uint32

// The members of why_no_delegation4.
const (
	WNDNotWanted              WhyNoDeleg = 0 // WND4_NOT_WANTED
	WNDContention             WhyNoDeleg = 1 // WND4_CONTENTION
	WNDResource               WhyNoDeleg = 2 // WND4_RESOURCE
	WNDNotSuppFtype           WhyNoDeleg = 3 // WND4_NOT_SUPP_FTYPE
	WNDWriteDelegNotSuppFtype WhyNoDeleg = 4 // WND4_WRITE_DELEG_NOT_SUPP_FTYPE
	WNDNotSuppUpgrade         WhyNoDeleg = 5 // WND4_NOT_SUPP_UPGRADE
	WNDNotSuppDowngrade       WhyNoDeleg = 6 // WND4_NOT_SUPP_DOWNGRADE
	WNDCancelled              WhyNoDeleg = 7 // WND4_CANCELLED
	WNDIsDir                  WhyNoDeleg = 8 // WND4_IS_DIR
)

// String returns the member's name in RFC 8881.
func (w WhyNoDeleg) String() string {
	if w <= WNDIsDir {
		return [...]string{"WND4_NOT_WANTED", "WND4_CONTENTION", "WND4_RESOURCE", "WND4_NOT_SUPP_FTYPE",
			"WND4_WRITE_DELEG_NOT_SUPP_FTYPE", "WND4_NOT_SUPP_UPGRADE", "WND4_NOT_SUPP_DOWNGRADE",
			"WND4_CANCELLED", "WND4_IS_DIR"}[w]
	}
	return "why_no_delegation4(" + strconv.FormatUint(uint64(w), 10) + ")"
}

// StateOwner is state_owner4 (RFC 8881 Section 3.3): an open or lock
// owner, Owner at most OpaqueLimit bytes (aliasing the decoder's memory
// when decoded).
type StateOwner struct {
	ClientID uint64
	Owner    []byte
}

// OpenArgs is OPEN4args (RFC 8881 Section 18.16).
//
// openflag4 is Create: false for OPEN4_NOCREATE; true for OPEN4_CREATE
// with createhow4 in CreateMode, CreateAttr (UNCHECKED4, GUARDED4,
// EXCLUSIVE4_1) and CreateVerf (EXCLUSIVE4, EXCLUSIVE4_1).
//
// open_claim4 is Claim with Name (CLAIM_NULL, CLAIM_DELEGATE_CUR,
// CLAIM_DELEGATE_PREV: the file in the current directory), DelegType
// (CLAIM_PREVIOUS) or DelegStateID (CLAIM_DELEGATE_CUR,
// CLAIM_DELEG_CUR_FH); CLAIM_FH and CLAIM_DELEG_PREV_FH open the current
// file handle and carry nothing.
type OpenArgs struct {
	Seqid       uint32 // ignored by NFSv4.1 servers; 0
	ShareAccess uint32
	ShareDeny   uint32
	Owner       StateOwner

	Create     bool
	CreateMode CreateMode
	CreateAttr SetAttr
	CreateVerf Verifier

	Claim        ClaimType
	Name         string
	DelegType    DelegType
	DelegStateID StateID
}

func (*OpenArgs) Op() Op { return OpOpen }

// Append appends the encoded arguments to b.
func (a *OpenArgs) Append(b *rpc.Body) {
	x := xdr.AppendUint32(b.XDR, a.Seqid)
	x = xdr.AppendUint32(x, a.ShareAccess)
	x = xdr.AppendUint32(x, a.ShareDeny)
	x = xdr.AppendUint64(x, a.Owner.ClientID)
	x = xdr.AppendOpaque(x, a.Owner.Owner)
	x = xdr.AppendBool(x, a.Create)
	if a.Create {
		x = xdr.AppendUint32(x, uint32(a.CreateMode))
		switch a.CreateMode {
		case Unchecked, Guarded:
			x = a.CreateAttr.Append(x)
		case Exclusive:
			x = append(x, a.CreateVerf[:]...)
		case Exclusive41:
			x = append(x, a.CreateVerf[:]...)
			x = a.CreateAttr.Append(x)
		}
	}
	x = xdr.AppendUint32(x, uint32(a.Claim))
	switch a.Claim {
	case ClaimNull, ClaimDelegatePrev:
		x = appendString(x, a.Name)
	case ClaimPrevious:
		x = xdr.AppendUint32(x, uint32(a.DelegType))
	case ClaimDelegateCur:
		x = appendString(a.DelegStateID.append(x), a.Name)
	case ClaimDelegCurFH:
		x = a.DelegStateID.append(x)
	}
	b.XDR = x
}

// Decode decodes the arguments and returns d's sticky error. A createmode4,
// open_claim_type4 or open_delegation_type4 outside its members fails.
func (a *OpenArgs) Decode(d *rpc.BodyDecoder) error {
	*a = OpenArgs{Seqid: d.Uint32(), ShareAccess: d.Uint32(), ShareDeny: d.Uint32()}
	a.Owner.ClientID = d.Uint64()
	a.Owner.Owner = opaque(d, OpaqueLimit)
	if a.Create = d.Bool(); a.Create {
		a.CreateMode = CreateMode(decodeEnum(d, uint32(Exclusive41), "createmode4"))
		switch a.CreateMode {
		case Unchecked, Guarded:
			a.CreateAttr.Decode(d)
		case Exclusive:
			a.CreateVerf.decode(d)
		case Exclusive41:
			a.CreateVerf.decode(d)
			a.CreateAttr.Decode(d)
		}
	}
	a.Claim = ClaimType(decodeEnum(d, uint32(ClaimDelegPrevFH), "open_claim_type4"))
	if d.Err() != nil {
		return d.Err()
	}
	switch a.Claim {
	case ClaimNull, ClaimDelegatePrev:
		a.Name = d.Str(MaxName)
	case ClaimPrevious:
		a.DelegType = DelegType(decodeEnum(d, uint32(DelegNoneExt), "open_delegation_type4"))
	case ClaimDelegateCur:
		a.DelegStateID.decode(d)
		a.Name = d.Str(MaxName)
	case ClaimDelegCurFH:
		a.DelegStateID.decode(d)
	}
	return d.Err()
}

// ACE is nfsace4 (RFC 8881 Section 6.2.1): an access control entry. Who
// is at most OpaqueLimit bytes.
type ACE struct {
	Type, Flag, AccessMask uint32
	Who                    string
}

func (e *ACE) append(b []byte) []byte {
	b = xdr.AppendUint32(b, e.Type)
	b = xdr.AppendUint32(b, e.Flag)
	b = xdr.AppendUint32(b, e.AccessMask)
	return appendString(b, e.Who)
}

func (e *ACE) decode(d *rpc.BodyDecoder) {
	e.Type = d.Uint32()
	e.Flag = d.Uint32()
	e.AccessMask = d.Uint32()
	e.Who = d.Str(OpaqueLimit)
}

// SpaceLimit is nfs_space_limit4 (RFC 8881 Section 18.16): how much a
// client holding a write delegation may write before flushing. LimitBy
// is limit_by4: 1 (NFS_LIMIT_SIZE) for FileSize, 2 (NFS_LIMIT_BLOCKS) for
// NumBlocks of BytesPerBlock.
type SpaceLimit struct {
	LimitBy                  uint32
	FileSize                 uint64
	NumBlocks, BytesPerBlock uint32
}

// The members of limit_by4.
const (
	LimitSize   = 1 // NFS_LIMIT_SIZE
	LimitBlocks = 2 // NFS_LIMIT_BLOCKS
)

// OpenDelegation is open_delegation4 (RFC 8881 Section 18.16): the
// delegation OPEN granted, if any. Type selects the arm: none; read
// (StateID, Recall, Permissions); write (those and SpaceLimit); or
// NFSv4.1's none_ext (WhyNone, with WillPushOrSignal for
// WND4_CONTENTION, ond_server_will_push_deleg, and WND4_RESOURCE,
// ond_server_will_signal_avail).
type OpenDelegation struct {
	Type             DelegType
	StateID          StateID
	Recall           bool
	SpaceLimit       SpaceLimit
	Permissions      ACE
	WhyNone          WhyNoDeleg
	WillPushOrSignal bool
}

func (o *OpenDelegation) append(b []byte) []byte {
	b = xdr.AppendUint32(b, uint32(o.Type))
	switch o.Type {
	case DelegRead, DelegWrite:
		b = o.StateID.append(b)
		b = xdr.AppendBool(b, o.Recall)
		if o.Type == DelegWrite {
			b = xdr.AppendUint32(b, o.SpaceLimit.LimitBy)
			if o.SpaceLimit.LimitBy == LimitSize {
				b = xdr.AppendUint64(b, o.SpaceLimit.FileSize)
			} else {
				b = xdr.AppendUint32(b, o.SpaceLimit.NumBlocks)
				b = xdr.AppendUint32(b, o.SpaceLimit.BytesPerBlock)
			}
		}
		b = o.Permissions.append(b)
	case DelegNoneExt:
		b = xdr.AppendUint32(b, uint32(o.WhyNone))
		if o.WhyNone == WNDContention || o.WhyNone == WNDResource {
			b = xdr.AppendBool(b, o.WillPushOrSignal)
		}
	}
	return b
}

func (o *OpenDelegation) decode(d *rpc.BodyDecoder) {
	*o = OpenDelegation{Type: DelegType(decodeEnum(d, uint32(DelegNoneExt), "open_delegation_type4"))}
	switch o.Type {
	case DelegRead, DelegWrite:
		o.StateID.decode(d)
		o.Recall = d.Bool()
		if o.Type == DelegWrite {
			switch o.SpaceLimit.LimitBy = d.Uint32(); {
			case d.Err() != nil:
			case o.SpaceLimit.LimitBy == LimitSize:
				o.SpaceLimit.FileSize = d.Uint64()
			case o.SpaceLimit.LimitBy == LimitBlocks:
				o.SpaceLimit.NumBlocks = d.Uint32()
				o.SpaceLimit.BytesPerBlock = d.Uint32()
			default:
				d.Fail(errEnum("limit_by4"))
			}
		}
		o.Permissions.decode(d)
	case DelegNoneExt:
		o.WhyNone = WhyNoDeleg(decodeEnum(d, uint32(WNDIsDir), "why_no_delegation4"))
		if o.WhyNone == WNDContention || o.WhyNone == WNDResource {
			o.WillPushOrSignal = d.Bool()
		}
	}
}

// OpenRes is OPEN4res (RFC 8881 Section 18.16).
type OpenRes struct {
	Status     Stat
	StateID    StateID // if OK, and the rest
	CInfo      ChangeInfo
	RFlags     uint32
	AttrSet    Bitmap
	Delegation OpenDelegation
}

func (*OpenRes) Op() Op           { return OpOpen }
func (r *OpenRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *OpenRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = r.StateID.append(b.XDR)
		b.XDR = r.CInfo.append(b.XDR)
		b.XDR = xdr.AppendUint32(b.XDR, r.RFlags)
		b.XDR = r.AttrSet.append(b.XDR)
		b.XDR = r.Delegation.append(b.XDR)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *OpenRes) Decode(d *rpc.BodyDecoder) error {
	*r = OpenRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.StateID.decode(d)
		r.CInfo.decode(d)
		r.RFlags = d.Uint32()
		r.AttrSet = decodeBitmap(d, nil)
		r.Delegation.decode(d)
	}
	return d.Err()
}

// CloseArgs is CLOSE4args (RFC 8881 Section 18.2).
type CloseArgs struct {
	Seqid   uint32 // ignored by NFSv4.1 servers; 0
	StateID StateID
}

func (*CloseArgs) Op() Op { return OpClose }

// Append appends the encoded arguments to b.
func (a *CloseArgs) Append(b *rpc.Body) { b.XDR = a.StateID.append(xdr.AppendUint32(b.XDR, a.Seqid)) }

// Decode decodes the arguments and returns d's sticky error.
func (a *CloseArgs) Decode(d *rpc.BodyDecoder) error {
	a.Seqid = d.Uint32()
	a.StateID.decode(d)
	return d.Err()
}

// CloseRes is CLOSE4res (RFC 8881 Section 18.2).
type CloseRes struct {
	Status  Stat
	StateID StateID // if OK
}

func (*CloseRes) Op() Op           { return OpClose }
func (r *CloseRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *CloseRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = r.StateID.append(b.XDR)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *CloseRes) Decode(d *rpc.BodyDecoder) error {
	*r = CloseRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.StateID.decode(d)
	}
	return d.Err()
}

// DelegReturnArgs is DELEGRETURN4args (RFC 8881 Section 18.6).
type DelegReturnArgs struct{ StateID StateID }

func (*DelegReturnArgs) Op() Op { return OpDelegReturn }

// Append appends the encoded arguments to b.
func (a *DelegReturnArgs) Append(b *rpc.Body) { b.XDR = a.StateID.append(b.XDR) }

// Decode decodes the arguments and returns d's sticky error.
func (a *DelegReturnArgs) Decode(d *rpc.BodyDecoder) error {
	a.StateID.decode(d)
	return d.Err()
}

// DelegReturnRes is DELEGRETURN4res (RFC 8881 Section 18.6).
type DelegReturnRes struct{ Status Stat }

func (*DelegReturnRes) Op() Op                            { return OpDelegReturn }
func (r *DelegReturnRes) OpStatus() Stat                  { return r.Status }
func (r *DelegReturnRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *DelegReturnRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// TestStateIDArgs is TEST_STATEID4args (RFC 8881 Section 18.48): at most
// MaxStateIDs stateids.
type TestStateIDArgs struct{ StateIDs []StateID }

func (*TestStateIDArgs) Op() Op { return OpTestStateID }

// Append appends the encoded arguments to b.
func (a *TestStateIDArgs) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(len(a.StateIDs)))
	for i := range a.StateIDs {
		b.XDR = a.StateIDs[i].append(b.XDR)
	}
}

// Decode decodes the arguments and returns d's sticky error.
func (a *TestStateIDArgs) Decode(d *rpc.BodyDecoder) error {
	a.StateIDs = nil
	if n := d.Count(MaxStateIDs, 16); n > 0 {
		a.StateIDs = make([]StateID, n)
		for i := range a.StateIDs {
			a.StateIDs[i].decode(d)
		}
	}
	return d.Err()
}

// TestStateIDRes is TEST_STATEID4res (RFC 8881 Section 18.48): a status
// for each stateid tested, in order.
type TestStateIDRes struct {
	Status Stat
	Codes  []Stat // if OK
}

func (*TestStateIDRes) Op() Op           { return OpTestStateID }
func (r *TestStateIDRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *TestStateIDRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = xdr.AppendUint32(b.XDR, uint32(len(r.Codes)))
		for _, c := range r.Codes {
			b.XDR = xdr.AppendUint32(b.XDR, uint32(c))
		}
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *TestStateIDRes) Decode(d *rpc.BodyDecoder) error {
	*r = TestStateIDRes{Status: Stat(d.Uint32())}
	if r.Status != OK {
		return d.Err()
	}
	if n := d.Count(MaxStateIDs, 4); n > 0 {
		r.Codes = make([]Stat, n)
		for i := range r.Codes {
			r.Codes[i] = Stat(d.Uint32())
		}
	}
	return d.Err()
}

// FreeStateIDArgs is FREE_STATEID4args (RFC 8881 Section 18.38).
type FreeStateIDArgs struct{ StateID StateID }

func (*FreeStateIDArgs) Op() Op { return OpFreeStateID }

// Append appends the encoded arguments to b.
func (a *FreeStateIDArgs) Append(b *rpc.Body) { b.XDR = a.StateID.append(b.XDR) }

// Decode decodes the arguments and returns d's sticky error.
func (a *FreeStateIDArgs) Decode(d *rpc.BodyDecoder) error {
	a.StateID.decode(d)
	return d.Err()
}

// FreeStateIDRes is FREE_STATEID4res (RFC 8881 Section 18.38).
type FreeStateIDRes struct{ Status Stat }

func (*FreeStateIDRes) Op() Op                            { return OpFreeStateID }
func (r *FreeStateIDRes) OpStatus() Stat                  { return r.Status }
func (r *FreeStateIDRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *FreeStateIDRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }
