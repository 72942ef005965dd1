package mpa

import "testing"

func TestParsersDoNotAllocate(t *testing.T) {
	req := frameVectors[0].wire
	fpdu := fpduVectors[0].wire
	mk := markerVectors[1]
	raw := make([]byte, len(mk.wire))
	out := make([]byte, 0, 256)
	payload := fpdu[20:48]
	hdr := fpdu[:20]
	tests := map[string]func(){
		"ParseFrame": func() {
			if _, _, err := ParseFrame(req, MaxPrivateDataLen); err != nil {
				t.Fatal(err)
			}
		},
		"ParseFPDU": func() {
			if _, _, err := ParseFPDU(fpdu, true); err != nil {
				t.Fatal(err)
			}
		},
		"Markers.ParseFPDU": func() {
			copy(raw, mk.wire)
			m := Markers{pos: mk.pos}
			if _, _, err := m.ParseFPDU(raw, true); err != nil {
				t.Fatal(err)
			}
		},
		"AppendFPDU": func() { out = AppendFPDU(out[:0], true, hdr[2:], payload) },
		"AppendTrailer": func() {
			out = AppendTrailer(out[:0], true, hdr, payload)
		},
		"Markers.AppendFPDU": func() {
			m := Markers{pos: mk.pos}
			out = m.AppendFPDU(out[:0], true, mk.ulpdu)
		},
		"ParseRTR": func() {
			if _, err := ParseRTR(fpduVectors[7].wire[2:48]); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range tests {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func BenchmarkAppendFPDU(b *testing.B) {
	payload := make([]byte, 1424)
	hdr := make([]byte, 18)
	out := make([]byte, 0, 2048)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		out = AppendFPDU(out[:0], true, hdr, payload)
	}
}

func BenchmarkParseFPDU(b *testing.B) {
	payload := make([]byte, 1424)
	fpdu := AppendFPDU(nil, true, make([]byte, 18), payload)
	b.SetBytes(int64(len(fpdu)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseFPDU(fpdu, true); err != nil {
			b.Fatal(err)
		}
	}
}
