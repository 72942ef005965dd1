package iwarp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

const testHandshakeTimeout = 300 * time.Millisecond

// rawFrame builds a startup frame byte by byte, so that it can be wrong.
func rawFrame(key string, flags mpa.Flags, rev uint8, pdLen int, pd []byte) []byte {
	b := append([]byte(key), byte(flags), rev)
	b = append(b, u16(pdLen)...)
	return append(b, pd...)
}

// enhancedPD returns an IRD/ORD word of 16/16 followed by n bytes.
func enhancedPD(n int) []byte {
	return append(mpa.IRDORD{IRD: 16, ORD: 16}.Append(nil), make([]byte, n)...)
}

// TestHostileRequest sends bad MPA Requests to our listener: each is
// dropped or rejected in bounded time, and the listener keeps serving.
func TestHostileRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frame  []byte
		reject bool // a Reply with R, else a silent close
	}{
		{"bad key", rawFrame("MPA ID Bad Frame", mpa.FlagEnhanced, 2, 4, enhancedPD(0)), false},
		{"reply key", rawFrame(mpa.ReplyKey, mpa.FlagEnhanced, 2, 4, enhancedPD(0)), false},
		{"revision 3", rawFrame(mpa.RequestKey, 0, 3, 0, nil), false},
		{"revision 0", rawFrame(mpa.RequestKey, 0, 0, 0, nil), false},
		{"private data over 512", rawFrame(mpa.RequestKey, 0, 1, 600, make([]byte, 600)), false},
		{"truncated request", rawFrame(mpa.RequestKey, 0, 1, 100, make([]byte, 10)), false},
		{"silent peer", nil, false},
		{"private data over 256", rawFrame(mpa.RequestKey, mpa.FlagEnhanced, 2, 300, enhancedPD(296)), true},
		{"rev 1 private data over 252", rawFrame(mpa.RequestKey, 0, 1, 253, make([]byte, 253)), true},
		{"markers requested", rawFrame(mpa.RequestKey, mpa.FlagMarker|mpa.FlagEnhanced, 2, 4, enhancedPD(0)), true},
		{"enhanced without IRD/ORD word", rawFrame(mpa.RequestKey, mpa.FlagEnhanced, 2, 2, []byte{0, 1}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdmatest.CheckGoroutines(t)
			p := newProvider(t, Options{HandshakeTimeout: testHandshakeTimeout})
			s := serve(t, p, rdma.ConnConfig{})
			r := rawDial(t, s.ln.Addr())
			start := time.Now()
			if tc.frame != nil {
				r.write(tc.frame)
			}
			if tc.reject {
				rep := r.expectReject()
				if len(rep.PrivateData) != 0 {
					t.Errorf("automatic reject %v carries private data", rep)
				}
			} else {
				r.expectClosedSilently()
			}
			if d := time.Since(start); d > testHandshakeTimeout+time.Second {
				t.Errorf("took %v to deal with the request", d)
			}
			roundTrip(t, p, s)
			if st := p.Stats(); st.HandshakeFailures != 1 || (st.AutoRejects == 1) != tc.reject {
				t.Errorf("stats %+v, want one handshake failure, rejected %v", st, tc.reject)
			}
		})
	}
}

