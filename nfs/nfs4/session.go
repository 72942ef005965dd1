package nfs4

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The eia_flags and eir_flags bits of EXCHANGE_ID (RFC 8881 Section
// 18.35).
const (
	ExchgIDFlagSuppMovedRefer   = 0x00000001 // EXCHGID4_FLAG_SUPP_MOVED_REFER
	ExchgIDFlagSuppMovedMigr    = 0x00000002 // EXCHGID4_FLAG_SUPP_MOVED_MIGR
	ExchgIDFlagBindPrincStateID = 0x00000100 // EXCHGID4_FLAG_BIND_PRINC_STATEID
	ExchgIDFlagUseNonPNFS       = 0x00010000 // EXCHGID4_FLAG_USE_NON_PNFS
	ExchgIDFlagUsePNFSMDS       = 0x00020000 // EXCHGID4_FLAG_USE_PNFS_MDS
	ExchgIDFlagUsePNFSDS        = 0x00040000 // EXCHGID4_FLAG_USE_PNFS_DS
	ExchgIDFlagMaskPNFS         = 0x00070000 // EXCHGID4_FLAG_MASK_PNFS
	ExchgIDFlagUpdConfirmedRecA = 0x40000000 // EXCHGID4_FLAG_UPD_CONFIRMED_REC_A
	ExchgIDFlagConfirmedR       = 0x80000000 // EXCHGID4_FLAG_CONFIRMED_R
)

// StateProtectHow is state_protect_how4 (RFC 8881 Section 18.35). This
// codec speaks SP4_NONE only: EXCHANGE_ID encodes it, and decoding any
// other fails.
type StateProtectHow uint32

// The members of state_protect_how4.
const (
	SP4None     StateProtectHow = 0 // SP4_NONE
	SP4MachCred StateProtectHow = 1 // SP4_MACH_CRED
	SP4SSV      StateProtectHow = 2 // SP4_SSV
)

// String returns the member's name in RFC 8881.
func (h StateProtectHow) String() string {
	if h <= SP4SSV {
		return [...]string{"SP4_NONE", "SP4_MACH_CRED", "SP4_SSV"}[h]
	}
	return "state_protect_how4(" + strconv.FormatUint(uint64(h), 10) + ")"
}

func decodeSP4None(d *rpc.BodyDecoder) {
	switch h := StateProtectHow(d.Uint32()); {
	case d.Err() != nil, h == SP4None:
	case h <= SP4SSV:
		d.Fail(errUnsupported("state protection " + h.String()))
	default:
		d.Fail(errEnum("state_protect_how4"))
	}
}

// ImplID is nfs_impl_id4 (RFC 8881 Section 18.35): the name and date of
// an implementation, which EXCHANGE_ID may carry.
type ImplID struct {
	Domain, Name string
	Date         Time
}

func appendImplID(b []byte, id *ImplID) []byte {
	if id == nil {
		return xdr.AppendUint32(b, 0)
	}
	b = xdr.AppendUint32(b, 1)
	b = appendString(b, id.Domain)
	b = appendString(b, id.Name)
	return id.Date.append(b)
}

// decodeImplID decodes nfs_impl_id4<1>.
func decodeImplID(d *rpc.BodyDecoder) *ImplID {
	if d.Count(1, 20) == 0 {
		return nil
	}
	id := &ImplID{Domain: d.Str(OpaqueLimit), Name: d.Str(OpaqueLimit)}
	id.Date.decode(d)
	return id
}

// ExchangeIDArgs is EXCHANGE_ID4args (RFC 8881 Section 18.35) with
// eia_state_protect SP4_NONE. OwnerID is co_ownerid, at most OpaqueLimit
// bytes; ImplID is eia_client_impl_id, nil when absent.
type ExchangeIDArgs struct {
	Verifier Verifier // co_verifier
	OwnerID  []byte
	Flags    uint32
	ImplID   *ImplID
}

func (*ExchangeIDArgs) Op() Op { return OpExchangeID }

// Append appends the encoded arguments to b.
func (a *ExchangeIDArgs) Append(b *rpc.Body) {
	b.XDR = append(b.XDR, a.Verifier[:]...)
	b.XDR = xdr.AppendOpaque(b.XDR, a.OwnerID)
	b.XDR = xdr.AppendUint32(b.XDR, a.Flags)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(SP4None))
	b.XDR = appendImplID(b.XDR, a.ImplID)
}

