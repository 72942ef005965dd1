package ddp

import (
	"log/slog"
	"strconv"
)

// Segment is one DDP segment, the ULPDU of one FPDU: the DDP header with the
// RDMAP control byte, the RDMAP header its opcode calls for, and the payload.
//
// The RDMAP header is parsed only for an untagged segment: ReadRequest is
// meaningful iff HasReadRequest(), Terminate iff HasTerminate(). Every other
// segment, whatever its opcode (Check judges opcodes), has its bytes after
// the DDP header in Payload.
type Segment struct {
	Header
	ReadRequest ReadRequest
	Terminate   Terminate
	// Payload is the ULP payload; it aliases the ULPDU after ParseSegment.
	// It is nil for a Read Request or a Terminate, which have none.
	Payload []byte
}

// HasReadRequest reports whether the segment carries a Read Request header:
// an untagged segment with opcode RDMA Read Request.
func (h *Header) HasReadRequest() bool {
	return !h.Control.Tagged() && h.Opcode() == OpRDMAReadRequest
}

// HasTerminate reports whether the segment carries a Terminate header: an
// untagged segment with opcode Terminate.
func (h *Header) HasTerminate() bool {
	return !h.Control.Tagged() && h.Opcode() == OpTerminate
}

// HeaderLen returns the number of bytes before the payload.
func (s *Segment) HeaderLen() int {
	n := s.Header.Len()
	switch {
	case s.HasReadRequest():
		n += ReadRequestLen
	case s.HasTerminate():
		n += s.Terminate.Len()
	}
	return n
}

// Len returns the encoded size of the segment, which is the ULPDU_Length of
// the FPDU that carries it.
func (s *Segment) Len() int { return s.HeaderLen() + len(s.Payload) }

// AppendHeaders appends the DDP header and the RDMAP header, without the
// payload, for a sender that writes the payload from where it lies.
func (s *Segment) AppendHeaders(b []byte) []byte {
	b = s.Header.Append(b)
	switch {
	case s.HasReadRequest():
		b = s.ReadRequest.Append(b)
	case s.HasTerminate():
		b = s.Terminate.Append(b)
	}
	return b
}

// Append appends the whole segment, payload included.
func (s *Segment) Append(b []byte) []byte { return append(s.AppendHeaders(b), s.Payload...) }

// ParseSegment parses the ULPDU of one FPDU. It checks structure only: the
// header sizes, that a Read Request is exactly its 28-byte header, and that
// a Terminate is well formed (decoded with LayoutAuto, so siw's Terminates
// are understood). It accepts any version, opcode, queue number or reserved
// bits; call s.Check for the receiver rules. It does not allocate; Payload
// and the Terminate's fields alias ulpdu.
func ParseSegment(ulpdu []byte) (s Segment, err error) {
	if s.Header, err = parseHeader(ulpdu, 0); err != nil {
		return Segment{}, err
	}
	off := s.Header.Len()
	switch {
	case s.HasReadRequest():
		if s.ReadRequest, err = parseReadRequest(ulpdu[off:], off); err != nil {
			return Segment{}, err
		}
		if extra := len(ulpdu) - off - ReadRequestLen; extra != 0 {
			return Segment{}, &ParseError{Field: "RDMA Read Request header", Offset: off + ReadRequestLen, Err: ErrTrailing, Value: uint64(extra), Cause: CauseRDMAPOperationUnspecified}
		}
	case s.HasTerminate():
		if s.Terminate, err = parseTerminate(ulpdu[off:], LayoutAuto, off); err != nil {
			return Segment{}, err
		}
	default:
		s.Payload = ulpdu[off:len(ulpdu):len(ulpdu)]
	}
	return s, nil
}

// String returns the header followed by the RDMAP header and the payload
// length, e.g. "Send L qn=0 msn=1 mo=0 len=28" or "RDMA Read Request L qn=1
// msn=1 mo=0 sink=0x0000a101@0x2000 size=4096 src=0x3a2b1c00@0x7f0000001000".
func (s Segment) String() string {
	str := s.Header.String()
	switch {
	case s.HasReadRequest():
		return str + " " + s.ReadRequest.String()
	case s.HasTerminate():
		return str + " " + s.Terminate.String()
	}
	return str + " len=" + strconv.Itoa(len(s.Payload))
}

// LogValue implements slog.LogValuer.
func (s Segment) LogValue() slog.Value {
	a := s.Header.attrs()
	switch {
	case s.HasReadRequest():
		a = append(a, slog.Any("rr", s.ReadRequest))
	case s.HasTerminate():
		a = append(a, slog.Any("term", s.Terminate))
	default:
		a = append(a, slog.Int("len", len(s.Payload)))
	}
	return slog.GroupValue(a...)
}