// TestHostileReply answers our Dial with bad MPA Replies: Dial fails in
// bounded time, having sent a Terminate where the Reply was malformed.
func TestHostileReply(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply []byte
		cause ddp.Cause // of the Terminate we must send; 0: none
		check func(*testing.T, error)
	}{
		{name: "bad key", reply: rawFrame("MPA ID Bad Frame", mpa.FlagEnhanced, 2, 4, enhancedPD(0)), cause: ddp.CauseMPAInvalidFrame},
		{name: "request key", reply: rawFrame(mpa.RequestKey, mpa.FlagEnhanced, 2, 4, enhancedPD(0)), cause: ddp.CauseMPAInvalidFrame},
		{name: "revision 3", reply: rawFrame(mpa.ReplyKey, 0, 3, 0, nil), cause: ddp.CauseMPAInvalidFrame},
		{name: "revision 0", reply: rawFrame(mpa.ReplyKey, 0, 0, 0, nil), cause: ddp.CauseMPAInvalidFrame},
		{name: "private data over 512", reply: rawFrame(mpa.ReplyKey, 0, 1, 513, make([]byte, 513)), cause: ddp.CauseMPAInvalidFrame},
		{name: "private data over 256", reply: rawFrame(mpa.ReplyKey, mpa.FlagEnhanced, 2, 300, enhancedPD(296)), cause: ddp.CauseMPAInvalidFrame},
		{name: "markers requested", reply: rawFrame(mpa.ReplyKey, mpa.FlagMarker|mpa.FlagEnhanced, 2, 4, enhancedPD(0)), cause: ddp.CauseMPAInvalidFrame},
		{name: "responder ORD beyond our largest IRD", cause: ddp.CauseMPAInsufficientIRD,
			reply: rawFrame(mpa.ReplyKey, mpa.FlagEnhanced, 2, 4, mpa.IRDORD{IRD: 16, ORD: 200}.Append(nil))},
		{name: "truncated reply", reply: rawFrame(mpa.ReplyKey, 0, 1, 100, make([]byte, 10)), check: func(t *testing.T, err error) {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("dial: %v, want the handshake deadline", err)
			}
		}},
		{name: "silent peer", check: func(t *testing.T, err error) {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("dial: %v, want the handshake deadline", err)
			}
		}},
		{name: "reject", reply: rawFrame(mpa.ReplyKey, mpa.FlagReject|mpa.FlagEnhanced, 2, 9, enhancedPD(5)), check: func(t *testing.T, err error) {
			var re *rdma.RejectError
			if !errors.As(err, &re) || !bytes.Equal(re.PrivateData, make([]byte, 5)) {
				t.Errorf("dial: %v, want a RejectError with 5 bytes", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdmatest.CheckGoroutines(t)
			p := newProvider(t, Options{HandshakeTimeout: testHandshakeTimeout})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			start := time.Now()
			dialed := make(chan error, 1)
			go func() {
				c, err := p.Dial(context.Background(), ln.Addr().String(), rdma.ConnConfig{PrivateData: []byte("hi")})
				if c != nil {
					c.Close()
				}
				dialed <- err
			}()
			nc, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			r := newRawPeer(t, nc)
			req := r.readFrame()
			if req.Kind != mpa.Request || !req.Enhanced() || string(req.PrivateData) != "hi" {
				t.Fatalf("request %v", req)
			}
			if tc.reply != nil {
				r.write(tc.reply)
			}
			err = <-dialed
			if err == nil {
				t.Fatalf("dial succeeded")
			}
			if d := time.Since(start); d > testHandshakeTimeout+time.Second {
				t.Errorf("dial took %v to fail", d)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			if tc.cause != 0 {
				r.expectTerminate(tc.cause, nil, 0)
			} else {
				r.expectEOF()
			}
		})
	}
}

// attack is one hostile FPDU exchange against an established connection c
// whose peer is r. It returns the Terminate our side must send: its cause
// and, when it copies one, the offending DDP header and ULPDU length.
type attack struct {
	name string
	crc  bool
	cfg  rdma.ConnConfig
	run  func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int)
	// after, if set, checks our side's completions.
	after func(t *testing.T, c *Conn)
}

func alloc(t *testing.T, c *Conn, n int, access rdma.Access) rdma.MR {
	t.Helper()
	m, err := c.Alloc(n, access)
	if err != nil {
		t.Fatalf("alloc: %v", err)
	}
	return m
}

func postRecv(t *testing.T, c *Conn, id uint64, n int) {
	t.Helper()
	if err := c.PostRecv(id, []rdma.SGE{{MR: alloc(t, c, n, rdma.AccessLocalWrite), Length: n}}); err != nil {
		t.Fatalf("post recv: %v", err)
	}
}

// wantCompletions checks what our side's queues completed with.
func wantCompletions(want ...rdma.Status) func(*testing.T, *Conn) {
	return func(t *testing.T, c *Conn) {
		t.Helper()
		cs := make([]rdma.Completion, 8)
		n := c.Poll(cs)
		if n != len(want) {
			t.Fatalf("completions %+v, want statuses %v", cs[:n], want)
		}
		for i, st := range want {
			if cs[i].Status != st {
				t.Errorf("completion %d: %+v, want %v", i, cs[i], st)
			}
		}
	}
}

