package ddp

import (
	"encoding/binary"
	"log/slog"
	"strconv"
)

// Header sizes (RFC 5041 sections 4.3 and 4.4).
const (
	TaggedHeaderLen   = 14
	UntaggedHeaderLen = 18
)

// Header is a DDP header with the RDMAP control byte and, for the untagged
// model, RDMAP's Invalidate STag word: everything from the DDP control byte
// to the start of the RDMAP header or payload. Which fields are on the wire
// depends on Control.Tagged():
//
//	tagged (14 bytes)            untagged (18 bytes)
//	 0 DDP control (T=1)          0 DDP control (T=0)
//	 1 RDMAP control              1 RDMAP control
//	 2 STag                       2 Invalidate STag (RsvdULP; 0 unless the
//	 6 TO (8 bytes)                 opcode invalidates)
//	                              6 QN
//	                             10 MSN
//	                             14 MO
//
// The fields of the other model are ignored by Append and zero after
// ParseHeader.
type Header struct {
	Control Control
	RDMAP   RDMAPControl

	// Tagged buffer model.
	STag uint32 // the data sink's steering tag
	TO   uint64 // tagged offset of this segment's first payload byte

	// Untagged buffer model.
	InvalidateSTag uint32 // for Send with Invalidate (and SE); else 0
	QN             uint32 // queue number
	MSN            uint32 // message sequence number, per QN, from 1
	MO             uint32 // message offset of this segment's first payload byte
}

// Tagged returns the header of a tagged segment (RDMA Write or RDMA Read
// Response) with DV and RV 1.
func Tagged(op Opcode, last bool, stag uint32, to uint64) Header {
	return Header{Control: MakeControl(true, last), RDMAP: MakeRDMAPControl(op), STag: stag, TO: to}
}

// Untagged returns the header of an untagged segment with DV and RV 1; set
// InvalidateSTag afterwards for the invalidating Sends.
func Untagged(op Opcode, last bool, qn, msn, mo uint32) Header {
	return Header{Control: MakeControl(false, last), RDMAP: MakeRDMAPControl(op), QN: qn, MSN: msn, MO: mo}
}

// Opcode returns the RDMAP opcode.
func (h *Header) Opcode() Opcode { return h.RDMAP.Opcode() }

// Len returns the encoded size: TaggedHeaderLen or UntaggedHeaderLen.
func (h *Header) Len() int {
	if h.Control.Tagged() {
		return TaggedHeaderLen
	}
	return UntaggedHeaderLen
}

// Append appends the encoded header to b.
func (h *Header) Append(b []byte) []byte {
	b = append(b, byte(h.Control), byte(h.RDMAP))
	if h.Control.Tagged() {
		b = binary.BigEndian.AppendUint32(b, h.STag)
		return binary.BigEndian.AppendUint64(b, h.TO)
	}
	b = binary.BigEndian.AppendUint32(b, h.InvalidateSTag)
	b = binary.BigEndian.AppendUint32(b, h.QN)
	b = binary.BigEndian.AppendUint32(b, h.MSN)
	return binary.BigEndian.AppendUint32(b, h.MO)
}

// ParseHeader parses the header at the start of b; its length is h.Len().
// Any control bytes are accepted (see the Check functions).
func ParseHeader(b []byte) (Header, error) { return parseHeader(b, 0) }

// parseHeader is ParseHeader with error offsets shifted by base.
func parseHeader(b []byte, base int) (h Header, err error) {
	if len(b) < 1 {
		return Header{}, shortErr("DDP control", base, 1, len(b))
	}
	h.Control = Control(b[0])
	if n := h.Len(); len(b) < n {
		return Header{}, shortErr("DDP header", base, n, len(b))
	}
	h.RDMAP = RDMAPControl(b[1])
	if h.Control.Tagged() {
		h.STag = binary.BigEndian.Uint32(b[2:])
		h.TO = binary.BigEndian.Uint64(b[6:])
		return h, nil
	}
	h.InvalidateSTag = binary.BigEndian.Uint32(b[2:])
	h.QN = binary.BigEndian.Uint32(b[6:])
	h.MSN = binary.BigEndian.Uint32(b[10:])
	h.MO = binary.BigEndian.Uint32(b[14:])
	return h, nil
}

// String returns a compact description: the opcode name, "L" on a last
// segment, then the buffer fields, e.g. "RDMA Write L stag=0x3a2b1c00
// to=0x7f0000001000" or "Send L qn=0 msn=1 mo=0". A tagged header with an
// untagged opcode or the reverse prints the fields its T bit selects.
// Versions other than 1 and non-zero reserved bits are appended.
func (h Header) String() string {
	s := h.Opcode().String()
	if h.Control.Last() {
		s += " L"
	}
	if h.Control.Tagged() {
		s += " stag=0x" + hex8(h.STag) + " to=0x" + strconv.FormatUint(h.TO, 16)
	} else {
		if h.InvalidateSTag != 0 || h.Opcode().Invalidates() {
			s += " inv=0x" + hex8(h.InvalidateSTag)
		}
		s += " qn=" + strconv.FormatUint(uint64(h.QN), 10) +
			" msn=" + strconv.FormatUint(uint64(h.MSN), 10) +
			" mo=" + strconv.FormatUint(uint64(h.MO), 10)
	}
	if v := h.Control.Version(); v != Version {
		s += " dv=" + strconv.Itoa(int(v))
	}
	if v := h.RDMAP.Version(); v != Version {
		s += " rv=" + strconv.Itoa(int(v))
	}
	if r := h.Control.Reserved() | h.RDMAP.Reserved(); r != 0 {
		s += " rsvd=0x" + strconv.FormatUint(uint64(r), 16)
	}
	return s
}

// LogValue implements slog.LogValuer.
func (h Header) LogValue() slog.Value { return slog.GroupValue(h.attrs()...) }

func (h *Header) attrs() []slog.Attr {
	a := []slog.Attr{
		slog.String("op", h.Opcode().String()),
		slog.Bool("last", h.Control.Last()),
	}
	if h.Control.Tagged() {
		a = append(a, slog.String("stag", "0x"+hex8(h.STag)), slog.String("to", "0x"+strconv.FormatUint(h.TO, 16)))
	} else {
		if h.InvalidateSTag != 0 || h.Opcode().Invalidates() {
			a = append(a, slog.String("inv", "0x"+hex8(h.InvalidateSTag)))
		}
		a = append(a, slog.Uint64("qn", uint64(h.QN)), slog.Uint64("msn", uint64(h.MSN)), slog.Uint64("mo", uint64(h.MO)))
	}
	if h.Control.Version() != Version || h.RDMAP.Version() != Version {
		a = append(a, slog.Int("dv", int(h.Control.Version())), slog.Int("rv", int(h.RDMAP.Version())))
	}
	return a
}

// hex8 formats v as 8 hex digits, the way STags are usually shown.
func hex8(v uint32) string {
	s := strconv.FormatUint(uint64(v), 16)
	return "00000000"[len(s):] + s
}
