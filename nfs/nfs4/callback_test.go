package nfs4

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

func allCBOps() []CBOp {
	var ops []CBOp
	for o := OpCBGetattr; o <= OpCBNotifyDeviceID; o++ {
		if newCBArgOp(o) != nil {
			ops = append(ops, o)
		}
	}
	return append(ops, OpCBIllegal)
}

func randCBCompound(rng *rand.Rand) (*CBCompoundArgs, *CBCompoundRes) {
	ops := allCBOps()
	a := &CBCompoundArgs{Tag: string(randBytes(rng, rng.IntN(8))), MinorVersion: 1}
	r := &CBCompoundRes{Tag: a.Tag}
	for range rng.IntN(5) {
		op := ops[rng.IntN(len(ops))]
		av, rv := newCBArgOp(op), newCBResOp(op)
		fill(rng, reflect.ValueOf(av).Elem())
		fill(rng, reflect.ValueOf(rv).Elem())
		a.Ops = append(a.Ops, av)
		r.Ops = append(r.Ops, rv)
	}
	return a, r
}

// goldenCB is a CB_COMPOUND with CB_SEQUENCE and CB_RECALL, as a server
// recalls a delegation, and the client's reply, written by hand from RFC
// 5662.
func goldenCB() (*CBCompoundArgs, string, *CBCompoundRes, string) {
	stid := StateID{Seqid: 1, Other: [12]byte{0xc0, 11: 0xcb}}
	args := &CBCompoundArgs{MinorVersion: 1, Ops: []CBArgOp{
		&CBSequenceArgs{SessionID: gsid, SequenceID: 1, ReferringCallLists: []ReferringCallList{
			{SessionID: gsid, Calls: []ReferringCall{{SequenceID: 5, SlotID: 2}}}}},
		&CBRecallArgs{StateID: stid, FH: gfh},
	}}
	argsHex := "00000000 00000001 00000000 00000002" + // tag "", minorversion 1, callback_ident 0, 2 operations
		" 0000000b" + gsidHex + "00000001 00000000 00000000 00000000" + // CB_SEQUENCE
		" 00000001" + gsidHex + "00000001 00000005 00000002" + // one referring_call_list4 of one call
		" 00000004 00000001 c000000000000000000000cb 00000000" + gfhHex // CB_RECALL
	res := &CBCompoundRes{Ops: []CBResOp{&CBSequenceRes{SessionID: gsid, SequenceID: 1}, &CBRecallRes{}}}
	resHex := "00000000 00000000 00000002" +
		" 0000000b 00000000" + gsidHex + "00000001 00000000 00000000 00000000" +
		" 00000004 00000000"
	return args, argsHex, res, resHex
}

func TestCBCompoundGolden(t *testing.T) {
	args, argsHex, res, resHex := goldenCB()
	checkGolden(t, args, argsHex, 0)
	checkGolden(t, res, resHex, 0)
	checkGolden(t, &CBRecallAnyArgs{ObjectsToKeep: 0, TypeMask: BitmapOf(RCA4TypeMaskRdataDlg, RCA4TypeMaskWdataDlg)},
		"00000000 00000001 00000003", 0)
	checkGolden(t, &CBRecallAnyRes{Status: OK}, "00000000", 0)
	checkGolden(t, &CBGetattrArgs{FH: gfh, AttrRequest: BitmapOf(AttrChange, AttrSize)}, gfhHex+"00000001 00000018", 0)
	checkGolden(t, &CBRecallSlotArgs{TargetHighestSlotID: 3}, "00000003", 0)
	checkGolden(t, &CBCompoundRes{Status: ErrOpIllegal, Ops: []CBResOp{&CBIllegalRes{Status: ErrOpIllegal}}},
		"0000273c 00000000 00000001 0000273c 0000273c", 0)
}

func TestCBRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, op := range allCBOps() {
		if newCBArgOp(op).CBOp() != op || newCBResOp(op).CBOp() != op {
			t.Fatalf("%v: types disagree", op)
		}
		for range 60 {
			a, r := newCBArgOp(op), newCBResOp(op)
			fill(rng, reflect.ValueOf(a).Elem())
			fill(rng, reflect.ValueOf(r).Elem())
			checkRoundTrip(t, a, func() codec { return newCBArgOp(op) })
			checkRoundTrip(t, r, func() codec { return newCBResOp(op) })
		}
	}
	for range 300 {
		a, r := randCBCompound(rng)
		checkRoundTrip(t, a, func() codec { return &CBCompoundArgs{} })
		checkRoundTrip(t, r, func() codec { return &CBCompoundRes{} })
	}
}

func TestCBRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		v    codec
		hex  string
		want error
	}{
		{"65 operations", &CBCompoundArgs{}, "00000000 00000001 00000000 00000041", xdr.ErrTooLong},
		{"65 referring call lists", &CBSequenceArgs{}, zeros(16) + "00000000 00000000 00000000 00000000 00000041", xdr.ErrTooLong},
		{"more referring calls than bytes", &CBSequenceArgs{}, zeros(16) + "00000000 00000000 00000000 00000000 00000001" + zeros(16) + "00000002 00000000 00000000", xdr.ErrCount},
		{"cachethis not a bool", &CBSequenceArgs{}, zeros(16) + "00000000 00000000 00000000 00000005", xdr.ErrBool},
		{"recall handle over 128 bytes", &CBRecallArgs{}, zeros(16) + "00000000 00000081" + zeros(132), xdr.ErrTooLong},
	} {
		err := decode(c.v, rpc.Body{XDR: mustHex(t, c.hex)})
		if err == nil || !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// CB_LAYOUTRECALL, which this codec does not decode, and an unknown
	// number, in arguments and in results.
	for _, c := range []struct {
		num  uint32
		want string
	}{
		{5, "nfs4: CB_COMPOUND operation 5 (CB_LAYOUTRECALL) at index 0 is not decoded by this codec, so nothing after it can be"},
		{99, "nfs4: CB_COMPOUND operation 99 (unknown) at index 0 is not decoded by this codec, so nothing after it can be"},
	} {
		var ue *UnknownOpError
		err := decode(&CBCompoundArgs{}, rpc.Body{XDR: mustHex(t, "00000000 00000001 00000000 00000001"+xdrU32(c.num)+"00000000")})
		if !errors.As(err, &ue) || !ue.Callback || ue.Error() != c.want {
			t.Errorf("args with op %d: %v", c.num, err)
		}
		err = decode(&CBCompoundRes{}, rpc.Body{XDR: mustHex(t, "00000000 00000000 00000001"+xdrU32(c.num)+"00000000")})
		if !errors.As(err, &ue) || ue.Op != c.num {
			t.Errorf("results with op %d: %v", c.num, err)
		}
	}
}

func TestCBOpStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{OpCBSequence.String(), "CB_SEQUENCE"}, {OpCBNotifyDeviceID.String(), "CB_NOTIFY_DEVICEID"},
		{OpCBIllegal.String(), "CB_ILLEGAL"}, {CBOp(2).String(), "cb_op(2)"}, {OpCBRecallAny.String(), "CB_RECALL_ANY"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
