package mpa

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"strconv"
	"strings"
)

// Frame sizes and limits (RFC 5044 section 7.1, RFC 6581 section 7).
const (
	// KeyLen is the length of the key that starts every Request and Reply.
	KeyLen = 16
	// FrameHeaderLen is the fixed part of a Request or Reply frame: key,
	// flags, Rev and PD_Length.
	FrameHeaderLen = 20
	// MaxPrivateDataLen is the largest PD_Length RFC 5044 allows.
	MaxPrivateDataLen = 512
	// SiwMaxPrivateDataLen is the largest PD_Length Linux siw accepts
	// (RDMA_MAX_PRIVATE_DATA); above it siw closes the connection.
	SiwMaxPrivateDataLen = 256
	// MaxRevision is the highest Rev this package speaks (RFC 6581).
	MaxRevision = 2
)

// The two keys, byte for byte (no NUL terminator). Only byte 9 differs.
const (
	RequestKey = "MPA ID Req Frame"
	ReplyKey   = "MPA ID Rep Frame"
)

// Kind says whether a frame is an MPA Request or an MPA Reply.
type Kind uint8

// Frame kinds.
const (
	Request Kind = iota // "MPA ID Req Frame", sent by the initiator
	Reply               // "MPA ID Rep Frame", sent by the responder
)

// String returns the RFC name of the frame kind.
func (k Kind) String() string {
	switch k {
	case Request:
		return "MPA Request"
	case Reply:
		return "MPA Reply"
	}
	return "MPA frame kind " + strconv.Itoa(int(k))
}

func (k Kind) key() string {
	if k == Reply {
		return ReplyKey
	}
	return RequestKey
}

// Flags is the flags byte of a Request or Reply frame as it sits on the wire
// (RFC 5044 section 7.1, RFC 6581 section 7.1).
type Flags uint8

// Flag bits.
const (
	// FlagMarker (M) asks the peer to insert markers in what it sends.
	FlagMarker Flags = 0x80
	// FlagCRC (C) asks for CRC32c; CRC is on in both directions if either
	// frame has it.
	FlagCRC Flags = 0x40
	// FlagReject (R) in a Reply rejects the connection; sent as 0 in a
	// Request and ignored there.
	FlagReject Flags = 0x20
	// FlagEnhanced (S, RFC 6581) says the private data starts with the
	// IRD/ORD word. It only has that meaning with Rev 2.
	FlagEnhanced Flags = 0x10
	// FlagsReserved are the remaining reserved bits: sent as 0, not checked.
	FlagsReserved Flags = 0x0f
)

