package nfs4

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

var (
	gsid = SessionID{0xa0, 15: 0xaf}
	gfh  = FileHandle{1, 2, 3, 4, 5, 6, 7, 8}
)

const (
	gsidHex = " a00000000000000000000000000000af "
	gfhHex  = " 00000008 0102030405060708 "
	zeroSID = " 00000000 000000000000000000000000 " // the anonymous stateid
)

// goldenRead is a SEQUENCE, PUTFH, READ COMPOUND as a client sends it,
// and its reply, written by hand from RFC 5662.
func goldenRead() (*CompoundArgs, string, *CompoundRes, string) {
	args := &CompoundArgs{MinorVersion: 1, Ops: []ArgOp{
		&SequenceArgs{SessionID: gsid, SequenceID: 1},
		&PutFHArgs{FH: gfh},
		&ReadArgs{Offset: 0x1000, Count: 0x1000},
	}}
	argsHex := "00000000 00000001 00000003" + // tag "", minorversion 1, 3 operations
		" 00000035" + gsidHex + "00000001 00000000 00000000 00000000" + // SEQUENCE
		" 00000016" + gfhHex + // PUTFH
		" 00000019" + zeroSID + "0000000000001000 00001000" // READ
	res := &CompoundRes{Ops: []ResOp{
		&SequenceRes{SessionID: gsid, SequenceID: 1, TargetHighestSlotID: 63},
		&PutFHRes{},
		&ReadRes{EOF: true, Data: []byte("hello")},
	}}
	resHex := "00000000 00000000 00000003" + // NFS4_OK, tag "", 3 results
		" 00000035 00000000" + gsidHex + "00000001 00000000 00000000 0000003f 00000000" + // SEQUENCE
		" 00000016 00000000" + // PUTFH
		" 00000019 00000000 00000001 00000005 68656c6c6f000000" // READ: eof, "hello"
	return args, argsHex, res, resHex
}

func TestReadCompoundGolden(t *testing.T) {
	args, argsHex, res, resHex := goldenRead()
	checkGolden(t, args, argsHex, 0)
	checkGolden(t, res, resHex, 1)
	io, ok := args.IO()
	if !ok || io != (IO{OpRead, 2, 0x1000}) || args.DDPResults() != 1 {
		t.Errorf("IO %+v %v, DDPResults %d", io, ok, args.DDPResults())
	}
	// The client passes its READ result with a buffer; the data lands
	// there, whether the transport placed it or it came inline.
	buf := make([]byte, 8)
	read := &ReadRes{Buf: buf}
	r := CompoundRes{Ops: []ResOp{&SequenceRes{}, &PutFHRes{}, read}}
	body, _ := encode(res)
	if err := decode(&r, body); err != nil || string(read.Data) != "hello" || &read.Data[0] != &buf[0] {
		t.Fatalf("into Buf: %q %v", read.Data, err)
	}
	read.Buf = make([]byte, 4)
	if err := decode(&r, rpc.Body{XDR: mustHex(t, resHex)}); !errors.Is(err, xdr.ErrTooLong) {
		t.Fatalf("into a short Buf: %v", err)
	}
}

// A GETATTR reply with the fattr4 of goldenAttr.
func TestGetattrCompoundGolden(t *testing.T) {
	checkGolden(t, &CompoundArgs{MinorVersion: 1, Ops: []ArgOp{&PutRootFHArgs{}, &GetFHArgs{},
		&GetattrArgs{AttrRequest: Bitmap{0x0010011a, 0x0020001a}}}},
		"00000000 00000001 00000003 00000018 0000000a 00000009 00000002 0010011a 0020001a", 0)
	checkGolden(t, &CompoundRes{Ops: []ResOp{&PutRootFHRes{}, &GetFHRes{FH: gfh}, &GetattrRes{Attr: goldenAttr}}},
		"00000000 00000000 00000003 00000018 00000000 0000000a 00000000"+gfhHex+
			"00000009 00000000 "+goldenAttrHex, 0)
	// A failed operation ends the reply.
	checkGolden(t, &CompoundRes{Status: ErrNoEnt, Ops: []ResOp{&PutRootFHRes{}, &LookupRes{Status: ErrNoEnt}}},
		"00000002 00000000 00000002 00000018 00000000 0000000f 00000002", 0)
}

