package ddp

import (
	"strconv"
	"strings"
)

// Version is the DDP version (DV) and the RDMAP version (RV) of RFC 5041 and
// RFC 5040. Version 0 is the pre-standard RDMA Consortium protocol (MPA
// Rev 0).
const Version = 1

// Control is the DDP control byte, the first byte of every DDP header
// (RFC 5041 sections 4.2 and 4.3):
//
//	0x80 T    tagged buffer model
//	0x40 L    last segment of the DDP message
//	0x3c Rsvd reserved: sent as 0, ignored
//	0x03 DV   DDP version, 1
type Control uint8

// Control bits.
const (
	ControlTagged   Control = 0x80
	ControlLast     Control = 0x40
	ControlReserved Control = 0x3c
	ControlVersion  Control = 0x03
)

// MakeControl returns the control byte with T and L as given and DV = 1.
func MakeControl(tagged, last bool) Control {
	c := Control(Version)
	if tagged {
		c |= ControlTagged
	}
	if last {
		c |= ControlLast
	}
	return c
}

// Tagged reports the T bit.
func (c Control) Tagged() bool { return c&ControlTagged != 0 }

// Last reports the L bit.
func (c Control) Last() bool { return c&ControlLast != 0 }

// Version returns DV.
func (c Control) Version() uint8 { return uint8(c & ControlVersion) }

// Reserved returns the reserved bits, in place.
func (c Control) Reserved() uint8 { return uint8(c & ControlReserved) }

// String returns e.g. "T|L dv=1".
func (c Control) String() string {
	var parts []string
	if c.Tagged() {
		parts = append(parts, "T")
	}
	if c.Last() {
		parts = append(parts, "L")
	}
	s := strings.Join(parts, "|")
	if s != "" {
		s += " "
	}
	s += "dv=" + strconv.Itoa(int(c.Version()))
	if r := c.Reserved(); r != 0 {
		s += " rsvd=0x" + strconv.FormatUint(uint64(r), 16)
	}
	return s
}

// RDMAPControl is the RDMAP control byte (RFC 5040 section 4.2), which is
// the first byte of DDP's RsvdULP field, so the second byte of every DDP
// header:
//
//	0xc0 RV     RDMAP version, 1
//	0x30 Rsv    reserved: sent as 0, ignored
//	0x0f Opcode
type RDMAPControl uint8

// RDMAPControl fields.
const (
	RDMAPVersion  RDMAPControl = 0xc0
	RDMAPReserved RDMAPControl = 0x30
	RDMAPOpcode   RDMAPControl = 0x0f
)

// MakeRDMAPControl returns the RDMAP control byte for op with RV = 1.
func MakeRDMAPControl(op Opcode) RDMAPControl {
	return RDMAPControl(Version<<6) | RDMAPControl(op)&RDMAPOpcode
}

// Version returns RV.
func (c RDMAPControl) Version() uint8 { return uint8(c >> 6) }

// Reserved returns the reserved bits, in place.
func (c RDMAPControl) Reserved() uint8 { return uint8(c & RDMAPReserved) }

// Opcode returns the opcode.
func (c RDMAPControl) Opcode() Opcode { return Opcode(c & RDMAPOpcode) }

// String returns e.g. "Send rv=1".
func (c RDMAPControl) String() string {
	s := c.Opcode().String() + " rv=" + strconv.Itoa(int(c.Version()))
	if r := c.Reserved(); r != 0 {
		s += " rsv=0x" + strconv.FormatUint(uint64(r), 16)
	}
	return s
}

// Opcode is an RDMAP opcode (RFC 5040 section 4.2, RFC 7306 section 9,
// IANA "RDMAP Opcodes" registry).
type Opcode uint8

// Opcodes.
const (
	OpRDMAWrite          Opcode = 0x0
	OpRDMAReadRequest    Opcode = 0x1
	OpRDMAReadResponse   Opcode = 0x2
	OpSend               Opcode = 0x3
	OpSendInvalidate     Opcode = 0x4
	OpSendSE             Opcode = 0x5
	OpSendSEInvalidate   Opcode = 0x6
	OpTerminate          Opcode = 0x7
	OpImmediateData      Opcode = 0x8 // RFC 7306; not supported by siw or by us
	OpImmediateDataSE    Opcode = 0x9 // RFC 7306
	OpAtomicRequest      Opcode = 0xa // RFC 7306
	OpAtomicResponse     Opcode = 0xb // RFC 7306
	opExperimental       Opcode = 0xf // RFC 6580: reserved for experiments
	numSupportedOpcodes         = 8
	numRegisteredOpcodes        = 12
)

var opcodeNames = [numRegisteredOpcodes]string{
	OpRDMAWrite:        "RDMA Write",
	OpRDMAReadRequest:  "RDMA Read Request",
	OpRDMAReadResponse: "RDMA Read Response",
	OpSend:             "Send",
	OpSendInvalidate:   "Send with Invalidate",
	OpSendSE:           "Send with SE",
	OpSendSEInvalidate: "Send with SE and Invalidate",
	OpTerminate:        "Terminate",
	OpImmediateData:    "Immediate Data",
	OpImmediateDataSE:  "Immediate Data with SE",
	OpAtomicRequest:    "Atomic Request",
	OpAtomicResponse:   "Atomic Response",
}

// String returns the RFC name of the opcode, "Reserved (0xf)" for the
// experimental value, "Unassigned (0xN)" otherwise.
func (op Opcode) String() string {
	switch {
	case op < numRegisteredOpcodes:
		return opcodeNames[op]
	case op == opExperimental:
		return "Reserved (0xf)"
	}
	return "Unassigned (0x" + strconv.FormatUint(uint64(op), 16) + ")"
}

// Supported reports whether the opcode is one of the eight RFC 5040 opcodes,
// which is what Linux siw and this stack implement. Others get a Terminate
// "unexpected opcode".
func (op Opcode) Supported() bool { return op < numSupportedOpcodes }

// Tagged reports whether the opcode uses the tagged buffer model (RDMA Write
// and RDMA Read Response); all others are untagged.
func (op Opcode) Tagged() bool { return op == OpRDMAWrite || op == OpRDMAReadResponse }

// Invalidates reports whether the opcode carries an STag to invalidate in
// the word after the RDMAP control byte.
func (op Opcode) Invalidates() bool { return op == OpSendInvalidate || op == OpSendSEInvalidate }

// RDMAP queue numbers (RFC 5040 section 5.1, RFC 7306 section 8).
const (
	QNSend         = 0 // Send family and Immediate Data
	QNReadRequest  = 1 // RDMA Read Request and Atomic Request
	QNTerminate    = 2
	QNAtomicResult = 3 // Atomic Response
)

// QN returns the queue an untagged opcode travels on, and false for tagged
// and unassigned opcodes.
func (op Opcode) QN() (uint32, bool) {
	switch op {
	case OpSend, OpSendInvalidate, OpSendSE, OpSendSEInvalidate, OpImmediateData, OpImmediateDataSE:
		return QNSend, true
	case OpRDMAReadRequest, OpAtomicRequest:
		return QNReadRequest, true
	case OpTerminate:
		return QNTerminate, true
	case OpAtomicResponse:
		return QNAtomicResult, true
	}
	return 0, false
}
