package rpcrdma

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// rawPeer is a requester written by hand on the bare provider: it sends
// whatever bytes a test gives it to a responder and reads what comes back.
type rawPeer struct {
	rc   rdma.Conn
	recv rdma.MR
	send rdma.MR
	cs   []rdma.Completion
}

const rawSlots, rawSize = 8, 8192

// peerToResponder starts a responder serving testServer and connects a
// rawPeer to it. The responder is closed at cleanup.
func peerToResponder(t testing.TB, cfg *Config) (*rawPeer, <-chan *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	net := loopback.New()
	l, err := Listen(ctx, net, "", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer()
	conns := make(chan *Conn, 1)
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := l.Accept(context.Background())
		if err != nil {
			return
		}
		conns <- c
		srv.Serve(c)
		c.Close()
	}()
	p := &rawPeer{cs: make([]rdma.Completion, 4)}
	rc, err := net.Dial(ctx, l.Addr().String(), rdma.ConnConfig{
		PrivateData: wire.PrivateData{SendSize: 4096, ReceiveSize: rawSize, RemoteInvalidation: true}.Append(nil),
		Prepare: func(rc rdma.Conn) error {
			var err error
			if p.recv, err = rc.Alloc(rawSlots*rawSize, rdma.AccessLocalWrite); err != nil {
				return err
			}
			for i := 0; i < rawSlots; i++ {
				if err := rc.PostRecv(uint64(i), []rdma.SGE{{MR: p.recv, Offset: i * rawSize, Length: rawSize}}); err != nil {
					return err
				}
			}
			p.send, err = rc.Alloc(rawSize, 0)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.rc = rc
	t.Cleanup(func() {
		rc.Close()
		l.Close()
		srv.Close()
		<-served
	})
	return p, conns
}

// exchange sends msg and returns the next message received within wait,
// or nil if none came. It reposts the receive it consumed.
func (p *rawPeer) exchange(t testing.TB, msg []byte, wait time.Duration) []byte {
	t.Helper()
	out, err := p.tryExchange(msg, wait)
	if err != nil {
		t.Fatalf("posting: %v", err)
	}
	return out
}

// tryExchange is exchange reporting a connection that has ended.
func (p *rawPeer) tryExchange(msg []byte, wait time.Duration) ([]byte, error) {
	copy(p.send.Bytes(), msg)
	err := p.rc.PostSend(&rdma.WorkRequest{ID: 1000, Op: rdma.OpSend, Local: []rdma.SGE{{MR: p.send, Length: len(msg)}}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		n, err := p.rc.Wait(ctx, p.cs)
		if err != nil {
			return nil, nil
		}
		for _, c := range p.cs[:n] {
			if c.Op != rdma.OpRecv {
				continue
			}
			slot := int(c.ID)
			out := append([]byte(nil), p.recv.Bytes()[slot*rawSize:slot*rawSize+c.Len]...)
			p.rc.PostRecv(c.ID, []rdma.SGE{{MR: p.recv, Offset: slot * rawSize, Length: rawSize}})
			return out, nil
		}
	}
}

// waitSent waits for the completion of the Send posted with id, so that
// p.send may be written again; completions of other work requests it
// meets are dropped (receives are not reposted).
func (p *rawPeer) waitSent(t testing.TB, id uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		n, err := p.rc.Wait(ctx, p.cs)
		if err != nil {
			t.Fatalf("waiting for the completion of send %d: %v", id, err)
		}
		for _, c := range p.cs[:n] {
			if c.ID == id && c.Op == rdma.OpSend {
				if c.Status != rdma.StatusSuccess {
					t.Fatalf("send %d completed with %v", id, c.Status)
				}
				return
			}
		}
	}
}

// nullCall is an inline RDMA_MSG carrying a NULL call to testProg.
func nullCall(xid uint32, vers wire.Version) []byte {
	h := wire.Header{XID: xid, Vers: vers, Credits: 8, Proc: wire.RDMA_MSG}
	b := h.Append(nil)
	ch := rpc.CallHeader{XID: xid, RPCVers: 2, Prog: testProg, Vers: testVers, Proc: 0}
	return ch.Append(b)
}

// nullReply is an inline RDMA_MSG carrying a successful NULL reply to
// xid, granting credits.
func nullReply(xid, credits uint32) []byte {
	h := wire.Header{XID: xid, Vers: wire.Version1, Credits: credits, Proc: wire.RDMA_MSG}
	rh := rpc.ReplyHeader{XID: xid, Stat: rpc.MsgAccepted, AcceptStat: rpc.Success}
	return rh.Append(h.Append(nil))
}

func hdr(xid uint32, words ...uint32) []byte {
	b := xdr.AppendUint32(nil, xid)
	for _, w := range words {
		b = xdr.AppendUint32(b, w)
	}
	return b
}

// TestResponderRejects sends one malformed message per class and checks the
// answer: ERR_CHUNK (v2: RDMA_ERR_BAD_HEADER), ERR_VERS with the range, or
// nothing at all; after each, the connection still serves a good call.
func TestResponderRejects(t *testing.T) {
	const xid = 0x0badc0de
	call := nullCall(xid, 1)[28:] // the RPC call, after its 28-byte transport header
	tests := []struct {
		name string
		msg  []byte
		want wire.ErrorCode // 0: no answer
		vers wire.Version
		why  Reason // the drop or rejection counted
	}{
		{"too-short-to-answer", hdr(xid, 1), 0, 0, DropUndecodable},
		{"unknown-version", hdr(xid, 7, 1, 0, 0, 0, 0), wire.ErrVers, 1, RejectVersion},
		{"unknown-proc", hdr(xid, 1, 1, 9, 0, 0, 0), wire.ErrChunk, 1, RejectUndecodable},
		{"truncated-chunk-lists", hdr(xid, 1, 1, 0, 0, 0), wire.ErrChunk, 1, RejectUndecodable},
		{"bad-discriminator", hdr(xid, 1, 1, 0, 2, 0, 0), wire.ErrChunk, 1, RejectUndecodable},
		{"misaligned-position", append(hdr(xid, 1, 1, 0, 1, 6, 0x100, 16, 0, 0, 0, 0, 0), call...), wire.ErrChunk, 1, RejectInvalidHeader},
		{"position-zero-in-rdma-msg", append(hdr(xid, 1, 1, 0, 1, 0, 0x100, 16, 0, 0, 0, 0, 0), call...), wire.ErrChunk, 1, RejectInvalidHeader},
		{"nomsg-without-chunk", hdr(xid, 1, 1, 1, 0, 0, 0), wire.ErrChunk, 1, RejectInvalidHeader},
		{"empty-write-chunk", append(hdr(xid, 1, 1, 0, 0, 1, 0, 0, 0), call...), wire.ErrChunk, 1, RejectInvalidHeader},
		{"write-count-beyond-message", append(hdr(xid, 1, 1, 0, 0, 1, 0x7fffffff), call...), wire.ErrChunk, 1, RejectUndecodable},
		{"read-chunk-outside-call", append(hdr(xid, 1, 1, 0, 1, 4000, 0x100, 16, 0, 0, 0, 0, 0), call...), wire.ErrChunk, 1, RejectChunk},
		// A chunk that matches its length word, but is more than we take.
		{"read-chunk-beyond-max", append(hdr(xid, 1, 1, 0, 1, uint32(len(call)+4), 0x100, maxChunk+4, 0, 0, 0, 0, 0), append(slices.Clip(call), hdr(maxChunk+4)...)...), wire.ErrChunk, 1, RejectChunk},
		{"rpc-xid-differs", append(hdr(xid, 1, 1, 0, 0, 0, 0), nullCall(xid+1, 1)[28:]...), wire.ErrChunk, 1, RejectXID},
		// The same, with a read chunk: refused before any RDMA Read.
		{"rpc-xid-differs-read-chunk", append(hdr(xid, 1, 1, 0, 1, uint32(len(call)+4), 0x100, 8, 0, 0, 0, 0, 0), append(slices.Clip(nullCall(xid+1, 1)[28:]), hdr(8)...)...), wire.ErrChunk, 1, RejectXID},
		{"msgp-disabled", hdr(xid, 1, 1, 2, 4, 1024, 0, 0, 0), wire.ErrChunk, 1, RejectMSGP},
		{"rdma-done-ignored", hdr(xid, 1, 1, 3), 0, 0, DropStrayDone},
		{"rdma-error-never-answered", hdr(xid, 1, 1, 4, 2), 0, 0, DropErrorToResponder},
		{"undecodable-rdma-error", hdr(xid, 1, 1, 4, 1), 0, 0, DropErrorToResponder},
		{"v2-unknown-option", hdr(xid, 2, 1, 5, 77, 0), wire.ErrInvalOption, 2, RejectOption},
		{"v2-bad-header", hdr(xid, 2, 1, 0, 3, 0, 0), wire.ErrBadHeader, 2, RejectUndecodable},
		{"v2-reserved-msgp", hdr(xid, 2, 1, 2), wire.ErrBadHeader, 2, RejectMSGP},
		{"trailing-bytes-after-nomsg", append(hdr(xid, 1, 1, 1, 1, 0, 0x100, 16, 0, 0, 0, 0, 0), 1, 2, 3, 4), wire.ErrChunk, 1, RejectUndecodable},
		{"rpc-reply-instead-of-call", append(hdr(xid, 1, 1, 0, 0, 0, 0), hdr(xid, 1, 0, 0, 0, 0)...), 0, 0, DropBackwardOff},
	}
	p, conns := peerToResponder(t, nil)
	resp := <-conns
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := resp.Stats()
			wait := 2 * time.Second
			if tt.want == 0 {
				wait = 100 * time.Millisecond
			}
			got := p.exchange(t, tt.msg, wait)
			if tt.want == 0 {
				if got != nil {
					t.Fatalf("answered %x, want no answer", got)
				}
			} else {
				var h wire.Header
				if _, err := h.Decode(got); err != nil {
					t.Fatalf("answer %x: %v", got, err)
				}
				if h.XID != xid || h.Proc != wire.RDMA_ERROR || h.Error.Code != tt.want || h.Vers != tt.vers || h.Credits == 0 {
					t.Fatalf("answer %v, want %v RDMA_ERROR in version %d with credits", &h, tt.want.Name(tt.vers), tt.vers)
				}
				if tt.want == wire.ErrVers && (h.Error.Low != 1 || h.Error.High != 2) {
					t.Fatalf("ERR_VERS range %d..%d, want 1..2", h.Error.Low, h.Error.High)
				}
			}
			// The connection carries on.
			good := uint32(0x1000 + i)
			rep := p.exchange(t, nullCall(good, 1), 2*time.Second)
			var h wire.Header
			n, err := h.Decode(rep)
			if err != nil || h.Proc != wire.RDMA_MSG || h.XID != good {
				t.Fatalf("good call after %s: %v %v", tt.name, &h, err)
			}
			var rh rpc.ReplyHeader
			d := xdr.NewDecoder(rep[n:])
			if err := rh.Decode(&d); err != nil || rh.XID != good || rh.AcceptStat != rpc.Success {
				t.Fatalf("reply %+v %v", rh, err)
			}
			// Counted under its reason, and only there (the good
			// call's reply has come, so the loop has counted).
			after := resp.Stats()
			for r := range NumReasons {
				want := before.Reasons[r]
				if r == tt.why {
					want++
				}
				if after.Reasons[r] != want {
					t.Errorf("%s counted %d times, want %d", r, after.Reasons[r]-before.Reasons[r], want-before.Reasons[r])
				}
			}
		})
	}
}

