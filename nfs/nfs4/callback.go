package nfs4

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// This file has the backchannel: CB_COMPOUND (RFC 8881 Section 19.2),
// which the server calls on the program number the client gave in
// CreateSessionArgs.CBProgram, version CBVersion, and its operations
// (RFC 8881 Section 20).

// CBOp is nfs_cb_opnum4 (RFC 8881 Section 19.2; RFC 5662), the number of
// an operation in a CB_COMPOUND.
type CBOp uint32

// The callback operations of RFC 8881 Section 20.
const (
	OpCBGetattr            CBOp = 3
	OpCBRecall             CBOp = 4
	OpCBLayoutRecall       CBOp = 5
	OpCBNotify             CBOp = 6
	OpCBPushDeleg          CBOp = 7
	OpCBRecallAny          CBOp = 8
	OpCBRecallableObjAvail CBOp = 9
	OpCBRecallSlot         CBOp = 10
	OpCBSequence           CBOp = 11
	OpCBWantsCancelled     CBOp = 12
	OpCBNotifyLock         CBOp = 13
	OpCBNotifyDeviceID     CBOp = 14
	OpCBIllegal            CBOp = 10044
)

var cbOpNames = [...]string{
	"CB_GETATTR", "CB_RECALL", "CB_LAYOUTRECALL", "CB_NOTIFY", "CB_PUSH_DELEG", "CB_RECALL_ANY",
	"CB_RECALLABLE_OBJ_AVAIL", "CB_RECALL_SLOT", "CB_SEQUENCE", "CB_WANTS_CANCELLED",
	"CB_NOTIFY_LOCK", "CB_NOTIFY_DEVICEID",
}

// String returns the operation's name in RFC 8881 (CB_SEQUENCE,
// CB_ILLEGAL), or its number if it has none.
func (o CBOp) String() string {
	switch {
	case o == OpCBIllegal:
		return "CB_ILLEGAL"
	case o.named():
		return cbOpNames[o-OpCBGetattr]
	}
	return "cb_op(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// named reports whether RFC 8881 defines o.
func (o CBOp) named() bool {
	return o >= OpCBGetattr && o <= OpCBNotifyDeviceID || o == OpCBIllegal
}

// CBArgOp is one callback operation's arguments in a CB_COMPOUND: an
// nfs_cb_argop4 arm. Like ArgOp, it leaves the operation number to
// CBCompoundArgs.
type CBArgOp interface {
	CBOp() CBOp
	Append(*rpc.Body)
	Decode(*rpc.BodyDecoder) error
}

// CBResOp is one callback operation's results: an nfs_cb_resop4 arm.
type CBResOp interface {
	CBOp() CBOp
	OpStatus() Stat
	Append(*rpc.Body)
	Decode(*rpc.BodyDecoder) error
}

// CBCompoundArgs is CB_COMPOUND4args (RFC 8881 Section 19.2).
// CallbackIdent is 0 in NFSv4.1 (the session identifies the client).
type CBCompoundArgs struct {
	Tag           string
	MinorVersion  uint32
	CallbackIdent uint32
	Ops           []CBArgOp
}

// Append appends the encoded arguments to b.
func (c *CBCompoundArgs) Append(b *rpc.Body) {
	b.XDR = appendString(b.XDR, c.Tag)
	b.XDR = xdr.AppendUint32(b.XDR, c.MinorVersion)
	b.XDR = xdr.AppendUint32(b.XDR, c.CallbackIdent)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(len(c.Ops)))
	for _, op := range c.Ops {
		b.XDR = xdr.AppendUint32(b.XDR, uint32(op.CBOp()))
		op.Append(b)
	}
}

// Decode decodes the arguments and returns d's sticky error, like
// CompoundArgs.Decode.
func (c *CBCompoundArgs) Decode(d *rpc.BodyDecoder) error {
	c.Tag = d.Str(MaxTag)
	c.MinorVersion = d.Uint32()
	c.CallbackIdent = d.Uint32()
	c.Ops = decodeOps(d, c.Ops[:0], 4, true, func(_ int, num uint32) CBArgOp { return newCBArgOp(CBOp(num)) })
	return d.Err()
}

// CBCompoundRes is CB_COMPOUND4res (RFC 8881 Section 19.2).
type CBCompoundRes struct {
	Status Stat
	Tag    string
	Ops    []CBResOp
}

// Append appends the encoded results to b.
func (c *CBCompoundRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(c.Status))
	b.XDR = appendString(b.XDR, c.Tag)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(len(c.Ops)))
	for _, op := range c.Ops {
		b.XDR = xdr.AppendUint32(b.XDR, uint32(op.CBOp()))
		op.Append(b)
	}
}

