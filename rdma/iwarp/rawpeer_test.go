package iwarp

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// rawTimeout bounds every wait on a raw peer.
const rawTimeout = 5 * time.Second

// rawPeer speaks bytes built with the codecs to one of our connections.
type rawPeer struct {
	t   testing.TB
	nc  net.Conn
	br  *rxBuf
	crc bool
	msn [3]uint32 // last MSN sent per QN
}

func newRawPeer(t testing.TB, nc net.Conn) *rawPeer {
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(rawTimeout))
	return &rawPeer{t: t, nc: nc, br: newRxBuf(nc, 4096)}
}

// rawDial connects a raw initiator to addr.
func rawDial(t testing.TB, addr net.Addr) *rawPeer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr.String(), rawTimeout)
	if err != nil {
		t.Fatalf("raw dial: %v", err)
	}
	return newRawPeer(t, nc)
}

func (r *rawPeer) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("raw write: %v", err)
	}
}

func (r *rawPeer) writeFrame(f mpa.Frame) {
	r.t.Helper()
	b, err := f.Append(nil)
	if err != nil {
		r.t.Fatalf("encode %v: %v", f, err)
	}
	r.write(b)
}

func (r *rawPeer) readFrame() mpa.Frame {
	r.t.Helper()
	f, err := readFrame(r.br, mpa.MaxPrivateDataLen)
	if err != nil {
		r.t.Fatalf("raw read frame: %v", err)
	}
	return f
}

// request returns an enhanced Rev 2 Request with IRD/ORD 16 and pd.
func request(crc bool, pd []byte) mpa.Frame {
	f := mpa.Frame{Kind: mpa.Request, Rev: 2, Flags: mpa.FlagEnhanced, IRDORD: mpa.IRDORD{IRD: 16, ORD: 16}, PrivateData: pd}
	if crc {
		f.Flags |= mpa.FlagCRC
	}
	return f
}

// initiate sends req and reads the Reply, which must accept.
func (r *rawPeer) initiate(req mpa.Frame) mpa.Frame {
	r.t.Helper()
	r.writeFrame(req)
	rep := r.readFrame()
	if rep.Kind != mpa.Reply || rep.Flags&mpa.FlagReject != 0 {
		r.t.Fatalf("reply %v, want an acceptance", rep)
	}
	r.crc = (req.Flags|rep.Flags)&mpa.FlagCRC != 0
	return rep
}

// sendULPDU sends ulpdu as one FPDU.
func (r *rawPeer) sendULPDU(ulpdu []byte) {
	r.t.Helper()
	r.write(mpa.AppendFPDU(nil, r.crc, ulpdu))
}

// sendSeg sends seg as one FPDU.
func (r *rawPeer) sendSeg(seg ddp.Segment) { r.sendULPDU(seg.Append(nil)) }

// nextMSN returns the next MSN on qn.
func (r *rawPeer) nextMSN(qn uint32) uint32 {
	r.msn[qn]++
	return r.msn[qn]
}

// send sends a one-segment Send with payload.
func (r *rawPeer) send(payload []byte) ddp.Header {
	h := ddp.Untagged(ddp.OpSend, true, ddp.QNSend, r.nextMSN(0), 0)
	r.sendSeg(ddp.Segment{Header: h, Payload: payload})
	return h
}

// write sends a one-segment RDMA Write.
func (r *rawPeer) rdmaWrite(stag rdma.STag, to uint64, payload []byte) ddp.Header {
	h := ddp.Tagged(ddp.OpRDMAWrite, true, uint32(stag), to)
	r.sendSeg(ddp.Segment{Header: h, Payload: payload})
	return h
}

// readRequest sends an RDMA Read Request.
func (r *rawPeer) readRequest(rr ddp.ReadRequest) ddp.Header {
	h := ddp.Untagged(ddp.OpRDMAReadRequest, true, ddp.QNReadRequest, r.nextMSN(1), 0)
	r.sendSeg(ddp.Segment{Header: h, ReadRequest: rr})
	return h
}

// readSeg reads the next FPDU, checking its CRC, and parses its segment.
// It returns an error at the end of the stream.
func (r *rawPeer) readSeg() (ddp.Segment, error) {
	r.t.Helper()
	b, err := r.br.Peek(mpa.LengthFieldLen)
	if err != nil {
		return ddp.Segment{}, err
	}
	n, _ := mpa.PeekFPDULen(b)
	buf := make([]byte, n)
	if _, err := io.ReadFull(r.br, buf); err != nil {
		return ddp.Segment{}, err
	}
	f, _, err := mpa.ParseFPDU(buf, r.crc)
	if err != nil {
		r.t.Fatalf("FPDU from our side: %v", err)
	}
	seg, err := ddp.ParseSegment(f.ULPDU)
	if err != nil {
		r.t.Fatalf("segment from our side: %v", err)
	}
	if err := seg.Check(); err != nil {
		r.t.Fatalf("segment from our side fails its checks: %v (%v)", err, seg)
	}
	return seg, nil
}

// awaitReadRequest reads FPDUs until a Read Request and returns it.
func (r *rawPeer) awaitReadRequest() ddp.ReadRequest {
	r.t.Helper()
	for {
		seg, err := r.readSeg()
		if err != nil {
			r.t.Fatalf("no Read Request: %v", err)
		}
		if seg.HasReadRequest() {
			return seg.ReadRequest
		}
	}
}

