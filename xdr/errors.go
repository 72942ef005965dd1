package xdr

import (
	"errors"
	"strconv"
)

// The kinds of decoding failure. A *DecodeError wraps exactly one of them, so
// callers test the kind with errors.Is and read the offset with errors.As.
var (
	// ErrShort: the buffer ends before the item does.
	ErrShort = errors.New("short buffer")
	// ErrTooLong: a length or count exceeds the maximum the caller allows.
	ErrTooLong = errors.New("length exceeds maximum")
	// ErrCount: an array count claims more elements than the remaining bytes
	// could hold.
	ErrCount = errors.New("count exceeds remaining bytes")
	// ErrPad: a padding byte is not zero (see the package doc).
	ErrPad = errors.New("non-zero padding")
	// ErrBool: a boolean or optional-data discriminant is neither 0 nor 1.
	ErrBool = errors.New("boolean not 0 or 1")
	// ErrTrailing: bytes remain after the last item of a message.
	ErrTrailing = errors.New("trailing bytes")
)

// DecodeError reports where and why decoding failed.
type DecodeError struct {
	// Offset is the byte offset, from the start of the decoder's buffer, of
	// the item that failed.
	Offset int
	// Err is one of the Err* kinds above.
	Err error
	// Value is the offending length, count or discriminant when there is
	// one, and the number of bytes needed or remaining for ErrShort and
	// ErrTrailing.
	Value uint64
	// Limit is the maximum the value was checked against, or the number of
	// bytes available, when it applies.
	Limit uint64
}

func (e *DecodeError) Error() string {
	s := "xdr: " + e.Err.Error() + " at offset " + strconv.Itoa(e.Offset)
	switch e.Err {
	case ErrShort:
		s += " (need " + strconv.FormatUint(e.Value, 10) + " bytes, have " + strconv.FormatUint(e.Limit, 10) + ")"
	case ErrTooLong, ErrCount:
		s += " (" + strconv.FormatUint(e.Value, 10) + " > " + strconv.FormatUint(e.Limit, 10) + ")"
	case ErrBool:
		s += " (value " + strconv.FormatUint(e.Value, 10) + ")"
	case ErrTrailing:
		s += " (" + strconv.FormatUint(e.Value, 10) + " bytes)"
	}
	return s
}

// Unwrap returns the kind of failure.
func (e *DecodeError) Unwrap() error { return e.Err }