// TestResponderBadSTag offers a read chunk naming an STag that does not
// exist: the responder's RDMA Read fails, which ends that connection (as on
// hardware) without harming the responder process.
func TestResponderBadSTag(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p, conns := peerToResponder(t, nil)
	var args rpc.Body
	args.AppendDDPOpaque(make([]byte, 5000))
	call := (&rpc.CallHeader{XID: 9, RPCVers: 2, Prog: testProg, Vers: testVers, Proc: procSum}).Append(nil)
	pos := len(call) + 4
	call = append(call, args.XDR...)
	h := wire.Header{XID: 9, Vers: 1, Credits: 1, Proc: wire.RDMA_MSG}
	h.Chunks.Reads = wire.ReadList{{Position: uint32(pos), Segment: wire.Segment{Handle: 0xdead01, Length: 5000, Offset: 0}}}
	msg := append(h.Append(nil), call...)
	if got := p.exchange(t, msg, 200*time.Millisecond); got != nil {
		t.Fatalf("answered %x", got)
	}
	c := <-conns
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("responder connection survived a failed RDMA Read")
	}
	var te rdma.TerminateError
	if err := c.Err(); !errors.As(err, &te) {
		t.Fatalf("responder ended with %v, want a TerminateError", err)
	}
}

// FuzzResponder feeds arbitrary Send payloads to a responder's receive
// path. Whatever arrives, the responder must not panic, must answer with
// nothing or a well-formed RDMA_ERROR or reply, and must either keep
// serving or end that connection cleanly.
func FuzzResponder(f *testing.F) {
	f.Add(nullCall(1, 1))
	f.Add(nullCall(2, 2))
	f.Add(hdr(3, 1, 1, 0, 1, 6, 0x100, 16, 0, 0, 0, 0, 0))
	f.Add(hdr(4, 7, 1, 0))
	f.Add(hdr(5, 2, 1, 5, 77, 4, 0xdeadbeef))
	f.Add(hdr(6, 1, 1, 1, 1, 0, 0x100, 64, 0, 0, 0, 0, 0))
	f.Add([]byte{1, 2, 3})
	f.Add(hdr(7, 1, 1, 0, 0, 0, 0, 7, 1, 0)) // a backward reply to no call (RFC 8167)
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) > 4096 {
			return
		}
		p, conns := peerToResponder(t, &Config{BackwardCredits: 2})
		c := <-conns
		// ended waits for the responder connection to end, as it must
		// when the raw side can no longer post.
		ended := func(why error) {
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("raw side failed (%v) but the responder connection lives", why)
			}
		}
		got, err := p.tryExchange(msg, 50*time.Millisecond)
		if err != nil {
			ended(err)
			return
		}
		if got != nil {
			var h wire.Header
			if _, err := h.Decode(got); err != nil {
				t.Fatalf("responder sent an undecodable message %x: %v", got, err)
			}
			if h.Credits == 0 {
				t.Fatalf("responder granted zero credits: %v", &h)
			}
			if len(msg) >= 4 && h.XID != binary.BigEndian.Uint32(msg) {
				t.Fatalf("answer %v does not carry the xid of %x", &h, msg[:4])
			}
		}
		rep, err := p.tryExchange(nullCall(0x77777777, 1), 2*time.Second)
		if err != nil {
			ended(err)
			return
		}
		var h wire.Header
		if _, err := h.Decode(rep); err != nil || h.XID != 0x77777777 {
			select {
			case <-c.Done():
			default:
				t.Fatalf("responder alive but not answering after %x: %v %v", msg, &h, err)
			}
		}
	})
}

