package mpa

import (
	"bytes"
	"testing"
)

// FuzzMPAFrame checks that ParseFrame never panics, and that a frame it
// accepts encodes back to exactly the bytes it was parsed from.
func FuzzMPAFrame(f *testing.F) {
	for _, v := range frameVectors {
		f.Add(v.wire)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := ParseFrame(b, MaxPrivateDataLen)
		if err != nil {
			return
		}
		if n > len(b) || n != fr.EncodedLen() {
			t.Fatalf("n = %d, EncodedLen %d, input %d", n, fr.EncodedLen(), len(b))
		}
		enc, err := fr.Append(nil)
		if err != nil {
			t.Fatalf("Append(%v): %v", fr, err)
		}
		if !bytes.Equal(enc, b[:n]) {
			t.Fatalf("re-encoded % x\nfrom        % x", enc, b[:n])
		}
		fr2, n2, err := ParseFrame(enc, MaxPrivateDataLen)
		if err != nil || n2 != n || fr2.String() != fr.String() {
			t.Fatalf("second parse: %v, %v", fr2, err)
		}
		_ = fr.String()
	})
}

// FuzzMarkerFPDU parses a stream of FPDUs with markers from an arbitrary
// marker phase; every accepted FPDU must re-encode to an FPDU that parses to
// the same ULPDU with a good CRC.
func FuzzMarkerFPDU(f *testing.F) {
	for _, v := range markerVectors {
		f.Add(uint16(v.pos), v.wire)
	}
	f.Fuzz(func(t *testing.T, pos uint16, b []byte) {
		start := uint32(pos) &^ 3
		m := Markers{pos: start}
		b = bytes.Clone(b)
		for len(b) > 0 {
			at := m.pos
			fp, n, err := m.ParseFPDU(b, false)
			if err != nil {
				return
			}
			enc := (&Markers{pos: at}).AppendFPDU(nil, true, fp.ULPDU)
			if len(enc) != n {
				t.Fatalf("re-encoded %d bytes, parsed %d", len(enc), n)
			}
			fp2, _, err := (&Markers{pos: at}).ParseFPDU(enc, true)
			if err != nil || !bytes.Equal(fp2.ULPDU, fp.ULPDU) {
				t.Fatalf("second parse: %v", err)
			}
			b = b[n:]
		}
	})
}
