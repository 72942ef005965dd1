package ddp

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

func TestSegmentGolden(t *testing.T) {
	for _, v := range segmentVectors {
		t.Run(v.name, func(t *testing.T) {
			s, err := ParseSegment(v.ulpdu)
			if err != nil {
				t.Fatalf("ParseSegment: %v", err)
			}
			if !reflect.DeepEqual(s, v.seg) {
				t.Errorf("ParseSegment =\n%+v\nwant\n%+v", s, v.seg)
			}
			if err := s.Check(); err != nil {
				t.Errorf("Check: %v", err)
			}
			if got := v.seg.Append(nil); !bytes.Equal(got, v.ulpdu) {
				t.Errorf("Append =\n% x\nwant\n% x", got, v.ulpdu)
			}
			if n := v.seg.Len(); n != len(v.ulpdu) {
				t.Errorf("Len = %d, want %d", n, len(v.ulpdu))
			}
			if n := v.seg.HeaderLen(); n != len(v.ulpdu)-len(v.seg.Payload) {
				t.Errorf("HeaderLen = %d", n)
			}
			if got := s.String(); got != v.str {
				t.Errorf("String =\n%q\nwant\n%q", got, v.str)
			}
			if v.fpdu == nil {
				return
			}
			// Through MPA: the whole FPDU of the worked example
			// or the lab, CRC included, both ways; and the vectored
			// form (headers, payload in place, trailer).
			if got := mpa.AppendFPDU(nil, true, v.seg.AppendHeaders(nil), v.seg.Payload); !bytes.Equal(got, v.fpdu) {
				t.Errorf("FPDU =\n% x\nwant\n% x", got, v.fpdu)
			}
			hdr := v.seg.AppendHeaders(mpa.AppendHeader(nil, v.seg.Len()))
			trailer := mpa.AppendTrailer(nil, true, hdr, v.seg.Payload)
			if got := bytes.Join([][]byte{hdr, v.seg.Payload, trailer}, nil); !bytes.Equal(got, v.fpdu) {
				t.Errorf("vectored FPDU =\n% x", got)
			}
			f, n, err := mpa.ParseFPDU(v.fpdu, true)
			if err != nil || n != len(v.fpdu) {
				t.Fatalf("mpa.ParseFPDU: %v", err)
			}
			if s2, err := ParseSegment(f.ULPDU); err != nil || !reflect.DeepEqual(s2, v.seg) {
				t.Errorf("from FPDU: %v, %v", s2, err)
			}
		})
	}
}

// Every prefix of a segment shorter than its headers fails, and so does
// every prefix of a Read Request or a Terminate, whose size is fixed by
// their headers. (A shorter prefix of a Send or Write is a valid segment
// with less payload; MPA's ULPDU_Length is what delimits it.)
func TestSegmentTruncated(t *testing.T) {
	for _, v := range segmentVectors {
		limit := v.seg.HeaderLen()
		for i := range limit {
			_, err := ParseSegment(v.ulpdu[:i])
			var pe *ParseError
			// A truncated Terminate can also read as one whose
			// other layout has reserved bits or an unknown cause.
			if !errors.As(err, &pe) || (pe.Err != ErrShort && pe.Err != ErrTrailing && pe.Err != ErrReserved && pe.Err != ErrCause) {
				t.Errorf("%s: ParseSegment(%d of %d bytes) = %v", v.name, i, len(v.ulpdu), err)
				continue
			}
			if pe.Cause != CauseRDMAPOperationUnspecified {
				t.Errorf("%s: cause %v", v.name, pe.Cause)
			}
		}
	}
}

func TestSegmentTrailing(t *testing.T) {
	for _, v := range segmentVectors {
		if !v.seg.HasReadRequest() && !v.seg.HasTerminate() {
			continue
		}
		_, err := ParseSegment(append(bytes.Clone(v.ulpdu), 0, 0, 0, 0))
		if !errors.Is(err, ErrTrailing) {
			t.Errorf("%s + 4 bytes: %v", v.name, err)
		}
	}
	_, err := ParseSegment(append(bytes.Clone(segmentVectors[2].ulpdu), 0))
	if err == nil || err.Error() != "ddp: RDMA Read Request header at offset 46: trailing bytes (1 bytes)" {
		t.Errorf("message: %v", err)
	}
}

func TestParseErrorMessages(t *testing.T) {
	tests := []struct {
		b    []byte
		want string
	}{
		{nil, "ddp: DDP control at offset 0: short segment (need 1 bytes, have 0)"},
		{h("41 43 00"), "ddp: DDP header at offset 0: short segment (need 18 bytes, have 3)"},
		{cat("41 41", zeros(16), zeros(20)), "ddp: RDMA Read Request header at offset 18: short segment (need 28 bytes, have 20)"},
		{cat("41 47", zeros(16), "12 02"), "ddp: Terminate control at offset 18: short segment (need 4 bytes, have 2)"},
		{cat("41 47", zeros(16), "12 02 c0 00 00"), "ddp: DDP Segment Length at offset 22: short segment (need 6 bytes, have 5)"},
		{cat("41 47", zeros(16), "12 02 c0 00 00 76 c1"), "ddp: DDP header at offset 24: short segment (need 14 bytes, have 1)"},
		{cat("41 47", zeros(16), "01 01 20 00", zeros(27)), "ddp: RDMA Read Request header at offset 22: short segment (need 28 bytes, have 27)"},
	}
	for _, tt := range tests {
		_, err := ParseSegment(tt.b)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseSegment(% x) =\n%v\nwant\n%s", tt.b, err, tt.want)
		}
	}
}