var attacks = []attack{
	{name: "bad CRC", crc: true, run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		postRecv(t, c, 1, 64)
		seg := ddp.Segment{Header: ddp.Untagged(ddp.OpSend, true, 0, 1, 0), Payload: []byte("hello")}
		b := mpa.AppendFPDU(nil, true, seg.Append(nil))
		b[len(b)-1] ^= 0xff
		r.write(b)
		return ddp.CauseMPACRC, nil, 0
	}, after: wantCompletions(rdma.StatusFlushed)},
	{name: "bad CRC on a Read Request", crc: true, run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		seg := ddp.Segment{Header: ddp.Untagged(ddp.OpRDMAReadRequest, true, 1, 1, 0)}
		b := mpa.AppendFPDU(nil, true, seg.Append(nil))
		b[len(b)-4] ^= 1
		r.write(b)
		return ddp.CauseMPACRC, nil, 0
	}},
	{name: "invalid STag key", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		m := alloc(t, c, 64, rdma.AccessRemoteWrite)
		h := r.rdmaWrite(otherKey(m.STag()), m.TO(), []byte("data"))
		return ddp.CauseDDPTaggedInvalidSTag, &h, ddp.TaggedHeaderLen + 4
	}},
	{name: "unknown STag", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := r.rdmaWrite(rdma.MakeSTag(0, 7), 0, []byte("data"))
		return ddp.CauseDDPTaggedInvalidSTag, &h, ddp.TaggedHeaderLen + 4
	}},
	{name: "write out of bounds", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		m := alloc(t, c, 64, rdma.AccessRemoteWrite)
		h := r.rdmaWrite(m.STag(), m.TO()+62, []byte("data"))
		return ddp.CauseDDPTaggedBaseBounds, &h, ddp.TaggedHeaderLen + 4
	}},
	{name: "write below the base", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		m := alloc(t, c, 64, rdma.AccessRemoteWrite)
		h := r.rdmaWrite(m.STag(), m.TO()-1, []byte("data"))
		return ddp.CauseDDPTaggedBaseBounds, &h, ddp.TaggedHeaderLen + 4
	}},
	{name: "write without the right", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		m := alloc(t, c, 64, rdma.AccessRemoteRead|rdma.AccessLocalWrite)
		h := r.rdmaWrite(m.STag(), m.TO(), []byte("data"))
		return ddp.CauseRDMAPAccessRights, &h, ddp.TaggedHeaderLen + 4
	}},
	{name: "write into another connection", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		_, b := rdmatest.Pair(t, rdmatest.Config{Provider: c.p, ListenAddr: "127.0.0.1:0"}, rdma.ConnConfig{}, rdma.ConnConfig{})
		m := alloc(t, b.(*Conn), 64, rdma.AccessRemoteWrite)
		h := r.rdmaWrite(m.STag(), m.TO(), []byte("data"))
		return ddp.CauseDDPTaggedSTagNotAssociated, &h, ddp.TaggedHeaderLen + 4
	}},
	{name: "STag changes inside a Write", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		m1, m2 := alloc(t, c, 64, rdma.AccessRemoteWrite), alloc(t, c, 64, rdma.AccessRemoteWrite)
		r.sendSeg(ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, false, uint32(m1.STag()), m1.TO()), Payload: make([]byte, 8)})
		h := ddp.Tagged(ddp.OpRDMAWrite, true, uint32(m2.STag()), m1.TO()+8)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 8)})
		return ddp.CauseDDPTaggedInvalidSTag, &h, ddp.TaggedHeaderLen + 8
	}},
	{name: "TO gap inside a Write", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		m := alloc(t, c, 64, rdma.AccessRemoteWrite)
		r.sendSeg(ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, false, uint32(m.STag()), m.TO()), Payload: make([]byte, 8)})
		h := ddp.Tagged(ddp.OpRDMAWrite, true, uint32(m.STag()), m.TO()+12)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 8)})
		return ddp.CauseDDPTaggedBaseBounds, &h, ddp.TaggedHeaderLen + 8
	}},
	{name: "Read Request beyond IRD", cfg: rdma.ConnConfig{IRD: 1}, run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		// Responses too large for the socket buffers keep the first
		// request held while the others arrive.
		const size = 16 << 20
		m := alloc(t, c, size, rdma.AccessRemoteRead)
		rr := ddp.ReadRequest{SinkSTag: 0x1234, Size: size, SourceSTag: uint32(m.STag()), SourceTO: m.TO()}
		var b []byte
		var h ddp.Header
		for range 2 { // one beyond IRD
			h = ddp.Untagged(ddp.OpRDMAReadRequest, true, ddp.QNReadRequest, r.nextMSN(1), 0)
			b = mpa.AppendFPDU(b, r.crc, (&ddp.Segment{Header: h, ReadRequest: rr}).Append(nil))
		}
		r.write(b)
		return ddp.CauseRDMAPCatastrophicStream, &h, ddp.UntaggedHeaderLen + ddp.ReadRequestLen
	}},
	{name: "Read Request with an invalid source", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		rr := ddp.ReadRequest{SinkSTag: 0x1234, SinkTO: 0x99, Size: 8, SourceSTag: uint32(rdma.MakeSTag(0, 9))}
		h := r.readRequest(rr)
		return ddp.CauseRDMAPInvalidSTag, &h, ddp.UntaggedHeaderLen + ddp.ReadRequestLen
	}},
	{name: "Read Request without the right", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		m := alloc(t, c, 64, rdma.AccessRemoteWrite)
		h := r.readRequest(ddp.ReadRequest{SinkSTag: 0x1234, Size: 8, SourceSTag: uint32(m.STag()), SourceTO: m.TO()})
		return ddp.CauseRDMAPAccessRights, &h, ddp.UntaggedHeaderLen + ddp.ReadRequestLen
	}},
	{name: "Read Request with a wrong MSN", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := ddp.Untagged(ddp.OpRDMAReadRequest, true, ddp.QNReadRequest, 5, 0)
		r.sendSeg(ddp.Segment{Header: h})
		return ddp.CauseDDPUntaggedInvalidMSN, &h, ddp.UntaggedHeaderLen + ddp.ReadRequestLen
	}},
	{name: "Read Response with no Read", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		r.sendSeg(ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAReadResponse, true, 1, 0), Payload: make([]byte, 4)})
		return ddp.CauseDDPLocalCatastrophic, nil, 0
	}},
	{name: "Send with no receive", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := r.send([]byte("hello"))
		return ddp.CauseDDPUntaggedNoBuffer, &h, ddp.UntaggedHeaderLen + 5
	}},
	{name: "Send too long", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		postRecv(t, c, 1, 4)
		postRecv(t, c, 2, 64)
		h := r.send([]byte("hello"))
		return ddp.CauseDDPUntaggedTooLong, &h, ddp.UntaggedHeaderLen + 5
	}, after: wantCompletions(rdma.StatusLocalLength, rdma.StatusFlushed)},
	{name: "Send with a wrong MSN", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		postRecv(t, c, 1, 64)
		h := ddp.Untagged(ddp.OpSend, true, ddp.QNSend, 2, 0)
		r.sendSeg(ddp.Segment{Header: h})
		return ddp.CauseDDPUntaggedInvalidMSN, &h, ddp.UntaggedHeaderLen
	}},
	{name: "Send with an MO gap", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		postRecv(t, c, 1, 64)
		r.sendSeg(ddp.Segment{Header: ddp.Untagged(ddp.OpSend, false, ddp.QNSend, 1, 0), Payload: make([]byte, 8)})
		h := ddp.Untagged(ddp.OpSend, true, ddp.QNSend, 1, 9)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 8)})
		return ddp.CauseDDPUntaggedInvalidMO, &h, ddp.UntaggedHeaderLen + 8
	}, after: wantCompletions(rdma.StatusFlushed)},
	{name: "Send on the Read Request queue", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := ddp.Untagged(ddp.OpSend, true, ddp.QNReadRequest, 1, 0)
		r.sendSeg(ddp.Segment{Header: h})
		return ddp.CauseDDPUntaggedInvalidQN, &h, ddp.UntaggedHeaderLen
	}},
	{name: "Send with Invalidate of an unknown STag", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		postRecv(t, c, 1, 64)
		h := ddp.Untagged(ddp.OpSendInvalidate, true, ddp.QNSend, 1, 0)
		h.InvalidateSTag = uint32(rdma.MakeSTag(0, 3))
		r.sendSeg(ddp.Segment{Header: h})
		return ddp.CauseRDMAPOperationInvalidate, &h, ddp.UntaggedHeaderLen
	}, after: wantCompletions(rdma.StatusRemoteInvalidRequest)},
	{name: "bad DDP version", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		postRecv(t, c, 1, 64)
		h := ddp.Untagged(ddp.OpSend, true, ddp.QNSend, 1, 0)
		h.Control = h.Control&^ddp.ControlVersion | 2
		r.sendSeg(ddp.Segment{Header: h})
		return ddp.CauseDDPUntaggedInvalidVersion, &h, ddp.UntaggedHeaderLen
	}},
	{name: "bad RDMAP version", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := ddp.Tagged(ddp.OpRDMAWrite, true, 1, 0)
		h.RDMAP = h.RDMAP&^ddp.RDMAPVersion | 0x80
		r.sendSeg(ddp.Segment{Header: h})
		return ddp.CauseRDMAPInvalidVersion, &h, ddp.TaggedHeaderLen
	}},
	{name: "unsupported opcode", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := ddp.Untagged(ddp.OpImmediateData, true, ddp.QNSend, 1, 0)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 8)})
		return ddp.CauseRDMAPUnexpectedOpcode, &h, ddp.UntaggedHeaderLen + 8
	}},
	{name: "ULPDU length beyond the frame", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := ddp.Untagged(ddp.OpRDMAReadRequest, true, ddp.QNReadRequest, 1, 0)
		seg := ddp.Segment{Header: h}
		r.sendULPDU(append(seg.Append(nil), make([]byte, 8)...))
		return ddp.CauseRDMAPOperationUnspecified, &h, ddp.UntaggedHeaderLen + ddp.ReadRequestLen + 8
	}},
	{name: "ULPDU length beyond any control message", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := ddp.Untagged(ddp.OpTerminate, true, ddp.QNTerminate, 1, 0)
		b := append(u16(60000), h.Append(nil)...)
		r.write(b) // the rest never comes
		return ddp.CauseRDMAPOperationUnspecified, &h, 60000
	}},
	{name: "ULPDU shorter than its header", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := ddp.Tagged(ddp.OpRDMAWrite, true, 1, 0)
		r.sendULPDU(h.Append(nil)[:10])
		return ddp.CauseRDMAPOperationUnspecified, nil, 0
	}},
	{name: "Read Response to the wrong STag", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		rr := postRead(t, c, r, 16)
		h := ddp.Tagged(ddp.OpRDMAReadResponse, true, rr.SinkSTag+1, rr.SinkTO)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 16)})
		return ddp.CauseDDPTaggedInvalidSTag, &h, ddp.TaggedHeaderLen + 16
	}, after: wantCompletions(rdma.StatusFlushed)},
	{name: "Read Response beyond the Read size", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		rr := postRead(t, c, r, 16)
		h := ddp.Tagged(ddp.OpRDMAReadResponse, true, rr.SinkSTag, rr.SinkTO)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 20)})
		return ddp.CauseDDPTaggedBaseBounds, &h, ddp.TaggedHeaderLen + 20
	}},
	{name: "Read Response short at its end", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		rr := postRead(t, c, r, 16)
		h := ddp.Tagged(ddp.OpRDMAReadResponse, true, rr.SinkSTag, rr.SinkTO)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 12)})
		return ddp.CauseDDPTaggedBaseBounds, &h, ddp.TaggedHeaderLen + 12
	}},
	{name: "Read Response with a TO gap", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		rr := postRead(t, c, r, 16)
		r.sendSeg(ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAReadResponse, false, rr.SinkSTag, rr.SinkTO), Payload: make([]byte, 8)})
		h := ddp.Tagged(ddp.OpRDMAReadResponse, true, rr.SinkSTag, rr.SinkTO+9)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 7)})
		return ddp.CauseDDPTaggedBaseBounds, &h, ddp.TaggedHeaderLen + 7
	}},
	{name: "Write inside a Read Response", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		rr := postRead(t, c, r, 16)
		r.sendSeg(ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAReadResponse, false, rr.SinkSTag, rr.SinkTO), Payload: make([]byte, 8)})
		h := ddp.Tagged(ddp.OpRDMAWrite, true, rr.SinkSTag, rr.SinkTO+8)
		r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 8)})
		return ddp.CauseRDMAPUnexpectedOpcode, &h, ddp.TaggedHeaderLen + 8
	}},
	{name: "Read Response into an invalidated sink", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		sink := alloc(t, c, 16, rdma.AccessLocalWrite)
		rdmatest.Post(t, c, rdma.WorkRequest{ID: 7, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: 0x1234})
		rr := r.awaitReadRequest()
		sink.Invalidate()
		r.sendSeg(ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAReadResponse, true, rr.SinkSTag, rr.SinkTO), Payload: make([]byte, 16)})
		return ddp.CauseDDPLocalCatastrophic, nil, 0
	}, after: wantCompletions(rdma.StatusLocalProtection)},
	{name: "Send into an invalidated receive", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		m := alloc(t, c, 16, rdma.AccessLocalWrite)
		if err := c.PostRecv(1, []rdma.SGE{rdmatest.Whole(m)}); err != nil {
			t.Fatal(err)
		}
		m.Invalidate()
		r.send([]byte("data"))
		return ddp.CauseDDPLocalCatastrophic, nil, 0
	}, after: wantCompletions(rdma.StatusLocalProtection)},
	{name: "malformed Terminate", run: func(t *testing.T, r *rawPeer, c *Conn) (ddp.Cause, *ddp.Header, int) {
		h := ddp.Untagged(ddp.OpTerminate, true, ddp.QNTerminate, 1, 0)
		r.sendULPDU(append(h.Append(nil), 0xff, 0xff, 0xff, 0xff))
		return ddp.CauseRDMAPOperationUnspecified, &h, ddp.UntaggedHeaderLen + 4
	}},
}

