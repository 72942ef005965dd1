package ddp

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// RFC 5041 section 4 and RFC 5040 section 4.1: the two control bytes of every
// message, L=1 and L=0.
func TestControlBytes(t *testing.T) {
	for _, tt := range []struct {
		op        Opcode
		last, mid string
	}{
		{OpRDMAWrite, "c1 40", "81 40"},
		{OpRDMAReadRequest, "41 41", ""},
		{OpRDMAReadResponse, "c1 42", "81 42"},
		{OpSend, "41 43", "01 43"},
		{OpSendInvalidate, "41 44", "01 44"},
		{OpSendSE, "41 45", "01 45"},
		{OpSendSEInvalidate, "41 46", "01 46"},
		{OpTerminate, "41 47", ""},
		{OpImmediateData, "41 48", ""},
		{OpImmediateDataSE, "41 49", ""},
		{OpAtomicRequest, "41 4a", ""},
		{OpAtomicResponse, "41 4b", ""},
	} {
		got := []byte{byte(MakeControl(tt.op.Tagged(), true)), byte(MakeRDMAPControl(tt.op))}
		if !bytes.Equal(got, h(tt.last)) {
			t.Errorf("%v: % x, want %s", tt.op, got, tt.last)
		}
		if tt.mid != "" {
			got[0] = byte(MakeControl(tt.op.Tagged(), false))
			if !bytes.Equal(got, h(tt.mid)) {
				t.Errorf("%v middle: % x, want %s", tt.op, got, tt.mid)
			}
		}
		c, r := Control(h(tt.last)[0]), RDMAPControl(h(tt.last)[1])
		if c.Tagged() != tt.op.Tagged() || !c.Last() || c.Version() != 1 || c.Reserved() != 0 || r.Version() != 1 || r.Opcode() != tt.op || r.Reserved() != 0 {
			t.Errorf("%v: accessors wrong", tt.op)
		}
	}
}

func TestOpcodeNames(t *testing.T) {
	want := []string{"RDMA Write", "RDMA Read Request", "RDMA Read Response", "Send",
		"Send with Invalidate", "Send with SE", "Send with SE and Invalidate", "Terminate",
		"Immediate Data", "Immediate Data with SE", "Atomic Request", "Atomic Response",
		"Unassigned (0xc)", "Unassigned (0xd)", "Unassigned (0xe)", "Reserved (0xf)"}
	for op, w := range want {
		if got := Opcode(op).String(); got != w {
			t.Errorf("Opcode(%d) = %q, want %q", op, got, w)
		}
		if Opcode(op).Supported() != (op < 8) {
			t.Errorf("Opcode(%d).Supported wrong", op)
		}
		if Opcode(op).Invalidates() != (op == 4 || op == 6) {
			t.Errorf("Opcode(%d).Invalidates wrong", op)
		}
	}
	if got := Opcode(0x1f).String(); got != "Unassigned (0x1f)" {
		t.Errorf("0x1f: %q", got)
	}
	if _, ok := OpRDMAWrite.QN(); ok {
		t.Error("RDMA Write has a QN")
	}
}

func TestControlStrings(t *testing.T) {
	for _, tt := range []struct {
		s, want string
	}{
		{Control(0xc1).String(), "T|L dv=1"},
		{Control(0x01).String(), "dv=1"},
		{Control(0x7e).String(), "L dv=2 rsvd=0x3c"},
		{RDMAPControl(0x43).String(), "Send rv=1"},
		{RDMAPControl(0x3f).String(), "Reserved (0xf) rv=0 rsv=0x30"},
		{Header{Control: 0x05, RDMAP: 0x73}.String(), "Send qn=0 msn=0 mo=0 rsvd=0x34"},
		{Header{Control: 0xc0, RDMAP: 0x00, STag: 1}.String(), "RDMA Write L stag=0x00000001 to=0x0 dv=0 rv=0"},
		{HdrCt(0).String(), "-"},
		{LayoutRFC.String() + LayoutSiw.String() + LayoutAuto.String() + TermLayout(9).String(), "rfcsiwautolayout 9"},
		{Layer(5).String(), "Layer 5"},
	} {
		if tt.s != tt.want {
			t.Errorf("%q, want %q", tt.s, tt.want)
		}
	}
}

