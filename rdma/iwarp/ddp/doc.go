// Package ddp implements the wire format of DDP, Direct Data Placement
// (RFC 5041), together with the RDMAP headers (RFC 5040) that share its
// control bytes: the DDP control byte, the RDMAP control byte, the tagged and
// untagged DDP headers, the RDMA Read Request header, the Terminate message
// (in the RFC layout and in the layout Linux siw actually sends), the
// Terminate error codes of every layer, and the checks a receiver can make on
// a single segment (RFC 5041 section 7, RFC 5040 section 7).
//
// A DDP segment is what MPA (package mpa) carries as the ULPDU of one FPDU:
//
//	DDP/RDMAP header (14 tagged, 18 untagged) | RDMAP header (Read Request
//	28, Terminate 4+) | payload
//
// The package is a codec: no I/O, no goroutines, no global mutable state, and
// no dependency on mpa. Encoders append to a caller-owned buffer. ParseSegment
// does not copy or allocate: Payload and the slices inside a Terminate alias
// the ULPDU and stay valid as long as it does. Parse errors are *ParseError
// values that name the field and its offset from the start of the ULPDU and
// carry the Terminate Cause a receiver reports for them; every one of them is
// fatal for the stream (RFC 5040 section 7.2: there is no recovery in
// iWARP).
//
// Parsing checks structure only (sizes, and what each opcode's header needs);
// Segment.Check and the Check* functions apply the receiver rules that need
// nothing beyond one segment, in the order a Terminate must report them.
// Checks needing connection state (MSN sequence, STag lookup, buffer bounds)
// belong to the layer that holds that state.
package ddp
