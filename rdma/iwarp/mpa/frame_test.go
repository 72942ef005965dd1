package mpa

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestFrameGolden(t *testing.T) {
	for _, v := range frameVectors {
		t.Run(v.name, func(t *testing.T) {
			f, n, err := ParseFrame(v.wire, MaxPrivateDataLen)
			if err != nil {
				t.Fatalf("ParseFrame: %v", err)
			}
			if n != len(v.wire) {
				t.Errorf("n = %d, want %d", n, len(v.wire))
			}
			if !reflect.DeepEqual(f, v.f) {
				t.Errorf("ParseFrame = %+v, want %+v", f, v.f)
			}
			got, err := v.f.Append(nil)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if !bytes.Equal(got, v.wire) {
				t.Errorf("Append = % x\nwant     % x", got, v.wire)
			}
			if l := v.f.EncodedLen(); l != len(v.wire) {
				t.Errorf("EncodedLen = %d, want %d", l, len(v.wire))
			}
			if l, err := FrameLen(v.wire[:FrameHeaderLen], MaxPrivateDataLen); err != nil || l != len(v.wire) {
				t.Errorf("FrameLen = %d, %v; want %d", l, err, len(v.wire))
			}
		})
	}
}

func TestFrameTruncated(t *testing.T) {
	for _, v := range frameVectors {
		for i := range len(v.wire) {
			_, _, err := ParseFrame(v.wire[:i], MaxPrivateDataLen)
			if !errors.Is(err, ErrShort) {
				t.Errorf("%s: ParseFrame(%d of %d bytes) = %v, want ErrShort", v.name, i, len(v.wire), err)
			}
		}
	}
}

func TestFrameTrailingBytesIgnored(t *testing.T) {
	v := frameVectors[0]
	b := append(bytes.Clone(v.wire), 0x00, 0x2e)
	_, n, err := ParseFrame(b, MaxPrivateDataLen)
	if err != nil || n != len(v.wire) {
		t.Fatalf("ParseFrame = %d, %v; want %d, nil", n, err, len(v.wire))
	}
}

func TestFrameErrors(t *testing.T) {
	good := frameVectors[0].wire
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name   string
		b      []byte
		maxPD  int
		kind   error
		field  string
		offset int
		code   ErrorCode
	}{
		{"key", mod(func(b []byte) []byte { b[9] = 'x'; return b }), MaxPrivateDataLen, ErrKey, "Key", 0, CodeInvalidFrame},
		{"key_case", mod(func(b []byte) []byte { b[0] = 'm'; return b }), MaxPrivateDataLen, ErrKey, "Key", 0, CodeInvalidFrame},
		{"rev3", mod(func(b []byte) []byte { b[17] = 3; return b }), MaxPrivateDataLen, ErrRevision, "Rev", 17, CodeInvalidFrame},
		{"pd_too_long_siw", mod(func(b []byte) []byte {
			b[18], b[19] = 0x01, 0x01
			return append(b, make([]byte, 257-12)...)
		}), SiwMaxPrivateDataLen, ErrTooLong, "PD_Length", 18, CodeInvalidFrame},
		{"pd_too_long_rfc", mod(func(b []byte) []byte { b[18], b[19] = 0x02, 0x01; return b }), MaxPrivateDataLen, ErrTooLong, "PD_Length", 18, CodeInvalidFrame},
		{"enhanced_pd3", mod(func(b []byte) []byte { b[19] = 3; return b[:23] }), MaxPrivateDataLen, ErrIRDORD, "PD_Length", 18, CodeInvalidFrame},
		{"short_pd", good[:25], MaxPrivateDataLen, ErrShort, "Private Data", 20, CodeNone},
		{"short_hdr", good[:19], MaxPrivateDataLen, ErrShort, "Key", 0, CodeNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseFrame(tt.b, tt.maxPD)
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, tt.kind) {
				t.Fatalf("ParseFrame = %v, want %v", err, tt.kind)
			}
			if pe.Field != tt.field || pe.Offset != tt.offset || pe.Code() != tt.code {
				t.Errorf("field %q offset %d code %v, want %q %d %v", pe.Field, pe.Offset, pe.Code(), tt.field, tt.offset, tt.code)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "mpa: "+tt.field+" at offset ") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

// A Rev 2 frame without S and a Rev 1 frame with S are not enhanced: the
// whole private data belongs to the ULP (siw does the same).
func TestFrameNotEnhanced(t *testing.T) {
	for _, hdr := range []string{"10 01 00 04", "00 02 00 04", "10 00 00 04"} {
		b := cat("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65", hdr, "00 80 00 10")
		f, _, err := ParseFrame(b, MaxPrivateDataLen)
		if err != nil {
			t.Fatal(err)
		}
		if f.Enhanced() || len(f.PrivateData) != 4 {
			t.Errorf("%s: Enhanced %v, %d bytes of private data", hdr, f.Enhanced(), len(f.PrivateData))
		}
		got, err := f.Append(nil)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: Append = % x, %v", hdr, got, err)
		}
	}
}

