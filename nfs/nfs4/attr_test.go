package nfs4

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// goldenAttr is a fattr4 of several attributes and its encoding, written
// by hand from RFC 5662: bitmap4 {type, change, size, fsid, fileid |
// mode, numlinks, owner, time_modify}, then the attrlist4.
var goldenAttr = Attr{
	Mask: BitmapOf(AttrType, AttrChange, AttrSize, AttrFSID, AttrFileID, AttrMode, AttrNumLinks, AttrOwner, AttrTimeModify),
	Type: TypeReg, Change: 0x1234, Size: 5, FSID: FSID{1, 2}, FileID: 42, Mode: 0o644, NumLinks: 1,
	Owner: "root", TimeModify: Time{1700000000, 5},
}

const goldenAttrHex = "00000002 0010011a 0020001a" + // bitmap4: 2 words
	" 00000048" + // attrlist4: 72 bytes
	" 00000001" + // type NF4REG
	" 0000000000001234" + // change
	" 0000000000000005" + // size
	" 0000000000000001 0000000000000002" + // fsid
	" 000000000000002a" + // fileid
	" 000001a4" + // mode 0644
	" 00000001" + // numlinks
	" 00000004 726f6f74" + // owner "root"
	" 000000006553f100 00000005" // time_modify

func TestAttrGolden(t *testing.T) {
	a := goldenAttr
	checkGolden(t, &attrCodec{a}, goldenAttrHex, 0)
	for _, id := range []AttrID{AttrType, AttrOwner, AttrTimeModify} {
		if !a.Has(id) {
			t.Errorf("Has(%v) false", id)
		}
	}
	if a.Has(AttrMode+1) || a.Has(200) {
		t.Error("Has of an absent attribute")
	}
	// supported_attrs and a file handle, as a GETATTR at mount asks.
	checkGolden(t, &attrCodec{Attr{Mask: BitmapOf(AttrSupportedAttrs, AttrLeaseTime, AttrFileHandle),
		SupportedAttrs: Bitmap{0x0010011f, 0x0030a23a}, LeaseTime: 90, FileHandle: FileHandle{1, 2, 3}}},
		"00000001 00080401 00000018 00000002 0010011f 0030a23a 0000005a 00000003 01020300", 0)
}

func TestSetAttrGolden(t *testing.T) {
	checkGolden(t, &setAttrCodec{SetAttr{SetSize: true, Size: 0, SetMode: true, Mode: 0o600,
		SetAtime: true, AtimeHow: SetToServerTime, SetMtime: true, MtimeHow: SetToClientTime, Mtime: Time{-1, 7}}},
		"00000002 00000010 00410002"+ // bitmap4 {size | mode, time_access_set, time_modify_set}
			" 00000020 0000000000000000 00000180 00000000 00000001 ffffffffffffffff 00000007", 0)
	checkGolden(t, &setAttrCodec{SetAttr{SetOwner: true, Owner: "a@b", SetOwnerGroup: true, OwnerGroup: "g"}},
		"00000002 00000000 00000030 00000010 00000003 61406200 00000001 67000000", 0)
	checkGolden(t, &setAttrCodec{}, "00000000 00000000", 0)
}

// An attribute the codec does not know fails the decode when a known one
// follows it, and is skipped when none does.
func TestAttrUnknown(t *testing.T) {
	// acl (12) before fileid (20).
	var a Attr
	d := rpc.NewBodyDecoder(rpc.Body{XDR: mustHex(t, "00000001 00101002 00000010 00000001 00000000 0000000000000007")})
	err := a.Decode(&d)
	var ue *UnknownAttrError
	if !errors.As(err, &ue) || ue.ID != AttrACL {
		t.Fatalf("acl before fileid: %v", err)
	}
	// type (1), then fs_status (61) and an unknown bit 100 after every
	// known one: skipped with their bytes, and cleared from Mask.
	d = rpc.NewBodyDecoder(rpc.Body{XDR: mustHex(t, "00000004 00000002 20000000 00000000 00000010 0000000c 00000002 deadbeef cafef00d")})
	if err := a.Decode(&d); err != nil || d.Done() != nil {
		t.Fatalf("trailing unknown: %v %v", err, d.Done())
	}
	if a.Type != TypeDir || len(knownIDs(a.Mask)) != 1 || !a.Has(AttrType) {
		t.Fatalf("trailing unknown: %+v", a)
	}
	// The same for SetAttr: acl before mode fails; mode_set_masked
	// (74) after every known one is skipped.
	var s SetAttr
	d = rpc.NewBodyDecoder(rpc.Body{XDR: mustHex(t, "00000002 00001000 00000002 00000008 00000000 000001ff")})
	if err := s.Decode(&d); !errors.As(err, &ue) || ue.ID != AttrACL {
		t.Fatalf("SetAttr acl before mode: %v", err)
	}
	d = rpc.NewBodyDecoder(rpc.Body{XDR: mustHex(t, "00000003 00000000 00000002 00000400 0000000c 000001ff 00000000 00000000")})
	if err := s.Decode(&d); err != nil || !s.SetMode || s.Mode != 0o777 {
		t.Fatalf("SetAttr trailing mode_set_masked: %+v %v", s, err)
	}
}