// TestMSGP sends RDMA_MSGP calls (RFC 5666 section 3.9) to a responder that
// honours them: the large opaque's data is padded to rdma_align in the
// receive buffer, and the responder decodes around the padding.
func TestMSGP(t *testing.T) {
	p, _ := peerToResponder(t, &Config{MSGP: true})
	const xid, align, thresh = 0x5150, 64, 32
	data := pattern(300, 9)
	h := wire.Header{XID: xid, Vers: 1, Credits: 4, Proc: wire.RDMA_MSGP, Padding: wire.Padding{Align: align, Thresh: thresh}}
	msg := h.Append(nil)
	msg = (&rpc.CallHeader{XID: xid, RPCVers: 2, Prog: testProg, Vers: testVers, Proc: procEchoFlat}).Append(msg)
	msg = xdr.AppendUint32(msg, uint32(len(data)))
	for len(msg)%align != 0 {
		msg = append(msg, 0xaa) // padding bytes need not be zero
	}
	msg = xdr.AppendFixedOpaque(msg, data)
	rep := p.exchange(t, msg, 2*time.Second)
	var rh wire.Header
	n, err := rh.Decode(rep)
	if err != nil || rh.Proc != wire.RDMA_MSG || rh.XID != xid {
		t.Fatalf("answer %v %v", &rh, err)
	}
	d := xdr.NewDecoder(rep[n:])
	var rpcHdr rpc.ReplyHeader
	if err := rpcHdr.Decode(&d); err != nil || rpcHdr.AcceptStat != rpc.Success {
		t.Fatalf("reply %+v %v", rpcHdr, err)
	}
	if got := d.Opaque(1024); string(got) != string(data) {
		t.Fatalf("echo of a padded opaque: %x", got)
	}

	// A short opaque is not padded.
	h.XID = xid + 1
	msg = h.Append(nil)
	msg = (&rpc.CallHeader{XID: xid + 1, RPCVers: 2, Prog: testProg, Vers: testVers, Proc: procEchoFlat}).Append(msg)
	msg = xdr.AppendOpaque(msg, data[:10])
	rep = p.exchange(t, msg, 2*time.Second)
	if _, err = rh.Decode(rep); err != nil || rh.Proc != wire.RDMA_MSG {
		t.Fatalf("answer %v %v", &rh, err)
	}
}

