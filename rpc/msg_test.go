package rpc

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// unhex decodes hex with spaces between the words.
func unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// authSysBody is authsys_parms {stamp 0x12345678, "client1", uid 1000,
// gid 100, gids {100, 1000}} (RFC 5531 appendix A), derived by hand.
const authSysBody = "12345678" + // stamp
	" 00000007 636c6965 6e743100" + // machinename<255> "client1" + 1 pad byte
	" 000003e8" + // uid 1000
	" 00000064" + // gid 100
	" 00000002 00000064 000003e8" // gids<16> {100, 1000}

var authSysParms = AuthSysParms{Stamp: 0x12345678, MachineName: "client1", UID: 1000, GID: 100, GIDs: []uint32{100, 1000}}

type callVector struct {
	name string
	hex  string
	want CallHeader
}

// callVectors are call headers (RFC 5531 section 9, call_body) derived by
// hand from the XDR definitions.
var callVectors = []callVector{
	{"rfc5531-s9-call-auth-none",
		"1a2b3c4d 00000000 00000002 000186a3 00000003 00000006" + // xid CALL rpcvers prog vers proc
			" 00000000 00000000" + // cred AUTH_NONE, empty
			" 00000000 00000000", // verf AUTH_NONE, empty
		CallHeader{XID: 0x1a2b3c4d, RPCVers: 2, Prog: 100003, Vers: 3, Proc: 6, Cred: OpaqueAuth{Body: []byte{}}, Verf: OpaqueAuth{Body: []byte{}}}},
	{"rfc5531-appA-call-auth-sys",
		"00000001 00000000 00000002 000186a3 00000003 00000001" +
			" 00000001 00000024 " + authSysBody + // cred AUTH_SYS, 36 bytes
			" 00000000 00000000",
		CallHeader{XID: 1, RPCVers: 2, Prog: 100003, Vers: 3, Proc: 1,
			Cred: OpaqueAuth{Flavor: AuthSys, Body: []byte{}}, Verf: OpaqueAuth{Body: []byte{}}}},
	{"rfc5531-s8.2-call-opaque-verf",
		"ffffffff 00000000 00000002 00000001 ffffffff 00000000" +
			" 00000003 00000005 0102030405000000" + // cred AUTH_DH, 5 bytes + pad
			" 00000006 00000004 deadbeef", // verf RPCSEC_GSS, 4 bytes
		CallHeader{XID: 0xffffffff, RPCVers: 2, Prog: 1, Vers: 0xffffffff, Proc: 0,
			Cred: OpaqueAuth{Flavor: AuthDH, Body: []byte{1, 2, 3, 4, 5}}, Verf: OpaqueAuth{Flavor: RPCSECGSS, Body: []byte{0xde, 0xad, 0xbe, 0xef}}}},
}

type replyVector struct {
	name string
	hex  string
	want ReplyHeader
}

const replyPrefix = "1a2b3c4d 00000001 " // xid REPLY

