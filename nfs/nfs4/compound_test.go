package nfs4

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// allOps lists every operation this codec decodes.
func allOps() []Op {
	var ops []Op
	for o := OpAccess; o <= OpReclaimComplete; o++ {
		if newArgOp(o) != nil {
			ops = append(ops, o)
		}
	}
	return append(ops, OpIllegal)
}

// randArgOp and randResOp return op's arguments or results filled at
// random.
func randArgOp(rng *rand.Rand, op Op) ArgOp {
	a := newArgOp(op)
	fill(rng, reflect.ValueOf(a).Elem())
	return a
}

func randResOp(rng *rand.Rand, op Op) ResOp {
	r := newResOp(op)
	fill(rng, reflect.ValueOf(r).Elem())
	return r
}

func randCompound(rng *rand.Rand) (*CompoundArgs, *CompoundRes) {
	ops := allOps()
	n := rng.IntN(6)
	a := &CompoundArgs{Tag: string(randBytes(rng, rng.IntN(8))), MinorVersion: 1}
	r := &CompoundRes{Status: Stat(rng.IntN(2) * int(ErrDelay)), Tag: a.Tag}
	for range n {
		op := ops[rng.IntN(len(ops))]
		a.Ops = append(a.Ops, randArgOp(rng, op))
		r.Ops = append(r.Ops, randResOp(rng, op))
	}
	return a, r
}

// Every operation's arguments and results, filled at random, round-trip
// and reject every truncation; so do COMPOUNDs of them.
func TestOpsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, op := range allOps() {
		if newResOp(op) == nil || newArgOp(op).Op() != op || newResOp(op).Op() != op {
			t.Fatalf("%v: types disagree", op)
		}
		for range 60 {
			checkRoundTrip(t, randArgOp(rng, op), func() codec { return newArgOp(op) })
			checkRoundTrip(t, randResOp(rng, op), func() codec { return newResOp(op) })
		}
	}
	for range 300 {
		a, r := randCompound(rng)
		checkRoundTrip(t, a, func() codec { return &CompoundArgs{} })
		checkRoundTrip(t, r, func() codec { return &CompoundRes{} })
	}
}

// The EXCHANGE_ID COMPOUND Linux's client sends first, less its flags,
// and a reply, written by hand from RFC 5662.
func TestExchangeIDGolden(t *testing.T) {
	checkGolden(t, &CompoundArgs{MinorVersion: 1, Ops: []ArgOp{&ExchangeIDArgs{
		Verifier: Verifier{1, 2, 3, 4, 5, 6, 7, 8}, OwnerID: []byte("client"), Flags: ExchgIDFlagUseNonPNFS,
		ImplID: &ImplID{Domain: "kernel.org", Name: "Linux"}}}},
		"00000000"+ // tag ""
			" 00000001"+ // minorversion 1
			" 00000001"+ // one operation
			" 0000002a"+ // OP_EXCHANGE_ID
			" 0102030405060708"+ // co_verifier
			" 00000006 636c69656e740000"+ // co_ownerid "client"
			" 00010000"+ // EXCHGID4_FLAG_USE_NON_PNFS
			" 00000000"+ // SP4_NONE
			" 00000001"+ // eia_client_impl_id<1>: one
			" 0000000a 6b65726e656c2e6f72670000"+ // nii_domain "kernel.org"
			" 00000005 4c696e7578000000"+ // nii_name "Linux"
			" 0000000000000000 00000000", 0) // nii_date
	checkGolden(t, &CompoundRes{Status: OK, Ops: []ResOp{&ExchangeIDRes{Status: OK, ClientID: 0x1122334455667788,
		SequenceID: 1, Flags: ExchgIDFlagUseNonPNFS | ExchgIDFlagConfirmedR, ServerMajorID: []byte("srv"), ServerScope: []byte("srv")}}},
		"00000000 00000000 00000001"+ // NFS4_OK, tag "", one result
			" 0000002a 00000000"+ // OP_EXCHANGE_ID, NFS4_OK
			" 1122334455667788 00000001 80010000"+ // clientid, sequenceid, flags
			" 00000000"+ // SP4_NONE
			" 0000000000000000 00000003 73727600"+ // server_owner4
			" 00000003 73727600"+ // eir_server_scope
			" 00000000", 0) // no eir_server_impl_id
	checkGolden(t, &CompoundRes{Status: ErrClidInUse, Tag: "x", Ops: []ResOp{&ExchangeIDRes{Status: ErrClidInUse}}},
		"00002721 00000001 78000000 00000001 0000002a 00002721", 0)
}

