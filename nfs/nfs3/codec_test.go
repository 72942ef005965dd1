package nfs3

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// codec is what every argument and result type implements.
type codec interface {
	Append(*rpc.Body)
	Decode(*rpc.BodyDecoder) error
}

// voidArgs stands for NULL's empty arguments and results.
type voidArgs struct{}

func (voidArgs) Append(*rpc.Body)                {}
func (voidArgs) Decode(d *rpc.BodyDecoder) error { return d.Err() }

// procTypes gives each procedure's argument and result types.
var procTypes = [NumProcs]struct{ args, res func() codec }{
	ProcNull:        {func() codec { return &voidArgs{} }, func() codec { return &voidArgs{} }},
	ProcGetattr:     {func() codec { return &FHArgs{} }, func() codec { return &GetattrRes{} }},
	ProcSetattr:     {func() codec { return &SetattrArgs{} }, func() codec { return &WccRes{} }},
	ProcLookup:      {func() codec { return &DirOpArgs{} }, func() codec { return &LookupRes{} }},
	ProcAccess:      {func() codec { return &AccessArgs{} }, func() codec { return &AccessRes{} }},
	ProcReadlink:    {func() codec { return &FHArgs{} }, func() codec { return &ReadlinkRes{} }},
	ProcRead:        {func() codec { return &ReadArgs{} }, func() codec { return &ReadRes{} }},
	ProcWrite:       {func() codec { return &WriteArgs{} }, func() codec { return &WriteRes{} }},
	ProcCreate:      {func() codec { return &CreateArgs{} }, func() codec { return &CreateRes{} }},
	ProcMkdir:       {func() codec { return &MkdirArgs{} }, func() codec { return &CreateRes{} }},
	ProcSymlink:     {func() codec { return &SymlinkArgs{} }, func() codec { return &CreateRes{} }},
	ProcMknod:       {func() codec { return &MknodArgs{} }, func() codec { return &CreateRes{} }},
	ProcRemove:      {func() codec { return &DirOpArgs{} }, func() codec { return &WccRes{} }},
	ProcRmdir:       {func() codec { return &DirOpArgs{} }, func() codec { return &WccRes{} }},
	ProcRename:      {func() codec { return &RenameArgs{} }, func() codec { return &RenameRes{} }},
	ProcLink:        {func() codec { return &LinkArgs{} }, func() codec { return &LinkRes{} }},
	ProcReaddir:     {func() codec { return &ReaddirArgs{} }, func() codec { return &ReaddirRes{} }},
	ProcReaddirplus: {func() codec { return &ReaddirplusArgs{} }, func() codec { return &ReaddirplusRes{} }},
	ProcFsstat:      {func() codec { return &FHArgs{} }, func() codec { return &FsstatRes{} }},
	ProcFsinfo:      {func() codec { return &FHArgs{} }, func() codec { return &FsinfoRes{} }},
	ProcPathconf:    {func() codec { return &FHArgs{} }, func() codec { return &PathconfRes{} }},
	ProcCommit:      {func() codec { return &CommitArgs{} }, func() codec { return &CommitRes{} }},
}

func encode(v codec) (rpc.Body, []byte) {
	var b rpc.Body
	v.Append(&b)
	return b, b.AppendFlat(nil)
}