// replyVectors are reply headers of every status (RFC 5531 section 9,
// reply_body), derived by hand.
var replyVectors = []replyVector{
	{"rfc5531-s9-reply-success", replyPrefix + "00000000 00000000 00000000 00000000",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgAccepted, Verf: OpaqueAuth{Body: []byte{}}, AcceptStat: Success}},
	{"rfc5531-s9-reply-success-verf", replyPrefix + "00000000 00000002 00000004 deadbeef 00000000",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgAccepted, Verf: OpaqueAuth{Flavor: AuthShort, Body: []byte{0xde, 0xad, 0xbe, 0xef}}, AcceptStat: Success}},
	{"rfc5531-s9-reply-prog-unavail", replyPrefix + "00000000 00000000 00000000 00000001",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgAccepted, Verf: OpaqueAuth{Body: []byte{}}, AcceptStat: ProgUnavail}},
	{"rfc5531-s9-reply-prog-mismatch", replyPrefix + "00000000 00000000 00000000 00000002 00000002 00000004",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgAccepted, Verf: OpaqueAuth{Body: []byte{}}, AcceptStat: ProgMismatch, Low: 2, High: 4}},
	{"rfc5531-s9-reply-proc-unavail", replyPrefix + "00000000 00000000 00000000 00000003",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgAccepted, Verf: OpaqueAuth{Body: []byte{}}, AcceptStat: ProcUnavail}},
	{"rfc5531-s9-reply-garbage-args", replyPrefix + "00000000 00000000 00000000 00000004",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgAccepted, Verf: OpaqueAuth{Body: []byte{}}, AcceptStat: GarbageArgs}},
	{"rfc5531-s9-reply-system-err", replyPrefix + "00000000 00000000 00000000 00000005",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgAccepted, Verf: OpaqueAuth{Body: []byte{}}, AcceptStat: SystemErr}},
	{"rfc5531-s9-reply-accept-default-arm", replyPrefix + "00000000 00000000 00000000 00000063",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgAccepted, Verf: OpaqueAuth{Body: []byte{}}, AcceptStat: 99}},
	{"rfc5531-s9-reply-rpc-mismatch", replyPrefix + "00000001 00000000 00000002 00000002",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgDenied, RejectStat: RPCMismatch, Low: 2, High: 2}},
	{"rfc5531-s9-reply-auth-badcred", replyPrefix + "00000001 00000001 00000001",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgDenied, RejectStat: AuthError, AuthStat: AuthBadCred}},
	{"rfc5531-s9-reply-auth-rejectedcred", replyPrefix + "00000001 00000001 00000002",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgDenied, RejectStat: AuthError, AuthStat: AuthRejectedCred}},
	{"rfc5531-s9-reply-auth-badverf", replyPrefix + "00000001 00000001 00000003",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgDenied, RejectStat: AuthError, AuthStat: AuthBadVerf}},
	{"rfc5531-s9-reply-auth-tooweak", replyPrefix + "00000001 00000001 00000005",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgDenied, RejectStat: AuthError, AuthStat: AuthTooWeak}},
	{"rfc5531-s9-reply-auth-gss-credproblem", replyPrefix + "00000001 00000001 0000000d",
		ReplyHeader{XID: 0x1a2b3c4d, Stat: MsgDenied, RejectStat: AuthError, AuthStat: RPCSECGSSCredProblem}},
}

// goldenCall returns the vector's header with the AUTH_SYS body filled in.
func goldenCall(tb testing.TB, v callVector) CallHeader {
	h := v.want
	if h.Cred.Flavor == AuthSys {
		h.Cred.Body = unhex(tb, authSysBody)
	}
	return h
}

func TestCallGolden(t *testing.T) {
	for _, v := range callVectors {
		t.Run(v.name, func(t *testing.T) {
			wire := unhex(t, v.hex)
			want := goldenCall(t, v)
			if got := want.Append(nil); !bytes.Equal(got, wire) {
				t.Errorf("Append = %x\nwant     %x", got, wire)
			}
			if n := want.EncodedLen(); n != len(wire) {
				t.Errorf("EncodedLen = %d, want %d", n, len(wire))
			}
			var got CallHeader
			d := xdr.NewDecoder(wire)
			if err := got.Decode(&d); err != nil {
				t.Fatal(err)
			}
			if err := d.Done(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Decode = %+v\nwant     %+v", got, want)
			}
			// Every strict prefix fails.
			for n := range len(wire) {
				var h CallHeader
				d := xdr.NewDecoder(wire[:n])
				if err := h.Decode(&d); !errors.Is(err, xdr.ErrShort) {
					t.Fatalf("prefix %d: err = %v, want ErrShort", n, err)
				}
			}
		})
	}
}

