package iwarp

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestCRCNegotiation checks RFC 5044 section 7.1 for every pair of
// policies: CRC is on, on both sides, iff either frame has C.
func TestCRCNegotiation(t *testing.T) {
	policies := []CRCPolicy{CRCFollow, CRCRequire, CRCRefuse}
	for _, ip := range policies {
		for _, rp := range policies {
			t.Run(ip.String()+"/"+rp.String(), func(t *testing.T) {
				rdmatest.CheckGoroutines(t)
				init, resp := newProvider(t, Options{CRC: ip}), newProvider(t, Options{CRC: rp})
				s := serve(t, resp, rdma.ConnConfig{})
				ctx, cancel := context.WithTimeout(context.Background(), rawTimeout)
				defer cancel()
				a, err := init.Dial(ctx, s.ln.Addr().String(), rdma.ConnConfig{})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				b := s.next(t)
				want := ip == CRCRequire || rp == CRCRequire
				if a.(*Conn).CRC() != want || b.CRC() != want {
					t.Errorf("CRC %v/%v, want %v", a.(*Conn).CRC(), b.CRC(), want)
				}
				if a.(*Conn).Revision() != 2 || b.Revision() != 2 || b.MULPDU() < mpa.MinMULPDU {
					t.Errorf("revision %d/%d MULPDU %d", a.(*Conn).Revision(), b.Revision(), b.MULPDU())
				}
				sendOne(t, a, b)
			})
		}
	}
}

// TestReplyFlags checks the Reply our listener sends: C by policy, the
// Request's revision and enhanced mode echoed, peer-to-peer answered with
// one RTR type as siw does; and that the connection then works.
func TestReplyFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy CRCPolicy
		req    mpa.Frame
		want   mpa.Frame // Flags, Rev, IRDORD.PeerToPeer and RTR compared
	}{
		{"follow, C asked", CRCFollow, request(true, nil), mpa.Frame{Flags: mpa.FlagCRC | mpa.FlagEnhanced, Rev: 2}},
		{"follow, C not asked", CRCFollow, request(false, nil), mpa.Frame{Flags: mpa.FlagEnhanced, Rev: 2}},
		{"require", CRCRequire, request(false, nil), mpa.Frame{Flags: mpa.FlagCRC | mpa.FlagEnhanced, Rev: 2}},
		{"refuse, C asked", CRCRefuse, request(true, nil), mpa.Frame{Flags: mpa.FlagEnhanced, Rev: 2}},
		{"rev 1", CRCFollow, mpa.Frame{Kind: mpa.Request, Rev: 1, PrivateData: []byte("v1")}, mpa.Frame{Rev: 1}},
		{"rev 2 not enhanced", CRCFollow, mpa.Frame{Kind: mpa.Request, Rev: 2}, mpa.Frame{Rev: 2}},
		{"peer to peer, Write and Read offered", CRCFollow,
			mpa.Frame{Kind: mpa.Request, Rev: 2, Flags: mpa.FlagEnhanced, IRDORD: mpa.IRDORD{PeerToPeer: true, RTR: mpa.RTRWrite | mpa.RTRRead | mpa.RTRSend, IRD: 4, ORD: 4}},
			mpa.Frame{Rev: 2, Flags: mpa.FlagEnhanced, IRDORD: mpa.IRDORD{PeerToPeer: true, RTR: mpa.RTRWrite}}},
		{"peer to peer, Read offered", CRCFollow,
			mpa.Frame{Kind: mpa.Request, Rev: 2, Flags: mpa.FlagEnhanced, IRDORD: mpa.IRDORD{PeerToPeer: true, RTR: mpa.RTRRead, IRD: 4, ORD: 4}},
			mpa.Frame{Rev: 2, Flags: mpa.FlagEnhanced, IRDORD: mpa.IRDORD{PeerToPeer: true, RTR: mpa.RTRRead}}},
		{"peer to peer, Send offered", CRCFollow,
			mpa.Frame{Kind: mpa.Request, Rev: 2, Flags: mpa.FlagEnhanced, IRDORD: mpa.IRDORD{PeerToPeer: true, RTR: mpa.RTRSend, IRD: 4, ORD: 4}},
			mpa.Frame{Rev: 2, Flags: mpa.FlagEnhanced, IRDORD: mpa.IRDORD{PeerToPeer: true, RTR: mpa.RTRWrite}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdmatest.CheckGoroutines(t)
			p := newProvider(t, Options{CRC: tc.policy})
			s := serve(t, p, rdma.ConnConfig{PrivateData: []byte("ok")})
			r := rawDial(t, s.ln.Addr())
			rep := r.initiate(tc.req)
			if rep.Flags != tc.want.Flags || rep.Rev != tc.want.Rev || rep.IRDORD.PeerToPeer != tc.want.IRDORD.PeerToPeer ||
				rep.IRDORD.RTR != tc.want.IRDORD.RTR || string(rep.PrivateData) != "ok" {
				t.Fatalf("reply %v, want flags %v rev %d %v", rep, tc.want.Flags, tc.want.Rev, tc.want.IRDORD)
			}
			c := s.next(t)
			if string(c.PeerPrivateData()) != string(tc.req.PrivateData) {
				t.Errorf("peer private data %q", c.PeerPrivateData())
			}
			// The RTR (any FPDU) lifts the fence; then our Send flows.
			switch tc.want.IRDORD.RTR {
			case mpa.RTRRead:
				r.readRequest(ddp.ReadRequest{})
			default:
				r.rdmaWrite(rtrSTag, 0, nil)
			}
			rdmatest.Post(t, c, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{{MR: alloc(t, c, 4, 0), Length: 4}}})
			for {
				seg, err := r.readSeg()
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if seg.Opcode() == ddp.OpSend {
					break
				}
				if seg.Opcode() != ddp.OpRDMAReadResponse || len(seg.Payload) != 0 || !seg.Control.Last() {
					t.Fatalf("unexpected %v", seg)
				}
			}
		})
	}
}