// Decode decodes the arguments and returns d's sticky error. OwnerID
// aliases d's memory. State protection other than SP4_NONE fails.
func (a *ExchangeIDArgs) Decode(d *rpc.BodyDecoder) error {
	a.Verifier.decode(d)
	a.OwnerID = opaque(d, OpaqueLimit)
	a.Flags = d.Uint32()
	decodeSP4None(d)
	a.ImplID = decodeImplID(d)
	return d.Err()
}

// ExchangeIDRes is EXCHANGE_ID4res (RFC 8881 Section 18.35) with
// eir_state_protect SP4_NONE. ServerMajorID (so_major_id) and ServerScope
// are at most OpaqueLimit bytes and alias the decoder's memory.
type ExchangeIDRes struct {
	Status        Stat
	ClientID      uint64 // if OK, and the rest
	SequenceID    uint32
	Flags         uint32
	ServerMinorID uint64
	ServerMajorID []byte
	ServerScope   []byte
	ImplID        *ImplID
}

func (*ExchangeIDRes) Op() Op           { return OpExchangeID }
func (r *ExchangeIDRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *ExchangeIDRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	if r.Status != OK {
		return
	}
	b.XDR = xdr.AppendUint64(b.XDR, r.ClientID)
	b.XDR = xdr.AppendUint32(b.XDR, r.SequenceID)
	b.XDR = xdr.AppendUint32(b.XDR, r.Flags)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(SP4None))
	b.XDR = xdr.AppendUint64(b.XDR, r.ServerMinorID)
	b.XDR = xdr.AppendOpaque(b.XDR, r.ServerMajorID)
	b.XDR = xdr.AppendOpaque(b.XDR, r.ServerScope)
	b.XDR = appendImplID(b.XDR, r.ImplID)
}

// Decode decodes the results and returns d's sticky error. State
// protection other than SP4_NONE fails.
func (r *ExchangeIDRes) Decode(d *rpc.BodyDecoder) error {
	*r = ExchangeIDRes{Status: Stat(d.Uint32())}
	if r.Status != OK {
		return d.Err()
	}
	r.ClientID = d.Uint64()
	r.SequenceID = d.Uint32()
	r.Flags = d.Uint32()
	decodeSP4None(d)
	r.ServerMinorID = d.Uint64()
	r.ServerMajorID = opaque(d, OpaqueLimit)
	r.ServerScope = opaque(d, OpaqueLimit)
	r.ImplID = decodeImplID(d)
	return d.Err()
}

// ChannelAttrs is channel_attrs4 (RFC 8881 Section 18.36): the limits of
// a session's fore or back channel. MaxResponseSize is what an
// RPC-over-RDMA requester sizes reply chunks by (RFC 8267 Section 5.2).
// RDMAIRD is ca_rdma_ird, present when HasRDMAIRD.
type ChannelAttrs struct {
	HeaderPadSize         uint32
	MaxRequestSize        uint32
	MaxResponseSize       uint32
	MaxResponseSizeCached uint32
	MaxOperations         uint32
	MaxRequests           uint32
	HasRDMAIRD            bool
	RDMAIRD               uint32
}

func (c *ChannelAttrs) append(b []byte) []byte {
	for _, v := range [...]uint32{c.HeaderPadSize, c.MaxRequestSize, c.MaxResponseSize,
		c.MaxResponseSizeCached, c.MaxOperations, c.MaxRequests} {
		b = xdr.AppendUint32(b, v)
	}
	if !c.HasRDMAIRD {
		return xdr.AppendUint32(b, 0)
	}
	return xdr.AppendUint32(xdr.AppendUint32(b, 1), c.RDMAIRD)
}

func (c *ChannelAttrs) decode(d *rpc.BodyDecoder) {
	*c = ChannelAttrs{HeaderPadSize: d.Uint32(), MaxRequestSize: d.Uint32(), MaxResponseSize: d.Uint32(),
		MaxResponseSizeCached: d.Uint32(), MaxOperations: d.Uint32(), MaxRequests: d.Uint32()}
	if d.Count(1, 4) == 1 {
		c.HasRDMAIRD, c.RDMAIRD = true, d.Uint32()
	}
}