func TestReplyGolden(t *testing.T) {
	for _, v := range replyVectors {
		t.Run(v.name, func(t *testing.T) {
			wire := unhex(t, v.hex)
			if got := v.want.Append(nil); !bytes.Equal(got, wire) {
				t.Errorf("Append = %x\nwant     %x", got, wire)
			}
			if n := v.want.EncodedLen(); n != len(wire) {
				t.Errorf("EncodedLen = %d, want %d", n, len(wire))
			}
			var got ReplyHeader
			d := xdr.NewDecoder(append(wire, 0xca, 0xfe, 0xba, 0xbe)) // results follow
			if err := got.Decode(&d); err != nil {
				t.Fatal(err)
			}
			if d.Offset() != len(wire) {
				t.Errorf("offset after header = %d, want %d", d.Offset(), len(wire))
			}
			if !reflect.DeepEqual(got, v.want) {
				t.Errorf("Decode = %+v\nwant     %+v", got, v.want)
			}
			for n := range len(wire) {
				var h ReplyHeader
				d := xdr.NewDecoder(wire[:n])
				if err := h.Decode(&d); !errors.Is(err, xdr.ErrShort) {
					t.Fatalf("prefix %d: err = %v, want ErrShort", n, err)
				}
			}
		})
	}
}

func TestAuthSysGolden(t *testing.T) {
	wire := unhex(t, authSysBody)
	if got := authSysParms.Append(nil); !bytes.Equal(got, wire) {
		t.Errorf("Append = %x\nwant     %x", got, wire)
	}
	if n := authSysParms.EncodedLen(); n != len(wire) {
		t.Errorf("EncodedLen = %d, want %d", n, len(wire))
	}
	cred, err := authSysParms.Cred()
	if err != nil || cred.Flavor != AuthSys || !bytes.Equal(cred.Body, wire) {
		t.Errorf("Cred = %v, %v", cred, err)
	}
	got, err := ParseAuthSys(cred)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, authSysParms) {
		t.Errorf("ParseAuthSys = %+v", got)
	}
	for n := range len(wire) {
		if _, err := ParseAuthSys(OpaqueAuth{Flavor: AuthSys, Body: wire[:n]}); !errors.Is(err, xdr.ErrShort) && !errors.Is(err, xdr.ErrCount) {
			t.Fatalf("prefix %d: err = %v, want ErrShort or ErrCount", n, err)
		}
	}
	// No gids decodes as nil.
	p := AuthSysParms{MachineName: "h"}
	q, err := ParseAuthSys(OpaqueAuth{Flavor: AuthSys, Body: p.Append(nil)})
	if err != nil || q.GIDs != nil {
		t.Errorf("no gids: %+v, %v", q, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'a'
	}
	callErr := func(h string) error {
		var c CallHeader
		d := xdr.NewDecoder(unhex(t, h))
		return c.Decode(&d)
	}
	replyErr := func(h string) error {
		var r ReplyHeader
		d := xdr.NewDecoder(unhex(t, h))
		return r.Decode(&d)
	}
	sys := func(p AuthSysParms, extra ...byte) error {
		_, err := ParseAuthSys(OpaqueAuth{Flavor: AuthSys, Body: append(p.Append(nil), extra...)})
		return err
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"call-is-reply", callErr("00000001 00000001 00000002"), ErrMsgType},
		{"call-msgtype-7", callErr("00000001 00000007 00000002"), ErrMsgType},
		{"call-rpcvers-3", callErr("00000001 00000000 00000003"), ErrRPCVersion},
		{"call-cred-401", callErr("00000001 00000000 00000002 00000001 00000001 00000000 00000001 00000191"), xdr.ErrTooLong},
		{"call-verf-pad", callErr("00000001 00000000 00000002 00000001 00000001 00000000 00000000 00000000 00000000 00000001 01020000"), xdr.ErrPad},
		{"call-verf-short", callErr("00000001 00000000 00000002 00000001 00000001 00000000 00000000 00000000 00000000 00000008 01020000"), xdr.ErrShort},
		{"call-cred-pad", callErr("00000001 00000000 00000002 00000001 00000001 00000000 00000000 00000001 01020000 00000000 00000000"), xdr.ErrPad},
		{"reply-is-call", replyErr("00000001 00000000 00000000"), ErrMsgType},
		{"reply-stat-2", replyErr("00000001 00000001 00000002"), ErrDiscriminant},
		{"reject-stat-2", replyErr("00000001 00000001 00000001 00000002 00000000 00000000"), ErrDiscriminant},
		{"reply-verf-401", replyErr("00000001 00000001 00000000 00000000 00000191"), xdr.ErrTooLong},
		{"authsys-name-256", sys(AuthSysParms{MachineName: string(long)}), xdr.ErrTooLong},
		{"authsys-gids-17", sys(AuthSysParms{GIDs: make([]uint32, 17)}), xdr.ErrTooLong},
		{"authsys-trailing", sys(AuthSysParms{}, 0, 0, 0, 0), xdr.ErrTrailing},
		{"authsys-gids-count-beyond-body", func() error {
			b := AuthSysParms{}.appendWithCount(5)
			_, err := ParseAuthSys(OpaqueAuth{Flavor: AuthSys, Body: b})
			return err
		}(), xdr.ErrCount},
		{"authsys-wrong-flavor", func() error { _, err := ParseAuthSys(OpaqueAuth{Flavor: AuthNone}); return err }(), ErrFlavor},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, tt.err, tt.want)
		}
		if _, ok := errors.AsType[*xdr.DecodeError](tt.err); !ok {
			t.Errorf("%s: err %T is not an *xdr.DecodeError", tt.name, tt.err)
		}
	}

	// RPC_MISMATCH needs the xid and rpcvers.
	var h CallHeader
	d := xdr.NewDecoder(unhex(t, "0000abcd 00000000 00000003 00000001"))
	if err := h.Decode(&d); !errors.Is(err, ErrRPCVersion) || h.XID != 0xabcd || h.RPCVers != 3 {
		t.Errorf("rpcvers 3: %+v, %v", h, err)
	}

	if _, err := (&AuthSysParms{MachineName: string(long)}).Cred(); err == nil {
		t.Error("Cred with a 256-byte machinename succeeded")
	}
	if _, err := (&AuthSysParms{GIDs: make([]uint32, 17)}).Cred(); err == nil {
		t.Error("Cred with 17 gids succeeded")
	}
}

