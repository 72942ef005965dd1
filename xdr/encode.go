package xdr

import "encoding/binary"

// Encoding is append-style: each AppendXxx function appends the XDR encoding of
// one item to b and returns the extended slice, like strconv.AppendInt. None of
// them allocates unless b lacks capacity. Callers that know the encoded size in
// advance should size b with the matching XxxLen helper.

// UnitSize is the XDR basic block size (RFC 4506 section 3): every item's
// encoding is a multiple of four bytes.
const UnitSize = 4

// Pad returns the number of zero bytes (0 to 3) that follow n bytes of opaque
// data or string to reach a multiple of four (RFC 4506 sections 4.9, 4.10).
func Pad(n int) int { return (UnitSize - n&(UnitSize-1)) & (UnitSize - 1) }

// RoundUp returns n rounded up to a multiple of four: the encoded size of n
// bytes of fixed-length opaque data.
func RoundUp(n int) int { return n + Pad(n) }

// OpaqueLen returns the encoded size of variable-length opaque data or a string
// of n bytes: the length word plus the rounded-up data.
func OpaqueLen(n int) int { return UnitSize + RoundUp(n) }

var zeros [UnitSize]byte

// AppendUint32 appends an unsigned integer (RFC 4506 section 4.2).
func AppendUint32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// AppendInt32 appends a signed integer (RFC 4506 section 4.1).
func AppendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// AppendEnum appends an enumeration value (RFC 4506 section 4.3); it is
// encoded exactly as a signed integer.
func AppendEnum(b []byte, v int32) []byte { return AppendInt32(b, v) }

// AppendBool appends a boolean (RFC 4506 section 4.4): 1 for true, 0 for false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return AppendUint32(b, 1)
	}
	return AppendUint32(b, 0)
}

// AppendUint64 appends an unsigned hyper integer (RFC 4506 section 4.5).
func AppendUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// AppendInt64 appends a hyper integer (RFC 4506 section 4.5).
func AppendInt64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// AppendFixedOpaque appends fixed-length opaque data (RFC 4506 section 4.9):
// the bytes of p followed by zero padding to a multiple of four. The length is
// not encoded; both sides know it.
func AppendFixedOpaque(b []byte, p []byte) []byte {
	b = append(b, p...)
	return append(b, zeros[:Pad(len(p))]...)
}

// AppendOpaque appends variable-length opaque data (RFC 4506 section 4.10): a
// length word, the bytes of p, and zero padding.
func AppendOpaque(b []byte, p []byte) []byte {
	b = AppendUint32(b, uint32(len(p)))
	return AppendFixedOpaque(b, p)
}

// AppendString appends a string (RFC 4506 section 4.11), encoded exactly as
// variable-length opaque data.
func AppendString(b []byte, s string) []byte {
	b = AppendUint32(b, uint32(len(s)))
	b = append(b, s...)
	return append(b, zeros[:Pad(len(s))]...)
}

// AppendPad appends the zero padding that follows n bytes of opaque data. Use
// it when the data itself is carried elsewhere (for example in an RDMA chunk)
// and only the padding belongs in this buffer.
func AppendPad(b []byte, n int) []byte { return append(b, zeros[:Pad(n)]...) }

// Reserve appends a zero word to b and returns the extended slice with the
// offset of that word, so that a length or count known only after the items
// that follow it can be filled in later with PutUint32. Offsets stay valid
// when b is reallocated by later appends; pointers into b would not.
func Reserve(b []byte) ([]byte, int) {
	return append(b, zeros[:]...), len(b)
}

// PutUint32 overwrites the word at offset off of b, typically one returned by
// Reserve. It panics if b is too short, which is a bug in the caller.
func PutUint32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:off+4], v) }