func TestCauseTables(t *testing.T) {
	for _, tt := range []struct {
		c    Cause
		want string
	}{
		{CauseRDMAPLocalCatastrophic, "RDMAP local catastrophic error (0/0/0x00)"},
		{MakeCause(LayerRDMAP, 0, 0xff), "RDMAP local catastrophic error (0/0/0xff)"},
		{CauseRDMAPInvalidSTag, "RDMAP remote protection error: invalid STag (0/1/0x00)"},
		{CauseRDMAPBaseBounds, "RDMAP remote protection error: base or bounds violation (0/1/0x01)"},
		{CauseRDMAPAccessRights, "RDMAP remote protection error: access rights violation (0/1/0x02)"},
		{CauseRDMAPSTagNotAssociated, "RDMAP remote protection error: STag not associated with RDMAP stream (0/1/0x03)"},
		{CauseRDMAPTOWrap, "RDMAP remote protection error: TO wrap (0/1/0x04)"},
		{CauseRDMAPProtectionInvalidate, "RDMAP remote protection error: STag cannot be invalidated (0/1/0x09)"},
		{CauseRDMAPProtectionUnspecified, "RDMAP remote protection error: unspecified error (0/1/0xff)"},
		{CauseRDMAPInvalidVersion, "RDMAP remote operation error: invalid RDMAP version (0/2/0x05)"},
		{CauseRDMAPUnexpectedOpcode, "RDMAP remote operation error: unexpected opcode (0/2/0x06)"},
		{CauseRDMAPCatastrophicStream, "RDMAP remote operation error: catastrophic error, localized to RDMAP stream (0/2/0x07)"},
		{CauseRDMAPCatastrophicGlobal, "RDMAP remote operation error: catastrophic error, global (0/2/0x08)"},
		{CauseRDMAPOperationInvalidate, "RDMAP remote operation error: STag cannot be invalidated (0/2/0x09)"},
		{CauseRDMAPOperationUnspecified, "RDMAP remote operation error: unspecified error (0/2/0xff)"},
		{CauseDDPLocalCatastrophic, "DDP local catastrophic error: local catastrophic error (1/0/0x00)"},
		{CauseDDPTaggedInvalidSTag, "DDP tagged buffer error: invalid STag (1/1/0x00)"},
		{CauseDDPTaggedBaseBounds, "DDP tagged buffer error: base or bounds violation (1/1/0x01)"},
		{CauseDDPTaggedSTagNotAssociated, "DDP tagged buffer error: STag not associated with DDP stream (1/1/0x02)"},
		{CauseDDPTaggedTOWrap, "DDP tagged buffer error: TO wrap (1/1/0x03)"},
		{CauseDDPTaggedInvalidVersion, "DDP tagged buffer error: invalid DDP version (1/1/0x04)"},
		{CauseDDPUntaggedInvalidQN, "DDP untagged buffer error: invalid QN (1/2/0x01)"},
		{CauseDDPUntaggedNoBuffer, "DDP untagged buffer error: invalid MSN - no buffer available (1/2/0x02)"},
		{CauseDDPUntaggedInvalidMSN, "DDP untagged buffer error: invalid MSN - MSN range is not valid (1/2/0x03)"},
		{CauseDDPUntaggedInvalidMO, "DDP untagged buffer error: invalid MO (1/2/0x04)"},
		{CauseDDPUntaggedTooLong, "DDP untagged buffer error: DDP message too long for available buffer (1/2/0x05)"},
		{CauseDDPUntaggedInvalidVersion, "DDP untagged buffer error: invalid DDP version (1/2/0x06)"},
		{CauseMPAConnectionLost, "LLP MPA error: TCP connection closed, terminated or lost (2/0/0x01)"},
		{CauseMPACRC, "LLP MPA error: MPA CRC error (2/0/0x02)"},
		{CauseMPAMarker, "LLP MPA error: MPA marker and ULPDU_Length mismatch (2/0/0x03)"},
		{CauseMPAInvalidFrame, "LLP MPA error: invalid MPA Request or Reply frame (2/0/0x04)"},
		{CauseMPALocalCatastrophic, "LLP MPA error: local catastrophic error (2/0/0x05)"},
		{CauseMPAInsufficientIRD, "LLP MPA error: insufficient IRD resources (2/0/0x06)"},
		{CauseMPANoMatchingRTR, "LLP MPA error: no matching RTR option (2/0/0x07)"},
		{MakeCause(LayerDDP, 3, 1), "DDP unknown error (1/3/0x01)"},
		{MakeCause(LayerLLP, 1, 2), "LLP unknown error (2/1/0x02)"},
		{MakeCause(7, 9, 9), "Layer 7 unknown error (7/9/0x09)"},
	} {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("%#04x: %q, want %q", uint16(tt.c), got, tt.want)
		}
		if tt.c.Known() != !strings.Contains(tt.want, "unknown") {
			t.Errorf("%#04x: Known = %v", uint16(tt.c), tt.c.Known())
		}
	}
	if got := MakeCause(LayerDDP, 3, 0).ETypeName(); got != "reserved for the LLP" {
		t.Errorf("DDP etype 3: %q", got)
	}
	if c := MakeCause(LayerDDP, 2, 2); c != CauseDDPUntaggedNoBuffer || c.Layer() != LayerDDP || c.EType() != 2 || c.Code() != 2 {
		t.Error("MakeCause")
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "c", CauseMPACRC)
	if !strings.Contains(buf.String(), `c.layer=LLP c.etype=0 c.code=0x02 c.name="MPA CRC error"`) {
		t.Errorf("slog: %s", buf.String())
	}
}

