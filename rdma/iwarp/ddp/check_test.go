package ddp

import (
	"errors"
	"math"
	"testing"
)

func TestCheckDDPVersion(t *testing.T) {
	for _, tt := range []struct {
		c     Control
		cause Cause
	}{
		{MakeControl(true, true), 0},
		{MakeControl(false, false), 0},
		{0xc0, CauseDDPTaggedInvalidVersion},   // DV 0, the pre-standard version
		{0x42, CauseDDPUntaggedInvalidVersion}, // DV 2
		{0x83, CauseDDPTaggedInvalidVersion},
	} {
		err := CheckDDPVersion(tt.c)
		checkCause(t, "CheckDDPVersion("+tt.c.String()+")", err, ErrDDPVersion, tt.cause, "DV", 0)
	}
}

func TestCheckRDMAPVersion(t *testing.T) {
	for _, tt := range []struct {
		c     RDMAPControl
		cause Cause
	}{
		{MakeRDMAPControl(OpSend), 0},
		{0x03, CauseRDMAPInvalidVersion},
		{0x83, CauseRDMAPInvalidVersion},
		{0xc3, CauseRDMAPInvalidVersion},
	} {
		checkCause(t, "CheckRDMAPVersion("+tt.c.String()+")", CheckRDMAPVersion(tt.c), ErrRDMAPVersion, tt.cause, "RV", 1)
	}
}

func TestCheckOpcode(t *testing.T) {
	for op := range Opcode(16) {
		for _, tagged := range []bool{false, true} {
			hd := Header{Control: MakeControl(tagged, true), RDMAP: MakeRDMAPControl(op)}
			var want Cause
			if op > OpTerminate || op.Tagged() != tagged {
				want = CauseRDMAPUnexpectedOpcode
			}
			checkCause(t, hd.String(), CheckOpcode(&hd), ErrOpcode, want, "Opcode", 1)
		}
	}
}

func TestCheckQN(t *testing.T) {
	for _, tt := range []struct {
		op   Opcode
		qn   uint32
		fail bool
	}{
		{OpSend, 0, false}, {OpSend, 1, true}, {OpSendInvalidate, 2, true}, {OpSendSE, 0, false}, {OpSendSEInvalidate, 3, true},
		{OpRDMAReadRequest, 1, false}, {OpRDMAReadRequest, 0, true},
		{OpTerminate, 2, false}, {OpTerminate, 0, true},
		{OpImmediateData, 0, false}, {OpAtomicRequest, 1, false}, {OpAtomicResponse, 3, false}, {OpAtomicResponse, 1, true},
		{0xc, 7, false}, // unassigned: CheckOpcode's business
	} {
		hd := Untagged(tt.op, true, tt.qn, 1, 0)
		var want Cause
		if tt.fail {
			want = CauseDDPUntaggedInvalidQN
		}
		checkCause(t, hd.String(), CheckQN(&hd), ErrQN, want, "QN", 6)
	}
	hd := Tagged(OpRDMAWrite, true, 1, 0)
	hd.QN = 9
	if err := CheckQN(&hd); err != nil {
		t.Errorf("tagged: %v", err)
	}
	h2 := Untagged(OpSend, true, 1, 1, 0)
	if err := CheckQN(&h2); err == nil || err.Error() != "ddp: QN at offset 6: invalid queue number (1, want 0)" {
		t.Errorf("message: %v", err)
	}
}

func TestCheckSingleSegment(t *testing.T) {
	for _, tt := range []struct {
		hd    Header
		kind  error
		cause Cause
		field string
		off   int
	}{
		{Untagged(OpRDMAReadRequest, true, 1, 1, 0), nil, 0, "", 0},
		{Untagged(OpRDMAReadRequest, false, 1, 1, 0), ErrNotLast, CauseRDMAPOperationUnspecified, "L", 0},
		{Untagged(OpRDMAReadRequest, true, 1, 1, 4), ErrMO, CauseDDPUntaggedInvalidMO, "MO", 14},
		{Untagged(OpTerminate, false, 2, 1, 0), ErrNotLast, CauseRDMAPOperationUnspecified, "L", 0},
		{Untagged(OpTerminate, true, 2, 1, 8), ErrMO, CauseDDPUntaggedInvalidMO, "MO", 14},
		{Untagged(OpSend, false, 0, 1, 8), nil, 0, "", 0},
		{Tagged(OpRDMAReadRequest, false, 1, 8), nil, 0, "", 0}, // no body: CheckOpcode's business
	} {
		checkCause(t, tt.hd.String(), CheckSingleSegment(&tt.hd), tt.kind, tt.cause, tt.field, tt.off)
	}
}

func TestCheckTOWrap(t *testing.T) {
	for _, tt := range []struct {
		to   uint64
		n    int
		fail bool
	}{
		{0, 0, false}, {math.MaxUint64, 0, false}, {math.MaxUint64, 1, false}, {math.MaxUint64, 2, true},
		{math.MaxUint64 - 99, 100, false}, {math.MaxUint64 - 99, 101, true}, {1 << 63, 1 << 20, false},
	} {
		hd := Tagged(OpRDMAWrite, true, 1, tt.to)
		var want Cause
		if tt.fail {
			want = CauseDDPTaggedTOWrap
		}
		checkCause(t, hd.String(), CheckTOWrap(&hd, tt.n), ErrTOWrap, want, "TO", 6)
	}
	hd := Untagged(OpSend, true, 0, 1, math.MaxUint32)
	if err := CheckTOWrap(&hd, 100); err != nil {
		t.Errorf("untagged: %v", err)
	}
}

