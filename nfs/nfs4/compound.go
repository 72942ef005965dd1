package nfs4

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Op is nfs_opnum4 (RFC 8881 Section 16.2.1; RFC 5662), the number of an
// operation in a COMPOUND.
type Op uint32

// The operations of RFC 8881 Section 18. Those marked "not in 4.1" are
// NFSv4.0's and MUST NOT be used in NFSv4.1.
const (
	OpAccess             Op = 3
	OpClose              Op = 4
	OpCommit             Op = 5
	OpCreate             Op = 6
	OpDelegPurge         Op = 7
	OpDelegReturn        Op = 8
	OpGetattr            Op = 9
	OpGetFH              Op = 10
	OpLink               Op = 11
	OpLock               Op = 12
	OpLockT              Op = 13
	OpLockU              Op = 14
	OpLookup             Op = 15
	OpLookupP            Op = 16
	OpNVerify            Op = 17
	OpOpen               Op = 18
	OpOpenAttr           Op = 19
	OpOpenConfirm        Op = 20 // not in 4.1
	OpOpenDowngrade      Op = 21
	OpPutFH              Op = 22
	OpPutPubFH           Op = 23
	OpPutRootFH          Op = 24
	OpRead               Op = 25
	OpReaddir            Op = 26
	OpReadlink           Op = 27
	OpRemove             Op = 28
	OpRename             Op = 29
	OpRenew              Op = 30 // not in 4.1
	OpRestoreFH          Op = 31
	OpSaveFH             Op = 32
	OpSecinfo            Op = 33
	OpSetattr            Op = 34
	OpSetClientID        Op = 35 // not in 4.1
	OpSetClientIDConfirm Op = 36 // not in 4.1
	OpVerify             Op = 37
	OpWrite              Op = 38
	OpReleaseLockOwner   Op = 39 // not in 4.1
	OpBackchannelCtl     Op = 40
	OpBindConnToSession  Op = 41
	OpExchangeID         Op = 42
	OpCreateSession      Op = 43
	OpDestroySession     Op = 44
	OpFreeStateID        Op = 45
	OpGetDirDelegation   Op = 46
	OpGetDeviceInfo      Op = 47
	OpGetDeviceList      Op = 48
	OpLayoutCommit       Op = 49
	OpLayoutGet          Op = 50
	OpLayoutReturn       Op = 51
	OpSecinfoNoName      Op = 52
	OpSequence           Op = 53
	OpSetSSV             Op = 54
	OpTestStateID        Op = 55
	OpWantDelegation     Op = 56
	OpDestroyClientID    Op = 57
	OpReclaimComplete    Op = 58
	OpIllegal            Op = 10044
)

var opNames = [...]string{
	"ACCESS", "CLOSE", "COMMIT", "CREATE", "DELEGPURGE", "DELEGRETURN", "GETATTR", "GETFH", "LINK",
	"LOCK", "LOCKT", "LOCKU", "LOOKUP", "LOOKUPP", "NVERIFY", "OPEN", "OPENATTR", "OPEN_CONFIRM",
	"OPEN_DOWNGRADE", "PUTFH", "PUTPUBFH", "PUTROOTFH", "READ", "READDIR", "READLINK", "REMOVE",
	"RENAME", "RENEW", "RESTOREFH", "SAVEFH", "SECINFO", "SETATTR", "SETCLIENTID",
	"SETCLIENTID_CONFIRM", "VERIFY", "WRITE", "RELEASE_LOCKOWNER", "BACKCHANNEL_CTL",
	"BIND_CONN_TO_SESSION", "EXCHANGE_ID", "CREATE_SESSION", "DESTROY_SESSION", "FREE_STATEID",
	"GET_DIR_DELEGATION", "GETDEVICEINFO", "GETDEVICELIST", "LAYOUTCOMMIT", "LAYOUTGET",
	"LAYOUTRETURN", "SECINFO_NO_NAME", "SEQUENCE", "SET_SSV", "TEST_STATEID", "WANT_DELEGATION",
	"DESTROY_CLIENTID", "RECLAIM_COMPLETE",
}

