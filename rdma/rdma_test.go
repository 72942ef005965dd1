package rdma

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

func TestSTag(t *testing.T) {
	for _, c := range []struct {
		index uint32
		key   uint8
		stag  STag
		str   string
	}{
		{0x00012a, 0x07, 0x00012a07, "0x00012a07"},
		{0xffffff, 0xff, 0xffffffff, "0xffffffff"},
		{0, 1, 1, "0x00000001"},
		{0x1000001, 0x02, 0x00000102, "0x00000102"}, // index bits above 24 dropped
	} {
		s := MakeSTag(c.index, c.key)
		if s != c.stag || s.Index() != c.index&0xffffff || s.Key() != c.key || s.String() != c.str {
			t.Errorf("MakeSTag(%#x, %#x) = %v (index %#x key %#x), want %v", c.index, c.key, s, s.Index(), s.Key(), c.str)
		}
	}
}

func TestAccess(t *testing.T) {
	for _, c := range []struct {
		a     Access
		str   string
		valid bool
	}{
		{0, "none", true},
		{AccessLocalWrite, "local-write", true},
		{AccessRemoteRead | AccessRemoteWrite, "remote-read|remote-write", true},
		{AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite, "local-write|remote-read|remote-write", true},
		{AccessRemoteRead | 0x80, "remote-read|0x80", false},
	} {
		if c.a.String() != c.str || c.a.Valid() != c.valid {
			t.Errorf("Access %#x: %q valid %v, want %q %v", uint8(c.a), c.a, c.a.Valid(), c.str, c.valid)
		}
	}
	rw := AccessRemoteRead | AccessRemoteWrite
	if !rw.Has(AccessRemoteRead) || !rw.Has(rw) || rw.Has(AccessLocalWrite) || !rw.Has(0) {
		t.Errorf("Has is wrong for %v", rw)
	}
}

func TestOp(t *testing.T) {
	for _, c := range []struct {
		op                         Op
		str                        string
		send, invalidate, solicits bool
	}{
		{OpSend, "Send", true, false, false},
		{OpSendInvalidate, "Send with Invalidate", true, true, false},
		{OpSendSE, "Send with SE", true, false, true},
		{OpSendSEInvalidate, "Send with SE and Invalidate", true, true, true},
		{OpWrite, "RDMA Write", false, false, false},
		{OpRead, "RDMA Read", false, false, false},
		{OpRecv, "Receive", false, false, false},
		{0, "Op(0)", false, false, false},
		{99, "Op(99)", false, false, false},
	} {
		if c.op.String() != c.str || c.op.IsSend() != c.send || c.op.Invalidates() != c.invalidate || c.op.Solicited() != c.solicits {
			t.Errorf("Op %d: %q send %v invalidates %v solicited %v", uint8(c.op), c.op, c.op.IsSend(), c.op.Invalidates(), c.op.Solicited())
		}
	}
}

func TestStatusString(t *testing.T) {
	seen := map[string]bool{}
	for s := StatusSuccess; s <= StatusTransport; s++ {
		str := s.String()
		if str == "" || strings.HasPrefix(str, "Status(") || seen[str] {
			t.Errorf("Status %d: %q", uint8(s), str)
		}
		seen[str] = true
	}
	if got := Status(200).String(); got != "Status(200)" {
		t.Errorf("unknown status: %q", got)
	}
}

func TestTerminateString(t *testing.T) {
	for _, c := range []struct {
		e    TerminateError
		str  string
		st   Status
		errs string
	}{
		{TerminateError{LayerDDP, TypeUntaggedBuffer, CodeNoBuffer, true, ""},
			"DDP untagged buffer: no buffer available (1/2/0x02)", StatusRNR,
			"rdma: connection terminated by peer: DDP untagged buffer: no buffer available (1/2/0x02)"},
		{TerminateError{LayerDDP, TypeUntaggedBuffer, CodeMessageTooLong, false, "send of 16 bytes into receive 7 of 8 bytes"},
			"DDP untagged buffer: message too long for buffer (1/2/0x05)", StatusRemoteOperation,
			"rdma: connection terminated: DDP untagged buffer: message too long for buffer (1/2/0x05): send of 16 bytes into receive 7 of 8 bytes"},
		{TerminateError{LayerRDMAP, TypeRemoteProtection, CodeBaseBounds, false, ""},
			"RDMAP remote protection: base or bounds violation (0/1/0x01)", StatusRemoteAccess, ""},
		{TerminateError{LayerRDMAP, TypeRemoteOperation, CodeCatastrophicStream, false, ""},
			"RDMAP remote operation: catastrophic error, localized to RDMAP stream (0/2/0x07)", StatusRemoteOperation, ""},
		{TerminateError{LayerRDMAP, TypeLocalCatastrophic, CodeUnspecified, false, ""},
			"RDMAP local catastrophic: code 0xff (0/0/0xff)", StatusRemoteOperation, ""},
		{TerminateError{LayerDDP, TypeTaggedBuffer, CodeTaggedSTagNotAssociated, false, ""},
			"DDP tagged buffer: STag not associated with DDP stream (1/1/0x02)", StatusRemoteAccess, ""},
		{TerminateError{LayerMPA, TypeMPA, CodeCRCError, false, ""},
			"MPA error: CRC error (2/0/0x02)", StatusTransport, ""},
		{TerminateError{Layer(5), ErrorType(9), ErrorCode(0x42), false, ""},
			"Layer(5) type 9: code 0x42 (5/9/0x42)", StatusRemoteOperation, ""},
	} {
		if got := c.e.String(); got != c.str {
			t.Errorf("String() = %q, want %q", got, c.str)
		}
		if got := c.e.Status(); got != c.st {
			t.Errorf("%v: Status() = %v, want %v", c.e, got, c.st)
		}
		if c.errs != "" && c.e.Error() != c.errs {
			t.Errorf("Error() = %q, want %q", c.e.Error(), c.errs)
		}
	}
}

