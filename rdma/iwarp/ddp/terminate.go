package ddp

import (
	"encoding/binary"
	"log/slog"
	"strconv"
	"strings"
)

// Terminate sizes (RFC 5040 section 4.8).
const (
	// TerminateControlLen is the size of the Terminate control word.
	TerminateControlLen = 4
	// SegmentLenLen is the size of the DDP Segment Length field.
	SegmentLenLen = 2
)

// HdrCt is the set of Terminate header-control bits, independent of the
// layout they are encoded in.
type HdrCt uint8

// Header-control bits.
const (
	// HdrCtM: the DDP Segment Length field is valid.
	HdrCtM HdrCt = 1 << 2
	// HdrCtD: the DDP Segment Length field and the terminated DDP header
	// are included.
	HdrCtD HdrCt = 1 << 1
	// HdrCtR: the terminated RDMA Read Request header is included.
	HdrCtR HdrCt = 1 << 0
)

// String returns the set bits as "M|D|R", or "-".
func (h HdrCt) String() string {
	var parts []string
	for _, b := range [...]struct {
		f HdrCt
		s string
	}{{HdrCtM, "M"}, {HdrCtD, "D"}, {HdrCtR, "R"}} {
		if h&b.f != 0 {
			parts = append(parts, b.s)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "|")
}

// TermLayout is the bit layout of the Terminate control word.
type TermLayout uint8

// Layouts.
const (
	// LayoutRFC is RFC 5040 section 4.8, a big-endian word:
	// Layer<<28 | EType<<24 | Code<<16 | M<<15 | D<<14 | R<<13.
	LayoutRFC TermLayout = iota
	// LayoutSiw is what Linux siw sends and expects on little-endian CPUs,
	// seen on the wire from Linux 6.1 (docs/linux-interop.md section 3): siw
	// declares the word as C bitfields in the RFC's order, which a
	// little-endian compiler allocates from the least significant bit, so
	// the same fields sit in a little-endian word in reverse:
	// Reserved<<19 | R<<18 | D<<17 | M<<16 | Code<<8 | EType<<4 | Layer.
	// siw also puts the payload length, not the ULPDU length, in DDP
	// Segment Length, and for Send errors sets R without including a Read
	// Request header.
	LayoutSiw
	// LayoutAuto, for parsing only, decodes with both layouts and keeps the
	// one under which the message is well formed, its cause registered and
	// its reserved bits zero, preferring LayoutRFC. If neither reading
	// qualifies, parsing fails with the RFC reading's error, ErrReserved
	// or ErrCause (use an explicit layout to decode such a message).
	LayoutAuto
)

// String returns "rfc", "siw" or "auto".
func (l TermLayout) String() string {
	switch l {
	case LayoutRFC:
		return "rfc"
	case LayoutSiw:
		return "siw"
	case LayoutAuto:
		return "auto"
	}
	return "layout " + strconv.Itoa(int(l))
}

// Terminate is the RDMAP header of a Terminate message (RFC 5040 section
// 4.8), which follows an untagged DDP header on QN 2 (MSN 1 for the one
// Terminate of a stream, MO 0, L=1):
//
//	0 Terminate control: Layer, EType, Error Code, M, D, R, reserved
//	4 DDP Segment Length (2)              iff D
//	6 terminated DDP header (14 or 18)    iff D; its own T bit gives the size
//	. terminated RDMA Read Request (28)   iff R
type Terminate struct {
	Cause  Cause
	HdrCt  HdrCt
	Layout TermLayout // how the control word is (or was) encoded
	// Reserved is the 13-bit reserved field of the control word, kept so
	// that a parsed message encodes back to the same bytes; send 0.
	Reserved uint16
	// SegmentLen is the DDP Segment Length of the terminated segment,
	// present iff D and meaningful iff M. RFC peers send the ULPDU length,
	// siw the payload length: treat it as informational.
	SegmentLen uint16
	// DDPHeader is the terminated segment's DDP header, iff D.
	DDPHeader Header
	// ReadRequest is the terminated Read Request header, iff R and not
	// ReadRequestOmitted.
	ReadRequest ReadRequest
	// ReadRequestOmitted is set when R is set but no Read Request header
	// follows, which siw does for Send errors (LayoutSiw only).
	ReadRequestOmitted bool
}

// Len returns the encoded size.
func (t *Terminate) Len() int {
	n := TerminateControlLen
	if t.HdrCt&HdrCtD != 0 {
		n += SegmentLenLen + t.DDPHeader.Len()
	}
	if t.HdrCt&HdrCtR != 0 && !t.ReadRequestOmitted {
		n += ReadRequestLen
	}
	return n
}

// Append appends the encoded Terminate header in t.Layout (LayoutAuto
// encodes as LayoutRFC).
func (t *Terminate) Append(b []byte) []byte {
	m, d, r := uint32(t.HdrCt>>2)&1, uint32(t.HdrCt>>1)&1, uint32(t.HdrCt)&1
	res := uint32(t.Reserved) & 0x1fff
	l, e, c := uint32(t.Cause.Layer()), uint32(t.Cause.EType()), uint32(t.Cause.Code())
	if t.Layout == LayoutSiw {
		b = binary.LittleEndian.AppendUint32(b, res<<19|r<<18|d<<17|m<<16|c<<8|e<<4|l)
	} else {
		b = binary.BigEndian.AppendUint32(b, l<<28|e<<24|c<<16|m<<15|d<<14|r<<13|res)
	}
	if t.HdrCt&HdrCtD != 0 {
		b = binary.BigEndian.AppendUint16(b, t.SegmentLen)
		b = t.DDPHeader.Append(b)
	}
	if t.HdrCt&HdrCtR != 0 && !t.ReadRequestOmitted {
		b = t.ReadRequest.Append(b)
	}
	return b
}

// ParseTerminate parses a Terminate header that fills b exactly (b is what
// follows the untagged DDP header). With LayoutAuto the result's Layout
// says which layout was used.
func ParseTerminate(b []byte, layout TermLayout) (Terminate, error) {
	return parseTerminate(b, layout, 0)
}

func parseTerminate(b []byte, layout TermLayout, base int) (Terminate, error) {
	if layout != LayoutAuto {
		return parseTerminateLayout(b, layout, base)
	}
	// Probe both readings without building errors, so that the hot path
	// does not allocate, then parse the winner.
	for _, l := range [...]TermLayout{LayoutRFC, LayoutSiw} {
		if cause, res, ok := termShape(b, l); ok && cause.Known() && res == 0 {
			return parseTerminateLayout(b, l, base)
		}
	}
	t, err := parseTerminateLayout(b, LayoutRFC, base)
	switch {
	case err != nil:
	case t.Reserved != 0:
		err = &ParseError{Field: "Terminate control", Offset: base, Err: ErrReserved, Value: uint64(t.Reserved), Cause: CauseRDMAPOperationUnspecified}
	default:
		err = &ParseError{Field: "Terminate control", Offset: base, Err: ErrCause, Value: uint64(t.Cause), Cause: CauseRDMAPOperationUnspecified}
	}
	return Terminate{}, err
}

// termControl decodes the Terminate control word at the start of b, which
// holds at least TerminateControlLen bytes.
func termControl(b []byte, layout TermLayout) (cause Cause, hdrct HdrCt, res uint16) {
	var l, e, c, m, d, r, rs uint32
	if layout == LayoutSiw {
		w := binary.LittleEndian.Uint32(b)
		l, e, c, m, d, r, rs = w&0xf, w>>4&0xf, w>>8&0xff, w>>16&1, w>>17&1, w>>18&1, w>>19
	} else {
		w := binary.BigEndian.Uint32(b)
		l, e, c, m, d, r, rs = w>>28, w>>24&0xf, w>>16&0xff, w>>15&1, w>>14&1, w>>13&1, w&0x1fff
	}
	return MakeCause(Layer(l), uint8(e), uint8(c)), HdrCt(m<<2 | d<<1 | r), uint16(rs)
}

// termShape reports whether b is exactly one Terminate header under layout,
// judging sizes only, and the cause and reserved bits it would decode to.
func termShape(b []byte, layout TermLayout) (cause Cause, res uint16, ok bool) {
	if len(b) < TerminateControlLen {
		return 0, 0, false
	}
	cause, hdrct, res := termControl(b, layout)
	n := TerminateControlLen
	if hdrct&HdrCtD != 0 {
		if len(b) <= n+SegmentLenLen {
			return 0, 0, false
		}
		n += SegmentLenLen + TaggedHeaderLen
		if !Control(b[n-TaggedHeaderLen]).Tagged() {
			n += UntaggedHeaderLen - TaggedHeaderLen
		}
	}
	if hdrct&HdrCtR != 0 && (layout != LayoutSiw || len(b) != n) {
		n += ReadRequestLen
	}
	return cause, res, n == len(b)
}

func parseTerminateLayout(b []byte, layout TermLayout, base int) (t Terminate, err error) {
	if len(b) < TerminateControlLen {
		return Terminate{}, shortErr("Terminate control", base, TerminateControlLen, len(b))
	}
	t.Layout = layout
	t.Cause, t.HdrCt, t.Reserved = termControl(b, layout)
	off := TerminateControlLen
	if t.HdrCt&HdrCtD != 0 {
		if len(b) < off+SegmentLenLen {
			return Terminate{}, shortErr("DDP Segment Length", base+off, off+SegmentLenLen, len(b))
		}
		t.SegmentLen = binary.BigEndian.Uint16(b[off:])
		off += SegmentLenLen
		if t.DDPHeader, err = parseHeader(b[off:], base+off); err != nil {
			return Terminate{}, err
		}
		off += t.DDPHeader.Len()
	}
	if t.HdrCt&HdrCtR != 0 {
		if layout == LayoutSiw && len(b) == off {
			t.ReadRequestOmitted = true
		} else {
			if t.ReadRequest, err = parseReadRequest(b[off:], base+off); err != nil {
				return Terminate{}, err
			}
			off += ReadRequestLen
		}
	}
	if off != len(b) {
		return Terminate{}, &ParseError{Field: "Terminate", Offset: base + off, Err: ErrTrailing, Value: uint64(len(b) - off), Cause: CauseRDMAPOperationUnspecified}
	}
	return t, nil
}

// String returns e.g. "DDP untagged buffer error: invalid MSN - no buffer
// available (1/2/0x02) M|D seglen=118 hdr=[Send L qn=0 msn=5 mo=0]".
func (t Terminate) String() string {
	s := t.Cause.String() + " " + t.HdrCt.String()
	if t.HdrCt&HdrCtD != 0 {
		s += " seglen=" + strconv.Itoa(int(t.SegmentLen)) + " hdr=[" + t.DDPHeader.String() + "]"
	}
	if t.HdrCt&HdrCtR != 0 && !t.ReadRequestOmitted {
		s += " rr=[" + t.ReadRequest.String() + "]"
	}
	if t.Reserved != 0 {
		s += " res=0x" + strconv.FormatUint(uint64(t.Reserved), 16)
	}
	if t.Layout == LayoutSiw {
		s += " (siw layout)"
	}
	return s
}

// LogValue implements slog.LogValuer.
func (t Terminate) LogValue() slog.Value {
	a := []slog.Attr{
		slog.Any("cause", t.Cause),
		slog.String("hdrct", t.HdrCt.String()),
		slog.String("layout", t.Layout.String()),
	}
	if t.HdrCt&HdrCtD != 0 {
		a = append(a, slog.Int("seglen", int(t.SegmentLen)), slog.Any("hdr", t.DDPHeader))
	}
	if t.HdrCt&HdrCtR != 0 && !t.ReadRequestOmitted {
		a = append(a, slog.Any("rr", t.ReadRequest))
	}
	return slog.GroupValue(a...)
}