// String returns the operation's name in RFC 8881 (SEQUENCE, ILLEGAL),
// or its number if it has none.
func (o Op) String() string {
	switch {
	case o == OpIllegal:
		return "ILLEGAL"
	case o.named():
		return opNames[o-OpAccess]
	}
	return "op(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// named reports whether RFC 8881 defines o.
func (o Op) named() bool { return o >= OpAccess && o <= OpReclaimComplete || o == OpIllegal }

// ArgOp is one operation's arguments in a COMPOUND: an nfs_argop4 arm
// (RFC 8881 Section 16.2.1). Append and Decode handle the arguments
// only; CompoundArgs writes and reads the operation number before them.
type ArgOp interface {
	Op() Op
	Append(*rpc.Body)
	Decode(*rpc.BodyDecoder) error
}

// ResOp is one operation's results in a COMPOUND reply: an nfs_resop4 arm
// (RFC 8881 Section 16.2.2), a union on its status. OpStatus returns that
// status. Like ArgOp, it leaves the operation number to CompoundRes.
type ResOp interface {
	Op() Op
	OpStatus() Stat
	Append(*rpc.Body)
	Decode(*rpc.BodyDecoder) error
}

// UnknownOpError: a COMPOUND or CB_COMPOUND holds an operation this codec
// does not decode. XDR gives no length for an operation, so nothing after
// it can be found: the whole message fails, and the decoded operations
// before it are kept: a server runs them and answers the bad one with
// NFS4ERR_OP_ILLEGAL if its number is outside the protocol (RFC 8881
// Section 18.52), with NFS4ERR_NOTSUPP if the server lacks it.
type UnknownOpError struct {
	Op       uint32 // the operation number
	Index    int    // its place in the operation array
	Callback bool   // in a CB_COMPOUND
}

func (e *UnknownOpError) Error() string {
	kind, name, known := "COMPOUND", Op(e.Op).String(), Op(e.Op).named()
	if e.Callback {
		kind, name, known = "CB_COMPOUND", CBOp(e.Op).String(), CBOp(e.Op).named()
	}
	if !known {
		name = "unknown"
	}
	return "nfs4: " + kind + " operation " + strconv.FormatUint(uint64(e.Op), 10) + " (" + name + ") at index " +
		strconv.Itoa(e.Index) + " is not decoded by this codec, so nothing after it can be"
}

// CompoundArgs is COMPOUND4args (RFC 8881 Section 16.2): the arguments of
// NFSPROC4_COMPOUND.
type CompoundArgs struct {
	Tag          string
	MinorVersion uint32 // MinorVersion for NFSv4.1
	Ops          []ArgOp
}

// Append appends the encoded arguments to b: DDP-eligible items (WRITE
// data, CREATE link text) are held apart, not copied, and must stay
// unchanged until the call returns.
func (c *CompoundArgs) Append(b *rpc.Body) {
	b.XDR = appendString(b.XDR, c.Tag)
	b.XDR = xdr.AppendUint32(b.XDR, c.MinorVersion)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(len(c.Ops)))
	for _, op := range c.Ops {
		b.XDR = xdr.AppendUint32(b.XDR, uint32(op.Op()))
		op.Append(b)
	}
}

// Decode decodes the arguments and returns d's sticky error: at most
// MaxOps operations, each a new value of its type; an operation this
// codec does not decode fails with an *UnknownOpError (see there).
// Decoded values alias d's memory as each type says.
func (c *CompoundArgs) Decode(d *rpc.BodyDecoder) error {
	c.Tag = d.Str(MaxTag)
	c.MinorVersion = d.Uint32()
	c.Ops = decodeOps(d, c.Ops[:0], 4, false, func(_ int, num uint32) ArgOp { return newArgOp(Op(num)) })
	return d.Err()
}

// CompoundRes is COMPOUND4res (RFC 8881 Section 16.2): the results of
// NFSPROC4_COMPOUND. Status is that of the last operation run; Ops holds
// the results of the operations run, which end at the first that failed
// (RFC 8881 Section 16.2.3).
type CompoundRes struct {
	Status Stat
	Tag    string
	Ops    []ResOp
}

// Append appends the encoded results to b; DDP-eligible items (READ data,
// READLINK link text) are held apart, not copied, and must stay unchanged
// until the transport has sent them.
func (c *CompoundRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(c.Status))
	b.XDR = appendString(b.XDR, c.Tag)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(len(c.Ops)))
	for _, op := range c.Ops {
		b.XDR = xdr.AppendUint32(b.XDR, uint32(op.Op()))
		op.Append(b)
	}
}

