package ddp

import (
	"log/slog"
	"strconv"
)

// Layer is the Layer field of a Terminate message: which protocol detected
// the error (RFC 5040 section 4.8).
type Layer uint8

// Layers.
const (
	LayerRDMAP Layer = 0
	LayerDDP   Layer = 1
	LayerLLP   Layer = 2 // the lower layer protocol: MPA over TCP
)

// String returns "RDMAP", "DDP", "LLP", or "Layer N".
func (l Layer) String() string {
	switch l {
	case LayerRDMAP:
		return "RDMAP"
	case LayerDDP:
		return "DDP"
	case LayerLLP:
		return "LLP"
	}
	return "Layer " + strconv.Itoa(int(l))
}

// Cause is the (Layer, Error Type, Error Code) triple of a Terminate
// message, packed as the first 16 bits of the RFC 5040 Terminate control
// word: Layer<<12 | EType<<8 | Error Code. The constants below are the
// registered values (RFC 5040 section 4.8, RFC 5041 section 7.2, RFC 5044
// section 8, RFC 6581 section 8; IANA "RDDP" registry), with the names the
// RFCs give them.
type Cause uint16

// MakeCause packs a cause; layer and etype are 4-bit fields.
func MakeCause(layer Layer, etype, code uint8) Cause {
	return Cause(layer&0xf)<<12 | Cause(etype&0xf)<<8 | Cause(code)
}

// Layer returns the layer.
func (c Cause) Layer() Layer { return Layer(c >> 12) }

// EType returns the error type.
func (c Cause) EType() uint8 { return uint8(c>>8) & 0xf }

// Code returns the error code.
func (c Cause) Code() uint8 { return uint8(c) }

// Terminate causes. RDMAP layer:
const (
	// Local catastrophic error; the code is not meaningful (siw sends 0xff).
	CauseRDMAPLocalCatastrophic Cause = 0x0000

	CauseRDMAPInvalidSTag           Cause = 0x0100 // remote protection: invalid STag
	CauseRDMAPBaseBounds            Cause = 0x0101 // remote protection: base or bounds violation
	CauseRDMAPAccessRights          Cause = 0x0102 // remote protection: access rights violation
	CauseRDMAPSTagNotAssociated     Cause = 0x0103 // remote protection: STag not associated with RDMAP stream
	CauseRDMAPTOWrap                Cause = 0x0104 // remote protection: TO wrap
	CauseRDMAPProtectionInvalidate  Cause = 0x0109 // remote protection: STag cannot be invalidated
	CauseRDMAPProtectionUnspecified Cause = 0x01ff // remote protection: unspecified error
	CauseRDMAPInvalidVersion        Cause = 0x0205 // remote operation: invalid RDMAP version
	CauseRDMAPUnexpectedOpcode      Cause = 0x0206 // remote operation: unexpected opcode
	CauseRDMAPCatastrophicStream    Cause = 0x0207 // remote operation: catastrophic, localized to RDMAP stream
	CauseRDMAPCatastrophicGlobal    Cause = 0x0208 // remote operation: catastrophic, global
	CauseRDMAPOperationInvalidate   Cause = 0x0209 // remote operation: STag cannot be invalidated
	CauseRDMAPOperationUnspecified  Cause = 0x02ff // remote operation: unspecified error
)

// DDP layer (RFC 5041 section 7.2):
const (
	CauseDDPLocalCatastrophic       Cause = 0x1000
	CauseDDPTaggedInvalidSTag       Cause = 0x1100
	CauseDDPTaggedBaseBounds        Cause = 0x1101
	CauseDDPTaggedSTagNotAssociated Cause = 0x1102
	CauseDDPTaggedTOWrap            Cause = 0x1103
	CauseDDPTaggedInvalidVersion    Cause = 0x1104
	CauseDDPUntaggedInvalidQN       Cause = 0x1201
	CauseDDPUntaggedNoBuffer        Cause = 0x1202 // invalid MSN: no buffer available
	CauseDDPUntaggedInvalidMSN      Cause = 0x1203 // invalid MSN: MSN range is not valid
	CauseDDPUntaggedInvalidMO       Cause = 0x1204
	CauseDDPUntaggedTooLong         Cause = 0x1205 // DDP message too long for available buffer
	CauseDDPUntaggedInvalidVersion  Cause = 0x1206
)

// LLP layer, error type 0: the MPA error codes (RFC 5044 section 8,
// RFC 6581 section 8; package mpa has the same codes as mpa.ErrorCode).
const (
	CauseMPAConnectionLost    Cause = 0x2001
	CauseMPACRC               Cause = 0x2002
	CauseMPAMarker            Cause = 0x2003
	CauseMPAInvalidFrame      Cause = 0x2004
	CauseMPALocalCatastrophic Cause = 0x2005
	CauseMPAInsufficientIRD   Cause = 0x2006
	CauseMPANoMatchingRTR     Cause = 0x2007
)