// Decode decodes the results and returns d's sticky error, like
// CompoundRes.Decode but always into new values.
func (c *CBCompoundRes) Decode(d *rpc.BodyDecoder) error {
	c.Status = Stat(d.Uint32())
	c.Tag = d.Str(MaxTag)
	c.Ops = decodeOps(d, c.Ops[:0], 8, true, func(_ int, num uint32) CBResOp { return newCBResOp(CBOp(num)) })
	return d.Err()
}

func newCBArgOp(op CBOp) CBArgOp {
	switch op {
	case OpCBGetattr:
		return &CBGetattrArgs{}
	case OpCBRecall:
		return &CBRecallArgs{}
	case OpCBRecallAny:
		return &CBRecallAnyArgs{}
	case OpCBRecallSlot:
		return &CBRecallSlotArgs{}
	case OpCBSequence:
		return &CBSequenceArgs{}
	case OpCBIllegal:
		return &CBIllegalArgs{}
	}
	return nil
}

func newCBResOp(op CBOp) CBResOp {
	switch op {
	case OpCBGetattr:
		return &CBGetattrRes{}
	case OpCBRecall:
		return &CBRecallRes{}
	case OpCBRecallAny:
		return &CBRecallAnyRes{}
	case OpCBRecallSlot:
		return &CBRecallSlotRes{}
	case OpCBSequence:
		return &CBSequenceRes{}
	case OpCBIllegal:
		return &CBIllegalRes{}
	}
	return nil
}

// ReferringCall is referring_call4 (RFC 8881 Section 20.9): a fore
// channel call that a callback follows from.
type ReferringCall struct {
	SequenceID, SlotID uint32
}

// ReferringCallList is referring_call_list4 (RFC 8881 Section 20.9), at
// most MaxReferringCalls calls.
type ReferringCallList struct {
	SessionID SessionID
	Calls     []ReferringCall
}

// CBSequenceArgs is CB_SEQUENCE4args (RFC 8881 Section 20.9), the first
// operation of every CB_COMPOUND. ReferringCallLists holds at most
// MaxReferringCalls lists.
type CBSequenceArgs struct {
	SessionID          SessionID
	SequenceID         uint32
	SlotID             uint32
	HighestSlotID      uint32
	CacheThis          bool
	ReferringCallLists []ReferringCallList
}

func (*CBSequenceArgs) CBOp() CBOp { return OpCBSequence }

// Append appends the encoded arguments to b.
func (a *CBSequenceArgs) Append(b *rpc.Body) {
	x := append(b.XDR, a.SessionID[:]...)
	x = xdr.AppendUint32(x, a.SequenceID)
	x = xdr.AppendUint32(x, a.SlotID)
	x = xdr.AppendUint32(x, a.HighestSlotID)
	x = xdr.AppendBool(x, a.CacheThis)
	x = xdr.AppendUint32(x, uint32(len(a.ReferringCallLists)))
	for _, l := range a.ReferringCallLists {
		x = append(x, l.SessionID[:]...)
		x = xdr.AppendUint32(x, uint32(len(l.Calls)))
		for _, c := range l.Calls {
			x = xdr.AppendUint32(xdr.AppendUint32(x, c.SequenceID), c.SlotID)
		}
	}
	b.XDR = x
}

// Decode decodes the arguments and returns d's sticky error.
func (a *CBSequenceArgs) Decode(d *rpc.BodyDecoder) error {
	*a = CBSequenceArgs{}
	a.SessionID.decode(d)
	a.SequenceID = d.Uint32()
	a.SlotID = d.Uint32()
	a.HighestSlotID = d.Uint32()
	a.CacheThis = d.Bool()
	if n := d.Count(MaxReferringCalls, 20); n > 0 {
		a.ReferringCallLists = make([]ReferringCallList, n)
		for i := range a.ReferringCallLists {
			l := &a.ReferringCallLists[i]
			l.SessionID.decode(d)
			if m := d.Count(MaxReferringCalls, 8); m > 0 {
				l.Calls = make([]ReferringCall, m)
				for j := range l.Calls {
					l.Calls[j] = ReferringCall{SequenceID: d.Uint32(), SlotID: d.Uint32()}
				}
			}
		}
	}
	return d.Err()
}

// CBSequenceRes is CB_SEQUENCE4res (RFC 8881 Section 20.9).
type CBSequenceRes struct {
	Status              Stat
	SessionID           SessionID // if OK, and the rest
	SequenceID          uint32
	SlotID              uint32
	HighestSlotID       uint32
	TargetHighestSlotID uint32
}