// TestFence checks that our responder sends nothing before the
// initiator's first FPDU (RFC 5044 section 7.1.2), then everything.
func TestFence(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p := newProvider(t, Options{})
	s := serve(t, p, rdma.ConnConfig{})
	r := rawDial(t, s.ln.Addr())
	r.initiate(request(false, nil))
	c := s.next(t)
	rdmatest.Post(t, c, rdma.WorkRequest{ID: 1, Op: rdma.OpSend})
	r.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := r.br.Peek(1); err == nil {
		t.Fatalf("the responder sent before the initiator's first FPDU")
	}
	r.nc.SetReadDeadline(time.Now().Add(rawTimeout))
	r.rdmaWrite(rtrSTag, 0, nil)
	seg, err := r.readSeg()
	if err != nil || seg.Opcode() != ddp.OpSend {
		t.Fatalf("first FPDU %v, %v; want our Send", seg, err)
	}
}

// TestListenerCloseRefuses checks that requests queued for Accept are
// refused when the listener closes: the initiator sees the stream end.
func TestListenerCloseRefuses(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p := newProvider(t, Options{})
	ln, err := p.Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := rawDial(t, ln.Addr())
	r.writeFrame(request(false, nil))
	// Wait until the request is queued, then close.
	l := ln.(*Listener)
	deadline := time.Now().Add(rawTimeout)
	for len(l.reqs) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	ln.Close()
	r.expectClosedSilently()
	if _, err := ln.Accept(context.Background()); err == nil {
		t.Errorf("accept after close succeeded")
	}
}

// TestAcceptDepartedInitiator checks that Accept fails once the initiator
// has closed its end.
func TestAcceptDepartedInitiator(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p := newProvider(t, Options{})
	ctx := context.Background()
	ln, err := p.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := rawDial(t, ln.Addr())
	r.writeFrame(request(false, []byte("bye")))
	req, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f := req.(*ConnRequest).Request(); string(f.PrivateData) != "bye" || f.IRDORD.ORD != 16 {
		t.Errorf("request %v", f)
	}
	r.nc.Close()
	time.Sleep(20 * time.Millisecond)
	if c, err := req.Accept(ctx, rdma.ConnConfig{}); err == nil {
		c.Close()
		t.Fatalf("accepted a departed initiator")
	}
	if err := req.Reject(nil); err == nil {
		t.Errorf("reject after accept succeeded")
	}
}

// TestAcceptCanceled checks Accept with a context already done.
func TestAcceptCanceled(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p := newProvider(t, Options{})
	ln, err := p.Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := rawDial(t, ln.Addr())
	r.writeFrame(request(false, nil))
	req, err := ln.Accept(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := req.Accept(ctx, rdma.ConnConfig{}); err == nil {
		t.Fatalf("accept with a canceled context succeeded")
	}
	if _, err := req.Accept(context.Background(), rdma.ConnConfig{IRD: -1}); err == nil {
		t.Fatalf("accept with a negative IRD succeeded")
	}
	if err := req.Reject([]byte("no")); err != nil {
		t.Fatal(err)
	}
	rep := r.expectReject()
	if string(rep.PrivateData) != "no" || !rep.Enhanced() {
		t.Errorf("reject %v", rep)
	}
	if _, err := ln.Accept(ctx); err == nil {
		t.Errorf("accept with a canceled context succeeded")
	}
}

// TestDialNotMPA: a peer that answers the MPA Request with another
// protocol's bytes (an HTTP server's "HTTP/1.1 400", then nothing more
// while it keeps the connection open) fails Dial with ErrNotMPA at once,
// not after HandshakeTimeout with a timeout.
func TestDialNotMPA(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		nc.Write([]byte("HTTP/1.1 400"))
		<-done
	}()
	p := newProvider(t, Options{HandshakeTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := p.Dial(ctx, ln.Addr().String(), rdma.ConnConfig{})
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded")
	}
	if !errors.Is(err, ErrNotMPA) || !strings.Contains(err.Error(), `"HTTP/1.1 400"`) {
		t.Fatalf("Dial: %v, want ErrNotMPA naming what arrived", err)
	}
}