// TestTerminateNames checks that every code named in errors.go has a name
// in its table.
func TestTerminateNames(t *testing.T) {
	for k, codes := range codeNames {
		if typeNames[k] == "" {
			t.Errorf("layer %v type %d has codes but no name", k.layer, k.typ)
		}
		for code, name := range codes {
			e := TerminateError{Layer: k.layer, Type: k.typ, Code: code}
			if !strings.Contains(e.String(), name) {
				t.Errorf("%v does not show %q", e, name)
			}
		}
	}
}

func TestTerminateIs(t *testing.T) {
	sent := TerminateError{LayerDDP, TypeTaggedBuffer, CodeTaggedBaseBounds, false, ""}
	got := error(TerminateError{LayerDDP, TypeTaggedBuffer, CodeTaggedBaseBounds, true, "remote write"})
	wrapped := fmt.Errorf("loopback: post: %w", got)
	if !errors.Is(wrapped, sent) || !errors.Is(wrapped, &sent) {
		t.Errorf("errors.Is(%v, %v) is false; Remote and Detail must not count", wrapped, sent)
	}
	if errors.Is(wrapped, TerminateError{LayerDDP, TypeTaggedBuffer, CodeTaggedInvalidSTag, true, ""}) {
		t.Errorf("errors.Is matched a different code")
	}
	if errors.Is(wrapped, TerminateError{LayerRDMAP, TypeTaggedBuffer, CodeTaggedBaseBounds, true, ""}) {
		t.Errorf("errors.Is matched a different layer")
	}
	if errors.Is(wrapped, (*TerminateError)(nil)) || errors.Is(wrapped, ErrClosed) {
		t.Errorf("errors.Is matched nil or ErrClosed")
	}
	if !errors.Is(wrapped, net.ErrClosed) {
		t.Errorf("a Terminate does not match net.ErrClosed")
	}
	var te TerminateError
	if !errors.As(wrapped, &te) || !te.Remote || te.Code != CodeTaggedBaseBounds {
		t.Errorf("errors.As: %+v", te)
	}
}

func TestEndErrors(t *testing.T) {
	for _, err := range []error{ErrClosed, ErrDisconnected, ErrConnectionLost} {
		if !errors.Is(err, net.ErrClosed) || !strings.HasPrefix(err.Error(), "rdma: ") {
			t.Errorf("%v: does not match net.ErrClosed or lacks the prefix", err)
		}
	}
	if errors.Is(ErrClosed, ErrDisconnected) {
		t.Errorf("ErrClosed matches ErrDisconnected")
	}
	for _, err := range []error{ErrQueueFull, ErrInvalid, ErrRejected} {
		if errors.Is(err, net.ErrClosed) {
			t.Errorf("%v matches net.ErrClosed but does not end the connection", err)
		}
	}
}

func TestRejectError(t *testing.T) {
	err := fmt.Errorf("dial: %w", &RejectError{PrivateData: []byte("no")})
	var re *RejectError
	if !errors.Is(err, ErrRejected) || !errors.As(err, &re) || string(re.PrivateData) != "no" {
		t.Errorf("RejectError: %v", err)
	}
	if !strings.Contains(err.Error(), "2 bytes of private data") {
		t.Errorf("Error() = %q", err)
	}
	if errors.Is(err, ErrInvalid) {
		t.Errorf("RejectError matches ErrInvalid")
	}
}

func TestCheckPrivateData(t *testing.T) {
	if err := CheckPrivateData("dial", make([]byte, MaxPrivateData)); err != nil {
		t.Errorf("%d bytes: %v", MaxPrivateData, err)
	}
	err := CheckPrivateData("accept", make([]byte, MaxPrivateData+1))
	if !errors.Is(err, ErrInvalid) || err.Error() != "rdma: accept: private data is 253 bytes, more than 252: rdma: invalid argument" {
		t.Errorf("%d bytes: %v", MaxPrivateData+1, err)
	}
}

func TestConnConfigDepths(t *testing.T) {
	def := Depths{SendQueue: 8, RecvQueue: 9, IRD: 2, ORD: 3}
	max := Depths{SendQueue: 100, RecvQueue: 100, IRD: 16, ORD: 16}
	d, err := ConnConfig{RecvQueueDepth: 50, IRD: 1000}.Depths(def, max)
	if err != nil || d != (Depths{SendQueue: 8, RecvQueue: 50, IRD: 16, ORD: 3}) {
		t.Fatalf("Depths = %+v, %v", d, err)
	}
	if _, err := (ConnConfig{ORD: -1}).Depths(def, max); !errors.Is(err, ErrInvalid) || err.Error() != "rdma: ORD -1 is negative: rdma: invalid argument" {
		t.Fatalf("negative ORD: %v", err)
	}
}
