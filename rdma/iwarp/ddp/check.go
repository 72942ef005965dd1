package ddp

import "math"

// Receiver checks that need nothing but one segment (RFC 5041 section 7.1,
// RFC 5040 section 7.2). Each
// returns nil or a *ParseError carrying the Cause of the Terminate to send.
// Offsets are from the start of the ULPDU. Segment.Check runs them all in
// the order a receiver must (only the first error is reported).

// CheckDDPVersion checks DV = 1. Cause: DDP "invalid DDP version", tagged
// or untagged after the T bit.
func CheckDDPVersion(c Control) error {
	if c.Version() == Version {
		return nil
	}
	cause := CauseDDPUntaggedInvalidVersion
	if c.Tagged() {
		cause = CauseDDPTaggedInvalidVersion
	}
	return &ParseError{Field: "DV", Offset: 0, Err: ErrDDPVersion, Value: uint64(c.Version()), Limit: Version, Cause: cause}
}

// CheckRDMAPVersion checks RV = 1. Cause: RDMAP "invalid RDMAP version".
func CheckRDMAPVersion(c RDMAPControl) error {
	if c.Version() == Version {
		return nil
	}
	return &ParseError{Field: "RV", Offset: 1, Err: ErrRDMAPVersion, Value: uint64(c.Version()), Limit: Version, Cause: CauseRDMAPInvalidVersion}
}

// CheckOpcode checks that the opcode is one of the eight of RFC 5040 and
// that it comes with its buffer model: T=1 for RDMA Write and Read Response,
// T=0 for the others. Cause: RDMAP "unexpected opcode" (what siw sends).
func CheckOpcode(h *Header) error {
	op := h.Opcode()
	if op.Supported() && op.Tagged() == h.Control.Tagged() {
		return nil
	}
	return &ParseError{Field: "Opcode", Offset: 1, Err: ErrOpcode, Value: uint64(op), Cause: CauseRDMAPUnexpectedOpcode}
}

// CheckQN checks that an untagged segment is on the queue its opcode uses:
// QN 0 for the Send family, 1 for Read Requests, 2 for Terminate. Tagged
// segments have no QN and pass; so do opcodes CheckOpcode rejects. Cause:
// DDP "invalid QN".
func CheckQN(h *Header) error {
	if h.Control.Tagged() {
		return nil
	}
	want, ok := h.Opcode().QN()
	if !ok || h.QN == want {
		return nil
	}
	return &ParseError{Field: "QN", Offset: 6, Err: ErrQN, Value: uint64(h.QN), Limit: uint64(want), Cause: CauseDDPUntaggedInvalidQN}
}

// CheckSingleSegment checks that a Read Request or Terminate, which are
// always one segment, has L=1 and MO=0. Other opcodes pass. Causes: DDP
// "invalid MO" for MO, RDMAP "unspecified" for a missing L.
func CheckSingleSegment(h *Header) error {
	if !h.HasReadRequest() && !h.HasTerminate() {
		return nil
	}
	if !h.Control.Last() {
		return &ParseError{Field: "L", Offset: 0, Err: ErrNotLast, Cause: CauseRDMAPOperationUnspecified}
	}
	if h.MO != 0 {
		return &ParseError{Field: "MO", Offset: 14, Err: ErrMO, Value: uint64(h.MO), Cause: CauseDDPUntaggedInvalidMO}
	}
	return nil
}

// CheckTOWrap checks that a tagged segment's payload does not run past
// 2^64: TO + payloadLen - 1 must not wrap. Cause: DDP tagged "TO wrap".
func CheckTOWrap(h *Header, payloadLen int) error {
	if !h.Control.Tagged() || payloadLen == 0 || h.TO <= math.MaxUint64-uint64(payloadLen-1) {
		return nil
	}
	return &ParseError{Field: "TO", Offset: 6, Err: ErrTOWrap, Value: h.TO, Limit: uint64(payloadLen), Cause: CauseDDPTaggedTOWrap}
}

// CheckReadRequest checks that a non-zero-length Read Request's source
// range does not run past 2^64 (zero-length requests are never validated,
// RFC 5040 section 5.2). The offset is that of Data Source TO in a ULPDU.
// Cause: RDMAP remote protection "TO wrap".
func CheckReadRequest(r *ReadRequest) error {
	if r.Size == 0 || r.SourceTO <= math.MaxUint64-uint64(r.Size-1) {
		return nil
	}
	return &ParseError{Field: "Data Source TO", Offset: UntaggedHeaderLen + 20, Err: ErrTOWrap, Value: r.SourceTO, Limit: uint64(r.Size), Cause: CauseRDMAPTOWrap}
}

// CheckReserved checks that the reserved bits of both control bytes are
// zero and that the Invalidate STag word is zero unless the opcode
// invalidates. The RFCs tell receivers to ignore these fields, and siw
// does; Segment.Check does not call this. It is for tests and strict
// peers. Cause: RDMAP "unspecified".
func CheckReserved(h *Header) error {
	switch {
	case h.Control.Reserved() != 0:
		return &ParseError{Field: "DDP Rsvd", Offset: 0, Err: ErrReserved, Value: uint64(h.Control.Reserved()), Cause: CauseRDMAPOperationUnspecified}
	case h.RDMAP.Reserved() != 0:
		return &ParseError{Field: "RDMAP Rsv", Offset: 1, Err: ErrReserved, Value: uint64(h.RDMAP.Reserved()), Cause: CauseRDMAPOperationUnspecified}
	case !h.Control.Tagged() && !h.Opcode().Invalidates() && h.InvalidateSTag != 0:
		return &ParseError{Field: "RsvdULP", Offset: 2, Err: ErrReserved, Value: uint64(h.InvalidateSTag), Cause: CauseRDMAPOperationUnspecified}
	}
	return nil
}

// Check applies every single-segment receiver check in order: DDP version,
// RDMAP version, opcode, QN, single-segment rules, TO wrap, Read Request
// source range. It returns the first failure.
func (s *Segment) Check() error {
	if err := CheckDDPVersion(s.Control); err != nil {
		return err
	}
	if err := CheckRDMAPVersion(s.RDMAP); err != nil {
		return err
	}
	if err := CheckOpcode(&s.Header); err != nil {
		return err
	}
	if err := CheckQN(&s.Header); err != nil {
		return err
	}
	if err := CheckSingleSegment(&s.Header); err != nil {
		return err
	}
	if err := CheckTOWrap(&s.Header, len(s.Payload)); err != nil {
		return err
	}
	if s.HasReadRequest() {
		return CheckReadRequest(&s.ReadRequest)
	}
	return nil
}
