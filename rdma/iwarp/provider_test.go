package iwarp

import (
	"errors"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

func TestNewOptions(t *testing.T) {
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := p.Options()
	if o.Revision != DefaultRevision || o.HandshakeTimeout != DefaultHandshakeTimeout || o.FirstSendDelay != 0 || o.CRC != CRCFollow {
		t.Errorf("defaults %+v", o)
	}
	p, err = New(Options{FirstSendDelay: -1, Revision: 1, HandshakeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if o := p.Options(); o.FirstSendDelay != 0 || o.Revision != 1 || o.HandshakeTimeout != time.Second {
		t.Errorf("options %+v", o)
	}
	for _, bad := range []Options{{Revision: 3}, {Revision: -1}, {CRC: 9}, {HandshakeTimeout: -1}, {MSS: -1}} {
		if _, err := New(bad); !errors.Is(err, rdma.ErrInvalid) {
			t.Errorf("New(%+v): %v, want ErrInvalid", bad, err)
		}
	}
}

func TestCRCPolicyString(t *testing.T) {
	for p, want := range map[CRCPolicy]string{CRCFollow: "follow", CRCRequire: "require", CRCRefuse: "refuse", 7: "CRCPolicy(7)"} {
		if got := p.String(); got != want {
			t.Errorf("%d: %q, want %q", p, got, want)
		}
	}
}

func TestNewSettings(t *testing.T) {
	s, err := (&Provider{}).newSettings(rdma.ConnConfig{SendQueueDepth: 1 << 20, IRD: 500, ORD: 3})
	if err != nil {
		t.Fatal(err)
	}
	if s != (settings{sq: MaxQueueDepth, rq: DefaultQueueDepth, ird: MaxReadDepth, ord: 3}) {
		t.Errorf("settings %+v", s)
	}
	if _, err := (&Provider{}).newSettings(rdma.ConnConfig{RecvQueueDepth: -1}); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("negative depth: %v", err)
	}
}

// TestNegotiation checks RFC 6581 section 9.1 on both sides, the
// all-ones "no negotiation" value included.
func TestNegotiation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		resp       settings
		init       mpa.IRDORD
		wantResp   settings
		wantWord   mpa.IRDORD
		initial    settings
		wantInit   settings
		wantInitOK bool
	}{
		{
			name: "rdmatest Limits", resp: settings{ird: 2, ord: 16}, init: mpa.IRDORD{IRD: 4, ORD: 8},
			wantResp: settings{ird: 8, ord: 4}, wantWord: mpa.IRDORD{IRD: 8, ORD: 4},
			initial: settings{ird: 4, ord: 8}, wantInit: settings{ird: 4, ord: 8}, wantInitOK: true,
		},
		{
			name: "initiator ORD above the maximum", resp: settings{ird: 2, ord: 2}, init: mpa.IRDORD{IRD: 1, ORD: 1000},
			wantResp: settings{ird: MaxReadDepth, ord: 1}, wantWord: mpa.IRDORD{IRD: MaxReadDepth, ORD: 1},
			initial: settings{ird: 1, ord: 1000}, wantInit: settings{ird: 1, ord: MaxReadDepth}, wantInitOK: true,
		},
		{
			name: "no automatic negotiation", resp: settings{ird: 5, ord: 6}, init: mpa.IRDORD{IRD: mpa.MaxIRDORD, ORD: mpa.MaxIRDORD},
			wantResp: settings{ird: 5, ord: 6}, wantWord: mpa.IRDORD{IRD: mpa.MaxIRDORD, ORD: mpa.MaxIRDORD},
			initial: settings{ird: 3, ord: 4}, wantInit: settings{ird: 3, ord: 4}, wantInitOK: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, w := negotiateResponder(tc.resp, tc.init)
			if s != tc.wantResp || w != tc.wantWord {
				t.Errorf("responder: %+v %v, want %+v %v", s, w, tc.wantResp, tc.wantWord)
			}
			got, err := negotiateInitiator(tc.initial, w)
			if (err == nil) != tc.wantInitOK || got != tc.wantInit {
				t.Errorf("initiator: %+v %v, want %+v", got, err, tc.wantInit)
			}
			if got.ord > s.ird && w.IRD != mpa.MaxIRDORD {
				t.Errorf("initiator ORD %d exceeds responder IRD %d", got.ord, s.ird)
			}
		})
	}
	if _, err := negotiateInitiator(settings{ird: 4}, mpa.IRDORD{ORD: MaxReadDepth + 1}); err == nil {
		t.Errorf("responder ORD beyond our largest IRD accepted")
	}
}