// postRead posts an RDMA Read of n bytes on c and returns its Read
// Request as r receives it.
func postRead(t *testing.T, c *Conn, r *rawPeer, n int) ddp.ReadRequest {
	t.Helper()
	sink := alloc(t, c, n, rdma.AccessLocalWrite)
	rdmatest.Post(t, c, rdma.WorkRequest{ID: 7, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: 0x1234, RemoteTO: 0x10})
	rr := r.awaitReadRequest()
	if rr.SinkSTag != uint32(sink.STag()) || rr.SinkTO != sink.TO() || rr.Size != uint32(n) || rr.SourceSTag != 0x1234 || rr.SourceTO != 0x10 {
		t.Fatalf("read request %v", rr)
	}
	return rr
}

// rawIRDORD is what a raw peer advertises: it holds 16 Read Requests and
// issues at most one, so our IRD stays what the test configures.
var rawIRDORD = mpa.IRDORD{IRD: 16, ORD: 1}

// otherKey returns s with a different key: a stale STag.
func otherKey(s rdma.STag) rdma.STag { return rdma.MakeSTag(s.Index(), s.Key()+1) }

// connectRaw establishes a connection between our provider p, in the
// given role, and a raw peer; it returns both ends.
func connectRaw(t *testing.T, p *Provider, responder bool, crc bool, cfg rdma.ConnConfig) (*rawPeer, *Conn, *server) {
	t.Helper()
	if responder {
		s := serve(t, p, cfg)
		r := rawDial(t, s.ln.Addr())
		req := request(crc, []byte("raw"))
		req.IRDORD = rawIRDORD
		r.initiate(req)
		c := s.next(t)
		// Lift our responder's fence, as our initiator does.
		r.rdmaWrite(rtrSTag, 0, nil)
		return r, c, s
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		c   rdma.Conn
		err error
	}
	dialed := make(chan result, 1)
	go func() {
		c, err := p.Dial(context.Background(), ln.Addr().String(), cfg)
		dialed <- result{c, err}
	}()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	r := newRawPeer(t, nc)
	req := r.readFrame()
	rep := mpa.Frame{Kind: mpa.Reply, Rev: 2, Flags: mpa.FlagEnhanced, IRDORD: rawIRDORD}
	if crc {
		rep.Flags |= mpa.FlagCRC
	}
	r.writeFrame(rep)
	r.crc = (req.Flags|rep.Flags)&mpa.FlagCRC != 0
	res := <-dialed
	if res.err != nil {
		t.Fatalf("dial: %v", res.err)
	}
	t.Cleanup(func() { res.c.Close() })
	return r, res.c.(*Conn), nil
}