// expectTerminate reads FPDUs until a Terminate, which must carry cause
// and, if hdr is not nil, a copy of hdr with segment length ulen; then the
// stream must end.
func (r *rawPeer) expectTerminate(cause ddp.Cause, hdr *ddp.Header, ulen int) ddp.Terminate {
	r.t.Helper()
	for {
		seg, err := r.readSeg()
		if err != nil {
			r.t.Fatalf("stream ended without a Terminate: %v", err)
		}
		if !seg.HasTerminate() {
			continue // our initiator's zero-length Write, Read Responses...
		}
		if seg.QN != ddp.QNTerminate || seg.MSN != 1 || seg.MO != 0 || !seg.Control.Last() {
			r.t.Errorf("terminate header %v", seg.Header)
		}
		term := seg.Terminate
		if term.Layout != ddp.LayoutRFC || term.Cause != cause {
			r.t.Errorf("terminate %v, want cause %v in RFC layout", term, cause)
		}
		switch {
		case hdr == nil && term.HdrCt&(ddp.HdrCtD|ddp.HdrCtM) != 0:
			r.t.Errorf("terminate %v copies a header, want none", term)
		case hdr != nil && (term.HdrCt&(ddp.HdrCtD|ddp.HdrCtM) != ddp.HdrCtD|ddp.HdrCtM || term.DDPHeader != *hdr || int(term.SegmentLen) != ulen):
			r.t.Errorf("terminate %v, want M|D seglen=%d hdr=[%v]", term, ulen, *hdr)
		}
		// A peer closes once it has the Terminate, as siw does; then
		// ours must close too.
		r.nc.(*net.TCPConn).CloseWrite()
		r.expectEOF()
		return term
	}
}

// expectEOF reads until the end of the stream, which must come in time.
func (r *rawPeer) expectEOF() {
	r.t.Helper()
	if _, err := io.Copy(io.Discard, r.br); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		r.t.Fatalf("waiting for the connection to close: %v", err)
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

// expectClosedSilently checks that our side closes without sending a byte.
func (r *rawPeer) expectClosedSilently() {
	r.t.Helper()
	b, err := io.ReadAll(r.br)
	if err != nil && !isReset(err) {
		r.t.Fatalf("waiting for the connection to close: %v", err)
	}
	if len(b) != 0 {
		r.t.Fatalf("got % x, want the connection closed without a reply", b)
	}
}

// expectReject reads a Reply that must reject, then the end of stream.
func (r *rawPeer) expectReject() mpa.Frame {
	r.t.Helper()
	rep := r.readFrame()
	if rep.Kind != mpa.Reply || rep.Flags&mpa.FlagReject == 0 || rep.Flags&mpa.FlagMarker != 0 {
		r.t.Fatalf("reply %v, want a Reject", rep)
	}
	r.expectEOF()
	return rep
}

// server accepts every request on a fresh listener of p with cfg and hands
// out the connections.
type server struct {
	ln    rdma.Listener
	conns chan rdma.Conn
}

func serve(t *testing.T, p *Provider, cfg rdma.ConnConfig) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := p.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &server{ln: ln, conns: make(chan rdma.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			req, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			c, err := req.Accept(ctx, cfg)
			if err != nil {
				continue
			}
			s.conns <- c
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		<-done
		close(s.conns)
		for c := range s.conns {
			c.Close()
		}
	})
	return s
}

// next returns the next accepted connection.
func (s *server) next(t *testing.T) *Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		t.Cleanup(func() { c.Close() })
		return c.(*Conn)
	case <-time.After(rawTimeout):
		t.Fatalf("no connection accepted")
	}
	return nil
}

// waitEnd waits for c to end and returns its error.
func waitEnd(t *testing.T, c rdma.Conn) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(rawTimeout):
		t.Fatalf("connection did not end")
	}
	return nil
}

// wantTerm checks that err is the TerminateError for cause.
func wantTerm(t *testing.T, err error, cause ddp.Cause, remote bool) {
	t.Helper()
	var te rdma.TerminateError
	if !errors.As(err, &te) || causeOf(te) != cause || te.Remote != remote {
		t.Fatalf("connection error %v, want a terminate %v (remote %v)", err, cause, remote)
	}
}

// roundTrip checks that a fresh connection from p to the listener of s
// carries a Send.
func roundTrip(t *testing.T, p *Provider, s *server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rawTimeout)
	defer cancel()
	a, err := p.Dial(ctx, s.ln.Addr().String(), rdma.ConnConfig{})
	if err != nil {
		t.Fatalf("dial after the hostile peer: %v", err)
	}
	defer a.Close()
	sendOne(t, a, s.next(t))
}

// sendOne sends an empty message from a to b and waits for both
// completions.
func sendOne(t *testing.T, a, b rdma.Conn) {
	t.Helper()
	cfg := rdmatest.Config{Timeout: rawTimeout}
	m := rdmatest.Alloc(t, b, 8, rdma.AccessLocalWrite)
	rdmatest.PostRecv(t, b, 1, rdmatest.Whole(m))
	rdmatest.Post(t, a, rdma.WorkRequest{ID: 2, Op: rdma.OpSend})
	rdmatest.Want(t, rdmatest.WaitN(t, cfg, a, 1)[0], 2, rdma.OpSend, rdma.StatusSuccess, 0)
	rdmatest.Want(t, rdmatest.WaitN(t, cfg, b, 1)[0], 1, rdma.OpRecv, rdma.StatusSuccess, 0)
}

// u16 returns v big-endian.
func u16(v int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