func (*CBSequenceRes) CBOp() CBOp       { return OpCBSequence }
func (r *CBSequenceRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *CBSequenceRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = append(b.XDR, r.SessionID[:]...)
		for _, v := range [...]uint32{r.SequenceID, r.SlotID, r.HighestSlotID, r.TargetHighestSlotID} {
			b.XDR = xdr.AppendUint32(b.XDR, v)
		}
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *CBSequenceRes) Decode(d *rpc.BodyDecoder) error {
	*r = CBSequenceRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.SessionID.decode(d)
		r.SequenceID = d.Uint32()
		r.SlotID = d.Uint32()
		r.HighestSlotID = d.Uint32()
		r.TargetHighestSlotID = d.Uint32()
	}
	return d.Err()
}

// CBRecallArgs is CB_RECALL4args (RFC 8881 Section 20.2): the server
// recalls the delegation StateID on FH; the client answers, then returns
// it with DELEGRETURN on the fore channel. Truncate says the file is
// about to be truncated to zero. FH aliases the decoder's memory.
type CBRecallArgs struct {
	StateID  StateID
	Truncate bool
	FH       FileHandle
}

func (*CBRecallArgs) CBOp() CBOp { return OpCBRecall }

// Append appends the encoded arguments to b.
func (a *CBRecallArgs) Append(b *rpc.Body) {
	b.XDR = a.StateID.append(b.XDR)
	b.XDR = xdr.AppendBool(b.XDR, a.Truncate)
	b.XDR = appendFH(b.XDR, a.FH)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *CBRecallArgs) Decode(d *rpc.BodyDecoder) error {
	a.StateID.decode(d)
	a.Truncate = d.Bool()
	a.FH = decodeFH(d)
	return d.Err()
}

// CBRecallRes is CB_RECALL4res (RFC 8881 Section 20.2).
type CBRecallRes struct{ Status Stat }

func (*CBRecallRes) CBOp() CBOp                        { return OpCBRecall }
func (r *CBRecallRes) OpStatus() Stat                  { return r.Status }
func (r *CBRecallRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *CBRecallRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// The craa_type_mask bits of CB_RECALL_ANY (RFC 8881 Section 20.6), as
// bit numbers of a Bitmap.
const (
	RCA4TypeMaskRdataDlg       AttrID = 0  // RCA4_TYPE_MASK_RDATA_DLG
	RCA4TypeMaskWdataDlg       AttrID = 1  // RCA4_TYPE_MASK_WDATA_DLG
	RCA4TypeMaskDirDlg         AttrID = 2  // RCA4_TYPE_MASK_DIR_DLG
	RCA4TypeMaskFileLayout     AttrID = 3  // RCA4_TYPE_MASK_FILE_LAYOUT
	RCA4TypeMaskBlkLayout      AttrID = 4  // RCA4_TYPE_MASK_BLK_LAYOUT
	RCA4TypeMaskObjLayoutMin   AttrID = 8  // RCA4_TYPE_MASK_OBJ_LAYOUT_MIN
	RCA4TypeMaskObjLayoutMax   AttrID = 9  // RCA4_TYPE_MASK_OBJ_LAYOUT_MAX
	RCA4TypeMaskOtherLayoutMin AttrID = 12 // RCA4_TYPE_MASK_OTHER_LAYOUT_MIN
	RCA4TypeMaskOtherLayoutMax AttrID = 15 // RCA4_TYPE_MASK_OTHER_LAYOUT_MAX
)

// CBRecallAnyArgs is CB_RECALL_ANY4args (RFC 8881 Section 20.6): keep at
// most ObjectsToKeep of the kinds of state TypeMask names, returning the
// rest.
type CBRecallAnyArgs struct {
	ObjectsToKeep uint32
	TypeMask      Bitmap
}

func (*CBRecallAnyArgs) CBOp() CBOp { return OpCBRecallAny }

// Append appends the encoded arguments to b.
func (a *CBRecallAnyArgs) Append(b *rpc.Body) {
	b.XDR = a.TypeMask.append(xdr.AppendUint32(b.XDR, a.ObjectsToKeep))
}

// Decode decodes the arguments and returns d's sticky error.
func (a *CBRecallAnyArgs) Decode(d *rpc.BodyDecoder) error {
	a.ObjectsToKeep = d.Uint32()
	a.TypeMask = decodeBitmap(d, a.TypeMask)
	return d.Err()
}

// CBRecallAnyRes is CB_RECALL_ANY4res (RFC 8881 Section 20.6).
type CBRecallAnyRes struct{ Status Stat }

func (*CBRecallAnyRes) CBOp() CBOp                        { return OpCBRecallAny }
func (r *CBRecallAnyRes) OpStatus() Stat                  { return r.Status }
func (r *CBRecallAnyRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *CBRecallAnyRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// CBGetattrArgs is CB_GETATTR4args (RFC 8881 Section 20.1): the server
// asks the holder of a write delegation for FH's attributes.
type CBGetattrArgs struct {
	FH          FileHandle
	AttrRequest Bitmap
}

func (*CBGetattrArgs) CBOp() CBOp { return OpCBGetattr }

// Append appends the encoded arguments to b.
func (a *CBGetattrArgs) Append(b *rpc.Body) { b.XDR = a.AttrRequest.append(appendFH(b.XDR, a.FH)) }

// Decode decodes the arguments and returns d's sticky error.
func (a *CBGetattrArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	a.AttrRequest = decodeBitmap(d, a.AttrRequest)
	return d.Err()
}

// CBGetattrRes is CB_GETATTR4res (RFC 8881 Section 20.1).
type CBGetattrRes struct {
	Status Stat
	Attr   Attr // if OK
}

func (*CBGetattrRes) CBOp() CBOp       { return OpCBGetattr }
func (r *CBGetattrRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *CBGetattrRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = r.Attr.Append(b.XDR)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *CBGetattrRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	if r.Status == OK {
		return r.Attr.Decode(d)
	}
	r.Attr = Attr{}
	return d.Err()
}

// CBRecallSlotArgs is CB_RECALL_SLOT4args (RFC 8881 Section 20.8): the
// server asks the client to use fore channel slots up to
// TargetHighestSlotID only.
type CBRecallSlotArgs struct{ TargetHighestSlotID uint32 }

func (*CBRecallSlotArgs) CBOp() CBOp { return OpCBRecallSlot }

// Append appends the encoded arguments to b.
func (a *CBRecallSlotArgs) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, a.TargetHighestSlotID)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *CBRecallSlotArgs) Decode(d *rpc.BodyDecoder) error {
	a.TargetHighestSlotID = d.Uint32()
	return d.Err()
}