// TestHostileFPDU runs every attack against our responder and our
// initiator: each ends the attacked connection, and only it, with the
// right Terminate, in bounded time.
func TestHostileFPDU(t *testing.T) {
	for _, role := range []string{"responder", "initiator"} {
		for _, a := range attacks {
			t.Run(role+"/"+a.name, func(t *testing.T) {
				rdmatest.CheckGoroutines(t)
				p := newProvider(t, Options{})
				cfg := rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0", Timeout: rawTimeout}
				// A bystander connection on the same provider.
				ga, gb := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
				r, c, s := connectRaw(t, p, role == "responder", a.crc, a.cfg)
				start := time.Now()
				cause, hdr, n := a.run(t, r, c)
				r.expectTerminate(cause, hdr, n)
				wantTerm(t, waitEnd(t, c), cause, false)
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("took %v", d)
				}
				if a.after != nil {
					a.after(t, c)
				}
				if st := p.Stats(); st.TerminatesSent != 1 {
					t.Errorf("stats %+v, want one Terminate sent", st)
				}
				if ga.Err() != nil || gb.Err() != nil {
					t.Fatalf("bystander connection ended: %v, %v", ga.Err(), gb.Err())
				}
				sendOne(t, ga, gb)
				if s != nil {
					roundTrip(t, p, s)
				}
			})
		}
	}
}