func TestFileOpsGolden(t *testing.T) {
	stid := StateID{Seqid: 1, Other: [12]byte{0xc0, 11: 0xcb}}
	const stidHex = " 00000001 c000000000000000000000cb "
	cases := []struct {
		name  string
		v     codec
		hex   string
		items int
	}{
		{"WRITE4args", &WriteArgs{StateID: stid, Offset: 1, Stable: FileSync, Data: []byte("hi")},
			stidHex + "0000000000000001 00000002 00000002 68690000", 1},
		{"WRITE4res", &WriteRes{Count: 2, Committed: Unstable, Verifier: Verifier{1, 2, 3, 4, 5, 6, 7, 8}},
			"00000000 00000002 00000000 0102030405060708", 0},
		{"COMMIT4args", &CommitArgs{Offset: 0, Count: 0}, "0000000000000000 00000000", 0},
		{"LOOKUP4args", &LookupArgs{Name: "hello"}, "00000005 68656c6c6f000000", 0},
		{"ACCESS4res", &AccessRes{Supported: 0x3f, Access: Access4Read | Access4Lookup}, "00000000 0000003f 00000003", 0},
		{"SETATTR4args", &SetattrArgs{StateID: stid, Attr: SetAttr{SetSize: true, Size: 7}},
			stidHex + "00000001 00000010 00000008 0000000000000007", 0},
		{"SETATTR4res failed", &SetattrRes{Status: ErrPerm}, "00000001 00000000", 0},
		{"OPEN4args CLAIM_NULL GUARDED4", &OpenArgs{ShareAccess: ShareAccessBoth | ShareAccessWantNoDeleg,
			Owner: StateOwner{ClientID: 5, Owner: []byte("own")}, Create: true, CreateMode: Guarded,
			CreateAttr: SetAttr{SetMode: true, Mode: 0o644}, Claim: ClaimNull, Name: "f"},
			"00000000 00000403 00000000 0000000000000005 00000003 6f776e00" +
				" 00000001 00000001 00000002 00000000 00000002 00000004 000001a4" + // OPEN4_CREATE GUARDED4 {mode}
				" 00000000 00000001 66000000", 0}, // CLAIM_NULL "f"
		{"OPEN4args CLAIM_FH EXCLUSIVE4_1", &OpenArgs{ShareAccess: ShareAccessRead, Create: true,
			CreateMode: Exclusive41, CreateVerf: Verifier{9, 8, 7, 6, 5, 4, 3, 2}, Claim: ClaimFH},
			"00000000 00000001 00000000 0000000000000000 00000000" +
				" 00000001 00000003 0908070605040302 00000000 00000000 00000004", 0},
		{"OPEN4args CLAIM_PREVIOUS", &OpenArgs{ShareAccess: ShareAccessRead, Claim: ClaimPrevious, DelegType: DelegRead},
			"00000000 00000001 00000000 0000000000000000 00000000 00000000 00000001 00000001", 0},
		{"OPEN4args CLAIM_DELEGATE_CUR", &OpenArgs{Claim: ClaimDelegateCur, DelegStateID: stid, Name: "g"},
			"00000000 00000000 00000000 0000000000000000 00000000 00000000 00000002" + stidHex + "00000001 67000000", 0},
		{"OPEN4res read delegation", &OpenRes{StateID: stid, CInfo: ChangeInfo{Atomic: true, Before: 1, After: 2},
			RFlags: OpenResultLocktypePosix, Delegation: OpenDelegation{Type: DelegRead, StateID: stid,
				Permissions: ACE{Who: "EVERYONE@"}}},
			"00000000" + stidHex + "00000001 0000000000000001 0000000000000002 00000004 00000000" +
				" 00000001" + stidHex + "00000000 00000000 00000000 00000000 00000009 45564552594f4e4540000000", 0},
		{"OPEN4res write delegation", &OpenRes{StateID: stid, Delegation: OpenDelegation{Type: DelegWrite, StateID: stid,
			SpaceLimit: SpaceLimit{LimitBy: LimitSize, FileSize: 1 << 40}}},
			"00000000" + stidHex + "00000000 0000000000000000 0000000000000000 00000000 00000000" +
				" 00000002" + stidHex + "00000000 00000001 0000010000000000 00000000 00000000 00000000 00000000", 0},
		{"OPEN4res none_ext", &OpenRes{StateID: stid, Delegation: OpenDelegation{Type: DelegNoneExt, WhyNone: WNDContention, WillPushOrSignal: true}},
			"00000000" + stidHex + "00000000 0000000000000000 0000000000000000 00000000 00000000 00000003 00000001 00000001", 0},
		{"CLOSE4args", &CloseArgs{StateID: stid}, "00000000" + stidHex, 0},
		{"CREATE4args NF4DIR", &CreateArgs{Type: TypeDir, Name: "d", Attr: SetAttr{SetMode: true, Mode: 0o755}},
			"00000002 00000001 64000000 00000002 00000000 00000002 00000004 000001ed", 0},
		{"CREATE4args NF4LNK", &CreateArgs{Type: TypeLnk, LinkData: "../t", Name: "l"},
			"00000005 00000004 2e2e2f74 00000001 6c000000 00000000 00000000", 1},
		{"CREATE4args NF4CHR", &CreateArgs{Type: TypeChr, DevData: SpecData{1, 3}, Name: "null"},
			"00000004 00000001 00000003 00000004 6e756c6c 00000000 00000000", 0},
		{"CREATE4args NF4FIFO", &CreateArgs{Type: TypeFIFO, Name: "p"}, "00000007 00000001 70000000 00000000 00000000", 0},
		{"CREATE4res", &CreateRes{CInfo: ChangeInfo{Before: 1, After: 2}, AttrSet: Bitmap{0, 2}},
			"00000000 00000000 0000000000000001 0000000000000002 00000002 00000000 00000002", 0},
		{"READLINK4res", &ReadlinkRes{Link: "x"}, "00000000 00000001 78000000", 1},
		{"RENAME4args", &RenameArgs{OldName: "a", NewName: "bc"}, "00000001 61000000 00000002 62630000", 0},
		{"RENAME4res", &RenameRes{Source: ChangeInfo{Before: 1}, Target: ChangeInfo{After: 2}},
			"00000000 00000000 0000000000000001 0000000000000000 00000000 0000000000000000 0000000000000002", 0},
		{"READDIR4args", &ReaddirArgs{DirCount: 4096, MaxCount: 32768, AttrRequest: Bitmap{0x00100002}},
			"0000000000000000 0000000000000000 00001000 00008000 00000001 00100002", 0},
		{"READDIR4res", &ReaddirRes{CookieVerf: Verifier{1}, EOF: true, Entries: []Entry{
			{Cookie: 3, Name: "a", Attr: Attr{Mask: BitmapOf(AttrType, AttrFileID), Type: TypeReg, FileID: 7}},
			{Cookie: 4, Name: "b"}}},
			"00000000 0100000000000000" +
				" 00000001 0000000000000003 00000001 61000000 00000001 00100002 0000000c 00000001 0000000000000007" +
				" 00000001 0000000000000004 00000001 62000000 00000000 00000000" +
				" 00000000 00000001", 0},
		{"SECINFO_NO_NAME4args", &SecinfoNoNameArgs{Style: SecinfoStyleParent}, "00000001", 0},
		{"SECINFO_NO_NAME4res", &SecinfoNoNameRes{Flavors: []SecInfo{
			{Flavor: rpc.RPCSECGSS, OID: []byte{0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02}, Service: GSSSvcIntegrity},
			{Flavor: rpc.AuthSys}}},
			"00000000 00000002 00000006 00000009 2a864886f7120102 02000000 00000000 00000002 00000001", 0},
		{"TEST_STATEID4args", &TestStateIDArgs{StateIDs: []StateID{stid, {}}}, "00000002" + stidHex + zeroSID, 0},
		{"TEST_STATEID4res", &TestStateIDRes{Codes: []Stat{OK, ErrBadStateID}}, "00000000 00000002 00000000 00002729", 0},
		{"FREE_STATEID4args", &FreeStateIDArgs{StateID: stid}, stidHex, 0},
		{"DELEGRETURN4res", &DelegReturnRes{Status: ErrBadStateID}, "00002729", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkGolden(t, c.v, c.hex, c.items) })
	}
}