// TestDroppedCallNotPending: a call the rpc.Server drops unanswered (its
// RPC header is cut short) leaves nothing behind in the responder: once
// the server releases it, it is no longer pending, and later calls with
// the same xid are answered.
func TestDroppedCallNotPending(t *testing.T) {
	p, conns := peerToResponder(t, nil)
	resp := <-conns
	for i := range uint32(20) {
		xid := 0x7000 + i
		h := wire.Header{XID: xid, Vers: wire.Version1, Credits: 8, Proc: wire.RDMA_MSG}
		// xid, CALL, rpcvers 2, and no more: too short to answer.
		msg := xdr.AppendUint32(xdr.AppendUint32(xdr.AppendUint32(h.Append(nil), xid), 0), 2)
		if out := p.exchange(t, msg, 20*time.Millisecond); out != nil {
			t.Fatalf("call 0x%x cut short was answered: % x", xid, out)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for resp.Stats().CallsPending != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := resp.Stats().CallsPending; n != 0 {
		t.Fatalf("%d dropped calls still pending", n)
	}
	out := p.exchange(t, nullCall(0x7000, wire.Version1), 5*time.Second)
	var got wire.Header
	if _, err := got.Decode(out); err != nil || got.XID != 0x7000 || got.Proc != wire.RDMA_MSG {
		t.Fatalf("NULL after the dropped calls: %v %v", got, err)
	}
}

// rawResponder is a hand-driven responder for a requester under test.
type rawResponder struct {
	rawPeer
	conn *Conn       // the requester
	cli  *rpc.Client // over conn
}

// newRawResponder connects a requester configured by cfg (nil: defaults),
// with an rpc.Client, to a raw responder. Both are closed at cleanup.
func newRawResponder(t testing.TB, cfg *Config) *rawResponder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	net := loopback.New()
	l, err := net.Listen(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := &rawResponder{rawPeer: rawPeer{cs: make([]rdma.Completion, 4)}}
	accepted := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			accepted <- err
			return
		}
		rc, err := req.Accept(ctx, rdma.ConnConfig{
			PrivateData: wire.PrivateData{SendSize: rawSize, ReceiveSize: rawSize}.Append(nil),
			Prepare: func(rc rdma.Conn) error {
				var err error
				if r.recv, err = rc.Alloc(rawSlots*rawSize, rdma.AccessLocalWrite); err != nil {
					return err
				}
				for i := 0; i < rawSlots; i++ {
					if err := rc.PostRecv(uint64(i), []rdma.SGE{{MR: r.recv, Offset: i * rawSize, Length: rawSize}}); err != nil {
						return err
					}
				}
				r.send, err = rc.Alloc(rawSize, 0)
				return err
			},
		})
		r.rc = rc
		accepted <- err
	}()
	conn, err := Dial(ctx, net, l.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		conn.Close()
		t.Fatal(err)
	}
	r.conn, r.cli = conn, rpc.NewClient(conn)
	t.Cleanup(func() {
		r.cli.Close()
		r.rc.Close()
	})
	return r
}

