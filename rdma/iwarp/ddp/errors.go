package ddp

import (
	"errors"
	"strconv"
)

// The kinds of failure. A *ParseError wraps exactly one of them, so callers
// test the kind with errors.Is and read the field, offset and Terminate
// cause with errors.As.
var (
	// ErrShort: the ULPDU ends before the header or RDMAP body does.
	ErrShort = errors.New("short segment")
	// ErrTrailing: bytes follow a Read Request or Terminate body.
	ErrTrailing = errors.New("trailing bytes")
	// ErrDDPVersion: DV is not 1 (RFC 5041 section 7.2).
	ErrDDPVersion = errors.New("invalid DDP version")
	// ErrRDMAPVersion: RV is not 1 (RFC 5040 section 7.2).
	ErrRDMAPVersion = errors.New("invalid RDMAP version")
	// ErrOpcode: an opcode this implementation does not support, or one
	// sent with the wrong buffer model (T bit).
	ErrOpcode = errors.New("unexpected opcode")
	// ErrQN: an untagged segment on a queue its opcode does not use.
	ErrQN = errors.New("invalid queue number")
	// ErrMO: a single-segment message (Read Request, Terminate) with MO != 0.
	ErrMO = errors.New("invalid message offset")
	// ErrNotLast: a single-segment message (Read Request, Terminate)
	// without L.
	ErrNotLast = errors.New("single-segment message without L")
	// ErrReserved: a reserved field is not zero. Only CheckReserved and
	// Terminate layout detection (LayoutAuto) report it; the RFCs say
	// receivers ignore reserved fields.
	ErrReserved = errors.New("reserved bits set")
	// ErrTOWrap: TO plus length passes 2^64.
	ErrTOWrap = errors.New("tagged offset wraps")
	// ErrCause: a Terminate whose Layer/EType/Error Code is not a
	// registered triple in either control word layout (LayoutAuto only).
	ErrCause = errors.New("unregistered Terminate cause")
)

// ParseError reports where and why a segment was rejected.
type ParseError struct {
	// Field is the RFC name of the field that failed, e.g. "QN".
	Field string
	// Offset is the byte offset of the field from the start of the ULPDU
	// (the DDP control byte), or from the start of the buffer given to
	// ParseReadRequest or ParseTerminate.
	Offset int
	// Err is one of the Err* kinds above.
	Err error
	// Value is the offending value, or the bytes needed for ErrShort and
	// the number of extra bytes for ErrTrailing.
	Value uint64
	// Limit is the expected value, or the bytes available for ErrShort.
	Limit uint64
	// Cause is what a Terminate reporting this error carries. The RFCs
	// define no cause for a malformed segment; ErrShort, ErrTrailing,
	// ErrNotLast, ErrReserved and ErrCause use
	// CauseRDMAPOperationUnspecified.
	Cause Cause
}

func (e *ParseError) Error() string {
	s := "ddp: " + e.Field + " at offset " + strconv.Itoa(e.Offset) + ": " + e.Err.Error()
	switch e.Err {
	case ErrShort:
		s += " (need " + strconv.FormatUint(e.Value, 10) + " bytes, have " + strconv.FormatUint(e.Limit, 10) + ")"
	case ErrTrailing:
		s += " (" + strconv.FormatUint(e.Value, 10) + " bytes)"
	case ErrQN:
		s += " (" + strconv.FormatUint(e.Value, 10) + ", want " + strconv.FormatUint(e.Limit, 10) + ")"
	case ErrDDPVersion, ErrRDMAPVersion, ErrMO, ErrOpcode:
		s += " (" + strconv.FormatUint(e.Value, 10) + ")"
	case ErrReserved, ErrCause:
		s += " (0x" + strconv.FormatUint(e.Value, 16) + ")"
	}
	return s
}

// Unwrap returns the kind of failure.
func (e *ParseError) Unwrap() error { return e.Err }

func shortErr(field string, off, need, have int) *ParseError {
	return &ParseError{Field: field, Offset: off, Err: ErrShort, Value: uint64(need), Limit: uint64(have), Cause: CauseRDMAPOperationUnspecified}
}