// CBRecallSlotRes is CB_RECALL_SLOT4res (RFC 8881 Section 20.8).
type CBRecallSlotRes struct{ Status Stat }

func (*CBRecallSlotRes) CBOp() CBOp                        { return OpCBRecallSlot }
func (r *CBRecallSlotRes) OpStatus() Stat                  { return r.Status }
func (r *CBRecallSlotRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *CBRecallSlotRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// CBIllegalArgs is the empty arguments of OP_CB_ILLEGAL (RFC 8881 Section
// 20.13).
type CBIllegalArgs struct{}

func (*CBIllegalArgs) CBOp() CBOp                      { return OpCBIllegal }
func (*CBIllegalArgs) Append(*rpc.Body)                {}
func (*CBIllegalArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// CBIllegalRes is CB_ILLEGAL4res (RFC 8881 Section 20.13): a client's
// answer to a callback operation number it does not know, with
// ErrOpIllegal.
type CBIllegalRes struct{ Status Stat }

func (*CBIllegalRes) CBOp() CBOp                        { return OpCBIllegal }
func (r *CBIllegalRes) OpStatus() Stat                  { return r.Status }
func (r *CBIllegalRes) Append(b *rpc.Body)              { appendStat(b, r.Status) }
func (r *CBIllegalRes) Decode(d *rpc.BodyDecoder) error { return decodeStat(d, &r.Status) }

// String returns the CB_COMPOUND's operations as one line:
// "CB_COMPOUND CB_SEQUENCE CB_RECALL".
func (c *CBCompoundArgs) String() string {
	b := appendTag([]byte("CB_COMPOUND"), c.Tag)
	for _, op := range c.Ops {
		b = append(b, ' ')
		b = append(b, op.CBOp().String()...)
	}
	return string(b)
}

// String returns the reply's status and each result's operation and
// status as one line, like CompoundRes.String.
func (c *CBCompoundRes) String() string {
	b := appendTag(append([]byte(nil), c.Status.String()...), c.Tag)
	for i, op := range c.Ops {
		if i == 0 {
			b = append(b, ':')
		} else {
			b = append(b, ',')
		}
		b = append(b, ' ')
		b = append(b, op.CBOp().String()...)
		b = append(b, ' ')
		b = append(b, op.OpStatus().String()...)
	}
	return string(b)
}