// receive returns the next message the requester sent, within wait.
func (r *rawPeer) receive(wait time.Duration) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		n, err := r.rc.Wait(ctx, r.cs)
		if err != nil {
			return nil
		}
		for _, c := range r.cs[:n] {
			if c.Op != rdma.OpRecv || c.Status != rdma.StatusSuccess {
				continue
			}
			slot := int(c.ID)
			out := append([]byte(nil), r.recv.Bytes()[slot*rawSize:slot*rawSize+c.Len]...)
			r.rc.PostRecv(c.ID, []rdma.SGE{{MR: r.recv, Offset: slot * rawSize, Length: rawSize}})
			return out
		}
	}
}

// FuzzRequester answers a call, made with a write chunk and a reply chunk
// offered, with an arbitrary message whose first word is the call's XID:
// the requester must not crash; it must end the call (with its reply or an
// error) or the connection, or drop the message and count it; and when
// the call ended and the connection lives, a well-formed reply to the
// next call must complete it.
func FuzzRequester(f *testing.F) {
	v1 := func(proc uint32, words ...uint32) []byte { return hdr(0, append([]uint32{1, 8, proc}, words...)...) }
	f.Add(v1(0, 0, 0, 0))                                 // RDMA_MSG, no chunks, no payload
	f.Add(v1(1, 0, 1, 1, 5, 64, 0, 0, 0, 0, 0))           // RDMA_NOMSG, a write chunk of 64 bytes
	f.Add(v1(4, 1, 1, 1))                                 // RDMA_ERROR ERR_VERS 1..1
	f.Add(v1(4, 2))                                       // RDMA_ERROR ERR_CHUNK
	f.Add(v1(0, 1, 1, 0, 77, 8, 0, 0, 0, 0, 0))           // a read chunk in a reply
	f.Add(append(v1(0, 0, 0, 0), 0, 0, 0, 0, 0, 0, 0, 1)) // a payload with another XID
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Add(append(v1(0, 0, 0, 0), 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 2)) // a backward call (RFC 8167)
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) > rawSize || len(msg) < 4 {
			return
		}
		// The backward direction is on, so backward calls are parsed
		// and queued too.
		r := newRawResponder(t, &Config{BackwardCredits: 2})
		result := make([]byte, 64)
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := r.cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procRead,
				ResultBufs: [][]byte{result}, MaxReply: 8 << 10})
			done <- err
		}()
		call := r.receive(5 * time.Second)
		if len(call) < 4 {
			t.Fatalf("no call arrived")
		}
		xid := binary.BigEndian.Uint32(call)
		m := append([]byte(nil), msg...)
		binary.BigEndian.PutUint32(m, xid)
		if _, err := r.tryExchange(m, time.Millisecond); err != nil {
			return // our raw side could not post: nothing to check
		}
		select {
		case <-done:
		case <-r.conn.Done():
			return
		case <-time.After(time.Second):
			// Only a message that is not a reply may leave the call
			// waiting: it is dropped and counted, or it is a backward
			// call, queued for the Backchannel.
			if st := r.conn.Stats(); st.Dropped == 0 && st.BackwardCalls == 0 {
				t.Fatalf("call neither completed nor failed after reply %x", m)
			}
			return
		}
		if r.conn.Err() != nil {
			return
		}
		// The connection lives: a proper call and reply still work.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done <- r.cli.Null(ctx, testProg, testVers)
		}()
		call = r.receive(5 * time.Second)
		if len(call) < 4 {
			if r.conn.Err() != nil {
				return
			}
			t.Fatalf("no NULL call arrived after reply %x", m)
		}
		xid = binary.BigEndian.Uint32(call)
		if _, err := r.tryExchange(nullReply(xid, 8), time.Millisecond); err != nil {
			return
		}
		select {
		case err := <-done:
			if err != nil && r.conn.Err() == nil {
				t.Fatalf("NULL after reply %x: %v", m, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("NULL after reply %x did not complete", m)
		}
	})
}