func TestCreateSessionGolden(t *testing.T) {
	fore := ChannelAttrs{MaxRequestSize: 0x100400, MaxResponseSize: 0x100400, MaxResponseSizeCached: 0x1000,
		MaxOperations: 8, MaxRequests: 64}
	back := ChannelAttrs{MaxRequestSize: 4096, MaxResponseSize: 4096, MaxOperations: 2, MaxRequests: 1}
	foreIRD := fore
	foreIRD.HasRDMAIRD, foreIRD.RDMAIRD = true, 16
	const backHex = " 00000000 00001000 00001000 00000000 00000002 00000001 00000000"
	checkGolden(t, &CreateSessionArgs{ClientID: 0x1122334455667788, Sequence: 1, Flags: CreateSessionFlagConnBackChan,
		Fore: foreIRD, Back: back, CBProgram: CBProgram, SecParms: []CallbackSec{
			{Flavor: rpc.AuthSys, Sys: rpc.AuthSysParms{Stamp: 1, MachineName: "host"}}, {Flavor: rpc.AuthNone}}},
		"1122334455667788 00000001 00000002"+ // clientid, sequence, CONN_BACK_CHAN
			" 00000000 00100400 00100400 00001000 00000008 00000040 00000001 00000010"+ // fore, ca_rdma_ird 16
			backHex+
			" 40000000"+ // csa_cb_program
			" 00000002"+ // two callback_sec_parms4
			" 00000001 00000001 00000004 686f7374 00000000 00000000 00000000"+ // AUTH_SYS
			" 00000000", 0) // AUTH_NONE
	checkGolden(t, &CreateSessionRes{Status: OK, SessionID: SessionID{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		Sequence: 1, Flags: CreateSessionFlagConnBackChan, Fore: fore, Back: back},
		"00000000 000102030405060708090a0b0c0d0e0f 00000001 00000002"+
			" 00000000 00100400 00100400 00001000 00000008 00000040 00000000"+backHex, 0)
}

func TestSessionOpsGolden(t *testing.T) {
	sid := SessionID{0xa0, 15: 0xaf}
	const sidHex = "a00000000000000000000000000000af"
	checkGolden(t, &SequenceArgs{SessionID: sid, SequenceID: 7, SlotID: 2, HighestSlotID: 9, CacheThis: true},
		sidHex+" 00000007 00000002 00000009 00000001", 0)
	checkGolden(t, &SequenceRes{Status: OK, SessionID: sid, SequenceID: 7, SlotID: 2, HighestSlotID: 9,
		TargetHighestSlotID: 4, StatusFlags: SeqStatusCBPathDown},
		"00000000"+sidHex+" 00000007 00000002 00000009 00000004 00000001", 0)
	checkGolden(t, &SequenceRes{Status: ErrBadSession}, "00002744", 0)
	checkGolden(t, &BindConnToSessionArgs{SessionID: sid, Dir: CDFC4BackOrBoth}, sidHex+" 00000007 00000000", 0)
	checkGolden(t, &BindConnToSessionRes{Status: OK, SessionID: sid, Dir: CDFC4ForeOrBoth}, "00000000"+sidHex+" 00000003 00000000", 0)
	checkGolden(t, &DestroySessionArgs{SessionID: sid}, sidHex, 0)
	checkGolden(t, &DestroyClientIDArgs{ClientID: 5}, "0000000000000005", 0)
	checkGolden(t, &ReclaimCompleteArgs{OneFS: false}, "00000000", 0)
	checkGolden(t, &ReclaimCompleteRes{Status: ErrCompleteAlready}, "00002746", 0)
}

func TestCompoundRejects(t *testing.T) {
	cases := []struct {
		name string
		v    codec
		hex  string
		want error
	}{
		{"tag too long", &CompoundArgs{}, "00000401", xdr.ErrTooLong},
		{"65 operations", &CompoundArgs{}, "00000000 00000001 00000041", xdr.ErrTooLong},
		{"more operations than bytes", &CompoundArgs{}, "00000000 00000001 00000003 00000018 00000018", xdr.ErrCount},
		{"more results than bytes", &CompoundRes{}, "00000000 00000000 00000002 00000018 00000000", xdr.ErrCount},
		{"state protection SP4_MACH_CRED", &ExchangeIDArgs{}, "0000000000000000 00000000 00000000 00000001", nil},
		{"state protection 3", &ExchangeIDArgs{}, "0000000000000000 00000000 00000000 00000003", nil},
		{"impl_id<1> of two", &ExchangeIDArgs{}, "0000000000000000 00000000 00000000 00000000 00000002" + zeros(48), xdr.ErrTooLong},
		{"owner over 1024 bytes", &ExchangeIDArgs{}, "0000000000000000 00000401" + zeros(1028), xdr.ErrTooLong},
		{"RPCSEC_GSS callback", &CreateSessionArgs{}, "0000000000000000 00000000 00000000" + zeros(56) + "00000000 00000001 00000006", nil},
		{"callback flavor 9", &CreateSessionArgs{}, "0000000000000000 00000000 00000000" + zeros(56) + "00000000 00000001 00000009", nil},
		{"ca_rdma_ird<1> of two", &CreateSessionRes{}, "00000000" + zeros(24) + zeros(24) + "00000002 00000000 00000000", xdr.ErrTooLong},
		{"channel dir 4", &BindConnToSessionArgs{}, zeros(16) + "00000004 00000000", nil},
		{"server channel dir 7", &BindConnToSessionRes{}, "00000000" + zeros(16) + "00000007 00000000", nil},
	}
	for _, c := range cases {
		err := decode(c.v, rpc.Body{XDR: mustHex(t, c.hex)})
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// An operation the codec does not decode fails the COMPOUND with an error
// naming it; the operations before it are kept.
func TestUnknownOp(t *testing.T) {
	for _, c := range []struct {
		num  uint32
		want string
	}{
		{12, "nfs4: COMPOUND operation 12 (LOCK) at index 1 is not decoded by this codec, so nothing after it can be"},
		{99, "nfs4: COMPOUND operation 99 (unknown) at index 1 is not decoded by this codec, so nothing after it can be"},
	} {
		in := mustHex(t, "00000000 00000001 00000003 0000003a 00000000"+xdrU32(c.num)+"00000000 00000000 00000000")
		var a CompoundArgs
		err := decode(&a, rpc.Body{XDR: in})
		var ue *UnknownOpError
		if !errors.As(err, &ue) || ue.Op != c.num || ue.Index != 1 || ue.Error() != c.want {
			t.Fatalf("op %d: %v", c.num, err)
		}
		if len(a.Ops) != 1 || a.Ops[0].Op() != OpReclaimComplete {
			t.Fatalf("op %d: kept %v", c.num, a.Ops)
		}
		var r CompoundRes
		in = mustHex(t, "00000000 00000000 00000001"+xdrU32(c.num)+"00000000")
		if err := decode(&r, rpc.Body{XDR: in}); !errors.As(err, &ue) || ue.Op != c.num || ue.Index != 0 {
			t.Fatalf("op %d in results: %v", c.num, err)
		}
	}
	// A server answers an operation number it does not know with
	// OP_ILLEGAL and NFS4ERR_OP_ILLEGAL (RFC 8881 Section 18.52).
	checkGolden(t, &CompoundRes{Status: ErrOpIllegal, Ops: []ResOp{&IllegalRes{Status: ErrOpIllegal}}},
		"0000273c 00000000 00000001 0000273c 0000273c", 0)
}

func xdrU32(v uint32) string {
	b := xdr.AppendUint32(nil, v)
	const h = "0123456789abcdef"
	s := ""
	for _, c := range b {
		s += string(h[c>>4]) + string(h[c&15])
	}
	return " " + s + " "
}

// CompoundRes.Decode fills the result values the caller passes when they
// match the reply's operations.
func TestCompoundResGiven(t *testing.T) {
	seq := &SequenceRes{}
	rc := &ReclaimCompleteRes{}
	wrong := &DestroySessionRes{}
	r := CompoundRes{Ops: []ResOp{seq, wrong, rc}}
	in := mustHex(t, "00000000 00000000 00000002 00000035 00002744 0000003a 00002746")
	if err := decode(&r, rpc.Body{XDR: in}); err != nil {
		t.Fatal(err)
	}
	if len(r.Ops) != 2 || r.Ops[0] != ResOp(seq) || seq.Status != ErrBadSession || r.Ops[1] == ResOp(wrong) ||
		r.Ops[1].OpStatus() != ErrCompleteAlready || rc.Status != 0 {
		t.Fatalf("%+v", r.Ops)
	}
}

func TestOpStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{OpSequence.String(), "SEQUENCE"}, {OpAccess.String(), "ACCESS"}, {OpReclaimComplete.String(), "RECLAIM_COMPLETE"},
		{OpIllegal.String(), "ILLEGAL"}, {Op(2).String(), "op(2)"}, {Op(59).String(), "op(59)"},
		{OpSecinfoNoName.String(), "SECINFO_NO_NAME"}, {SP4MachCred.String(), "SP4_MACH_CRED"},
		{CDFC4BackOrBoth.String(), "CDFC4_BACK_OR_BOTH"}, {ChannelDir(4).String(), "channel_dir(4)"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

func TestCompoundStrings(t *testing.T) {
	args, _, _, _ := goldenRead()
	cb, _, cbr, _ := goldenCB()
	for _, c := range []struct{ got, want string }{
		{args.String(), "COMPOUND SEQUENCE PUTFH READ"},
		{(&CompoundArgs{Tag: "ls"}).String(), `COMPOUND ["ls"]`},
		{(&CompoundRes{Status: ErrNoEnt, Tag: "x", Ops: []ResOp{&PutRootFHRes{}, &LookupRes{Status: ErrNoEnt}}}).String(),
			`NFS4ERR_NOENT ["x"]: PUTROOTFH NFS4_OK, LOOKUP NFS4ERR_NOENT`},
		{cb.String(), "CB_COMPOUND CB_SEQUENCE CB_RECALL"},
		{cbr.String(), "NFS4_OK: CB_SEQUENCE NFS4_OK, CB_RECALL NFS4_OK"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

// BenchmarkReadCompound encodes a SEQUENCE, PUTFH, READ COMPOUND and
// decodes its reply, the 4 KiB of data held apart as a transport hands it
// over.
func BenchmarkReadCompound(b *testing.B) {
	args, _, res, _ := goldenRead()
	res.Ops[2].(*ReadRes).Data = make([]byte, 4096)
	var reply rpc.Body
	res.Append(&reply)
	seq, read := &SequenceRes{}, &ReadRes{Buf: make([]byte, 4096)}
	given := []ResOp{seq, &PutFHRes{}, read}
	var call rpc.Body
	var d rpc.BodyDecoder // reused: passed to the operations' Decode, it escapes
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		call.XDR, call.Items = call.XDR[:0], call.Items[:0]
		args.Append(&call)
		r := CompoundRes{Ops: given}
		d.Reset(reply)
		if err := r.Decode(&d); err != nil || d.Done() != nil {
			b.Fatal(err)
		}
	}
}