// The csa_flags and csr_flags bits of CREATE_SESSION (RFC 8881 Section
// 18.36).
const (
	CreateSessionFlagPersist      = 0x00000001 // CREATE_SESSION4_FLAG_PERSIST
	CreateSessionFlagConnBackChan = 0x00000002 // CREATE_SESSION4_FLAG_CONN_BACK_CHAN
	CreateSessionFlagConnRDMA     = 0x00000004 // CREATE_SESSION4_FLAG_CONN_RDMA
)

// CallbackSec is callback_sec_parms4 (RFC 8881 Section 18.36): how the
// server authenticates its callbacks, AUTH_NONE or AUTH_SYS with Sys.
// This codec does not decode the RPCSEC_GSS arm.
type CallbackSec struct {
	Flavor rpc.AuthFlavor
	Sys    rpc.AuthSysParms // with rpc.AuthSys
}

func (c *CallbackSec) append(b []byte) []byte {
	b = xdr.AppendUint32(b, uint32(c.Flavor))
	if c.Flavor == rpc.AuthSys {
		b = c.Sys.Append(b)
	}
	return b
}

func (c *CallbackSec) decode(d *rpc.BodyDecoder) {
	*c = CallbackSec{Flavor: rpc.AuthFlavor(d.Uint32())}
	switch {
	case d.Err() != nil, c.Flavor == rpc.AuthNone:
	case c.Flavor == rpc.AuthSys:
		c.Sys.Decode(&d.Decoder)
	case c.Flavor == rpc.RPCSECGSS:
		d.Fail(errUnsupported("callback security RPCSEC_GSS"))
	default:
		d.Fail(errEnum("callback_sec_parms4 flavor"))
	}
}

func appendCallbackSecs(b []byte, secs []CallbackSec) []byte {
	b = xdr.AppendUint32(b, uint32(len(secs)))
	for i := range secs {
		b = secs[i].append(b)
	}
	return b
}

func decodeCallbackSecs(d *rpc.BodyDecoder) []CallbackSec {
	n := d.Count(MaxSecParms, 4)
	if n == 0 {
		return nil
	}
	secs := make([]CallbackSec, n)
	for i := range secs {
		secs[i].decode(d)
	}
	return secs
}

// CreateSessionArgs is CREATE_SESSION4args (RFC 8881 Section 18.36).
// CBProgram is the program number the server calls back with (CBProgram
// is customary); SecParms, at most MaxSecParms, says how.
type CreateSessionArgs struct {
	ClientID   uint64
	Sequence   uint32
	Flags      uint32
	Fore, Back ChannelAttrs
	CBProgram  uint32
	SecParms   []CallbackSec
}

func (*CreateSessionArgs) Op() Op { return OpCreateSession }

// Append appends the encoded arguments to b.
func (a *CreateSessionArgs) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint64(b.XDR, a.ClientID)
	b.XDR = xdr.AppendUint32(b.XDR, a.Sequence)
	b.XDR = xdr.AppendUint32(b.XDR, a.Flags)
	b.XDR = a.Fore.append(b.XDR)
	b.XDR = a.Back.append(b.XDR)
	b.XDR = xdr.AppendUint32(b.XDR, a.CBProgram)
	b.XDR = appendCallbackSecs(b.XDR, a.SecParms)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *CreateSessionArgs) Decode(d *rpc.BodyDecoder) error {
	a.ClientID = d.Uint64()
	a.Sequence = d.Uint32()
	a.Flags = d.Uint32()
	a.Fore.decode(d)
	a.Back.decode(d)
	a.CBProgram = d.Uint32()
	a.SecParms = decodeCallbackSecs(d)
	return d.Err()
}

// CreateSessionRes is CREATE_SESSION4res (RFC 8881 Section 18.36).
type CreateSessionRes struct {
	Status     Stat
	SessionID  SessionID // if OK, and the rest
	Sequence   uint32
	Flags      uint32
	Fore, Back ChannelAttrs
}

