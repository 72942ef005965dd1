package mpa

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
)

func TestChecksumVectors(t *testing.T) {
	if got := Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Errorf("CRC32c check value = %#x, want 0xe3069283", got)
	}
	// RFC 5044 figures 5 and 6: the CRC over
	// the 48 bytes in front of the CRC field, written least significant
	// byte first.
	for _, v := range markerVectors[:2] {
		n := len(v.wire) - CRCLen
		want := v.wire[n:]
		got := AppendTrailer(nil, true, v.wire[:n])
		if !bytes.Equal(got, want) {
			t.Errorf("%s: trailer % x, want % x", v.name, got, want)
		}
	}
}

func TestPadAndLengths(t *testing.T) {
	for l, want := range map[int]int{0: 2, 1: 1, 2: 0, 3: 3, 26: 0, 27: 3, 42: 0, 46: 0, 65535: 3} {
		if got := PadLen(l); got != want {
			t.Errorf("PadLen(%d) = %d, want %d", l, got, want)
		}
		if got := FPDULen(l); got%4 != 0 || got != 2+l+want+4 {
			t.Errorf("FPDULen(%d) = %d", l, got)
		}
	}
}

func TestMULPDU(t *testing.T) {
	tests := []struct {
		emss    int
		markers bool
		want    int
	}{
		{1448, false, 1442}, // EMSS - (6 + EMSS mod 4)
		{1448, true, 1430},
		{1460, false, 1454},
		{1461, false, 1454},
		{1463, false, 1454},
		{65483, false, 65474},
		{1 << 20, false, MaxULPDULen},
		{100, false, MinMULPDU},
		{-1, true, MinMULPDU},
	}
	for _, tt := range tests {
		if got := MULPDU(tt.emss, tt.markers); got != tt.want {
			t.Errorf("MULPDU(%d, %v) = %d, want %d", tt.emss, tt.markers, got, tt.want)
		}
	}
}

func TestFPDUGolden(t *testing.T) {
	for _, v := range fpduVectors {
		t.Run(v.name, func(t *testing.T) {
			f, n, err := ParseFPDU(v.wire, v.crc)
			if err != nil || n != len(v.wire) {
				t.Fatalf("ParseFPDU = %d, %v", n, err)
			}
			l := int(v.wire[0])<<8 | int(v.wire[1])
			if !bytes.Equal(f.ULPDU, v.wire[2:2+l]) {
				t.Errorf("ULPDU wrong")
			}
			// Encode both ways: contiguous, and vectored with the
			// first 2 ULPDU bytes as a separate header piece.
			if got := AppendFPDU(nil, v.crc, f.ULPDU); !bytes.Equal(got, v.wire) {
				t.Errorf("AppendFPDU = % x\nwant         % x", got, v.wire)
			}
			hdr := AppendHeader(nil, l)
			hdr = append(hdr, f.ULPDU[:2]...)
			bufs := net.Buffers{hdr, f.ULPDU[2:], AppendTrailer(nil, v.crc, hdr, f.ULPDU[2:])}
			var w bytes.Buffer
			if _, err := bufs.WriteTo(&w); err != nil || !bytes.Equal(w.Bytes(), v.wire) {
				t.Errorf("vectored = % x", w.Bytes())
			}
			if got, err := PeekFPDULen(v.wire[:2]); err != nil || got != len(v.wire) {
				t.Errorf("PeekFPDULen = %d, %v", got, err)
			}
		})
	}
}

func TestFPDUTruncated(t *testing.T) {
	for _, v := range fpduVectors {
		for i := range len(v.wire) {
			if _, _, err := ParseFPDU(v.wire[:i], v.crc); !errors.Is(err, ErrShort) {
				t.Errorf("%s: ParseFPDU(%d bytes) = %v, want ErrShort", v.name, i, err)
			}
		}
	}
}

func TestFPDUBadCRC(t *testing.T) {
	v := fpduVectors[0]
	for i := range len(v.wire) {
		if i < 2 {
			continue // changing the length makes a different frame
		}
		b := bytes.Clone(v.wire)
		b[i] ^= 0x10
		f, n, err := ParseFPDU(b, true)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Err != ErrCRC || pe.Code() != CodeCRC || pe.Offset != 48 || pe.Field != "CRC" {
			t.Fatalf("byte %d flipped: err = %v", i, err)
		}
		if n != len(b) || len(f.ULPDU) != 46 {
			t.Errorf("byte %d flipped: FPDU not returned with the CRC error", i)
		}
		if _, _, err := ParseFPDU(b, false); err != nil {
			t.Errorf("CRC off: %v", err)
		}
	}
	// The right value in the wrong (big-endian) order is rejected.
	b := bytes.Clone(v.wire)
	copy(b[48:], h("8c 8f f0 9a"))
	_, _, err := ParseFPDU(b, true)
	if err == nil || err.Error() != "mpa: CRC at offset 48: CRC mismatch (got 0x9af08f8c, want 0x8c8ff09a)" {
		t.Errorf("big-endian CRC: %v", err)
	}
}

func TestFPDURandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var stream []byte
	var ulpdus [][]byte
	for range 300 {
		u := make([]byte, r.IntN(2000))
		for i := range u {
			u[i] = byte(r.IntN(256))
		}
		ulpdus = append(ulpdus, u)
		stream = AppendFPDU(stream, true, u[:len(u)/3], u[len(u)/3:])
	}
	for i, u := range ulpdus {
		f, n, err := ParseFPDU(stream, true)
		if err != nil || !bytes.Equal(f.ULPDU, u) {
			t.Fatalf("FPDU %d: %v", i, err)
		}
		stream = stream[n:]
	}
	if len(stream) != 0 {
		t.Errorf("%d bytes left", len(stream))
	}
}

func TestAppendHeaderPanics(t *testing.T) {
	for _, n := range []int{-1, MaxULPDULen + 1} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "mpa: ") {
					t.Errorf("AppendHeader(%d) did not panic properly: %v", n, r)
				}
			}()
			AppendHeader(nil, n)
		}()
	}
}

func TestFPDUString(t *testing.T) {
	f, _, _ := ParseFPDU(fpduVectors[0].wire, true)
	if got := f.String(); got != "FPDU len=46 crc=0x8c8ff09a" {
		t.Errorf("String = %q", got)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "fpdu", f)
	if !strings.Contains(buf.String(), "fpdu.ulpdu_len=46 fpdu.crc=0x8c8ff09a") {
		t.Errorf("slog: %s", buf.String())
	}
}

func TestRTR(t *testing.T) {
	tests := []struct {
		t     RTR
		fpdu  []byte
		ulpdu []byte
	}{
		{RTRWrite, fpduVectors[6].wire, nil},
		{RTRRead, fpduVectors[7].wire, nil},
		{RTRSend, nil, cat("41 43", zeros(8), "00 00 00 01", zeros(4))},
	}
	for _, tt := range tests {
		u := AppendRTR(nil, tt.t)
		if tt.fpdu != nil {
			// The RTR FPDUs siw sends in peer-to-peer mode, CRC on (siw_cm.c).
			if got := AppendFPDU(nil, true, u); !bytes.Equal(got, tt.fpdu) {
				t.Errorf("%v: FPDU % x\nwant % x", tt.t, got, tt.fpdu)
			}
		} else if !bytes.Equal(u, tt.ulpdu) {
			t.Errorf("%v: ULPDU % x", tt.t, u)
		}
		if got, err := ParseRTR(u); err != nil || got != tt.t {
			t.Errorf("ParseRTR(%v) = %v, %v", tt.t, got, err)
		}
		// Reserved bits and MSN are ignored; anything else is not an RTR.
		v := bytes.Clone(u)
		v[0] |= 0x3c
		v[1] |= 0x30
		if got, err := ParseRTR(v); err != nil || got != tt.t {
			t.Errorf("%v with reserved bits: %v, %v", tt.t, got, err)
		}
		for _, bad := range [][]byte{append(bytes.Clone(u), 0), u[:len(u)-1], append([]byte{u[0] ^ 0x40}, u[1:]...)} {
			if _, err := ParseRTR(bad); !errors.Is(err, ErrNotRTR) {
				t.Errorf("%v: ParseRTR(% x) = %v", tt.t, bad, err)
			}
		}
	}
	if _, err := ParseRTR(cat("41 43", zeros(4), "00 00 00 01", "00 00 00 01", zeros(4))); !errors.Is(err, ErrNotRTR) {
		t.Error("Send on QN 1 accepted as RTR")
	}
	if _, err := ParseRTR(nil); !errors.Is(err, ErrNotRTR) {
		t.Error("empty ULPDU accepted as RTR")
	}
	if e := (&ParseError{Err: ErrNotRTR}); e.Code() != CodeNone {
		t.Error("ErrNotRTR has an MPA code")
	}
	for set, want := range map[RTR]RTR{0: 0, RTRSend: RTRSend, RTRSend | RTRRead: RTRRead, RTRSend | RTRRead | RTRWrite: RTRWrite} {
		if got := set.Pick(); got != want {
			t.Errorf("%v.Pick() = %v, want %v", set, got, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("AppendRTR(Send|Write) did not panic")
		}
	}()
	AppendRTR(nil, RTRSend|RTRWrite)
}