// Decode decodes the results and returns d's sticky error. A caller may
// pass in Ops the result values it wants filled, as a client does with
// the ones matching its request's operations (ReadRes with Buf set, say):
// the i-th result decodes into Ops[i] when that is of the operation the
// reply names, and into a new value otherwise. Ops ends up holding the
// results the reply has. An operation this codec does not decode fails
// with an *UnknownOpError.
func (c *CompoundRes) Decode(d *rpc.BodyDecoder) error {
	c.Status = Stat(d.Uint32())
	c.Tag = d.Str(MaxTag)
	given := c.Ops
	c.Ops = decodeOps(d, c.Ops[:0], 8, false, func(i int, num uint32) ResOp {
		if i < len(given) && given[i] != nil && given[i].Op() == Op(num) {
			return given[i]
		}
		return newResOp(Op(num))
	})
	return d.Err()
}

// decodeOps decodes the operation array of a COMPOUND or CB_COMPOUND
// (RFC 8881 Sections 16.2 and 20.2) into ops, which it returns: at most
// MaxOps entries of at least minLen bytes each, every one an operation
// number and the value pick gives for it (nil for a number this codec
// does not decode, which fails the decoder with an *UnknownOpError, as
// nothing after it can be found). A failed entry ends the array; what
// decoded before it is kept.
func decodeOps[T interface{ Decode(*rpc.BodyDecoder) error }](d *rpc.BodyDecoder, ops []T, minLen int, callback bool, pick func(i int, num uint32) T) []T {
	n := d.Count(MaxOps, minLen)
	for i := range n {
		num := d.Uint32()
		if d.Err() != nil {
			break
		}
		op := pick(i, num)
		if any(op) == nil { // T is an interface: the nil one
			d.Fail(&UnknownOpError{Op: num, Index: i, Callback: callback})
			break
		}
		if op.Decode(d) != nil {
			break
		}
		ops = append(ops, op)
	}
	if len(ops) == 0 {
		return nil
	}
	return ops
}

// newArgOp returns a new arguments value for op, or nil if this codec
// does not decode op.
func newArgOp(op Op) ArgOp {
	switch op {
	case OpAccess:
		return &AccessArgs{}
	case OpClose:
		return &CloseArgs{}
	case OpCommit:
		return &CommitArgs{}
	case OpCreate:
		return &CreateArgs{}
	case OpDelegReturn:
		return &DelegReturnArgs{}
	case OpGetattr:
		return &GetattrArgs{}
	case OpGetFH:
		return &GetFHArgs{}
	case OpLink:
		return &LinkArgs{}
	case OpLookup:
		return &LookupArgs{}
	case OpLookupP:
		return &LookupPArgs{}
	case OpOpen:
		return &OpenArgs{}
	case OpPutFH:
		return &PutFHArgs{}
	case OpPutRootFH:
		return &PutRootFHArgs{}
	case OpRead:
		return &ReadArgs{}
	case OpReaddir:
		return &ReaddirArgs{}
	case OpReadlink:
		return &ReadlinkArgs{}
	case OpRemove:
		return &RemoveArgs{}
	case OpRename:
		return &RenameArgs{}
	case OpRestoreFH:
		return &RestoreFHArgs{}
	case OpSaveFH:
		return &SaveFHArgs{}
	case OpSetattr:
		return &SetattrArgs{}
	case OpWrite:
		return &WriteArgs{}
	case OpBindConnToSession:
		return &BindConnToSessionArgs{}
	case OpExchangeID:
		return &ExchangeIDArgs{}
	case OpCreateSession:
		return &CreateSessionArgs{}
	case OpDestroySession:
		return &DestroySessionArgs{}
	case OpFreeStateID:
		return &FreeStateIDArgs{}
	case OpSecinfoNoName:
		return &SecinfoNoNameArgs{}
	case OpSequence:
		return &SequenceArgs{}
	case OpTestStateID:
		return &TestStateIDArgs{}
	case OpDestroyClientID:
		return &DestroyClientIDArgs{}
	case OpReclaimComplete:
		return &ReclaimCompleteArgs{}
	case OpIllegal:
		return &IllegalArgs{}
	}
	return nil
}