func (*CreateSessionRes) Op() Op           { return OpCreateSession }
func (r *CreateSessionRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *CreateSessionRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	if r.Status != OK {
		return
	}
	b.XDR = append(b.XDR, r.SessionID[:]...)
	b.XDR = xdr.AppendUint32(b.XDR, r.Sequence)
	b.XDR = xdr.AppendUint32(b.XDR, r.Flags)
	b.XDR = r.Fore.append(b.XDR)
	b.XDR = r.Back.append(b.XDR)
}

// Decode decodes the results and returns d's sticky error.
func (r *CreateSessionRes) Decode(d *rpc.BodyDecoder) error {
	*r = CreateSessionRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.SessionID.decode(d)
		r.Sequence = d.Uint32()
		r.Flags = d.Uint32()
		r.Fore.decode(d)
		r.Back.decode(d)
	}
	return d.Err()
}

// DestroySessionArgs is DESTROY_SESSION4args (RFC 8881 Section 18.37).
type DestroySessionArgs struct{ SessionID SessionID }

func (*DestroySessionArgs) Op() Op { return OpDestroySession }

// Append appends the encoded arguments to b.
func (a *DestroySessionArgs) Append(b *rpc.Body) { b.XDR = append(b.XDR, a.SessionID[:]...) }

// Decode decodes the arguments and returns d's sticky error.
func (a *DestroySessionArgs) Decode(d *rpc.BodyDecoder) error {
	a.SessionID.decode(d)
	return d.Err()
}

// DestroySessionRes is DESTROY_SESSION4res (RFC 8881 Section 18.37).
type DestroySessionRes struct{ Status Stat }

func (*DestroySessionRes) Op() Op                            { return OpDestroySession }
func (r *DestroySessionRes) OpStatus() Stat                  { return r.Status }
func (r *DestroySessionRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *DestroySessionRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// DestroyClientIDArgs is DESTROY_CLIENTID4args (RFC 8881 Section 18.50).
type DestroyClientIDArgs struct{ ClientID uint64 }

func (*DestroyClientIDArgs) Op() Op { return OpDestroyClientID }

// Append appends the encoded arguments to b.
func (a *DestroyClientIDArgs) Append(b *rpc.Body) { b.XDR = xdr.AppendUint64(b.XDR, a.ClientID) }

// Decode decodes the arguments and returns d's sticky error.
func (a *DestroyClientIDArgs) Decode(d *rpc.BodyDecoder) error {
	a.ClientID = d.Uint64()
	return d.Err()
}

// DestroyClientIDRes is DESTROY_CLIENTID4res (RFC 8881 Section 18.50).
type DestroyClientIDRes struct{ Status Stat }

func (*DestroyClientIDRes) Op() Op                            { return OpDestroyClientID }
func (r *DestroyClientIDRes) OpStatus() Stat                  { return r.Status }
func (r *DestroyClientIDRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *DestroyClientIDRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// ChannelDir is channel_dir_from_client4 or channel_dir_from_server4
// (RFC 8881 Section 18.34): which channels BIND_CONN_TO_SESSION binds a
// connection to.
type ChannelDir uint32

// The members of channel_dir_from_client4 (CDFC4_*) and
// channel_dir_from_server4 (CDFS4_*, the first three values).
const (
	CDFC4Fore       ChannelDir = 0x1 // CDFC4_FORE, CDFS4_FORE
	CDFC4Back       ChannelDir = 0x2 // CDFC4_BACK, CDFS4_BACK
	CDFC4ForeOrBoth ChannelDir = 0x3 // CDFC4_FORE_OR_BOTH, CDFS4_BOTH
	CDFC4BackOrBoth ChannelDir = 0x7 // CDFC4_BACK_OR_BOTH
)

// String returns the client's member name in RFC 8881 (CDFC4_FORE).
func (c ChannelDir) String() string {
	switch c {
	case CDFC4Fore:
		return "CDFC4_FORE"
	case CDFC4Back:
		return "CDFC4_BACK"
	case CDFC4ForeOrBoth:
		return "CDFC4_FORE_OR_BOTH"
	case CDFC4BackOrBoth:
		return "CDFC4_BACK_OR_BOTH"
	}
	return "channel_dir(" + strconv.FormatUint(uint64(c), 10) + ")"
}

func decodeChannelDir(d *rpc.BodyDecoder, server bool) ChannelDir {
	c := ChannelDir(d.Uint32())
	if d.Err() == nil && (c < CDFC4Fore || c > CDFC4ForeOrBoth) && (server || c != CDFC4BackOrBoth) {
		d.Fail(errEnum("channel_dir"))
	}
	return c
}

// BindConnToSessionArgs is BIND_CONN_TO_SESSION4args (RFC 8881 Section
// 18.34). Over RPC-over-RDMA UseRDMA (bctsa_use_conn_in_rdma_mode) stays
// false: the connection is already in RDMA mode.
type BindConnToSessionArgs struct {
	SessionID SessionID
	Dir       ChannelDir
	UseRDMA   bool
}

func (*BindConnToSessionArgs) Op() Op { return OpBindConnToSession }

// Append appends the encoded arguments to b.
func (a *BindConnToSessionArgs) Append(b *rpc.Body) {
	b.XDR = append(b.XDR, a.SessionID[:]...)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(a.Dir))
	b.XDR = xdr.AppendBool(b.XDR, a.UseRDMA)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *BindConnToSessionArgs) Decode(d *rpc.BodyDecoder) error {
	a.SessionID.decode(d)
	a.Dir = decodeChannelDir(d, false)
	a.UseRDMA = d.Bool()
	return d.Err()
}

// BindConnToSessionRes is BIND_CONN_TO_SESSION4res (RFC 8881 Section
// 18.34); Dir is a channel_dir_from_server4.
type BindConnToSessionRes struct {
	Status    Stat
	SessionID SessionID // if OK, and the two below
	Dir       ChannelDir
	UseRDMA   bool
}

func (*BindConnToSessionRes) Op() Op           { return OpBindConnToSession }
func (r *BindConnToSessionRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *BindConnToSessionRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	if r.Status == OK {
		b.XDR = append(b.XDR, r.SessionID[:]...)
		b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Dir))
		b.XDR = xdr.AppendBool(b.XDR, r.UseRDMA)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *BindConnToSessionRes) Decode(d *rpc.BodyDecoder) error {
	*r = BindConnToSessionRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.SessionID.decode(d)
		r.Dir = decodeChannelDir(d, true)
		r.UseRDMA = d.Bool()
	}
	return d.Err()
}