var causeNames = map[Cause]string{
	CauseRDMAPInvalidSTag:           "invalid STag",
	CauseRDMAPBaseBounds:            "base or bounds violation",
	CauseRDMAPAccessRights:          "access rights violation",
	CauseRDMAPSTagNotAssociated:     "STag not associated with RDMAP stream",
	CauseRDMAPTOWrap:                "TO wrap",
	CauseRDMAPProtectionInvalidate:  "STag cannot be invalidated",
	CauseRDMAPProtectionUnspecified: "unspecified error",
	CauseRDMAPInvalidVersion:        "invalid RDMAP version",
	CauseRDMAPUnexpectedOpcode:      "unexpected opcode",
	CauseRDMAPCatastrophicStream:    "catastrophic error, localized to RDMAP stream",
	CauseRDMAPCatastrophicGlobal:    "catastrophic error, global",
	CauseRDMAPOperationInvalidate:   "STag cannot be invalidated",
	CauseRDMAPOperationUnspecified:  "unspecified error",

	CauseDDPLocalCatastrophic:       "local catastrophic error",
	CauseDDPTaggedInvalidSTag:       "invalid STag",
	CauseDDPTaggedBaseBounds:        "base or bounds violation",
	CauseDDPTaggedSTagNotAssociated: "STag not associated with DDP stream",
	CauseDDPTaggedTOWrap:            "TO wrap",
	CauseDDPTaggedInvalidVersion:    "invalid DDP version",
	CauseDDPUntaggedInvalidQN:       "invalid QN",
	CauseDDPUntaggedNoBuffer:        "invalid MSN - no buffer available",
	CauseDDPUntaggedInvalidMSN:      "invalid MSN - MSN range is not valid",
	CauseDDPUntaggedInvalidMO:       "invalid MO",
	CauseDDPUntaggedTooLong:         "DDP message too long for available buffer",
	CauseDDPUntaggedInvalidVersion:  "invalid DDP version",

	CauseMPAConnectionLost:    "TCP connection closed, terminated or lost",
	CauseMPACRC:               "MPA CRC error",
	CauseMPAMarker:            "MPA marker and ULPDU_Length mismatch",
	CauseMPAInvalidFrame:      "invalid MPA Request or Reply frame",
	CauseMPALocalCatastrophic: "local catastrophic error",
	CauseMPAInsufficientIRD:   "insufficient IRD resources",
	CauseMPANoMatchingRTR:     "no matching RTR option",
}

// ETypeName returns the RFC name of the error type within its layer, or ""
// for an unassigned one.
func (c Cause) ETypeName() string {
	switch c & 0xff00 {
	case 0x0000, 0x1000:
		return "local catastrophic error"
	case 0x0100:
		return "remote protection error"
	case 0x0200:
		return "remote operation error"
	case 0x1100:
		return "tagged buffer error"
	case 0x1200:
		return "untagged buffer error"
	case 0x1300:
		return "reserved for the LLP"
	case 0x2000:
		return "MPA error"
	}
	return ""
}

// Known reports whether the cause is a registered triple. Every code of
// an RDMAP local catastrophic error is.
func (c Cause) Known() bool {
	if c&0xff00 == 0 {
		return true
	}
	_, ok := causeNames[c]
	return ok
}

// Name returns the RFC name of the error code, e.g. "invalid MSN - no
// buffer available", or "" for an unregistered triple.
func (c Cause) Name() string {
	if c&0xff00 == 0 {
		return "local catastrophic error"
	}
	return causeNames[c]
}

// String returns e.g. "DDP untagged buffer error: invalid MSN - no buffer
// available (1/2/0x02)"; unregistered triples print their numbers only.
func (c Cause) String() string {
	nums := strconv.Itoa(int(c.Layer())) + "/" + strconv.Itoa(int(c.EType())) + "/0x" + hex2(c.Code())
	if !c.Known() {
		return c.Layer().String() + " unknown error (" + nums + ")"
	}
	s := c.Layer().String() + " " + c.ETypeName()
	if c&0xff00 != 0 {
		s += ": " + c.Name()
	}
	return s + " (" + nums + ")"
}

// LogValue implements slog.LogValuer.
func (c Cause) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("layer", c.Layer().String()),
		slog.Int("etype", int(c.EType())),
		slog.String("code", "0x"+hex2(c.Code())),
		slog.String("name", c.Name()),
	)
}

func hex2(b uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&0xf]})
}
