package rdma

import (
	"errors"
	"fmt"
	"net"
)

// Errors returned by methods. They concern one call: the connection
// survives.
var (
	// ErrQueueFull: a send queue, receive queue or ORD limit is reached.
	// Poll for completions, then post again.
	ErrQueueFull = errors.New("rdma: queue full")

	// ErrInvalid: an argument is invalid (oversized private data, a bad
	// SGE, an unknown op or access bit, an MR of another connection). It is
	// a bug in the caller.
	ErrInvalid = errors.New("rdma: invalid argument")

	// ErrRejected: the responder rejected a connection request. Dial
	// returns it inside a *RejectError.
	ErrRejected = errors.New("rdma: connection rejected")
)

// Errors that end a connection, as returned by Conn.Err and by methods
// called after the end. Each matches errors.Is(err, net.ErrClosed).
var (
	// ErrClosed: this side called Close.
	ErrClosed error = &closedError{"rdma: connection closed"}
	// ErrDisconnected: the peer closed the connection.
	ErrDisconnected error = &closedError{"rdma: connection closed by peer"}
	// ErrConnectionLost: the link failed (reset, timeout); iwarp reports
	// MPA's "TCP connection closed, reset or lost" (2/0/0x01) as this.
	ErrConnectionLost error = &closedError{"rdma: connection lost"}
)

type closedError struct{ msg string }

func (e *closedError) Error() string { return e.msg }
func (e *closedError) Unwrap() error { return net.ErrClosed }

// RejectError is returned by Dial when the responder rejects the request.
type RejectError struct {
	// PrivateData is the responder's private data sent with the reject.
	PrivateData []byte
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("rdma: connection rejected with %d bytes of private data", len(e.PrivateData))
}

// Is reports whether target is ErrRejected.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// CheckPrivateData returns an error matching ErrInvalid if b is longer than
// MaxPrivateData. where names the operation ("dial", "accept", "reject").
func CheckPrivateData(where string, b []byte) error {
	if len(b) > MaxPrivateData {
		return fmt.Errorf("rdma: %s: private data is %d bytes, more than %d: %w",
			where, len(b), MaxPrivateData, ErrInvalid)
	}
	return nil
}

// CheckPrivateDataMax is CheckPrivateData with a provider's own maximum.
func CheckPrivateDataMax(where string, b []byte, max int) error {
	if len(b) > max {
		return fmt.Errorf("rdma: %s: private data is %d bytes, more than %d: %w",
			where, len(b), max, ErrInvalid)
	}
	return nil
}

// PrivateDataLimits are the largest private data a provider carries in a
// connect request (Dial), a reply (ConnRequest.Accept) and a reject.
// InfiniBand and RoCE carry 56, 196 and 148 bytes through rdma_cm, and
// deliver the whole fixed-size area, zero-padded (Padded); iWARP carries
// MaxPrivateData bytes each way at their exact length.
type PrivateDataLimits struct {
	Dial, Accept, Reject int
	Padded               bool // received private data may carry trailing zeros
}

// PrivateDataLimiter is implemented by providers that carry less private
// data than MaxPrivateData, or pad it.
type PrivateDataLimiter interface {
	PrivateDataLimits() PrivateDataLimits
}

// PrivateDataLimitsOf returns p's limits: its own if it implements
// PrivateDataLimiter, MaxPrivateData each way, unpadded, otherwise.
func PrivateDataLimitsOf(p Provider) PrivateDataLimits {
	if l, ok := p.(PrivateDataLimiter); ok {
		return l.PrivateDataLimits()
	}
	return PrivateDataLimits{Dial: MaxPrivateData, Accept: MaxPrivateData, Reject: MaxPrivateData}
}

// RemoteInvalidationReporter is implemented by providers that know before
// connecting whether their connections take remote invalidation
// (Limits.RemoteInvalidation), so that an upper layer can decide what to
// offer in its connect request's private data (RFC 8797 section 4.1.1).
type RemoteInvalidationReporter interface {
	RemoteInvalidation() bool
}

// RemoteInvalidationOf reports whether p's connections take remote
// invalidation: p's answer if it implements RemoteInvalidationReporter,
// true otherwise.
func RemoteInvalidationOf(p Provider) bool {
	if r, ok := p.(RemoteInvalidationReporter); ok {
		return r.RemoteInvalidation()
	}
	return true
}

// Layer is the layer field of an RDMAP Terminate (RFC 5040 section 4.8).
type Layer uint8

const (
	LayerRDMAP Layer = 0 // RDMAP, RFC 5040
	LayerDDP   Layer = 1 // DDP, RFC 5041
	LayerMPA   Layer = 2 // the LLP: MPA, RFC 5044
)

// String returns "RDMAP", "DDP", "MPA" or "Layer(n)".
func (l Layer) String() string {
	switch l {
	case LayerRDMAP:
		return "RDMAP"
	case LayerDDP:
		return "DDP"
	case LayerMPA:
		return "MPA"
	}
	return fmt.Sprintf("Layer(%d)", uint8(l))
}