// SequenceArgs is SEQUENCE4args (RFC 8881 Section 18.46), the first
// operation of every COMPOUND on a session.
type SequenceArgs struct {
	SessionID     SessionID
	SequenceID    uint32
	SlotID        uint32
	HighestSlotID uint32
	CacheThis     bool
}

func (*SequenceArgs) Op() Op { return OpSequence }

// Append appends the encoded arguments to b.
func (a *SequenceArgs) Append(b *rpc.Body) {
	b.XDR = append(b.XDR, a.SessionID[:]...)
	b.XDR = xdr.AppendUint32(b.XDR, a.SequenceID)
	b.XDR = xdr.AppendUint32(b.XDR, a.SlotID)
	b.XDR = xdr.AppendUint32(b.XDR, a.HighestSlotID)
	b.XDR = xdr.AppendBool(b.XDR, a.CacheThis)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *SequenceArgs) Decode(d *rpc.BodyDecoder) error {
	a.SessionID.decode(d)
	a.SequenceID = d.Uint32()
	a.SlotID = d.Uint32()
	a.HighestSlotID = d.Uint32()
	a.CacheThis = d.Bool()
	return d.Err()
}

// The sr_status_flags bits of SEQUENCE (RFC 8881 Section 18.46.3).
const (
	SeqStatusCBPathDown              = 0x00000001 // SEQ4_STATUS_CB_PATH_DOWN
	SeqStatusCBGSSContextsExpiring   = 0x00000002 // SEQ4_STATUS_CB_GSS_CONTEXTS_EXPIRING
	SeqStatusCBGSSContextsExpired    = 0x00000004 // SEQ4_STATUS_CB_GSS_CONTEXTS_EXPIRED
	SeqStatusExpiredAllStateRevoked  = 0x00000008 // SEQ4_STATUS_EXPIRED_ALL_STATE_REVOKED
	SeqStatusExpiredSomeStateRevoked = 0x00000010 // SEQ4_STATUS_EXPIRED_SOME_STATE_REVOKED
	SeqStatusAdminStateRevoked       = 0x00000020 // SEQ4_STATUS_ADMIN_STATE_REVOKED
	SeqStatusRecallableStateRevoked  = 0x00000040 // SEQ4_STATUS_RECALLABLE_STATE_REVOKED
	SeqStatusLeaseMoved              = 0x00000080 // SEQ4_STATUS_LEASE_MOVED
	SeqStatusRestartReclaimNeeded    = 0x00000100 // SEQ4_STATUS_RESTART_RECLAIM_NEEDED
	SeqStatusCBPathDownSession       = 0x00000200 // SEQ4_STATUS_CB_PATH_DOWN_SESSION
	SeqStatusBackchannelFault        = 0x00000400 // SEQ4_STATUS_BACKCHANNEL_FAULT
	SeqStatusDevIDChanged            = 0x00000800 // SEQ4_STATUS_DEVID_CHANGED
	SeqStatusDevIDDeleted            = 0x00001000 // SEQ4_STATUS_DEVID_DELETED
)