func TestCheckReadRequest(t *testing.T) {
	for _, tt := range []struct {
		rr   ReadRequest
		fail bool
	}{
		{ReadRequest{SourceTO: math.MaxUint64}, false}, // zero length: never validated
		{ReadRequest{SourceTO: math.MaxUint64, Size: 1}, false},
		{ReadRequest{SourceTO: math.MaxUint64, Size: 2}, true},
		{ReadRequest{SourceTO: math.MaxUint64 - 4095, Size: 4096}, false},
		{ReadRequest{SourceTO: math.MaxUint64 - 4094, Size: 4096}, true},
	} {
		var want Cause
		if tt.fail {
			want = CauseRDMAPTOWrap
		}
		checkCause(t, tt.rr.String(), CheckReadRequest(&tt.rr), ErrTOWrap, want, "Data Source TO", 38)
	}
}

func TestCheckReserved(t *testing.T) {
	for _, tt := range []struct {
		hd    Header
		field string
		off   int
	}{
		{Untagged(OpSend, true, 0, 1, 0), "", 0},
		{withInv(Untagged(OpSendInvalidate, true, 0, 1, 0), 5), "", 0},
		{withInv(Untagged(OpSendSEInvalidate, true, 0, 1, 0), 5), "", 0},
		{withInv(Tagged(OpRDMAWrite, true, 0, 1), 5), "", 0}, // tagged: the word is the STag
		{withInv(Untagged(OpSend, true, 0, 1, 0), 5), "RsvdULP", 2},
		{withInv(Untagged(OpRDMAReadRequest, true, 1, 1, 0), 5), "RsvdULP", 2},
		{Header{Control: MakeControl(false, true) | 0x04, RDMAP: MakeRDMAPControl(OpSend)}, "DDP Rsvd", 0},
		{Header{Control: MakeControl(true, true), RDMAP: MakeRDMAPControl(OpRDMAWrite) | 0x10}, "RDMAP Rsv", 1},
	} {
		var want Cause
		if tt.field != "" {
			want = CauseRDMAPOperationUnspecified
		}
		checkCause(t, tt.hd.String(), CheckReserved(&tt.hd), ErrReserved, want, tt.field, tt.off)
	}
}

// TestSegmentCheckOrder checks that Segment.Check reports the first failing
// rule in receiver order.
func TestSegmentCheckOrder(t *testing.T) {
	bad := Segment{Header: Header{Control: 0x02, RDMAP: 0x8c, QN: 5, MO: 3}}
	for _, step := range []struct {
		fix  func(s *Segment)
		kind error
	}{
		{func(s *Segment) {}, ErrDDPVersion},
		{func(s *Segment) { s.Control = MakeControl(false, false) }, ErrRDMAPVersion},
		{func(s *Segment) { s.RDMAP = 0x4c }, ErrOpcode},
		{func(s *Segment) { s.RDMAP = MakeRDMAPControl(OpRDMAReadRequest) }, ErrQN},
		{func(s *Segment) { s.QN = 1 }, ErrNotLast},
		{func(s *Segment) { s.Control = MakeControl(false, true) }, ErrMO},
		{func(s *Segment) { s.MO = 0; s.ReadRequest = ReadRequest{Size: 10, SourceTO: math.MaxUint64} }, ErrTOWrap},
		{func(s *Segment) { s.ReadRequest.SourceTO = 0 }, nil},
	} {
		step.fix(&bad)
		if err := bad.Check(); !errors.Is(err, step.kind) || (err == nil) != (step.kind == nil) {
			t.Fatalf("%v: Check = %v, want %v", bad, err, step.kind)
		}
	}
	w := Segment{Header: Tagged(OpRDMAWrite, true, 1, math.MaxUint64), Payload: make([]byte, 2)}
	if err := w.Check(); !errors.Is(err, ErrTOWrap) {
		t.Errorf("tagged wrap: %v", err)
	}
}

func checkCause(t *testing.T, what string, err, kind error, cause Cause, field string, off int) {
	t.Helper()
	if kind == nil || cause == 0 { // no error expected (cause 0 is never expected below)
		if err != nil {
			t.Errorf("%s: unexpected %v", what, err)
		}
		return
	}
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Err != kind {
		t.Errorf("%s: err = %v, want %v", what, err, kind)
		return
	}
	if pe.Cause != cause || pe.Field != field || pe.Offset != off {
		t.Errorf("%s: cause %v field %q offset %d; want %v %q %d", what, pe.Cause, pe.Field, pe.Offset, cause, field, off)
	}
}

func TestParseErrorKindsMessages(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{CheckDDPVersion(0x42), "ddp: DV at offset 0: invalid DDP version (2)"},
		{CheckRDMAPVersion(0x03), "ddp: RV at offset 1: invalid RDMAP version (0)"},
		{CheckOpcode(&Header{Control: 0x41, RDMAP: 0x4c}), "ddp: Opcode at offset 1: unexpected opcode (12)"},
		{CheckReserved(&Header{Control: 0x45}), "ddp: DDP Rsvd at offset 0: reserved bits set (0x4)"},
		{CheckTOWrap(&Header{Control: 0xc1, TO: math.MaxUint64}, 2), "ddp: TO at offset 6: tagged offset wraps"},
	} {
		if tt.err == nil || tt.err.Error() != tt.want {
			t.Errorf("%v, want %s", tt.err, tt.want)
		}
	}
	_, err := ParseTerminate(h("2f 02 00 00"), LayoutAuto)
	if err == nil || err.Error() != "ddp: Terminate control at offset 0: unregistered Terminate cause (0x2f02)" {
		t.Errorf("ErrCause message: %v", err)
	}
	if got := CauseRDMAPLocalCatastrophic.Name(); got != "local catastrophic error" {
		t.Errorf("Name = %q", got)
	}
	if got := MakeCause(LayerLLP, 5, 0).ETypeName(); got != "" {
		t.Errorf("ETypeName = %q", got)
	}
}