// ErrorType is the error type field of a Terminate; its meaning depends on
// the Layer.
type ErrorType uint8

const (
	// TypeLocalCatastrophic, layer RDMAP or DDP.
	TypeLocalCatastrophic ErrorType = 0
	// TypeRemoteProtection, layer RDMAP.
	TypeRemoteProtection ErrorType = 1
	// TypeRemoteOperation, layer RDMAP.
	TypeRemoteOperation ErrorType = 2
	// TypeTaggedBuffer, layer DDP.
	TypeTaggedBuffer ErrorType = 1
	// TypeUntaggedBuffer, layer DDP.
	TypeUntaggedBuffer ErrorType = 2
	// TypeReservedLLP, layer DDP: reserved for the LLP.
	TypeReservedLLP ErrorType = 3
	// TypeMPA, layer MPA: the only type.
	TypeMPA ErrorType = 0
)

// ErrorCode is the error code field of a Terminate; its meaning depends on
// the Layer and ErrorType. Names follow RFC 5040 section 7.1, RFC 5041
// section 7.2, RFC 5044 section 8 and RFC 6581.
type ErrorCode uint8

// RDMAP remote protection (0/1) and remote operation (0/2) codes.
const (
	CodeInvalidSTag         ErrorCode = 0x00 // 0/1: invalid STag
	CodeBaseBounds          ErrorCode = 0x01 // 0/1: base or bounds violation
	CodeAccessRights        ErrorCode = 0x02 // 0/1: access rights violation
	CodeSTagNotAssociated   ErrorCode = 0x03 // 0/1: STag not associated with RDMAP stream
	CodeTOWrap              ErrorCode = 0x04 // 0/1: TO wrap
	CodeInvalidRDMAPVersion ErrorCode = 0x05 // 0/2: invalid RDMAP version
	CodeUnexpectedOpcode    ErrorCode = 0x06 // 0/2: unexpected opcode
	CodeCatastrophicStream  ErrorCode = 0x07 // 0/2: catastrophic error, localized to RDMAP stream
	CodeCatastrophicGlobal  ErrorCode = 0x08 // 0/2: catastrophic error, global
	CodeCannotInvalidate    ErrorCode = 0x09 // 0/1 and 0/2: STag cannot be invalidated
	CodeUnspecified         ErrorCode = 0xFF // 0/1 and 0/2: unspecified error
)

// DDP tagged buffer (1/1) codes.
const (
	CodeTaggedInvalidSTag       ErrorCode = 0x00 // invalid STag
	CodeTaggedBaseBounds        ErrorCode = 0x01 // base or bounds violation
	CodeTaggedSTagNotAssociated ErrorCode = 0x02 // STag not associated with DDP stream
	CodeTaggedTOWrap            ErrorCode = 0x03 // TO wrap
	CodeTaggedInvalidVersion    ErrorCode = 0x04 // invalid DDP version
)

// DDP untagged buffer (1/2) codes.
const (
	CodeInvalidQN              ErrorCode = 0x01 // invalid QN
	CodeNoBuffer               ErrorCode = 0x02 // invalid MSN: no buffer available
	CodeInvalidMSN             ErrorCode = 0x03 // invalid MSN: MSN range is not valid
	CodeInvalidMO              ErrorCode = 0x04 // invalid MO
	CodeMessageTooLong         ErrorCode = 0x05 // DDP message too long for available buffer
	CodeUntaggedInvalidVersion ErrorCode = 0x06 // invalid DDP version
)

// MPA (2/0) codes.
const (
	CodeConnectionLost       ErrorCode = 0x01 // TCP connection closed, reset or lost
	CodeCRCError             ErrorCode = 0x02 // MPA CRC error
	CodeMarkerError          ErrorCode = 0x03 // MPA marker and ULPDU length disagree
	CodeInvalidFrame         ErrorCode = 0x04 // invalid MPA Request or Reply frame
	CodeMPALocalCatastrophic ErrorCode = 0x05 // local catastrophic (RFC 6581)
	CodeInsufficientIRD      ErrorCode = 0x06 // insufficient IRD resources (RFC 6581)
	CodeNoMatchingRTR        ErrorCode = 0x07 // no matching RTR model (RFC 6581)
)

type termKey struct {
	layer Layer
	typ   ErrorType
}

var typeNames = map[termKey]string{
	{LayerRDMAP, TypeLocalCatastrophic}: "local catastrophic",
	{LayerRDMAP, TypeRemoteProtection}:  "remote protection",
	{LayerRDMAP, TypeRemoteOperation}:   "remote operation",
	{LayerDDP, TypeLocalCatastrophic}:   "local catastrophic",
	{LayerDDP, TypeTaggedBuffer}:        "tagged buffer",
	{LayerDDP, TypeUntaggedBuffer}:      "untagged buffer",
	{LayerDDP, TypeReservedLLP}:         "reserved for LLP",
	{LayerMPA, TypeMPA}:                 "error",
}

