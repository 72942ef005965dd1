package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

var privateDataVectors = []struct {
	name string
	hex  string
	want PrivateData
}{
	// Captured from Linux 6.1 (docs/linux-interop.md section 1), after MPA
	// v2's IRD/ORD word.
	{"lab-client-linux-private-data", "f6ab0e18 01 01 03 03", PrivateData{RemoteInvalidation: true, SendSize: 4096, ReceiveSize: 4096}},
	{"lab-full-knfsd-private-data", "f6ab0e18 01 00 03 03", PrivateData{SendSize: 4096, ReceiveSize: 4096}},
	// Hand-derived from RFC 8797 sections 4 and 5.2: the extremes of the
	// size encoding.
	{"seed003-5.2-min-sizes", "f6ab0e18 01 00 00 00", PrivateData{SendSize: 1024, ReceiveSize: 1024}},
	{"seed003-5.2-max-sizes", "f6ab0e18 01 01 ff ff", PrivateData{RemoteInvalidation: true, SendSize: 256 * 1024, ReceiveSize: 256 * 1024}},
	{"seed003-5.2-asymmetric", "f6ab0e18 01 00 07 00", PrivateData{SendSize: 8192, ReceiveSize: 1024}},
}

func TestPrivateDataGolden(t *testing.T) {
	for _, v := range privateDataVectors {
		t.Run(v.name, func(t *testing.T) {
			b := unhex(v.hex)
			var p PrivateData
			if !p.Decode(b) || p != v.want {
				t.Errorf("Decode = %+v, want %+v", p, v.want)
			}
			if got := v.want.Append(nil); !bytes.Equal(got, b) {
				t.Errorf("Append = %x, want %x", got, b)
			}
			if v.want.EncodedLen() != len(b) {
				t.Errorf("EncodedLen = %d", v.want.EncodedLen())
			}
			for k := range len(b) {
				if p.Decode(b[:k]) || p != DefaultPrivateData() {
					t.Errorf("Decode(%d bytes) = %+v, want absent", k, p)
				}
			}
		})
	}
}

func TestPrivateDataAbsent(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		{"empty", ""},
		{"short", "f6ab0e18 01 01 03"},
		{"other-format", "f6ab0e19 01 01 03 03"},
		{"mpa-ird-ord-first", "00100010 f6ab0e18 01 00 03 03"},
		// RFC 8797 section 4 defines only version 1; a message of another
		// version does not conform, so it is as if none was sent.
		{"version-0", "f6ab0e18 00 01 03 03"},
		{"version-2", "f6ab0e18 02 01 03 03"},
	} {
		p := PrivateData{RemoteInvalidation: true, SendSize: 9}
		if p.Decode(unhex(tc.hex)) || p != DefaultPrivateData() {
			t.Errorf("%s: Decode = %+v, want absent and defaults", tc.name, p)
		}
	}
	if d := DefaultPrivateData(); d.SendSize != 1024 || d.ReceiveSize != 1024 || d.RemoteInvalidation {
		t.Errorf("DefaultPrivateData = %+v", d)
	}
}

// TestPrivateDataPaddedIB: an InfiniBand or RoCE connect request delivers
// its private data zero-padded to 56 bytes, a reply to 196 (InfiniBand
// Architecture Specification Volume 1, section 12.6; rdma_cm keeps 36 of
// the REQ's 92 bytes); the message is recognised by its format identifier.
func TestPrivateDataPaddedIB(t *testing.T) {
	want := PrivateData{RemoteInvalidation: true, SendSize: 4096, ReceiveSize: 8192}
	for _, n := range []int{56, 196} {
		b := make([]byte, n)
		copy(b, want.Append(nil))
		var p PrivateData
		if !p.Decode(b) || p != want {
			t.Errorf("%d bytes, zero-padded: Decode = %+v, want %+v", n, p, want)
		}
		if p.Decode(make([]byte, n)) {
			t.Errorf("%d zero bytes decoded as private data", n)
		}
	}
}

func TestPrivateDataFlagsAndPadding(t *testing.T) {
	// Reserved flag bits are ignored on receipt and zero when sent; bytes
	// after the eighth are ignored.
	var p PrivateData
	if !p.Decode(unhex("f6ab0e18 01 fe 03 01 00000000")) || p != (PrivateData{SendSize: 4096, ReceiveSize: 2048}) {
		t.Errorf("Decode = %+v", p)
	}
	if !p.Decode(unhex("f6ab0e18 01 ff 03 01")) || !p.RemoteInvalidation {
		t.Errorf("Decode = %+v", p)
	}
	if got := p.Append(nil); !bytes.Equal(got, unhex("f6ab0e18 01 01 03 01")) {
		t.Errorf("Append = %x", got)
	}
}

func TestPrivateDataRounding(t *testing.T) {
	for _, tc := range []struct {
		send, recv int
		want       string
	}{
		{4096, 4096, "f6ab0e18 01 00 03 03"},
		{1500, 1500, "f6ab0e18 01 00 01 00"}, // send rounds up, receive down
		{0, 0, "f6ab0e18 01 00 00 00"},
		{-1, 1023, "f6ab0e18 01 00 00 00"},
		{1 << 20, 1 << 20, "f6ab0e18 01 00 ff ff"},
		{256*1024 - 1, 256*1024 + 1023, "f6ab0e18 01 00 ff ff"},
	} {
		p := PrivateData{SendSize: tc.send, ReceiveSize: tc.recv}
		if got := p.Append(nil); !bytes.Equal(got, unhex(tc.want)) {
			t.Errorf("Append(send %d, recv %d) = %x, want %s", tc.send, tc.recv, got, tc.want)
		}
	}
}

func TestPrivateDataRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		p := PrivateData{
			RemoteInvalidation: r.IntN(2) == 0,
			SendSize:           (1 + r.IntN(256)) * 1024,
			ReceiveSize:        (1 + r.IntN(256)) * 1024,
		}
		var got PrivateData
		if !got.Decode(p.Append(nil)) || got != p {
			t.Fatalf("round trip %+v = %+v", p, got)
		}
	}
}

func TestPrivateDataString(t *testing.T) {
	p := PrivateData{RemoteInvalidation: true, SendSize: 4096, ReceiveSize: 1024}
	if got := p.String(); got != "v1 rinv=true send=4096 recv=1024" {
		t.Errorf("String = %q", got)
	}
	if got := logText(p); got != "msg=m v.rinv=true v.send=4096 v.recv=1024" {
		t.Errorf("LogValue = %q", got)
	}
}