// TestReadReplyBeyondMax: a read-chunk reply larger than a requester takes
// fails that call, without a transfer, and the connection carries on.
func TestReadReplyBeyondMax(t *testing.T) {
	r := newRawResponder(t, &Config{ReadChunkReplies: true})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- r.cli.Null(ctx, testProg, testVers)
	}()
	call := r.receive(5 * time.Second)
	if len(call) < 4 {
		t.Fatal("no call arrived")
	}
	xid := binary.BigEndian.Uint32(call)
	// RDMA_NOMSG, a position-zero read chunk of maxChunk+4 bytes.
	if _, err := r.tryExchange(hdr(xid, 1, 8, 1, 1, 0, 0x100, maxChunk+4, 0, 0, 0, 0, 0), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "more than") {
			t.Fatalf("call ended with %v, want the reply refused as too large", err)
		}
		var ce *ConnError
		if errors.As(err, &ce) {
			t.Fatalf("call ended with connection error %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call did not end")
	}
	if err := r.conn.Err(); err != nil {
		t.Fatalf("connection ended: %v", err)
	}
}

// TestAbandonedCallEndsConnection: a cancelled call keeps its credit until
// its reply comes; a reply that never comes ends the connection after
// AbandonTimeout, while one that comes in time is dropped and the
// connection carries on. Both run on a testing/synctest bubble's clock.
func TestAbandonedCallEndsConnection(t *testing.T) {
	cancelled := func(t *testing.T, r *rawResponder) uint32 {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.cli.Null(ctx, testProg, testVers) }()
		call := r.receive(5 * time.Second)
		if len(call) < 4 {
			t.Fatal("no call arrived")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v", err)
		}
		return binary.BigEndian.Uint32(call)
	}
	t.Run("no-reply", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRawResponder(t, &Config{AbandonTimeout: 50 * time.Millisecond})
			cancelled(t, r)
			select {
			case <-r.conn.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("connection still up long after AbandonTimeout")
			}
			var ce *ConnError
			if err := r.conn.Err(); !errors.As(err, &ce) || !strings.Contains(err.Error(), "no reply to cancelled call") {
				t.Fatalf("connection ended with %v", err)
			}
		})
	})
	t.Run("late-reply", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRawResponder(t, &Config{AbandonTimeout: time.Second})
			xid := cancelled(t, r)
			if _, err := r.tryExchange(nullReply(xid, 8), time.Millisecond); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			if err := r.conn.Err(); err != nil {
				t.Fatalf("connection ended after the late reply came: %v", err)
			}
		})
	})
}