func TestFrameAppendErrors(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
	}{
		{"kind", Frame{Kind: 2, Rev: 1}},
		{"rev", Frame{Kind: Request, Rev: 3}},
		{"pd_513", Frame{Kind: Request, Rev: 1, PrivateData: make([]byte, 513)}},
		{"pd_509_enhanced", Frame{Kind: Request, Rev: 2, Flags: FlagEnhanced, PrivateData: make([]byte, 509)}},
		{"ird", Frame{Kind: Request, Rev: 2, Flags: FlagEnhanced, IRDORD: IRDORD{IRD: 0x4000}}},
		{"ord", Frame{Kind: Request, Rev: 2, Flags: FlagEnhanced, IRDORD: IRDORD{ORD: 0xffff}}},
		{"rtr_bits", Frame{Kind: Request, Rev: 2, Flags: FlagEnhanced, IRDORD: IRDORD{RTR: 0x80}}},
	}
	for _, tt := range tests {
		b := []byte{1, 2}
		got, err := tt.f.Append(b)
		if err == nil || !strings.HasPrefix(err.Error(), "mpa: ") {
			t.Errorf("%s: Append error = %v", tt.name, err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s: Append changed b: % x", tt.name, got)
		}
	}
	// 512 bytes is the limit, 508 of them after the word when enhanced.
	f := Frame{Kind: Reply, Rev: 2, Flags: FlagEnhanced, PrivateData: make([]byte, 508)}
	b, err := f.Append(nil)
	if err != nil || len(b) != FrameHeaderLen+MaxPrivateDataLen {
		t.Errorf("Append 508+4 = %d bytes, %v", len(b), err)
	}
}

func randFrame(r *rand.Rand) Frame {
	f := Frame{
		Kind:        Kind(r.IntN(2)),
		Flags:       Flags(r.IntN(256)),
		Rev:         uint8(r.IntN(3)),
		PrivateData: make([]byte, r.IntN(MaxPrivateDataLen-IRDORDLen+1)),
	}
	for i := range f.PrivateData {
		f.PrivateData[i] = byte(r.IntN(256))
	}
	if f.Enhanced() {
		f.IRDORD = IRDORD{PeerToPeer: r.IntN(2) == 0, RTR: RTR(r.IntN(8)), IRD: uint16(r.IntN(MaxIRDORD + 1)), ORD: uint16(r.IntN(MaxIRDORD + 1))}
	}
	return f
}

func TestFrameRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		f := randFrame(r)
		b, err := f.Append(nil)
		if err != nil {
			t.Fatalf("Append(%v): %v", f, err)
		}
		g, n, err := ParseFrame(b, MaxPrivateDataLen)
		if err != nil || n != len(b) {
			t.Fatalf("ParseFrame(Append(%v)) = %d, %v", f, n, err)
		}
		if !reflect.DeepEqual(f, g) {
			t.Fatalf("round trip: %+v != %+v", g, f)
		}
	}
}