func decode(v codec, b rpc.Body) error {
	d := rpc.NewBodyDecoder(b)
	if err := v.Decode(&d); err != nil {
		return err
	}
	return d.Done()
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Golden vectors, written by hand from the XDR of RFC 1813 Section 3.3.
func TestGolden(t *testing.T) {
	fh := FileHandle{0xaa, 0xbb, 0xcc, 0xdd, 0xee}
	const fhHex = "00000005 aabbccddee000000"
	attr := Attr{Type: TypeReg, Mode: 0o644, Nlink: 1, UID: 1000, GID: 100, Size: 5, Used: 4096,
		Rdev: SpecData{0, 0}, FSID: 7, FileID: 42, Atime: Time{1, 2}, Mtime: Time{3, 4}, Ctime: Time{5, 6}}
	const attrHex = "00000001 000001a4 00000001 000003e8 00000064 0000000000000005 0000000000001000" +
		" 00000000 00000000 0000000000000007 000000000000002a 00000001 00000002 00000003 00000004 00000005 00000006"
	cases := []struct {
		name  string
		v     codec
		hex   string
		items int // held-apart items
	}{
		{"GETATTR3args", &FHArgs{FH: fh}, fhHex, 0},
		{"GETATTR3res", &GetattrRes{Status: OK, Attr: attr}, "00000000" + attrHex, 0},
		{"GETATTR3res stale", &GetattrRes{Status: ErrStale}, "00000046", 0},
		{"LOOKUP3args", &DirOpArgs{Dir: fh, Name: "hello"}, fhHex + "00000005 68656c6c6f000000", 0},
		{"LOOKUP3res noent", &LookupRes{Status: ErrNoEnt, DirAttr: PostOpAttr{Present: true, Attr: attr}},
			"00000002 00000001" + attrHex, 0},
		{"READ3args", &ReadArgs{FH: fh, Offset: 0x1000, Count: 8192}, fhHex + "0000000000001000 00002000", 0},
		{"READ3res", &ReadRes{Status: OK, Count: 3, EOF: true, Data: []byte("abc")},
			"00000000 00000000 00000003 00000001 00000003 61626300", 1},
		{"WRITE3args", &WriteArgs{FH: fh, Offset: 1, Count: 2, Stable: FileSync, Data: []byte("hi")},
			fhHex + "0000000000000001 00000002 00000002 00000002 68690000", 1},
		{"WRITE3res", &WriteRes{Status: OK, Wcc: WccData{BeforePresent: true, Before: WccAttr{Size: 1, Mtime: Time{2, 3}, Ctime: Time{4, 5}}},
			Count: 2, Committed: Unstable, Verf: Verf{1, 2, 3, 4, 5, 6, 7, 8}},
			"00000000 00000001 0000000000000001 00000002 00000003 00000004 00000005 00000000 00000002 00000000 0102030405060708", 0},
		{"CREATE3args guarded", &CreateArgs{Where: DirOpArgs{Dir: fh, Name: "f"}, Mode: Guarded,
			Attr: SetAttr{SetMode: true, Mode: 0o600, SetMtime: SetToClientTime, Mtime: Time{9, 10}}},
			fhHex + "00000001 66000000 00000001 00000001 00000180 00000000 00000000 00000000 00000000 00000002 00000009 0000000a", 0},
		{"CREATE3args exclusive", &CreateArgs{Where: DirOpArgs{Dir: fh, Name: "f"}, Mode: Exclusive, Verf: Verf{8, 7, 6, 5, 4, 3, 2, 1}},
			fhHex + "00000001 66000000 00000002 0807060504030201", 0},
		{"SYMLINK3args", &SymlinkArgs{Where: DirOpArgs{Dir: fh, Name: "l"}, Path: "../t"},
			fhHex + "00000001 6c000000 00000000 00000000 00000000 00000000 00000000 00000000 00000004 2e2e2f74", 1},
		{"READLINK3res", &ReadlinkRes{Status: OK, Path: "x"}, "00000000 00000000 00000001 78000000", 1},
		{"CREATE3res", &CreateRes{Status: OK, FH: PostOpFH{Present: true, FH: fh}},
			"00000000 00000001" + fhHex + "00000000 00000000 00000000", 0},
		{"READDIR3res", &ReaddirRes{Status: OK, CookieVerf: Verf{1}, Entries: []Entry{{FileID: 2, Name: "a", Cookie: 3}}, EOF: true},
			"00000000 00000000 0100000000000000 00000001 0000000000000002 00000001 61000000 0000000000000003 00000000 00000001", 0},
		{"READDIRPLUS3args", &ReaddirplusArgs{Dir: fh, Cookie: 0, DirCount: 512, MaxCount: 4096},
			fhHex + "0000000000000000 0000000000000000 00000200 00001000", 0},
		{"FSINFO3res", &FsinfoRes{Status: OK, RTMax: 1 << 20, RTPref: 1 << 20, RTMult: 4096, WTMax: 1 << 20, WTPref: 1 << 20, WTMult: 4096,
			DTPref: 4096, MaxFileSize: 1 << 62, TimeDelta: Time{0, 1}, Properties: FSFLink | FSFSymlink | FSFHomogeneous | FSFCanSetTime},
			"00000000 00000000 00100000 00100000 00001000 00100000 00100000 00001000 00001000 4000000000000000 00000000 00000001 0000001b", 0},
		{"PATHCONF3res", &PathconfRes{Status: OK, LinkMax: 32000, NameMax: 255, NoTrunc: true, CasePreserving: true},
			"00000000 00000000 00007d00 000000ff 00000001 00000000 00000000 00000001", 0},
		{"RENAME3res", &RenameRes{Status: ErrNotEmpty}, "00000042 00000000 00000000 00000000 00000000", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := mustHex(t, c.hex)
			body, flat := encode(c.v)
			if !bytes.Equal(flat, want) {
				t.Fatalf("encoded\n%x\nwant\n%x", flat, want)
			}
			if len(body.Items) != c.items {
				t.Fatalf("%d DDP items, want %d", len(body.Items), c.items)
			}
			got := reflect.New(reflect.TypeOf(c.v).Elem()).Interface().(codec)
			if err := decode(got, rpc.Body{XDR: want}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.v) {
				t.Fatalf("decoded %+v\nwant %+v", got, c.v)
			}
		})
	}
}