func randSegment(r *rand.Rand) Segment {
	var s Segment
	s.Control = Control(r.IntN(256))
	s.RDMAP = RDMAPControl(r.IntN(256))
	if s.Control.Tagged() {
		s.STag, s.TO = r.Uint32(), r.Uint64()
	} else {
		s.InvalidateSTag, s.QN, s.MSN, s.MO = r.Uint32(), r.Uint32(), r.Uint32(), r.Uint32()
	}
	rr := func() ReadRequest {
		return ReadRequest{SinkSTag: r.Uint32(), SinkTO: r.Uint64(), Size: r.Uint32(), SourceSTag: r.Uint32(), SourceTO: r.Uint64()}
	}
	switch {
	case s.HasReadRequest():
		s.ReadRequest = rr()
	case s.HasTerminate():
		t := &s.Terminate
		t.Layout = TermLayout(r.IntN(2))
		// Registered causes only, so that LayoutAuto finds the layout
		// again.
		for {
			t.Cause = Cause(r.IntN(0x3000))
			if t.Cause.Known() && t.Cause&0xff00 != 0 {
				break
			}
		}
		t.HdrCt = HdrCt(r.IntN(8))
		if t.HdrCt&HdrCtD != 0 {
			t.SegmentLen = uint16(r.IntN(65536))
			t.DDPHeader = randSegment(r).Header
		}
		if t.HdrCt&HdrCtR != 0 {
			if t.Layout == LayoutSiw && t.HdrCt&HdrCtD != 0 && r.IntN(2) == 0 {
				t.ReadRequestOmitted = true
			} else {
				t.ReadRequest = rr()
			}
		}
	default:
		s.Payload = make([]byte, r.IntN(100))
		for i := range s.Payload {
			s.Payload[i] = byte(r.IntN(256))
		}
	}
	return s
}

func TestSegmentRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 5000 {
		s := randSegment(r)
		b := s.Append(nil)
		if len(b) != s.Len() {
			t.Fatalf("%v: Len %d, encoded %d", s, s.Len(), len(b))
		}
		s2, err := ParseSegment(b)
		if err != nil {
			t.Fatalf("ParseSegment(%v): %v", s, err)
		}
		if s2.HasTerminate() && s2.Terminate.Layout != s.Terminate.Layout {
			// Both readings can be registered causes; then auto
			// detection prefers the RFC. Re-encoding must still be
			// byte-identical.
			if !bytes.Equal(s2.Append(nil), b) {
				t.Fatalf("layout switch changed bytes: %v", s)
			}
			continue
		}
		if len(s.Payload) == 0 {
			s.Payload = s2.Payload[:0:0]
			s2.Payload = s2.Payload[:0:0]
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip:\n%+v\n%+v", s, s2)
		}
	}
}

func TestSegmentLogValue(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == "time" || a.Key == "level" || a.Key == "msg" {
			return slog.Attr{}
		}
		return a
	}}))
	for _, i := range []int{0, 1, 2, 3, 13} {
		log.Info("", "s", segmentVectors[i].seg)
	}
	log.Info("", "h", Header{Control: 0x42, RDMAP: 0x83})
	want := []string{
		"s.op=Send s.last=true s.qn=0 s.msn=1 s.mo=0 s.len=28",
		"s.op=\"RDMA Write\" s.last=true s.stag=0x3a2b1c00 s.to=0x7f0000001000 s.len=13",
		"s.op=\"RDMA Read Request\" s.last=true s.qn=1 s.msn=1 s.mo=0 s.rr.sink_stag=0x0000a101 s.rr.sink_to=0x2000 s.rr.size=4096 s.rr.src_stag=0x3a2b1c00 s.rr.src_to=0x7f0000001000",
		"s.op=Terminate s.last=true s.qn=2 s.msn=1 s.mo=0 s.term.cause.layer=DDP s.term.cause.etype=2 s.term.cause.code=0x02 s.term.cause.name=\"invalid MSN - no buffer available\" s.term.hdrct=M|D s.term.layout=rfc s.term.seglen=118 s.term.hdr.op=Send s.term.hdr.last=true s.term.hdr.qn=0 s.term.hdr.msn=5 s.term.hdr.mo=0",
		"s.op=\"Send with Invalidate\" s.last=true s.inv=0x00abcd01 s.qn=0 s.msn=6 s.mo=0 s.len=4",
		"h.op=Send h.last=true h.qn=0 h.msn=0 h.mo=0 h.dv=2 h.rv=2",
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slog:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	buf.Reset()
	log.Info("", "t", segmentVectors[17].seg.Terminate)
	if !strings.Contains(buf.String(), "t.rr.size=4096") {
		t.Errorf("terminate rr: %s", buf.String())
	}
}
