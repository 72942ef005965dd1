package mpa

import (
	"encoding/binary"
	"log/slog"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/internal/crc32c"
)

// FPDU sizes (RFC 5044 section 4).
const (
	// LengthFieldLen is the size of the ULPDU_Length field.
	LengthFieldLen = 2
	// CRCLen is the size of the CRC field.
	CRCLen = 4
	// MaxULPDULen is the largest ULPDU_Length.
	MaxULPDULen = 65535
	// MinMULPDU is the floor RFC 5044 section 7.1 puts under MULPDU.
	MinMULPDU = 128
)

// zeroPad is the source of pad bytes. Read-only; a package variable because
// a local array passed to crc32c.Update would be moved to the heap.
var zeroPad [3]byte

// Checksum returns the CRC32c (Castagnoli, reflected, preset and final XOR
// 0xFFFFFFFF: the iSCSI digest) of b, as RFC 5044 section 6 specifies for
// the FPDU. On the wire the value goes least significant byte first: Linux
// siw stores cpu_to_le32(crc), Wireshark compares with a byte swap, and
// RFC 5044's example FPDUs (figures 5 and 6) end in exactly those bytes.
// CRC32c("123456789") is 0xE3069283.
func Checksum(b []byte) uint32 { return crc32c.Checksum(b) }

// PadLen returns the number of pad bytes after a ULPDU of ulpduLen bytes:
// enough to make LengthFieldLen + ulpduLen a multiple of 4.
func PadLen(ulpduLen int) int { return -(ulpduLen + LengthFieldLen) & 3 }

// FPDULen returns the size of an FPDU without markers carrying a ULPDU of
// ulpduLen bytes: length field, ULPDU, pad and CRC. It is a multiple of 4.
func FPDULen(ulpduLen int) int {
	return LengthFieldLen + ulpduLen + PadLen(ulpduLen) + CRCLen
}

// MULPDU returns the largest ULPDU that fits in one TCP segment of emss
// bytes (the connection's effective send MSS), per RFC 5044 section 7.1:
// emss - (6 + emss mod 4) without markers, and with markers also minus 4
// bytes per marker the segment can hold (ceil(emss/512)). The result is
// never below MinMULPDU nor above MaxULPDULen. It is a sender-side limit;
// receivers accept any ULPDU_Length.
func MULPDU(emss int, markers bool) int {
	if emss < 0 {
		emss = 0
	}
	m := emss - (LengthFieldLen + CRCLen + emss%4)
	if markers {
		m -= MarkerLen * ((emss + MarkerInterval - 1) / MarkerInterval)
	}
	return max(MinMULPDU, min(m, MaxULPDULen))
}

// AppendHeader appends the ULPDU_Length field for a ULPDU of ulpduLen bytes.
// It panics if ulpduLen is outside [0, MaxULPDULen]: sizing segments is the
// caller's job (see MULPDU).
func AppendHeader(b []byte, ulpduLen int) []byte {
	checkULPDULen(ulpduLen)
	return binary.BigEndian.AppendUint16(b, uint16(ulpduLen))
}

// AppendTrailer appends the pad and the CRC field that close an FPDU whose
// bytes so far - ULPDU_Length field and ULPDU - are the concatenation of
// pieces. It does not copy the pieces, so a sender can keep payload in place
// and write net.Buffers{hdr, payload, trailer}:
//
//	hdr := mpa.AppendHeader(buf[:0], len(ddpHdr)+len(payload))
//	hdr = append(hdr, ddpHdr...)
//	trailer := mpa.AppendTrailer(tbuf[:0], crcOn, hdr, payload)
//
// With crc false the CRC field is written as zeros, as Linux siw does when
// neither side asked for CRC. AppendTrailer appends at most 7 bytes.
func AppendTrailer(b []byte, crc bool, pieces ...[]byte) []byte {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	pad := zeroPad[:-n&3]
	var sum uint32
	if crc {
		for _, p := range pieces {
			sum = crc32c.Update(sum, p)
		}
		sum = crc32c.Update(sum, pad)
	}
	b = append(b, pad...)
	return binary.LittleEndian.AppendUint32(b, sum)
}

// AppendFPDU appends a complete FPDU without markers whose ULPDU is the
// concatenation of ulpdu (for instance a DDP header and its payload). Each
// piece is copied once. It panics, like AppendHeader, if the ULPDU is longer
// than MaxULPDULen.
func AppendFPDU(b []byte, crc bool, ulpdu ...[]byte) []byte {
	n := 0
	for _, p := range ulpdu {
		n += len(p)
	}
	start := len(b)
	b = AppendHeader(b, n)
	for _, p := range ulpdu {
		b = append(b, p...)
	}
	return AppendTrailer(b, crc, b[start:])
}

func checkULPDULen(n int) {
	if n < 0 || n > MaxULPDULen {
		panic("mpa: ULPDU length " + strconv.Itoa(n) + " outside [0, 65535]")
	}
}

// FPDU is one parsed FPDU.
type FPDU struct {
	// ULPDU is the DDP segment the FPDU carries, markers removed. It
	// aliases the parsed buffer.
	ULPDU []byte
	// CRC is the CRC field read as the little-endian number it is; when
	// CRC is not negotiated it is whatever the peer sent (0 from siw).
	CRC uint32
}

// String returns e.g. "FPDU len=46 crc=0x8c8ff09a".
func (f FPDU) String() string {
	return "FPDU len=" + strconv.Itoa(len(f.ULPDU)) + " crc=0x" + strconv.FormatUint(uint64(f.CRC), 16)
}

// LogValue implements slog.LogValuer.
func (f FPDU) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("ulpdu_len", len(f.ULPDU)), slog.String("crc", "0x"+strconv.FormatUint(uint64(f.CRC), 16)))
}

// PeekFPDULen returns the length of the FPDU without markers that starts at
// b[0], from its ULPDU_Length field, so that a stream reader knows how many
// bytes to gather before calling ParseFPDU. It needs LengthFieldLen bytes.
func PeekFPDULen(b []byte) (int, error) {
	if len(b) < LengthFieldLen {
		return 0, shortErr("ULPDU_Length", 0, LengthFieldLen, len(b))
	}
	return FPDULen(int(binary.BigEndian.Uint16(b))), nil
}

// ParseFPDU parses the FPDU without markers at the start of b and returns it
// with its length. With crc true it checks the CRC field; on a mismatch it
// returns an ErrCRC error together with a valid FPDU and length, so that a
// trace tool can still show the frame (a connection must treat the error as
// fatal). Pad bytes are not checked. f.ULPDU aliases b.
func ParseFPDU(b []byte, crc bool) (f FPDU, n int, err error) {
	n, err = PeekFPDULen(b)
	if err != nil {
		return FPDU{}, 0, err
	}
	if len(b) < n {
		return FPDU{}, 0, shortErr("ULPDU", LengthFieldLen, n, len(b))
	}
	l := int(binary.BigEndian.Uint16(b))
	f.ULPDU = b[LengthFieldLen : LengthFieldLen+l : LengthFieldLen+l]
	f.CRC = binary.LittleEndian.Uint32(b[n-CRCLen:])
	if crc {
		if want := Checksum(b[:n-CRCLen]); want != f.CRC {
			err = &ParseError{Field: "CRC", Offset: n - CRCLen, Err: ErrCRC, Value: uint64(f.CRC), Limit: uint64(want)}
		}
	}
	return f, n, err
}