// appendWithCount encodes p with a gids count that does not match GIDs.
func (p AuthSysParms) appendWithCount(n uint32) []byte {
	b := xdr.AppendUint32(nil, p.Stamp)
	b = xdr.AppendString(b, p.MachineName)
	b = xdr.AppendUint32(b, p.UID)
	b = xdr.AppendUint32(b, p.GID)
	return xdr.AppendUint32(b, n)
}

func randBytes(r *rand.Rand, max int) []byte {
	b := make([]byte, r.IntN(max+1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randAuth(r *rand.Rand) OpaqueAuth {
	return OpaqueAuth{Flavor: AuthFlavor(r.Uint32N(8)), Body: randBytes(r, MaxAuthBytes)}
}

func randReply(r *rand.Rand) ReplyHeader {
	h := ReplyHeader{XID: r.Uint32()}
	if r.IntN(2) == 0 {
		h.Stat = MsgAccepted
		h.Verf = randAuth(r)
		h.AcceptStat = AcceptStat(r.IntN(8))
		if h.AcceptStat == ProgMismatch {
			h.Low, h.High = r.Uint32(), r.Uint32()
		}
		return h
	}
	h.Stat = MsgDenied
	if r.IntN(2) == 0 {
		h.RejectStat = RPCMismatch
		h.Low, h.High = r.Uint32(), r.Uint32()
	} else {
		h.RejectStat = AuthError
		h.AuthStat = AuthStat(r.IntN(16))
	}
	return h
}

func TestRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		c := CallHeader{XID: r.Uint32(), RPCVers: 2, Prog: r.Uint32(), Vers: r.Uint32(), Proc: r.Uint32(), Cred: randAuth(r), Verf: randAuth(r)}
		b := c.Append([]byte{0xee})[1:]
		if len(b) != c.EncodedLen() {
			t.Fatalf("call EncodedLen %d, encoded %d", c.EncodedLen(), len(b))
		}
		var c2 CallHeader
		d := xdr.NewDecoder(b)
		if err := c2.Decode(&d); err != nil || d.Done() != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("call round trip: %+v -> %+v, %v", c, c2, err)
		}

		h := randReply(r)
		b = h.Append(nil)
		if len(b) != h.EncodedLen() {
			t.Fatalf("reply EncodedLen %d, encoded %d", h.EncodedLen(), len(b))
		}
		var h2 ReplyHeader
		d = xdr.NewDecoder(b)
		if err := h2.Decode(&d); err != nil || d.Done() != nil || !reflect.DeepEqual(h, h2) {
			t.Fatalf("reply round trip: %+v -> %+v, %v", h, h2, err)
		}

		p := AuthSysParms{Stamp: r.Uint32(), MachineName: string(randBytes(r, MaxMachineName)), UID: r.Uint32(), GID: r.Uint32()}
		if n := r.IntN(MaxAuthSysGIDs + 1); n > 0 {
			p.GIDs = make([]uint32, n)
			for i := range p.GIDs {
				p.GIDs[i] = r.Uint32()
			}
		}
		cred, err := p.Cred()
		if err != nil || len(cred.Body) != p.EncodedLen() || len(cred.Body) > MaxAuthBytes {
			t.Fatalf("Cred: %d bytes, %v", len(cred.Body), err)
		}
		p2, err := ParseAuthSys(cred)
		if err != nil || !reflect.DeepEqual(p, p2) {
			t.Fatalf("AUTH_SYS round trip: %+v -> %+v, %v", p, p2, err)
		}
	}
}