func TestAttrRejects(t *testing.T) {
	cases := []struct {
		name string
		v    codec
		hex  string
		want error
	}{
		{"bitmap over 8 words", &attrCodec{}, "00000009", xdr.ErrTooLong},
		{"attrlist over the buffer", &attrCodec{}, "00000001 00000002 00000010 00000001", xdr.ErrShort},
		{"attrlist longer than its attributes", &attrCodec{}, "00000001 00000002 00000008 00000001 00000000", xdr.ErrTrailing},
		{"attrlist shorter than its attributes", &attrCodec{}, "00000001 00000010 00000004 00000000", xdr.ErrShort},
		{"short attrlist before a skipped unknown attribute", &attrCodec{}, "00000002 00000002 10000000 00000000", xdr.ErrShort},
		{"bad type", &attrCodec{}, "00000001 00000002 00000004 0000000a", nil},
		{"bad bool", &attrCodec{}, "00000001 00000020 00000004 00000002", xdr.ErrBool},
		{"file handle over 128 bytes", &attrCodec{}, "00000001 00080000 00000088 00000081" + zeros(132), xdr.ErrTooLong},
		{"bad time_how4", &setAttrCodec{}, "00000002 00000000 00010000 00000004 00000002", nil},
	}
	for _, c := range cases {
		err := decode(c.v, rpc.Body{XDR: mustHex(t, c.hex)})
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func zeros(n int) string {
	b := make([]byte, 2*n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

func TestAttrRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		a := &attrCodec{}
		fill(rng, reflect.ValueOf(&a.Attr).Elem())
		checkRoundTrip(t, a, func() codec { return &attrCodec{} })
		s := &setAttrCodec{}
		fill(rng, reflect.ValueOf(&s.SetAttr).Elem())
		checkRoundTrip(t, s, func() codec { return &setAttrCodec{} })
	}
	// Every known attribute at once.
	a := &attrCodec{}
	fill(rng, reflect.ValueOf(&a.Attr).Elem())
	a.Mask = AttrKnown()
	checkRoundTrip(t, a, func() codec { return &attrCodec{} })
	// Mask bits the codec does not know are left out of the encoding.
	a.Mask = BitmapOf(AttrSize, AttrACL, 200)
	_, flat := encode(a)
	if got := mustHex(t, "00000001 00000010 00000008"); string(flat[:12]) != string(got) {
		t.Errorf("unknown bits encoded: %x", flat)
	}
}

func TestBitmap(t *testing.T) {
	b := BitmapOf(AttrType, AttrMode, AttrSuppattrExclcreat)
	if len(b) != 3 || b[0] != 2 || b[1] != 2 || b[2] != 1<<11 {
		t.Fatalf("BitmapOf = %x", b)
	}
	if !b.Has(AttrMode) || b.Has(AttrSize) || b.Has(1000) {
		t.Fatal("Has")
	}
}

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ErrBadSession.String(), "NFS4ERR_BADSESSION"}, {OK.String(), "NFS4_OK"},
		{ErrDelegRevoked.String(), "NFS4ERR_DELEG_REVOKED"}, {Stat(10073).String(), "nfsstat4(10073)"},
		{ErrBadSession.Describe(), "session unknown to the server (NFS4ERR_BADSESSION)"},
		{ErrStale.Error(), "nfs4: stale file handle (NFS4ERR_STALE)"}, {Stat(99).Describe(), "nfsstat4(99)"},
		{TypeNamedAttr.String(), "NF4NAMEDATTR"}, {FType(0).String(), "nfs_ftype4(0)"},
		{AttrTimeModifySet.String(), "time_modify_set"}, {AttrFSCharsetCap.String(), "fs_charset_cap"},
		{AttrID(77).String(), "attr(77)"}, {SetToClientTime.String(), "SET_TO_CLIENT_TIME4"},
		{StateID{Seqid: 1, Other: [12]byte{0xab, 1}}.String(), "1:ab0100000000000000000000"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	var err error = ErrDelay
	if !errors.Is(err, ErrDelay) || errors.Is(err, ErrGrace) {
		t.Error("errors.Is on a Stat")
	}
}

// Every status of RFC 8881 Section 15.1 has a name and words.
func TestStatInfo(t *testing.T) {
	if len(statInfo) != 104 {
		t.Errorf("%d statuses", len(statInfo))
	}
	for s, n := range statInfo {
		if n[0] == "" || n[1] == "" || s.Describe() != n[1]+" ("+n[0]+")" {
			t.Errorf("%d: %q", uint32(s), n)
		}
	}
}

func TestTimeOf(t *testing.T) {
	tm := time.Date(1969, 7, 20, 20, 17, 40, 123456789, time.UTC)
	nt := TimeOf(tm)
	if nt.Seconds != tm.Unix() || nt.Seconds >= 0 || nt.Nseconds != 123456789 || !nt.Time().Equal(tm) {
		t.Errorf("TimeOf(%v) = %+v, back %v", tm, nt, nt.Time())
	}
}