func TestTerminateLayouts(t *testing.T) {
	base := Terminate{Cause: CauseDDPUntaggedNoBuffer, HdrCt: HdrCtM | HdrCtD, SegmentLen: 100, DDPHeader: Untagged(OpSend, true, 0, 5, 0)}
	for _, tt := range []struct {
		layout TermLayout
		word   string
	}{
		{LayoutRFC, "12 02 c0 00"}, // RFC 5040 section 4.8
		{LayoutSiw, "21 02 03 00"}, // Linux 6.1 (docs/linux-interop.md section 3)
	} {
		tm := base
		tm.Layout = tt.layout
		b := tm.Append(nil)
		if !bytes.Equal(b[:4], h(tt.word)) {
			t.Errorf("%v: control % x, want %s", tt.layout, b[:4], tt.word)
		}
		for _, l := range []TermLayout{tt.layout, LayoutAuto} {
			got, err := ParseTerminate(b, l)
			if err != nil || got != tm {
				t.Errorf("ParseTerminate(%v, %v) = %v, %v", tt.layout, l, got, err)
			}
		}
		// The other layout reads something else or nothing.
		other := LayoutSiw - tt.layout
		if got, err := ParseTerminate(b, other); err == nil && got.Cause == tm.Cause {
			t.Errorf("%v bytes read as %v: %v", tt.layout, other, got)
		}
	}
	// Reserved bits survive a round trip in both layouts and stop auto
	// detection.
	for _, l := range []TermLayout{LayoutRFC, LayoutSiw} {
		tm := Terminate{Cause: CauseMPACRC, Layout: l, Reserved: 0x1abc}
		b := tm.Append(nil)
		if got, err := ParseTerminate(b, l); err != nil || got != tm {
			t.Errorf("%v reserved: %v, %v", l, got, err)
		}
		if tm.String() != "LLP MPA error: MPA CRC error (2/0/0x02) - res=0x1abc"+map[TermLayout]string{LayoutSiw: " (siw layout)"}[l] {
			t.Errorf("String: %q", tm.String())
		}
	}
	for _, tt := range []struct {
		b    []byte
		kind error
	}{
		{h("20 02 00 01"), ErrReserved},    // RFC, reserved bit; siw reading unknown
		{h("2f 02 00 00"), ErrCause},       // RFC LLP type 15
		{h("20 02 c0 00 00"), ErrShort},    // D without the segment length
		{h("20 02 00 00 00"), ErrTrailing}, // one byte too many
	} {
		if _, err := ParseTerminate(tt.b, LayoutAuto); !errors.Is(err, tt.kind) {
			t.Errorf("ParseTerminate(% x) = %v, want %v", tt.b, err, tt.kind)
		}
	}
	if _, err := ParseTerminate(h("2f 02 00 00"), LayoutRFC); err != nil {
		t.Errorf("explicit layout accepts unregistered causes: %v", err)
	}
	if _, err := ParseTerminate(h("00 00 20 00"), LayoutRFC); !errors.Is(err, ErrShort) {
		t.Errorf("RFC layout never omits the Read Request header: %v", err)
	}
}

func TestHeaderParse(t *testing.T) {
	for _, v := range segmentVectors {
		hd, err := ParseHeader(v.ulpdu)
		if err != nil || hd != v.seg.Header {
			t.Errorf("%s: ParseHeader = %v, %v", v.name, hd, err)
		}
		if got := hd.Append(nil); !bytes.Equal(got, v.ulpdu[:hd.Len()]) {
			t.Errorf("%s: Append = % x", v.name, got)
		}
	}
	rr, err := ParseReadRequest(segmentVectors[2].ulpdu[UntaggedHeaderLen:])
	if err != nil || rr != segmentVectors[2].seg.ReadRequest {
		t.Errorf("ParseReadRequest = %v, %v", rr, err)
	}
}
