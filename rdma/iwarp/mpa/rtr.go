package mpa

import "encoding/binary"

// RTR messages (RFC 6581 section 9.3). In peer-to-peer mode the initiator's
// first FPDU is a zero-length message of a type both sides flagged in their
// IRD/ORD words: a Send, an RDMA Write or an RDMA Read Request. They are DDP
// messages, but their bytes are fixed, because an RTR is always the first
// message on its queue (MSN 1) and zero-length tagged fields are never
// validated. The templates below are what Linux siw sends in peer-to-peer
// mode (RFC 6581 section 9.2; siw_cm.c): STag 1 and TO 0 for the
// Write; sink STag 0 / TO 0, size 0, source STag 1 / TO 0 for the Read
// Request.
// They are ULPDUs; frame them with AppendFPDU like any other.
//
// Layouts (ULPDU offsets, RFC 5041 section 4, RFC 5040 section 4):
//
//	Write:  0 DDP ctrl C1 | 1 RDMAP ctrl 40 | 2 STag | 6 TO(8)                         = 14
//	Send:   0 DDP ctrl 41 | 1 RDMAP ctrl 43 | 2 rsvd | 6 QN 0 | 10 MSN 1 | 14 MO 0      = 18
//	Read:   0 DDP ctrl 41 | 1 RDMAP ctrl 41 | 2 rsvd | 6 QN 1 | 10 MSN 1 | 14 MO 0
//	        18 sink STag | 22 sink TO(8) | 30 size 0 | 34 source STag 1 | 38 source TO(8) = 46
var (
	rtrWrite = [14]byte{0xc1, 0x40, 0, 0, 0, 1}
	rtrSend  = [18]byte{0x41, 0x43, 13: 1}
	rtrRead  = [46]byte{0x41, 0x41, 9: 1, 13: 1, 37: 1}
)

const (
	rtrOffQN     = 6
	rtrOffMO     = 14
	rtrOffRdSize = 30
	ddpCtrlMask  = 0xc3 // T, L and DV; reserved bits ignored
	rdmaCtrlMask = 0xcf // RV and opcode; reserved bits ignored
)

// Pick returns the one type, among those in r, that the initiator sends
// (or a siw-like responder accepts): RDMA Write first, then RDMA Read, then
// Send. It returns 0 if r is empty, which at the initiator, applied to the
// intersection of both words, means no matching RTR option (Terminate with
// CodeNoMatchingRTR).
func (r RTR) Pick() RTR {
	for _, t := range [...]RTR{RTRWrite, RTRRead, RTRSend} {
		if r&t != 0 {
			return t
		}
	}
	return 0
}

// AppendRTR appends the ULPDU of the RTR message of type t, which must be
// exactly one of RTRSend, RTRWrite and RTRRead (AppendRTR panics otherwise:
// that is a caller bug, not peer input).
func AppendRTR(b []byte, t RTR) []byte {
	switch t {
	case RTRWrite:
		return append(b, rtrWrite[:]...)
	case RTRSend:
		return append(b, rtrSend[:]...)
	case RTRRead:
		return append(b, rtrRead[:]...)
	}
	panic("mpa: AppendRTR: not a single RTR type: " + t.String())
}

// ParseRTR reports which RTR message the ULPDU is: a zero-length RDMA Write
// (any STag and TO), a zero-length Send on QN 0, or an RDMA Read Request of
// size 0 on QN 1, each with L=1, DDP and RDMAP version 1, MO 0. Reserved
// bits are ignored, and so is the MSN (its check belongs to DDP). Any other
// ULPDU fails with ErrNotRTR. Note that Linux siw, as responder, accepts any
// valid FPDU in place of the RTR.
func ParseRTR(ulpdu []byte) (RTR, error) {
	if len(ulpdu) >= 2 {
		c0, c1 := ulpdu[0]&ddpCtrlMask, ulpdu[1]&rdmaCtrlMask
		switch {
		case len(ulpdu) == len(rtrWrite) && c0 == rtrWrite[0] && c1 == rtrWrite[1]:
			return RTRWrite, nil
		case len(ulpdu) == len(rtrSend) && c0 == rtrSend[0] && c1 == rtrSend[1] &&
			be32(ulpdu, rtrOffQN) == 0 && be32(ulpdu, rtrOffMO) == 0:
			return RTRSend, nil
		case len(ulpdu) == len(rtrRead) && c0 == rtrRead[0] && c1 == rtrRead[1] &&
			be32(ulpdu, rtrOffQN) == 1 && be32(ulpdu, rtrOffMO) == 0 && be32(ulpdu, rtrOffRdSize) == 0:
			return RTRRead, nil
		}
	}
	return 0, &ParseError{Field: "ULPDU", Offset: 0, Err: ErrNotRTR}
}

func be32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