// SequenceRes is SEQUENCE4res (RFC 8881 Section 18.46).
// TargetHighestSlotID, not HighestSlotID, is what the client shrinks or
// grows its slot table to.
type SequenceRes struct {
	Status              Stat
	SessionID           SessionID // if OK, and the rest
	SequenceID          uint32
	SlotID              uint32
	HighestSlotID       uint32
	TargetHighestSlotID uint32
	StatusFlags         uint32
}

func (*SequenceRes) Op() Op           { return OpSequence }
func (r *SequenceRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *SequenceRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	if r.Status == OK {
		b.XDR = append(b.XDR, r.SessionID[:]...)
		for _, v := range [...]uint32{r.SequenceID, r.SlotID, r.HighestSlotID, r.TargetHighestSlotID, r.StatusFlags} {
			b.XDR = xdr.AppendUint32(b.XDR, v)
		}
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *SequenceRes) Decode(d *rpc.BodyDecoder) error {
	*r = SequenceRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.SessionID.decode(d)
		r.SequenceID = d.Uint32()
		r.SlotID = d.Uint32()
		r.HighestSlotID = d.Uint32()
		r.TargetHighestSlotID = d.Uint32()
		r.StatusFlags = d.Uint32()
	}
	return d.Err()
}

// ReclaimCompleteArgs is RECLAIM_COMPLETE4args (RFC 8881 Section 18.51).
// A client sends it with OneFS false once after CREATE_SESSION, before
// its first OPEN that is not a reclaim.
type ReclaimCompleteArgs struct{ OneFS bool }

func (*ReclaimCompleteArgs) Op() Op { return OpReclaimComplete }

// Append appends the encoded arguments to b.
func (a *ReclaimCompleteArgs) Append(b *rpc.Body) { b.XDR = xdr.AppendBool(b.XDR, a.OneFS) }

// Decode decodes the arguments and returns d's sticky error.
func (a *ReclaimCompleteArgs) Decode(d *rpc.BodyDecoder) error {
	a.OneFS = d.Bool()
	return d.Err()
}

// ReclaimCompleteRes is RECLAIM_COMPLETE4res (RFC 8881 Section 18.51).
type ReclaimCompleteRes struct{ Status Stat }

func (*ReclaimCompleteRes) Op() Op                            { return OpReclaimComplete }
func (r *ReclaimCompleteRes) OpStatus() Stat                  { return r.Status }
func (r *ReclaimCompleteRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *ReclaimCompleteRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// appendStat and decodeStat encode the results of the operations whose
// results are their status alone.
func appendStat(b *rpc.Body, s Stat) { b.XDR = xdr.AppendUint32(b.XDR, uint32(s)) }

func decodeStat(d *rpc.BodyDecoder, s *Stat) error {
	*s = Stat(d.Uint32())
	return d.Err()
}