func TestFileOpsRejects(t *testing.T) {
	sid := "00000000 000000000000000000000000"
	open := "00000000 00000000 00000000 0000000000000000 00000000 "
	cases := []struct {
		name string
		v    codec
		hex  string
		want error
	}{
		{"handle over 128 bytes", &PutFHArgs{}, "00000081" + strings.Repeat("00", 132), xdr.ErrTooLong},
		{"name over 1024 bytes", &LookupArgs{}, "00000401" + strings.Repeat("61", 1028), xdr.ErrTooLong},
		{"bad stable_how4", &WriteArgs{}, sid + "0000000000000000 00000003 00000000", nil},
		{"data over MaxData", &ReadRes{}, "00000000 00000000 00400001", xdr.ErrTooLong},
		{"createmode4 4", &OpenArgs{}, open + "00000001 00000004", nil},
		{"open_claim_type4 7", &OpenArgs{}, open + "00000000 00000007", nil},
		{"CLAIM_PREVIOUS delegation type 4", &OpenArgs{}, open + "00000000 00000001 00000004", nil},
		{"openflag4 not a bool", &OpenArgs{}, open + "00000002", xdr.ErrBool},
		{"limit_by4 3", &OpenRes{}, "00000000" + sid + "00000000" + strings.Repeat("00", 16) + "00000000 00000000 00000002" + sid + "00000000 00000003", nil},
		{"why_no_delegation4 9", &OpenRes{}, "00000000" + sid + "00000000" + strings.Repeat("00", 16) + "00000000 00000000 00000003 00000009", nil},
		{"open_delegation_type4 4", &OpenRes{}, "00000000" + sid + "00000000" + strings.Repeat("00", 16) + "00000000 00000000 00000004", nil},
		{"rpc_gss_svc_t 4", &SecinfoNoNameRes{}, "00000000 00000001 00000006 00000000 00000000 00000004", nil},
		{"secinfo_style4 2", &SecinfoNoNameArgs{}, "00000002", nil},
		{"17 flavors", &SecinfoNoNameRes{}, "00000000 00000011", xdr.ErrTooLong},
		{"more stateids than bytes", &TestStateIDArgs{}, "00000002" + sid, xdr.ErrCount},
		{"link over MaxPath", &ReadlinkRes{}, "00000000 00001001", xdr.ErrTooLong},
		{"READDIR entry not a bool", &ReaddirRes{}, "00000000 0000000000000000 00000002", xdr.ErrBool},
		{"entry fattr4 with acl before fileid", &ReaddirRes{}, "00000000 0000000000000000 00000001 0000000000000001 00000000 00000001 00101000 00000000", nil},
	}
	for _, c := range cases {
		err := decode(c.v, rpc.Body{XDR: mustHex(t, c.hex)})
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// IO finds the one READ or WRITE of a COMPOUND, and refuses two or a
// READ beside another DDP-eligible operation.
func TestCompoundIO(t *testing.T) {
	seq := &SequenceArgs{}
	for _, c := range []struct {
		ops  []ArgOp
		io   IO
		ok   bool
		ddpr int
	}{
		{[]ArgOp{seq, &PutFHArgs{}, &WriteArgs{Data: make([]byte, 300)}, &GetattrArgs{}}, IO{OpWrite, 2, 300}, true, 0},
		{[]ArgOp{seq, &PutFHArgs{}, &ReadArgs{Count: 9}, &CreateArgs{Type: TypeDir}}, IO{OpRead, 2, 9}, true, 1},
		{[]ArgOp{seq, &ReadArgs{}, &ReadArgs{}}, IO{}, false, 2},
		{[]ArgOp{seq, &ReadArgs{}, &WriteArgs{}}, IO{}, false, 1},
		{[]ArgOp{seq, &ReadArgs{}, &ReadlinkArgs{}}, IO{}, false, 2},
		{[]ArgOp{seq, &WriteArgs{}, &CreateArgs{Type: TypeLnk}}, IO{}, false, 0},
		{[]ArgOp{seq, &GetattrArgs{}}, IO{}, false, 0},
	} {
		a := CompoundArgs{Ops: c.ops}
		io, ok := a.IO()
		if io != c.io || ok != c.ok || a.DDPResults() != c.ddpr {
			t.Errorf("%v: IO %+v %v, DDPResults %d", c.ops, io, ok, a.DDPResults())
		}
	}
	for _, o := range allOps() {
		if o.DDPArg() != (o == OpWrite || o == OpCreate) || o.DDPResult() != (o == OpRead || o == OpReadlink) {
			t.Errorf("%v: DDPArg %v DDPResult %v", o, o.DDPArg(), o.DDPResult())
		}
	}
}

func TestFileOpStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Exclusive41.String(), "EXCLUSIVE4_1"}, {ClaimDelegPrevFH.String(), "CLAIM_DELEG_PREV_FH"},
		{DelegNoneExt.String(), "OPEN_DELEGATE_NONE_EXT"}, {WNDIsDir.String(), "WND4_IS_DIR"},
		{FileSync.String(), "FILE_SYNC4"}, {StableHow(3).String(), "stable_how4(3)"},
		{SecinfoStyleParent.String(), "SECINFO_STYLE4_PARENT"}, {GSSSvcPrivacy.String(), "RPC_GSS_SVC_PRIVACY"},
		{CreateMode(4).String(), "createmode4(4)"}, {ClaimType(9).String(), "open_claim_type4(9)"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

// ReplySize bounds the results of every COMPOUND whose results answer
// its arguments: GETATTR and READDIR attributes among those asked for,
// READDIR within maxcount, TEST_STATEID one status a stateid. READ data
// is left out, READLINK's link counted.
func TestReplySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for range 2000 {
		_, res := randCompound(rng)
		args := &CompoundArgs{Tag: res.Tag}
		for _, r := range res.Ops {
			a := newArgOp(r.Op())
			fill(rng, reflect.ValueOf(a).Elem())
			switch r := r.(type) {
			case *GetattrRes:
				a.(*GetattrArgs).AttrRequest = r.Attr.Mask
			case *ReaddirRes:
				var b rpc.Body
				r.Append(&b)
				a.(*ReaddirArgs).MaxCount = uint32(len(b.XDR) - 4)
			case *TestStateIDRes:
				a.(*TestStateIDArgs).StateIDs = make([]StateID, len(r.Codes))
			}
			args.Ops = append(args.Ops, a)
		}
		var b rpc.Body
		res.Append(&b)
		n := len(b.XDR) // less the DDP items, READ data and READLINK links
		for _, op := range res.Ops {
			if rl, ok := op.(*ReadlinkRes); ok && rl.Status == OK {
				n += xdr.RoundUp(len(rl.Link))
			}
		}
		if max := args.ReplySize(); n > max {
			t.Fatalf("%v: %d-byte results over ReplySize %d", res, n, max)
		}
	}
	// A GETATTR of supported_attrs and lease_time fits a 1 KiB inline
	// reply, one of owner strings does not; asking for acl makes it huge.
	small := CompoundArgs{Ops: []ArgOp{&SequenceArgs{}, &PutRootFHArgs{}, &GetattrArgs{AttrRequest: BitmapOf(AttrSupportedAttrs, AttrLeaseTime)}}}
	owner := CompoundArgs{Ops: []ArgOp{&SequenceArgs{}, &PutFHArgs{}, &GetattrArgs{AttrRequest: BitmapOf(AttrOwner, AttrOwnerGroup)}}}
	acl := CompoundArgs{Ops: []ArgOp{&GetattrArgs{AttrRequest: BitmapOf(AttrACL)}}}
	if s, o, a := small.ReplySize(), owner.ReplySize(), acl.ReplySize(); s > 1024 || o <= 1024 || a < MaxAttrLen {
		t.Errorf("ReplySize: small GETATTR %d, owners %d, acl %d", s, o, a)
	}
}