// String returns the set bits as "M|C|R|S", "0" when none is set; reserved
// bits show as "res=0xN".
func (f Flags) String() string {
	var parts []string
	for _, b := range [...]struct {
		f Flags
		s string
	}{{FlagMarker, "M"}, {FlagCRC, "C"}, {FlagReject, "R"}, {FlagEnhanced, "S"}} {
		if f&b.f != 0 {
			parts = append(parts, b.s)
		}
	}
	if r := f & FlagsReserved; r != 0 {
		parts = append(parts, "res=0x"+strconv.FormatUint(uint64(r), 16))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// Frame is an MPA Request or Reply frame (RFC 5044 section 7.1):
//
//	off size
//	  0  16  Key
//	 16   1  Flags: M C R S Res
//	 17   1  Rev
//	 18   2  PD_Length
//	 20   n  Private Data: [IRD/ORD word if enhanced] ULP private data
//
// A frame is enhanced (RFC 6581) when Rev >= 2 and FlagEnhanced is set; then
// the first 4 bytes of the private data are the IRD/ORD word, held in IRDORD,
// and PrivateData holds only what follows it. Otherwise IRDORD is unused and
// PrivateData is the whole private data.
type Frame struct {
	Kind  Kind
	Flags Flags
	Rev   uint8
	// IRDORD is the RFC 6581 IRD/ORD word, meaningful iff Enhanced().
	IRDORD IRDORD
	// PrivateData is the ULP's private data. After ParseFrame it aliases
	// the parsed buffer.
	PrivateData []byte
}

// Enhanced reports whether the frame carries the RFC 6581 IRD/ORD word.
func (f *Frame) Enhanced() bool { return f.Rev >= 2 && f.Flags&FlagEnhanced != 0 }

// PDLength returns the PD_Length the frame encodes to.
func (f *Frame) PDLength() int {
	if f.Enhanced() {
		return IRDORDLen + len(f.PrivateData)
	}
	return len(f.PrivateData)
}

// EncodedLen returns the number of bytes Append writes.
func (f *Frame) EncodedLen() int { return FrameHeaderLen + f.PDLength() }

// Append appends the encoded frame to b. It fails, leaving b unchanged, if
// PD_Length would exceed MaxPrivateDataLen, if Kind is not Request or Reply,
// if Rev exceeds MaxRevision, or if an enhanced frame's IRD or ORD exceeds
// MaxIRDORD.
func (f *Frame) Append(b []byte) ([]byte, error) {
	if f.Kind > Reply {
		return b, errors.New("mpa: Frame.Kind " + strconv.Itoa(int(f.Kind)) + " is neither Request nor Reply")
	}
	if f.Rev > MaxRevision {
		return b, errors.New("mpa: Rev " + strconv.Itoa(int(f.Rev)) + " exceeds " + strconv.Itoa(MaxRevision))
	}
	if n := f.PDLength(); n > MaxPrivateDataLen {
		return b, errors.New("mpa: PD_Length " + strconv.Itoa(n) + " exceeds " + strconv.Itoa(MaxPrivateDataLen))
	}
	if f.Enhanced() {
		if err := f.IRDORD.validate(); err != nil {
			return b, err
		}
	}
	b = append(b, f.Kind.key()...)
	b = append(b, byte(f.Flags), f.Rev)
	b = binary.BigEndian.AppendUint16(b, uint16(f.PDLength()))
	if f.Enhanced() {
		b = f.IRDORD.Append(b)
	}
	return append(b, f.PrivateData...), nil
}

// FrameLen returns the total length, FrameHeaderLen + PD_Length, of the frame
// whose first FrameHeaderLen bytes are hdr, so that a reader knows how much
// to read. It checks the key, the revision and PD_Length <= maxPD.
func FrameLen(hdr []byte, maxPD int) (int, error) {
	if len(hdr) < FrameHeaderLen {
		return 0, shortErr("Key", 0, FrameHeaderLen, len(hdr))
	}
	if _, ok := keyKind(hdr); !ok {
		return 0, &ParseError{Field: "Key", Offset: 0, Err: ErrKey}
	}
	if rev := hdr[17]; rev > MaxRevision {
		return 0, &ParseError{Field: "Rev", Offset: 17, Err: ErrRevision, Value: uint64(rev)}
	}
	pd := int(binary.BigEndian.Uint16(hdr[18:]))
	if pd > maxPD {
		return 0, &ParseError{Field: "PD_Length", Offset: 18, Err: ErrTooLong, Value: uint64(pd), Limit: uint64(maxPD)}
	}
	return FrameHeaderLen + pd, nil
}

// ParseFrame parses the Request or Reply frame at the start of b and returns
// it with the number of bytes it occupies. Bytes after the frame are not
// looked at; a caller that must reject them (Linux siw does) checks n against
// len(b). PD_Length must not exceed maxPD (MaxPrivateDataLen per RFC,
// SiwMaxPrivateDataLen toward siw). The flags are returned as received,
// reserved bits included; checking them against the negotiation is the
// caller's business. f.PrivateData aliases b.
func ParseFrame(b []byte, maxPD int) (f Frame, n int, err error) {
	n, err = FrameLen(b, maxPD)
	if err != nil {
		return Frame{}, 0, err
	}
	if len(b) < n {
		return Frame{}, 0, shortErr("Private Data", FrameHeaderLen, n, len(b))
	}
	f.Kind, _ = keyKind(b)
	f.Flags = Flags(b[16])
	f.Rev = b[17]
	pd := b[FrameHeaderLen:n:n]
	if f.Enhanced() {
		if len(pd) < IRDORDLen {
			return Frame{}, 0, &ParseError{Field: "PD_Length", Offset: 18, Err: ErrIRDORD, Value: uint64(len(pd))}
		}
		f.IRDORD = ParseIRDORD(pd)
		pd = pd[IRDORDLen:]
	}
	f.PrivateData = pd
	return f, n, nil
}

func keyKind(b []byte) (Kind, bool) {
	switch string(b[:KeyLen]) {
	case RequestKey:
		return Request, true
	case ReplyKey:
		return Reply, true
	}
	return 0, false
}

// String returns a compact one-line description, e.g.
// "MPA Request rev 2 C|S ird=128 ord=0 pd=8".
func (f Frame) String() string {
	s := f.Kind.String() + " rev " + strconv.Itoa(int(f.Rev)) + " " + f.Flags.String()
	if f.Enhanced() {
		s += " " + f.IRDORD.String()
	}
	return s + " pd=" + strconv.Itoa(len(f.PrivateData))
}

// LogValue implements slog.LogValuer.
func (f Frame) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("kind", f.Kind.String()),
		slog.Int("rev", int(f.Rev)),
		slog.String("flags", f.Flags.String()),
	}
	if f.Enhanced() {
		attrs = append(attrs, slog.Any("irdord", f.IRDORD))
	}
	attrs = append(attrs, slog.Int("pd_len", len(f.PrivateData)))
	return slog.GroupValue(attrs...)
}
