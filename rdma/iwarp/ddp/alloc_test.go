package ddp

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

func TestHotPathDoesNotAllocate(t *testing.T) {
	out := make([]byte, 0, 8192)
	for _, v := range segmentVectors {
		n := testing.AllocsPerRun(50, func() {
			s, err := ParseSegment(v.ulpdu)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			out = s.AppendHeaders(out[:0])
		})
		if n != 0 {
			t.Errorf("%s: %v allocations", v.name, n)
		}
	}
}

// BenchmarkReceive measures the receive path of a full-size Send: MPA
// framing with CRC, DDP parsing and the single-segment checks.
func BenchmarkReceive(b *testing.B) {
	seg := Segment{Header: Untagged(OpSend, true, 0, 1, 0), Payload: make([]byte, 1424)}
	fpdu := mpa.AppendFPDU(nil, true, seg.AppendHeaders(nil), seg.Payload)
	b.SetBytes(int64(len(fpdu)))
	b.ReportAllocs()
	for b.Loop() {
		f, _, err := mpa.ParseFPDU(fpdu, true)
		if err != nil {
			b.Fatal(err)
		}
		s, err := ParseSegment(f.ULPDU)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Check(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSend measures building the header and trailer of a full-size
// RDMA Write for a vectored write, payload left in place.
func BenchmarkSend(b *testing.B) {
	seg := Segment{Header: Tagged(OpRDMAWrite, true, 0x3a2b1c00, 0x1000), Payload: make([]byte, 1428)}
	hdr := make([]byte, 0, 64)
	trailer := make([]byte, 0, 8)
	b.SetBytes(int64(len(seg.Payload)))
	b.ReportAllocs()
	for b.Loop() {
		hdr = seg.AppendHeaders(mpa.AppendHeader(hdr[:0], seg.Len()))
		trailer = mpa.AppendTrailer(trailer[:0], true, hdr, seg.Payload)
	}
}
