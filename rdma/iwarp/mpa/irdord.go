package mpa

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"strconv"
	"strings"
)

// IRDORDLen is the size of the RFC 6581 IRD/ORD word.
const IRDORDLen = 4

// MaxIRDORD is the largest 14-bit IRD or ORD value. RFC 6581 section 9.1
// gives it a special meaning: "no automatic negotiation, the ULP decides".
// (Linux siw does not implement that meaning; it reads 0x3FFF as 16383 and
// caps it at 128.)
const MaxIRDORD = 0x3fff

// RTR is a set of RTR message types (RFC 6581 section 9.2): in the IRD/ORD
// word, the types a peer can send (initiator) or accepts (responder).
type RTR uint8

// RTR message types. Their values are independent of the wire bits, which
// are spread over the two halves of the IRD/ORD word.
const (
	// RTRSend is a zero-length Send (wire bit B, first half).
	RTRSend RTR = 1 << iota
	// RTRWrite is a zero-length RDMA Write (wire bit C, second half).
	RTRWrite
	// RTRRead is a zero-length RDMA Read Request (wire bit D, second half).
	RTRRead
)

// String returns the set types as "Send|Write|Read", or "none".
func (r RTR) String() string {
	var parts []string
	if r&RTRSend != 0 {
		parts = append(parts, "Send")
	}
	if r&RTRWrite != 0 {
		parts = append(parts, "Write")
	}
	if r&RTRRead != 0 {
		parts = append(parts, "Read")
	}
	if r&^(RTRSend|RTRWrite|RTRRead) != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(r), 16))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// IRD/ORD word bits, on the two big-endian 16-bit halves.
const (
	bitPeerToPeer = 0x8000 // A, first half
	bitRTRSend    = 0x4000 // B, first half
	bitRTRWrite   = 0x8000 // C, second half
	bitRTRRead    = 0x4000 // D, second half
)

// IRDORD is the 4-byte word at the start of the private data of an enhanced
// frame (RFC 6581 section 7.1):
//
//	byte 0          byte 1          byte 2          byte 3
//	A B i i i i i i i i i i i i i i C D o o o o o o o o o o o o o o
//
// A is the peer-to-peer bit; B, C and D flag zero-length Send, RDMA Write
// and RDMA Read as RTR messages; IRD and ORD are 14-bit queue depths.
type IRDORD struct {
	// PeerToPeer (A) asks for or confirms peer-to-peer mode, in which the
	// initiator's first FPDU is an RTR message.
	PeerToPeer bool
	// RTR holds the B, C and D bits. They must be 0 when PeerToPeer is
	// false.
	RTR RTR
	// IRD is the inbound RDMA Read queue depth, 0..MaxIRDORD.
	IRD uint16
	// ORD is the outbound RDMA Read queue depth, 0..MaxIRDORD.
	ORD uint16
}

// ParseIRDORD decodes the word in the first IRDORDLen bytes of b, which the
// caller guarantees are there. Every bit pattern is a valid word.
func ParseIRDORD(b []byte) IRDORD {
	hi := binary.BigEndian.Uint16(b[0:2])
	lo := binary.BigEndian.Uint16(b[2:4])
	w := IRDORD{
		PeerToPeer: hi&bitPeerToPeer != 0,
		IRD:        hi & MaxIRDORD,
		ORD:        lo & MaxIRDORD,
	}
	if hi&bitRTRSend != 0 {
		w.RTR |= RTRSend
	}
	if lo&bitRTRWrite != 0 {
		w.RTR |= RTRWrite
	}
	if lo&bitRTRRead != 0 {
		w.RTR |= RTRRead
	}
	return w
}

// Append appends the encoded word to b. IRD and ORD are masked to 14 bits;
// Frame.Append refuses larger values instead of masking them.
func (w IRDORD) Append(b []byte) []byte {
	hi := w.IRD & MaxIRDORD
	lo := w.ORD & MaxIRDORD
	if w.PeerToPeer {
		hi |= bitPeerToPeer
	}
	if w.RTR&RTRSend != 0 {
		hi |= bitRTRSend
	}
	if w.RTR&RTRWrite != 0 {
		lo |= bitRTRWrite
	}
	if w.RTR&RTRRead != 0 {
		lo |= bitRTRRead
	}
	b = binary.BigEndian.AppendUint16(b, hi)
	return binary.BigEndian.AppendUint16(b, lo)
}

func (w IRDORD) validate() error {
	if w.IRD > MaxIRDORD || w.ORD > MaxIRDORD {
		return errors.New("mpa: IRD " + strconv.Itoa(int(w.IRD)) + " or ORD " + strconv.Itoa(int(w.ORD)) + " exceeds 14 bits")
	}
	if w.RTR&^(RTRSend|RTRWrite|RTRRead) != 0 {
		return errors.New("mpa: unknown RTR bits " + w.RTR.String())
	}
	return nil
}

// String returns e.g. "ird=128 ord=0", with " p2p rtr=Write|Read" appended
// in peer-to-peer mode (or when RTR bits are set without it).
func (w IRDORD) String() string {
	s := "ird=" + strconv.Itoa(int(w.IRD)) + " ord=" + strconv.Itoa(int(w.ORD))
	if w.PeerToPeer {
		s += " p2p"
	}
	if w.PeerToPeer || w.RTR != 0 {
		s += " rtr=" + w.RTR.String()
	}
	return s
}

// LogValue implements slog.LogValuer.
func (w IRDORD) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("ird", int(w.IRD)),
		slog.Int("ord", int(w.ORD)),
		slog.Bool("p2p", w.PeerToPeer),
		slog.String("rtr", w.RTR.String()),
	)
}