func TestDecodeAllocs(t *testing.T) {
	ch := goldenCall(t, callVectors[1])
	call := ch.Append(nil)
	reply := unhex(t, replyVectors[3].hex)
	allocs := testing.AllocsPerRun(100, func() {
		var h CallHeader
		d := xdr.NewDecoder(call)
		h.Decode(&d)
		var r ReplyHeader
		d.Reset(reply)
		r.Decode(&d)
	})
	if allocs != 0 {
		t.Errorf("decoding headers allocates %v times", allocs)
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got  fmt.Stringer
		want string
	}{
		{MsgCall, "CALL"}, {MsgReply, "REPLY"}, {MsgType(2), "2"},
		{MsgAccepted, "MSG_ACCEPTED"}, {MsgDenied, "MSG_DENIED"}, {ReplyStat(-1), "-1"},
		{Success, "SUCCESS"}, {ProgUnavail, "PROG_UNAVAIL"}, {ProgMismatch, "PROG_MISMATCH"},
		{ProcUnavail, "PROC_UNAVAIL"}, {GarbageArgs, "GARBAGE_ARGS"}, {SystemErr, "SYSTEM_ERR"},
		{AcceptStat(6), "6"}, {AcceptStat(-3), "-3"},
		{RPCMismatch, "RPC_MISMATCH"}, {AuthError, "AUTH_ERROR"}, {RejectStat(9), "9"},
		{AuthOK, "AUTH_OK"}, {AuthBadCred, "AUTH_BADCRED"}, {AuthRejectedCred, "AUTH_REJECTEDCRED"},
		{AuthBadVerf, "AUTH_BADVERF"}, {AuthRejectedVerf, "AUTH_REJECTEDVERF"}, {AuthTooWeak, "AUTH_TOOWEAK"},
		{AuthInvalidResp, "AUTH_INVALIDRESP"}, {AuthFailed, "AUTH_FAILED"}, {AuthKerbGeneric, "AUTH_KERB_GENERIC"},
		{AuthTimeExpire, "AUTH_TIMEEXPIRE"}, {AuthTktFile, "AUTH_TKT_FILE"}, {AuthDecode, "AUTH_DECODE"},
		{AuthNetAddr, "AUTH_NET_ADDR"}, {RPCSECGSSCredProblem, "RPCSEC_GSS_CREDPROBLEM"},
		{RPCSECGSSCtxProblem, "RPCSEC_GSS_CTXPROBLEM"}, {AuthStat(15), "15"}, {AuthStat(-1), "-1"},
		{AuthNone, "AUTH_NONE"}, {AuthSys, "AUTH_SYS"}, {AuthShort, "AUTH_SHORT"}, {AuthDH, "AUTH_DH"},
		{RPCSECGSS, "RPCSEC_GSS"}, {AuthFlavor(4), "4"},
		{&CallHeader{XID: 0x1a2b, RPCVers: 2, Prog: 100003, Vers: 3, Proc: 6, Cred: OpaqueAuth{Flavor: AuthSys}},
			"call xid=0x1a2b prog=100003 vers=3 proc=6 cred=AUTH_SYS verf=AUTH_NONE"},
		{&CallHeader{XID: 1, RPCVers: 3}, "call xid=0x1 rpcvers=3 prog=0 vers=0 proc=0 cred=AUTH_NONE verf=AUTH_NONE"},
		{&ReplyHeader{XID: 0x1a2b, Stat: MsgAccepted, AcceptStat: ProgMismatch, Low: 2, High: 4},
			"reply xid=0x1a2b MSG_ACCEPTED PROG_MISMATCH 2..4 verf=AUTH_NONE"},
		{&ReplyHeader{XID: 0x1a2b, Stat: MsgDenied, RejectStat: RPCMismatch, Low: 2, High: 2},
			"reply xid=0x1a2b MSG_DENIED RPC_MISMATCH 2..2"},
		{&ReplyHeader{XID: 0x1a2b, Stat: MsgDenied, RejectStat: AuthError, AuthStat: AuthTooWeak},
			"reply xid=0x1a2b MSG_DENIED AUTH_ERROR AUTH_TOOWEAK"},
		{&OpaqueAuth{Flavor: AuthSys, Body: make([]byte, 32)}, "AUTH_SYS(32 bytes)"},
		{&authSysParms, "client1 uid=1000 gid=100 gids=[100 1000]"},
		{CallID{XID: 0x1a2b, Prog: 100003, Vers: 3, Proc: 6}, "call 0x1a2b prog 100003 vers 3 proc 6"},
		{CallID{XID: 0x1a2b, Prog: 0x20049001, Vers: 1, Proc: 2}, "call 0x1a2b prog 0x20049001 vers 1 proc 2"},
	}
	for _, tt := range tests {
		if s := tt.got.String(); s != tt.want {
			t.Errorf("%T: String() = %q, want %q", tt.got, s, tt.want)
		}
	}
}