var codeNames = map[termKey]map[ErrorCode]string{
	{LayerRDMAP, TypeRemoteProtection}: {
		CodeInvalidSTag:       "invalid STag",
		CodeBaseBounds:        "base or bounds violation",
		CodeAccessRights:      "access rights violation",
		CodeSTagNotAssociated: "STag not associated with RDMAP stream",
		CodeTOWrap:            "TO wrap",
		CodeCannotInvalidate:  "STag cannot be invalidated",
		CodeUnspecified:       "unspecified error",
	},
	{LayerRDMAP, TypeRemoteOperation}: {
		CodeInvalidRDMAPVersion: "invalid RDMAP version",
		CodeUnexpectedOpcode:    "unexpected opcode",
		CodeCatastrophicStream:  "catastrophic error, localized to RDMAP stream",
		CodeCatastrophicGlobal:  "catastrophic error, global",
		CodeCannotInvalidate:    "STag cannot be invalidated",
		CodeUnspecified:         "unspecified error",
	},
	{LayerDDP, TypeTaggedBuffer}: {
		CodeTaggedInvalidSTag:       "invalid STag",
		CodeTaggedBaseBounds:        "base or bounds violation",
		CodeTaggedSTagNotAssociated: "STag not associated with DDP stream",
		CodeTaggedTOWrap:            "TO wrap",
		CodeTaggedInvalidVersion:    "invalid DDP version",
	},
	{LayerDDP, TypeUntaggedBuffer}: {
		CodeInvalidQN:              "invalid QN",
		CodeNoBuffer:               "no buffer available",
		CodeInvalidMSN:             "invalid MSN",
		CodeInvalidMO:              "invalid MO",
		CodeMessageTooLong:         "message too long for buffer",
		CodeUntaggedInvalidVersion: "invalid DDP version",
	},
	{LayerMPA, TypeMPA}: {
		CodeConnectionLost:       "TCP connection closed, reset or lost",
		CodeCRCError:             "CRC error",
		CodeMarkerError:          "marker and ULPDU length mismatch",
		CodeInvalidFrame:         "invalid request or reply frame",
		CodeMPALocalCatastrophic: "local catastrophic",
		CodeInsufficientIRD:      "insufficient IRD resources",
		CodeNoMatchingRTR:        "no matching RTR model",
	},
}

// TerminateError is the error carried by an RDMAP Terminate message (RFC
// 5040 section 4.8): the reason a connection ended. Remote is true on the
// side that received the Terminate, false on the side that detected the
// error and sent it. Detail, if not empty, says what the provider knows of
// the offending message, for people ("remote write to stag 0x00012a07
// offset 4096 length 8192 beyond region length 8192"). A TerminateError
// always ends the connection.
type TerminateError struct {
	Layer  Layer
	Type   ErrorType
	Code   ErrorCode
	Remote bool
	Detail string
}

// String returns the layer, type and code by name with the numbers, for
// example "DDP untagged buffer: no buffer available (1/2/0x02)". Codes
// without a name (local catastrophic) print as their number.
func (e TerminateError) String() string {
	k := termKey{e.Layer, e.Type}
	typ, ok := typeNames[k]
	if !ok {
		typ = fmt.Sprintf("type %d", uint8(e.Type))
	}
	code := codeNames[k][e.Code]
	if code == "" {
		code = fmt.Sprintf("code 0x%02x", uint8(e.Code))
	}
	return fmt.Sprintf("%v %s: %s (%d/%d/0x%02x)", e.Layer, typ, code,
		uint8(e.Layer), uint8(e.Type), uint8(e.Code))
}

func (e TerminateError) Error() string {
	s := "rdma: connection terminated: " + e.String()
	if e.Remote {
		s = "rdma: connection terminated by peer: " + e.String()
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports whether target is a TerminateError with the same Layer, Type
// and Code; Remote and Detail are not compared.
func (e TerminateError) Is(target error) bool {
	switch t := target.(type) {
	case TerminateError:
		return t.Layer == e.Layer && t.Type == e.Type && t.Code == e.Code
	case *TerminateError:
		return t != nil && t.Layer == e.Layer && t.Type == e.Type && t.Code == e.Code
	}
	return false
}

// Unwrap returns net.ErrClosed: a Terminate always ends the connection.
func (e TerminateError) Unwrap() error { return net.ErrClosed }

// Status returns the completion status of the work request whose message
// the peer refused with e: StatusRemoteAccess for RDMAP remote protection
// and DDP tagged buffer errors, StatusRNR for DDP "no buffer available",
// StatusTransport for MPA errors, StatusRemoteOperation otherwise.
func (e TerminateError) Status() Status {
	switch {
	case e.Layer == LayerRDMAP && e.Type == TypeRemoteProtection,
		e.Layer == LayerDDP && e.Type == TypeTaggedBuffer:
		return StatusRemoteAccess
	case e.Layer == LayerDDP && e.Type == TypeUntaggedBuffer && e.Code == CodeNoBuffer:
		return StatusRNR
	case e.Layer == LayerMPA:
		return StatusTransport
	}
	return StatusRemoteOperation
}