// Every argument and result type, filled at random, decodes back from its
// encoding, held-apart and flattened, to a value that encodes the same; and
// every strict prefix of the encoding fails to decode.
func TestRoundTripAndTruncation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for p := range Proc(NumProcs) {
		for side, mk := range map[string]func() codec{"args": procTypes[p].args, "res": procTypes[p].res} {
			for range 60 {
				v := mk()
				fill(rng, reflect.ValueOf(v).Elem())
				body, flat := encode(v)
				if err := body.Validate(); err != nil {
					t.Fatalf("%v %s: %v", p, side, err)
				}
				for _, in := range []rpc.Body{body, {XDR: flat}} {
					got := mk()
					if err := decode(got, in); err != nil {
						t.Fatalf("%v %s %+v: decoding %x: %v", p, side, v, flat, err)
					}
					if _, again := encode(got); !bytes.Equal(again, flat) {
						t.Fatalf("%v %s: re-encoded\n%x\nwant\n%x", p, side, again, flat)
					}
				}
				for n := range len(flat) {
					if err := decode(mk(), rpc.Body{XDR: flat[:n]}); err == nil {
						t.Fatalf("%v %s: %d of %d bytes decoded", p, side, n, len(flat))
					}
				}
			}
		}
	}
}

// RFC 8267 Section 4: WRITE data and SYMLINK path in arguments, READ data
// and READLINK path in results, and nothing else, are DDP-eligible.
func TestDDPEligibility(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for p := range Proc(NumProcs) {
		for range 20 {
			a, r := procTypes[p].args(), procTypes[p].res()
			fill(rng, reflect.ValueOf(a).Elem())
			fill(rng, reflect.ValueOf(r).Elem())
			ab, _ := encode(a)
			rb, _ := encode(r)
			if got := len(ab.Items) > 0; got != p.DDPArg() {
				t.Errorf("%v args: DDP items %v, DDPArg %v", p, ab.Items, p.DDPArg())
			}
			rv := reflect.ValueOf(r).Elem()
			ok := rv.NumField() > 0 && rv.Field(0).Uint() == uint64(OK)
			if got := len(rb.Items) > 0; got != (p.DDPResult() && ok) {
				t.Errorf("%v results: DDP items %v, DDPResult %v", p, rb.Items, p.DDPResult())
			}
		}
	}
}