// TestResponderOverrun: a requester that ignores its credits and keeps
// sending calls its handlers do not answer gets no more than the
// responder's receives' worth of them passed on; the rest are dropped, so
// what waits for a handler stays bounded.
func TestResponderOverrun(t *testing.T) {
	p, conns := peerToResponder(t, &Config{Grant: GrantPolicy{Max: 4}})
	resp := <-conns
	const calls = 20
	for i := range uint32(calls) {
		xid := 0x9000 + i
		h := wire.Header{XID: xid, Vers: wire.Version1, Credits: 8, Proc: wire.RDMA_MSG}
		ch := rpc.CallHeader{XID: xid, RPCVers: 2, Prog: testProg, Vers: testVers, Proc: procBlock}
		msg := ch.Append(h.Append(nil))
		copy(p.send.Bytes(), msg)
		if err := p.rc.PostSend(&rdma.WorkRequest{ID: 2000, Op: rdma.OpSend, Local: []rdma.SGE{{MR: p.send, Length: len(msg)}}}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		// Wait for the responder to have taken it (and reposted its
		// receive) before the next.
		deadline := time.Now().Add(5 * time.Second)
		for s := resp.Stats(); s.CallsReceived+s.Dropped < uint64(i+1); s = resp.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("call %d not taken: %+v", i, s)
			}
			time.Sleep(time.Millisecond)
		}
		p.rc.Poll(p.cs) // the Send's completion
	}
	s := resp.Stats()
	slots := int(GrantPolicy{Max: 4}.Grant()) + 2
	if s.CallsPending > slots || s.CallsReceived > uint64(slots) {
		t.Errorf("%d calls pending, %d passed on; want at most %d, the receives posted", s.CallsPending, s.CallsReceived, slots)
	}
	if s.Dropped != calls-s.CallsReceived {
		t.Errorf("%d of %d calls dropped, %d passed on", s.Dropped, calls, s.CallsReceived)
	}
	if s.Reasons[DropCreditOverrun] != s.Dropped {
		t.Errorf("%d calls dropped, %d of them counted as %v", s.Dropped, s.Reasons[DropCreditOverrun], DropCreditOverrun)
	}
	if resp.Err() != nil {
		t.Fatalf("connection ended: %v", resp.Err())
	}
}

// TestCloseWaitsForSideGoroutines: the goroutines that send RDMA_ERROR for
// rejected calls belong to the connection, and Close returns only once
// they have.
func TestCloseWaitsForSideGoroutines(t *testing.T) {
	p, conns := peerToResponder(t, nil)
	resp := <-conns
	bad := hdr(0x77, 1, 1, 0, 2, 0, 0) // a bad discriminator: ERR_CHUNK
	const n = 4
	for i := range n {
		copy(p.send.Bytes(), bad)
		if err := p.rc.PostSend(&rdma.WorkRequest{ID: uint64(3000 + i), Op: rdma.OpSend, Local: []rdma.SGE{{MR: p.send, Length: len(bad)}}}); err != nil {
			t.Fatal(err)
		}
		p.waitSent(t, uint64(3000+i)) // before the next copy reuses p.send
	}
	// A rejection is counted on the loop before its goroutine starts,
	// and the loop ends before Close stops taking new ones.
	for deadline := time.Now().Add(5 * time.Second); resp.Stats().Reasons[RejectUndecodable] < n; {
		if time.Now().After(deadline) {
			t.Fatalf("rejections not counted: %+v", resp.Stats().Reasons)
		}
		time.Sleep(time.Millisecond)
	}
	resp.Close()
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "(*Conn).goSide") {
		t.Errorf("a side goroutine outlived Close:\n%s", stacks)
	}
}
