package mpa

import (
	"errors"
	"strconv"
)

// The kinds of parse failure. A *ParseError wraps exactly one of them, so
// callers test the kind with errors.Is and read the field and offset with
// errors.As.
var (
	// ErrShort: the buffer ends before the item does. For a stream reader
	// this means "read more"; it is the only kind that is not fatal.
	ErrShort = errors.New("short buffer")
	// ErrKey: the 16-byte key is neither "MPA ID Req Frame" nor
	// "MPA ID Rep Frame".
	ErrKey = errors.New("bad key")
	// ErrRevision: the Rev field is one this package cannot speak (> 2).
	ErrRevision = errors.New("unsupported revision")
	// ErrTooLong: a length exceeds the maximum the caller allows.
	ErrTooLong = errors.New("length exceeds maximum")
	// ErrIRDORD: an enhanced frame (Rev 2, S=1) whose private data is too
	// short to hold the IRD/ORD word (RFC 6581 section 7.1).
	ErrIRDORD = errors.New("enhanced frame without IRD/ORD word")
	// ErrCRC: the CRC field does not match the CRC32c of the FPDU.
	ErrCRC = errors.New("CRC mismatch")
	// ErrMarker: a marker's FPDUPTR does not point at the start of the FPDU
	// that ULPDU_Length delimits.
	ErrMarker = errors.New("marker does not point to FPDU start")
	// ErrNotRTR: a ULPDU is not one of the zero-length RTR messages.
	ErrNotRTR = errors.New("not an RTR message")
)

// ParseError reports where and why parsing failed.
type ParseError struct {
	// Field is the RFC name of the wire field that failed, e.g. "PD_Length".
	Field string
	// Offset is the byte offset of that field from the start of the buffer
	// passed to the parser.
	Offset int
	// Err is one of the Err* kinds above.
	Err error
	// Value is the offending value when there is one (a length, a CRC, an
	// FPDUPTR), or the number of bytes needed for ErrShort.
	Value uint64
	// Limit is what Value was checked against: the maximum length, the
	// expected CRC or FPDUPTR, or the bytes available for ErrShort.
	Limit uint64
}

func (e *ParseError) Error() string {
	s := "mpa: " + e.Field + " at offset " + strconv.Itoa(e.Offset) + ": " + e.Err.Error()
	switch e.Err {
	case ErrShort:
		s += " (need " + strconv.FormatUint(e.Value, 10) + " bytes, have " + strconv.FormatUint(e.Limit, 10) + ")"
	case ErrTooLong:
		s += " (" + strconv.FormatUint(e.Value, 10) + " > " + strconv.FormatUint(e.Limit, 10) + ")"
	case ErrRevision:
		s += " (" + strconv.FormatUint(e.Value, 10) + ")"
	case ErrCRC, ErrMarker:
		s += " (got 0x" + strconv.FormatUint(e.Value, 16) + ", want 0x" + strconv.FormatUint(e.Limit, 16) + ")"
	}
	return s
}

// Unwrap returns the kind of failure.
func (e *ParseError) Unwrap() error { return e.Err }

// Code returns the MPA error code (RFC 5044 section 8, carried in a Terminate
// with layer LLP, error type 0) that the failure maps to, or CodeNone for
// ErrShort and ErrNotRTR, which are not protocol errors by themselves.
func (e *ParseError) Code() ErrorCode {
	switch e.Err {
	case ErrCRC:
		return CodeCRC
	case ErrMarker:
		return CodeMarker
	case ErrKey, ErrRevision, ErrTooLong, ErrIRDORD:
		return CodeInvalidFrame
	}
	return CodeNone
}

func shortErr(field string, off, need, have int) *ParseError {
	return &ParseError{Field: field, Offset: off, Err: ErrShort, Value: uint64(need), Limit: uint64(have)}
}

// ErrorCode is an MPA error code: the Error Code of a Terminate message whose
// Layer is LLP and whose Error Type is 0 (RFC 5044 section 8, RFC 6581
// section 8, IANA "RDDP" registry).
type ErrorCode uint8

// MPA error codes.
const (
	CodeNone              ErrorCode = 0x00 // not an MPA error code; no Terminate reason
	CodeConnectionLost    ErrorCode = 0x01 // TCP connection closed, terminated or lost
	CodeCRC               ErrorCode = 0x02 // MPA CRC error
	CodeMarker            ErrorCode = 0x03 // MPA marker and ULPDU_Length field mismatch
	CodeInvalidFrame      ErrorCode = 0x04 // invalid MPA Request or Reply frame
	CodeLocalCatastrophic ErrorCode = 0x05 // local catastrophic error (RFC 6581)
	CodeInsufficientIRD   ErrorCode = 0x06 // insufficient IRD resources (RFC 6581)
	CodeNoMatchingRTR     ErrorCode = 0x07 // no matching RTR option (RFC 6581)
	codeCount                       = 0x08
)

var codeNames = [codeCount]string{
	CodeNone:              "none",
	CodeConnectionLost:    "TCP connection closed, terminated or lost",
	CodeCRC:               "MPA CRC error",
	CodeMarker:            "MPA marker and ULPDU_Length mismatch",
	CodeInvalidFrame:      "invalid MPA Request or Reply frame",
	CodeLocalCatastrophic: "local catastrophic error",
	CodeInsufficientIRD:   "insufficient IRD resources",
	CodeNoMatchingRTR:     "no matching RTR option",
}

// String returns the RFC name of the code.
func (c ErrorCode) String() string {
	if c < codeCount {
		return codeNames[c]
	}
	return "unknown MPA error 0x" + strconv.FormatUint(uint64(c), 16)
}