// ReplySize bounds every result encoding, less READ's DDP data.
func TestReplySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for p := range Proc(NumProcs) {
		for range 50 {
			r := procTypes[p].res()
			fill(rng, reflect.ValueOf(r).Elem())
			b, _ := encode(r)
			n := len(b.XDR)
			if p == ProcReadlink {
				n = b.Len()
			}
			var count uint32
			if p == ProcReaddir || p == ProcReaddirplus {
				count = uint32(n)
			}
			if max := p.ReplySize(count); n > max {
				t.Fatalf("%v: %d-byte results over ReplySize %d", p, n, max)
			}
		}
	}
	// With Linux's usable inline receive of 3996 bytes (4096 less the
	// transport header) and a one-page directory count, exactly READDIR,
	// READDIRPLUS and READLINK need a reply chunk, as Linux's client
	// offers one for them (and READ a write chunk, its other results
	// inline).
	for p := range Proc(NumProcs) {
		need := p.ReplySize(4096) > 3996
		if need != (p == ProcReaddir || p == ProcReaddirplus || p == ProcReadlink) {
			t.Errorf("%v: ReplySize(4096) = %d", p, p.ReplySize(4096))
		}
	}
	if got := ProcReaddirplus.ReplySize(8192); got != 4+8192 {
		t.Errorf("READDIRPLUS ReplySize(8192) = %d", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	fh := "00000001 01000000"
	cases := []struct {
		name string
		v    codec
		hex  string
		want error
	}{
		{"handle over 64 bytes", &FHArgs{}, "00000041" + strings.Repeat("00", 68), xdr.ErrTooLong},
		{"bad stable_how", &WriteArgs{}, fh + "0000000000000000 00000000 00000003 00000000", nil},
		{"bad createmode3", &CreateArgs{}, fh + "00000001 66000000 00000003", nil},
		{"bad time_how", &MkdirArgs{}, fh + "00000001 66000000 00000000 00000000 00000000 00000000 00000003 00000000", nil},
		{"bad ftype3", &GetattrRes{}, "00000000 00000008" + strings.Repeat("00", 80), nil},
		{"bool 2", &PostOpAttrCodec{}, "00000002", xdr.ErrBool},
		{"name too long", &DirOpArgs{}, fh + "00000401" + strings.Repeat("61", 1028), xdr.ErrTooLong},
		{"data too long", &ReadRes{}, "00000000 00000000 00000001 00000000 00400001", xdr.ErrTooLong},
		{"non-zero pad", &DirOpArgs{}, fh + "00000001 61000001", xdr.ErrPad},
	}
	for _, c := range cases {
		err := decode(c.v, rpc.Body{XDR: mustHex(t, c.hex)})
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// READ data into a buffer shorter than the data.
	var r ReadRes
	d := rpc.NewBodyDecoder(rpc.Body{XDR: mustHex(t, "00000000 00000000 00000003 00000001 00000003 61626300")})
	if err := r.DecodeInto(&d, make([]byte, 2)); !errors.Is(err, xdr.ErrTooLong) {
		t.Errorf("DecodeInto a short buffer: %v", err)
	}
	d.Reset(rpc.Body{XDR: mustHex(t, "00000000 00000000 00000003 00000001 00000003 61626300")})
	buf := make([]byte, 8)
	if err := r.DecodeInto(&d, buf); err != nil || string(r.Data) != "abc" || &r.Data[0] != &buf[0] {
		t.Errorf("DecodeInto: %q %v", r.Data, err)
	}
}

// PostOpAttrCodec lets the tests decode a bare post_op_attr.
type PostOpAttrCodec struct{ PostOpAttr }

func (p *PostOpAttrCodec) Append(b *rpc.Body)              { b.XDR = p.PostOpAttr.Append(b.XDR) }
func (p *PostOpAttrCodec) Decode(d *rpc.BodyDecoder) error { return p.PostOpAttr.Decode(d) }

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ErrNoEnt.String(), "NFS3ERR_NOENT"}, {OK.String(), "NFS3_OK"}, {ErrJukebox.String(), "NFS3ERR_JUKEBOX"},
		{Stat(99).String(), "nfsstat3(99)"}, {ProcReaddirplus.String(), "READDIRPLUS"}, {Proc(22).String(), "proc(22)"},
		{TypeLnk.String(), "NF3LNK"}, {FileSync.String(), "FILE_SYNC"}, {Guarded.String(), "GUARDED"},
		{SetToServerTime.String(), "SET_TO_SERVER_TIME"}, {ErrStale.Error(), "nfs3: stale file handle (NFS3ERR_STALE)"}, {ErrROFS.Describe(), "read-only file system (NFS3ERR_ROFS)"}, {Stat(99).Describe(), "nfsstat3(99)"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

// fill sets v to random values a decoder accepts: enums within their
// members, statuses half the time OK, lengths within the maxima.
func fill(rng *rand.Rand, v reflect.Value) {
	switch v.Type() {
	case reflect.TypeFor[FType]():
		v.SetUint(uint64(1 + rng.IntN(7)))
		return
	case reflect.TypeFor[StableHow](), reflect.TypeFor[CreateMode](), reflect.TypeFor[TimeHow]():
		v.SetUint(uint64(rng.IntN(3)))
		return
	case reflect.TypeFor[Stat]():
		if rng.IntN(2) == 0 {
			v.SetUint(0)
		} else {
			v.SetUint(uint64([]Stat{ErrNoEnt, ErrStale, ErrAcces, ErrNotSupp, 12345}[rng.IntN(5)]))
		}
		return
	case reflect.TypeFor[FileHandle]():
		v.SetBytes(randBytes(rng, rng.IntN(FHSize+1)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Uint32, reflect.Uint64:
		v.SetUint(rng.Uint64() >> (rng.IntN(4) * 16))
	case reflect.String:
		v.SetString(string(randBytes(rng, rng.IntN(40))))
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(randBytes(rng, rng.IntN(3000)))
			return
		}
		n := rng.IntN(5)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(rng, v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			fill(rng, v.Field(i))
		}
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return b
}

// TestStatWords: every status has words, and Describe puts the RFC's
// name after them.
func TestStatWords(t *testing.T) {
	for st, name := range statNames {
		w, ok := statWords[st]
		if !ok || w == "" {
			t.Errorf("%s has no words", name)
		}
		if got := st.Describe(); got != w+" ("+name+")" {
			t.Errorf("Describe(%s) = %q", name, got)
		}
	}
}

func TestTimeOf(t *testing.T) {
	tm := time.Date(2026, 11, 28, 14, 33, 1, 123456789, time.UTC)
	nt := TimeOf(tm)
	if nt.Seconds != uint32(tm.Unix()) || nt.Nseconds != 123456789 || !nt.Time().Equal(tm) {
		t.Errorf("TimeOf(%v) = %+v, back %v", tm, nt, nt.Time())
	}
}