func TestFrameString(t *testing.T) {
	tests := []struct {
		f    Frame
		want string
	}{
		{frameVectors[0].f, "MPA Request rev 2 C|S ird=128 ord=0 pd=8"},
		{frameVectors[6].f, "MPA Reply rev 1 R pd=0"},
		{frameVectors[11].f, "MPA Request rev 2 C|S ird=128 ord=16 p2p rtr=Send|Write|Read pd=0"},
		{Frame{Kind: 7, Flags: 0x0f}, "MPA frame kind 7 rev 0 res=0xf pd=0"},
		{Frame{Kind: Reply, Flags: FlagMarker, Rev: 1}, "MPA Reply rev 1 M pd=0"},
		{Frame{Kind: Reply, Rev: 1}, "MPA Reply rev 1 0 pd=0"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("String = %q, want %q", got, tt.want)
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "frame", frameVectors[0].f, "plain", frameVectors[6].f)
	want := "frame.kind=\"MPA Request\" frame.rev=2 frame.flags=C|S frame.irdord.ird=128 frame.irdord.ord=0 frame.irdord.p2p=false frame.irdord.rtr=none frame.pd_len=8 plain.kind=\"MPA Reply\" plain.rev=1 plain.flags=R plain.pd_len=0"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("slog output %q\nwant %q", buf.String(), want)
	}
}

func TestIRDORD(t *testing.T) {
	tests := []struct {
		wire string
		w    IRDORD
		str  string
	}{
		{"00 80 00 00", IRDORD{IRD: 128}, "ird=128 ord=0"},
		{"3f ff 3f ff", IRDORD{IRD: MaxIRDORD, ORD: MaxIRDORD}, "ird=16383 ord=16383"},
		{"80 10 80 10", IRDORD{PeerToPeer: true, RTR: RTRWrite, IRD: 16, ORD: 16}, "ird=16 ord=16 p2p rtr=Write"},
		{"c0 01 40 02", IRDORD{PeerToPeer: true, RTR: RTRSend | RTRRead, IRD: 1, ORD: 2}, "ird=1 ord=2 p2p rtr=Send|Read"},
		{"80 00 00 00", IRDORD{PeerToPeer: true}, "ird=0 ord=0 p2p rtr=none"},
		{"00 00 80 00", IRDORD{RTR: RTRWrite}, "ird=0 ord=0 rtr=Write"},
	}
	for _, tt := range tests {
		b := h(tt.wire)
		if got := ParseIRDORD(b); got != tt.w {
			t.Errorf("ParseIRDORD(%s) = %+v, want %+v", tt.wire, got, tt.w)
		}
		if got := tt.w.Append(nil); !bytes.Equal(got, b) {
			t.Errorf("Append(%+v) = % x, want %s", tt.w, got, tt.wire)
		}
		if got := tt.w.String(); got != tt.str {
			t.Errorf("String = %q, want %q", got, tt.str)
		}
	}
	if got := (IRDORD{IRD: 0xffff, ORD: 0x4001}).Append(nil); !bytes.Equal(got, h("3f ff 00 01")) {
		t.Errorf("Append masks to 14 bits: % x", got)
	}
	if got := RTR(0x0b).String(); got != "Send|Write|0xb" {
		t.Errorf("RTR(0xb) = %q", got)
	}
}

func TestKindAndCodeStrings(t *testing.T) {
	if Request.String() != "MPA Request" || Reply.String() != "MPA Reply" {
		t.Error("Kind.String")
	}
	for c, want := range map[ErrorCode]string{
		CodeCRC:           "MPA CRC error",
		CodeNoMatchingRTR: "no matching RTR option",
		0x08:              "unknown MPA error 0x8",
	} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", c, got, want)
		}
	}
}