// newResOp returns a new results value for op, or nil if this codec does
// not decode op.
func newResOp(op Op) ResOp {
	switch op {
	case OpAccess:
		return &AccessRes{}
	case OpClose:
		return &CloseRes{}
	case OpCommit:
		return &CommitRes{}
	case OpCreate:
		return &CreateRes{}
	case OpDelegReturn:
		return &DelegReturnRes{}
	case OpGetattr:
		return &GetattrRes{}
	case OpGetFH:
		return &GetFHRes{}
	case OpLink:
		return &LinkRes{}
	case OpLookup:
		return &LookupRes{}
	case OpLookupP:
		return &LookupPRes{}
	case OpOpen:
		return &OpenRes{}
	case OpPutFH:
		return &PutFHRes{}
	case OpPutRootFH:
		return &PutRootFHRes{}
	case OpRead:
		return &ReadRes{}
	case OpReaddir:
		return &ReaddirRes{}
	case OpReadlink:
		return &ReadlinkRes{}
	case OpRemove:
		return &RemoveRes{}
	case OpRename:
		return &RenameRes{}
	case OpRestoreFH:
		return &RestoreFHRes{}
	case OpSaveFH:
		return &SaveFHRes{}
	case OpSetattr:
		return &SetattrRes{}
	case OpWrite:
		return &WriteRes{}
	case OpBindConnToSession:
		return &BindConnToSessionRes{}
	case OpExchangeID:
		return &ExchangeIDRes{}
	case OpCreateSession:
		return &CreateSessionRes{}
	case OpDestroySession:
		return &DestroySessionRes{}
	case OpFreeStateID:
		return &FreeStateIDRes{}
	case OpSecinfoNoName:
		return &SecinfoNoNameRes{}
	case OpSequence:
		return &SequenceRes{}
	case OpTestStateID:
		return &TestStateIDRes{}
	case OpDestroyClientID:
		return &DestroyClientIDRes{}
	case OpReclaimComplete:
		return &ReclaimCompleteRes{}
	case OpIllegal:
		return &IllegalRes{}
	}
	return nil
}

// IllegalArgs is the empty arguments of OP_ILLEGAL (RFC 8881 Section
// 18.52), which a client sends only to test a server.
type IllegalArgs struct{}

func (*IllegalArgs) Op() Op                          { return OpIllegal }
func (*IllegalArgs) Append(*rpc.Body)                {}
func (*IllegalArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// IllegalRes is ILLEGAL4res (RFC 8881 Section 18.52): a server's answer
// to an operation number it does not know, with ErrOpIllegal.
type IllegalRes struct{ Status Stat }

func (*IllegalRes) Op() Op           { return OpIllegal }
func (r *IllegalRes) OpStatus() Stat { return r.Status }
func (r *IllegalRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
}
func (r *IllegalRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	return d.Err()
}

// String returns the COMPOUND's operations as one line for logs and
// tests: "COMPOUND SEQUENCE PUTFH READ", with the tag in brackets when
// there is one.
func (c *CompoundArgs) String() string {
	b := []byte("COMPOUND")
	b = appendTag(b, c.Tag)
	for _, op := range c.Ops {
		b = append(b, ' ')
		b = append(b, op.Op().String()...)
	}
	return string(b)
}

// String returns the reply's status and each result's operation and
// status as one line: "NFS4ERR_NOENT: PUTROOTFH NFS4_OK, LOOKUP
// NFS4ERR_NOENT".
func (c *CompoundRes) String() string {
	b := append([]byte(nil), c.Status.String()...)
	b = appendTag(b, c.Tag)
	for i, op := range c.Ops {
		if i == 0 {
			b = append(b, ':')
		} else {
			b = append(b, ',')
		}
		b = append(b, ' ')
		b = append(b, op.Op().String()...)
		b = append(b, ' ')
		b = append(b, op.OpStatus().String()...)
	}
	return string(b)
}

func appendTag(b []byte, tag string) []byte {
	if tag == "" {
		return b
	}
	return append(strconv.AppendQuote(append(b, " ["...), tag), ']')
}
