package rdma

import (
	"fmt"
	"strings"
)

// STag is a steering tag: the 32-bit name of a registered region on the wire
// (RFC 5040 section 2.1). As in verbs and Linux siw (siw_mem.c), the upper 24
// bits are an index chosen by the provider and the low 8 bits a key that
// changes on every registration of that index, so a stale STag never matches.
// Index 0 is never used: no valid STag is below 0x100.
type STag uint32

// MakeSTag returns the STag with the given 24-bit index and 8-bit key.
// Index bits above 24 are dropped.
func MakeSTag(index uint32, key uint8) STag {
	return STag(index<<8 | uint32(key))
}

// Index returns the 24-bit index.
func (s STag) Index() uint32 { return uint32(s) >> 8 }

// Key returns the 8-bit key.
func (s STag) Key() uint8 { return uint8(s) }

// String returns the STag as 0x followed by 8 hex digits.
func (s STag) String() string { return fmt.Sprintf("0x%08x", uint32(s)) }

// Access is a set of access rights of a registered region, as verbs names
// them. Local read is always allowed.
type Access uint8

const (
	// AccessLocalWrite lets the local side place data into the region:
	// the sink of a posted receive or of an RDMA Read.
	AccessLocalWrite Access = 1 << iota
	// AccessRemoteRead lets the peer read the region with RDMA Read.
	AccessRemoteRead
	// AccessRemoteWrite lets the peer write the region with RDMA Write.
	AccessRemoteWrite

	accessAll = AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite
)

// Has reports whether a includes every right in b.
func (a Access) Has(b Access) bool { return a&b == b }

// Valid reports whether a has only known bits.
func (a Access) Valid() bool { return a&^accessAll == 0 }

// String returns the rights joined by "|" ("local-write|remote-read"),
// "none" for no rights, and unknown bits in hex.
func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	var parts []string
	for _, r := range [...]struct {
		bit  Access
		name string
	}{
		{AccessLocalWrite, "local-write"},
		{AccessRemoteRead, "remote-read"},
		{AccessRemoteWrite, "remote-write"},
	} {
		if a&r.bit != 0 {
			parts = append(parts, r.name)
		}
	}
	if rest := a &^ accessAll; rest != 0 {
		parts = append(parts, fmt.Sprintf("0x%02x", uint8(rest)))
	}
	return strings.Join(parts, "|")
}

// Op is the kind of a work request or completion. The send-family names
// are RDMAP's (RFC 5040 section 4.3).
type Op uint8

const (
	OpSend             Op = iota + 1 // Send
	OpSendInvalidate                 // Send with Invalidate
	OpSendSE                         // Send with Solicited Event
	OpSendSEInvalidate               // Send with Solicited Event and Invalidate
	OpWrite                          // RDMA Write
	OpRead                           // RDMA Read
	OpRecv                           // a posted receive (completions only)
)

var opNames = [...]string{
	OpSend:             "Send",
	OpSendInvalidate:   "Send with Invalidate",
	OpSendSE:           "Send with SE",
	OpSendSEInvalidate: "Send with SE and Invalidate",
	OpWrite:            "RDMA Write",
	OpRead:             "RDMA Read",
	OpRecv:             "Receive",
}

// String returns the RFC 5040 name ("Send with SE and Invalidate", "RDMA
// Read"), or "Op(n)" for an unknown value.
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// IsSend reports whether o is one of the four Send variants.
func (o Op) IsSend() bool { return o >= OpSend && o <= OpSendSEInvalidate }

// Invalidates reports whether o is a Send with Invalidate variant.
func (o Op) Invalidates() bool { return o == OpSendInvalidate || o == OpSendSEInvalidate }

// Solicited reports whether o is a Send with Solicited Event variant.
func (o Op) Solicited() bool { return o == OpSendSE || o == OpSendSEInvalidate }

// Status is the outcome of a work request. Every status but StatusSuccess
// means the connection has ended (Conn.Err says why).
type Status uint8

const (
	// StatusSuccess: the work request completed.
	StatusSuccess Status = iota
	// StatusFlushed: the connection ended before the work request ran.
	StatusFlushed
	// StatusLocalLength: an inbound Send was longer than this posted
	// receive (the receiver's side of a too-small buffer).
	StatusLocalLength
	// StatusLocalProtection: a local SGE failed its check when the work
	// request ran (its MR was invalidated or released after posting).
	StatusLocalProtection
	// StatusRemoteAccess: the peer refused an STag this work request used
	// (invalid, invalidated, foreign, missing right, out of bounds).
	StatusRemoteAccess
	// StatusRemoteOperation: the peer could not carry out this work
	// request (its receive buffer was too small, its IRD was exceeded, it
	// failed locally).
	StatusRemoteOperation
	// StatusRNR: the peer had no receive posted for this Send.
	StatusRNR
	// StatusRemoteInvalidRequest: the peer's message that completed this
	// receive was invalid (a Send with Invalidate naming an STag that
	// cannot be invalidated).
	StatusRemoteInvalidRequest
	// StatusTransport: the link failed while this work request was in
	// flight.
	StatusTransport
)

var statusNames = [...]string{
	StatusSuccess:              "success",
	StatusFlushed:              "flushed",
	StatusLocalLength:          "local length error",
	StatusLocalProtection:      "local protection error",
	StatusRemoteAccess:         "remote access error",
	StatusRemoteOperation:      "remote operation error",
	StatusRNR:                  "receiver not ready",
	StatusRemoteInvalidRequest: "remote invalid request",
	StatusTransport:            "transport error",
}

// String returns the status name ("remote access error"), or "Status(n)".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}
