package mpa

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMarkersGolden(t *testing.T) {
	for _, v := range markerVectors {
		t.Run(v.name, func(t *testing.T) {
			m := Markers{pos: v.pos}
			if got, err := m.PeekFPDULen(v.wire); err != nil || got != len(v.wire) {
				t.Errorf("PeekFPDULen = %d, %v; want %d", got, err, len(v.wire))
			}
			if got := m.FPDULen(len(v.ulpdu)); got != len(v.wire) {
				t.Errorf("FPDULen = %d, want %d", got, len(v.wire))
			}
			enc := Markers{pos: v.pos}
			if got := enc.AppendFPDU(nil, true, v.ulpdu); !bytes.Equal(got, v.wire) {
				t.Errorf("AppendFPDU = % x\nwant         % x", got, v.wire)
			}
			b := bytes.Clone(v.wire)
			f, n, err := m.ParseFPDU(b, true)
			if err != nil || n != len(v.wire) || !bytes.Equal(f.ULPDU, v.ulpdu) {
				t.Fatalf("ParseFPDU = % x, %d, %v", f.ULPDU, n, err)
			}
			if m.Offset() != v.pos+uint32(n) || enc.Offset() != m.Offset() {
				t.Errorf("offsets %d, %d; want %d", m.Offset(), enc.Offset(), v.pos+uint32(n))
			}
		})
	}
}

func TestMarkersTruncated(t *testing.T) {
	for _, v := range markerVectors {
		for i := range len(v.wire) {
			m := Markers{pos: v.pos}
			b := bytes.Clone(v.wire[:i])
			if _, _, err := m.ParseFPDU(b, true); !errors.Is(err, ErrShort) {
				t.Errorf("%s: %d bytes: %v, want ErrShort", v.name, i, err)
			}
			if m.pos != v.pos || !bytes.Equal(b, v.wire[:i]) {
				t.Errorf("%s: state or buffer changed on ErrShort", v.name)
			}
		}
	}
}

func TestMarkersBadPointer(t *testing.T) {
	v := markerVectors[1]
	b := bytes.Clone(v.wire)
	b[23] = 0x10 // FPDUPTR 0x14 -> 0x10
	m := Markers{pos: v.pos}
	_, _, err := m.ParseFPDU(b, true)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Err != ErrMarker || pe.Offset != 22 || pe.Code() != CodeMarker {
		t.Fatalf("err = %v", err)
	}
	if err.Error() != "mpa: FPDUPTR at offset 22: marker does not point to FPDU start (got 0x10, want 0x14)" {
		t.Errorf("message %q", err)
	}
	if m.pos != v.pos || !bytes.Equal(b[:22], v.wire[:22]) {
		t.Error("state or buffer changed on ErrMarker")
	}
	// The two low bits and the reserved half are ignored.
	b = bytes.Clone(v.wire)
	b[20], b[23] = 0xff, 0x17
	if _, _, err := (&Markers{pos: v.pos}).ParseFPDU(b, false); err != nil {
		t.Errorf("low FPDUPTR bits: %v", err)
	}
	// A leading marker must have FPDUPTR 0.
	b = bytes.Clone(markerVectors[0].wire)
	b[3] = 4
	if _, _, err := (&Markers{}).ParseFPDU(b, true); !errors.Is(err, ErrMarker) {
		t.Errorf("leading marker FPDUPTR 4: %v", err)
	}
	// A CRC error still strips the markers and advances.
	b = bytes.Clone(v.wire)
	b[30] = 1
	m = Markers{pos: v.pos}
	f, n, err := m.ParseFPDU(b, true)
	if !errors.Is(err, ErrCRC) || n != len(b) || len(f.ULPDU) != 42 || m.pos != v.pos+uint32(n) {
		t.Errorf("CRC error: %v, n %d, len %d", err, n, len(f.ULPDU))
	}
}

// TestMarkersStream writes FPDUs of random sizes through one Markers and
// reads them back through another: markers land everywhere, including
// between the pad and the CRC and exactly between two FPDUs.
func TestMarkersStream(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, start := range []uint32{0, 0xffffff00} {
		tx, rx := Markers{pos: start}, Markers{pos: start}
		var stream []byte
		var ulpdus [][]byte
		for range 400 {
			u := make([]byte, r.IntN(1500))
			for i := range u {
				u[i] = byte(r.IntN(256))
			}
			before := tx.pos
			data := FPDULen(len(u))
			ulpdus = append(ulpdus, u)
			stream = tx.AppendFPDU(stream, true, u[:len(u)/2], u[len(u)/2:])
			if got := int(tx.pos - before); got != rawLen(before, data) {
				t.Fatalf("AppendFPDU advanced %d, rawLen %d", got, rawLen(before, data))
			}
		}
		for i, u := range ulpdus {
			f, n, err := rx.ParseFPDU(stream, true)
			if err != nil || !bytes.Equal(f.ULPDU, u) {
				t.Fatalf("start %#x FPDU %d (len %d): %v", start, i, len(u), err)
			}
			stream = stream[n:]
		}
		if tx.pos != rx.pos || len(stream) != 0 {
			t.Errorf("tx %d rx %d, %d bytes left", tx.pos, rx.pos, len(stream))
		}
	}
}

// A marker that falls right before the CRC field belongs to the FPDU and is
// covered by its CRC.
func TestMarkerBeforeCRC(t *testing.T) {
	u := make([]byte, 42) // FPDU data 48 bytes: 2 + 42 + 0 pad + 4 CRC
	m := Markers{pos: MarkerInterval - 44}
	b := m.AppendFPDU(nil, true, u)
	if len(b) != 52 {
		t.Fatalf("len %d", len(b))
	}
	if mk := ParseMarker(b[44:]); mk.FPDUPTR != 44 {
		t.Errorf("marker before CRC: %v", mk)
	}
	if got, want := b[48:], AppendTrailer(nil, true, b[:48])[0:]; !bytes.Equal(got, want) {
		t.Errorf("CRC % x does not cover the marker (% x)", got, want)
	}
}

func TestMarkerString(t *testing.T) {
	mk := ParseMarker(h("00 01 00 14"))
	if got := mk.String(); got != "marker fpduptr=20 res=0x1" {
		t.Errorf("String = %q", got)
	}
	if got := (Marker{}).String(); got != "marker fpduptr=0" {
		t.Errorf("String = %q", got)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "m", mk)
	if !strings.Contains(buf.String(), "m.fpduptr=20 m.reserved=1") {
		t.Errorf("slog: %s", buf.String())
	}
}