func TestLogValues(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	log.Info("m",
		"call", &CallHeader{XID: 0x1a2b, Prog: 100003, Vers: 3, Proc: 6},
		"reply", &ReplyHeader{XID: 0x1a2b, Stat: MsgAccepted, AcceptStat: ProgMismatch, Low: 2, High: 4},
		"denied", &ReplyHeader{Stat: MsgDenied, RejectStat: AuthError, AuthStat: AuthBadCred},
		"auth", &OpaqueAuth{Flavor: AuthSys, Body: make([]byte, 8)},
		"sys", &authSysParms)
	want := `level=INFO msg=m call.xid=0x1a2b call.prog=100003 call.vers=3 call.proc=6 call.cred=AUTH_NONE call.verf=AUTH_NONE` +
		` reply.xid=0x1a2b reply.stat=MSG_ACCEPTED reply.accept_stat=PROG_MISMATCH reply.low=2 reply.high=4` +
		` denied.xid=0x0 denied.stat=MSG_DENIED denied.reject_stat=AUTH_ERROR denied.auth_stat=AUTH_BADCRED` +
		` auth.flavor=AUTH_SYS auth.len=8 sys.machinename=client1 sys.uid=1000 sys.gid=100 sys.ngids=2` + "\n"
	if buf.String() != want {
		t.Errorf("log =\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestPeekHeader(t *testing.T) {
	if _, _, ok := PeekHeader(make([]byte, 7)); ok {
		t.Error("7 bytes peeked")
	}
	xid, mt, ok := PeekHeader(unhex(t, replyVectors[0].hex))
	if !ok || xid != 0x1a2b3c4d || mt != MsgReply {
		t.Errorf("PeekHeader = %x %v %v", xid, mt, ok)
	}
}
