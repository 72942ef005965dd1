package iwarp

// The receive path: one reader goroutine per connection.
//
// The reader parses the TCP byte stream FPDU by FPDU (RFC 5044 section 4)
// through a small buffered reader. For Sends, RDMA Writes and Read
// Responses it reads only the FPDU header first, checks it, and then reads
// the payload straight from the socket into its destination (the posted
// receive at MO, the registered region at TO, the Read's sink), copying
// only what the buffer already holds; the CRC32c, when negotiated, is
// computed over what was read and checked at the end of the FPDU, before
// anything is delivered. Read Requests and Terminates, which are short,
// are read whole and CRC-checked before they are looked at.
//
// Checks come in the order siw applies them (RFC 5041 section 7.2, RFC 5040
// section 7.2, docs/linux-interop.md section 2): DDP version, RDMAP version,
// opcode, QN; then per queue the MSN in sequence, a posted receive, the MO,
// room in the receive; for tagged segments STag index, key, validity, PD,
// rights and bounds. The first violation ends the connection with a Terminate
// (terminate.go); after it, nothing more is placed or delivered.

import (
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/wq"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/internal/crc32c"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

// errEnded reports that the connection ended while the reader was at work
// (a Terminate was sent or received, or Close was called).
var errEnded = errors.New("iwarp: connection ended")

// rxState is the reader's own state; nothing else touches it.
type rxState struct {
	msn      [2]uint32 // next MSN expected on QN 0 (Send) and QN 1 (Read Request)
	crc      uint32    // CRC of the FPDU being read, so far
	unfenced bool      // an FPDU has been received
	yield    bool      // a Read Request woke the writer: let it run first
	// dl is the read deadline a direct owner's wait at an FPDU boundary
	// left armed (armWaitDeadlineLocked), zero if none; waiting is set
	// while that wait reads.
	dl      time.Time
	waiting bool

	// The untagged message (Send) being received.
	send struct {
		active bool
		op     ddp.Opcode
		msn    uint32
		got    int // payload bytes placed: the MO the next segment must carry
		dst    cursor
	}
	// The tagged message (RDMA Write or Read Response) being received.
	tagged struct {
		active bool
		op     ddp.Opcode
		stag   uint32
		next   uint64 // the TO the next segment must carry
	}
	// The Read Response being received, for the oldest outstanding Read.
	resp struct {
		got int
		dst cursor
	}
}

func (rx *rxState) init() { rx.msn = [2]uint32{1, 1} }

// reader is the goroutine that receives for c; it is the last of c's
// goroutines to finish and closes the socket.
func (c *Conn) reader() {
	c.rxMu.Lock()
	var err error
	for err == nil {
		if c.wantDirect.Load() && c.rxEmpty() {
			// A direct owner reads (direct.go).
			err = c.parkReader()
			continue
		}
		err = c.readFPDU()
		if c.rx.yield {
			// A Read Request woke the writer for the response. With
			// nothing buffered, the next read finds the socket empty;
			// the writer goes first, on this core: woken on an idle
			// one, it can wait tens of microseconds, and a read-chunk
			// call took longer on two cores (docs/performance.md).
			c.rx.yield = false
			if c.br.Buffered() == 0 {
				runtime.Gosched()
			}
		}
	}
	c.mu.Lock()
	c.endByStreamLocked(err)
	if c.srqHeld {
		c.completeRecvLocked(rdma.Completion{Status: rdma.StatusFlushed})
	}
	c.mu.Unlock()
	if err == errEnded {
		// Discard what still arrives until the peer closes or the deadline
		// endLocked set passes, so that closing does not reset a
		// connection whose peer has yet to read our Terminate.
		io.Copy(io.Discard, c.br)
	}
	<-c.writerDone
	c.closeSocket()
	close(c.readerDone)
}

// endByStreamLocked ends c after the stream failed with err, read by the
// reader goroutine or a direct owner: the peer's orderly close is a
// disconnection, anything else a lost connection. The caller holds c.mu.
func (c *Conn) endByStreamLocked(err error) {
	switch {
	case c.state == stateDead:
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		c.endLocked(rdma.ErrDisconnected, nil)
	default:
		c.endLocked(rdma.ErrConnectionLost, nil)
	}
}

// isSend reports whether op is one of the four Send variants.
func isSend(op ddp.Opcode) bool { return op >= ddp.OpSend && op <= ddp.OpSendSEInvalidate }

// readFPDU reads and handles one FPDU. It returns errEnded once the
// connection has ended and an I/O error when the stream fails.
func (c *Conn) readFPDU() error {
	b, err := c.br.Peek(4) // an FPDU is at least 8 bytes
	if err != nil {
		return streamErr(b, err)
	}
	ulen := int(binary.BigEndian.Uint16(b))
	ctl, op := ddp.Control(b[2]), ddp.RDMAPControl(b[3]).Opcode()
	hlen := ddp.UntaggedHeaderLen
	if ctl.Tagged() {
		hlen = ddp.TaggedHeaderLen
	}
	if ulen >= hlen && (ctl.Tagged() || isSend(op)) {
		err = c.readStreamed(ulen, hlen)
	} else {
		err = c.readWhole(ulen, hlen)
	}
	if err == nil {
		c.rxDone.Add(uint64(mpa.FPDULen(ulen)))
	}
	if err == nil && !c.rx.unfenced {
		// The initiator's first FPDU lifts the responder's fence
		// (RFC 5044 section 7.1.2).
		c.rx.unfenced = true
		c.mu.Lock()
		c.fenced = false
		c.wakeWriterLocked()
		c.mu.Unlock()
	}
	return err
}

// streamErr maps a read error: the stream ending inside an FPDU is an
// unexpected EOF.
func streamErr(partial []byte, err error) error {
	if err == io.EOF && len(partial) > 0 {
		return io.ErrUnexpectedEOF
	}
	return err
}

// fail ends c with the Terminate for v and returns errEnded.
func (c *Conn) fail(v *violation) error {
	c.mu.Lock()
	c.violateLocked(v)
	c.mu.Unlock()
	return errEnded
}

// parseCause returns the Terminate cause a codec error carries.
func parseCause(err error) ddp.Cause {
	var pe *ddp.ParseError
	if errors.As(err, &pe) {
		return pe.Cause
	}
	return ddp.CauseRDMAPOperationUnspecified
}

// readWhole handles an FPDU that is read whole before it is looked at:
// Read Requests, Terminates, and whatever is malformed.
func (c *Conn) readWhole(ulen, hlen int) error {
	n := mpa.FPDULen(ulen)
	if n > c.br.Size() {
		// Nothing that takes this path is legitimately this long: a Read
		// Request is 46 bytes, a Terminate at most 70.
		b, err := c.br.Peek(mpa.LengthFieldLen + hlen)
		if err != nil {
			return streamErr(b, err)
		}
		h, _ := ddp.ParseHeader(b[mpa.LengthFieldLen:])
		return c.fail(violatef(ddp.CauseRDMAPOperationUnspecified, &h, ulen,
			"%v with ULPDU_Length %d", h.Opcode(), ulen))
	}
	b, err := c.br.Peek(n)
	if err != nil {
		return streamErr(b, err)
	}
	f, _, err := mpa.ParseFPDU(b, c.crc)
	if err != nil {
		return c.fail(violatef(ddp.CauseMPACRC, nil, 0, "%v", err))
	}
	seg, err := ddp.ParseSegment(f.ULPDU)
	if err == nil {
		err = seg.Check()
	}
	if err != nil {
		v := violatef(parseCause(err), nil, ulen, "%v", err)
		if h, herr := ddp.ParseHeader(f.ULPDU); herr == nil {
			v.hdr, v.hasHdr = h, true
		}
		return c.fail(v)
	}
	switch {
	case seg.HasReadRequest():
		err = c.recvReadRequest(&seg, ulen)
	case seg.HasTerminate():
		err = c.recvTerminate(seg.Terminate)
	default:
		// Check admits nothing else on this path.
		err = c.fail(violatef(ddp.CauseRDMAPUnexpectedOpcode, &seg.Header, ulen, "%v", seg.Header))
	}
	if err != nil {
		return err
	}
	_, err = c.br.Discard(n)
	return err
}

// recvReadRequest queues an inbound RDMA Read Request for the writer. Its
// source is checked when the response is built, as siw does.
func (c *Conn) recvReadRequest(seg *ddp.Segment, ulen int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateDead {
		return errEnded
	}
	h := &seg.Header
	if h.MSN != c.rx.msn[1] {
		c.violateLocked(violatef(ddp.CauseDDPUntaggedInvalidMSN, h, ulen, "RDMA Read Request MSN %d, want %d", h.MSN, c.rx.msn[1]))
		return errEnded
	}
	held := c.irq.Len()
	if c.serving {
		held++
	}
	if held >= c.limits.IRD {
		c.violateLocked(violatef(ddp.CauseRDMAPCatastrophicStream, h, ulen,
			"RDMA Read Request MSN %d beyond IRD %d", h.MSN, c.limits.IRD))
		return errEnded
	}
	c.rx.msn[1]++
	*c.irq.Push() = inRead{hdr: *h, rr: seg.ReadRequest, ulen: ulen}
	c.wakeWriterLocked()
	c.rx.yield = true
	return nil
}

// recvTerminate ends c with the peer's Terminate. The work request it
// concerns, where it is still outstanding here, completes with the
// Terminate's status; the rest are flushed.
//
// It takes the Terminate by value: a pointer into the reader's segment
// would make every segment escape to the heap (the log keeps it).
func (c *Conn) recvTerminate(term ddp.Terminate) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateDead {
		return errEnded
	}
	t := &term
	te := termErr(t.Cause, true, t.String())
	if seq, ok := c.terminatedWRLocked(t); ok {
		c.q.Finish(seq, te.Status(), 0)
	}
	c.p.stats.termRecv.Add(1)
	c.log.Debug("iwarp: terminate received", "conn", c.String(), "terminate", t)
	c.endLocked(te, nil)
	return errEnded
}

// terminatedWRLocked finds the transmitted, unfinished work request whose
// message a Terminate names: a Send or Read by the QN and MSN of the
// copied DDP header, an RDMA Write by the STag and TO range of the copied
// tagged header, a Read by the sink of a copied Read Request header. A
// Write or Send whose write has returned is normally complete already.
// The caller holds c.mu.
func (c *Conn) terminatedWRLocked(t *ddp.Terminate) (uint64, bool) {
	h := &t.DDPHeader
	hasHdr := t.HdrCt&ddp.HdrCtD != 0
	hasRR := t.HdrCt&ddp.HdrCtR != 0 && !t.ReadRequestOmitted
	for seq := c.q.SQ.Head; seq < c.sqNext; seq++ {
		w := c.q.SQ.At(seq)
		if w.Done {
			continue
		}
		switch {
		case w.Op == rdma.OpRead && hasHdr && h.HasReadRequest() && h.MSN == w.MSN,
			w.Op == rdma.OpRead && hasRR && rdma.STag(t.ReadRequest.SourceSTag) == w.RemoteSTag && t.ReadRequest.SourceTO == w.RemoteTO,
			w.Op.IsSend() && hasHdr && !h.Control.Tagged() && h.QN == ddp.QNSend && h.MSN == w.MSN,
			w.Op == rdma.OpWrite && hasHdr && h.Control.Tagged() && h.Opcode() == ddp.OpRDMAWrite &&
				rdma.STag(h.STag) == w.RemoteSTag && h.TO >= w.RemoteTO && h.TO-w.RemoteTO <= uint64(w.Length):
			return seq, true
		}
	}
	return 0, false
}

// checkHeader applies the single-segment checks to a streamed segment's
// header, in order.
func checkHeader(h *ddp.Header, plen int) error {
	if err := ddp.CheckDDPVersion(h.Control); err != nil {
		return err
	}
	if err := ddp.CheckRDMAPVersion(h.RDMAP); err != nil {
		return err
	}
	if err := ddp.CheckOpcode(h); err != nil {
		return err
	}
	if err := ddp.CheckQN(h); err != nil {
		return err
	}
	return ddp.CheckTOWrap(h, plen)
}

// readStreamed handles a Send, RDMA Write or Read Response segment: header
// first, payload straight into place, then the trailer.
func (c *Conn) readStreamed(ulen, hlen int) error {
	b, err := c.br.Peek(mpa.LengthFieldLen + hlen)
	if err != nil {
		return streamErr(b, err)
	}
	h, _ := ddp.ParseHeader(b[mpa.LengthFieldLen:])
	plen := ulen - hlen
	if err := checkHeader(&h, plen); err != nil {
		return c.fail(violatef(parseCause(err), &h, ulen, "%v", err))
	}
	if c.crc {
		c.rx.crc = crc32c.Update(0, b)
	}
	if _, err := c.br.Discard(len(b)); err != nil {
		return err
	}
	switch h.Opcode() {
	case ddp.OpRDMAWrite:
		return c.recvWrite(&h, ulen, plen)
	case ddp.OpRDMAReadResponse:
		return c.recvResponse(&h, ulen, plen)
	}
	return c.recvSend(&h, ulen, plen)
}

// readFull fills p from the stream: first what the buffer holds, then
// straight from the socket (countReader.readFull, which on Linux reads
// what follows p in the same system call). It updates the running CRC.
func (c *Conn) readFull(p []byte) error {
	n := 0
	if k := c.br.Buffered(); k > 0 {
		n, _ = c.br.Read(p[:min(k, len(p))])
	}
	if n < len(p) {
		if err := c.cr.readFull(p[n:]); err != nil {
			return streamErr(p, err)
		}
	}
	if c.crc {
		c.rx.crc = crc32c.Update(c.rx.crc, p)
	}
	return nil
}

// readInto reads n payload bytes into the pieces cur hands out.
func (c *Conn) readInto(cur *cursor, n int) error {
	for n > 0 {
		p := cur.next(n)
		if p == nil {
			panic("iwarp: placement beyond a checked destination")
		}
		if err := c.readFull(p); err != nil {
			return err
		}
		n -= len(p)
	}
	return nil
}

// readTrailer reads the pad and CRC that end an FPDU of ulen bytes and
// checks the CRC when it is on.
func (c *Conn) readTrailer(ulen int) error {
	pad := mpa.PadLen(ulen)
	b, err := c.br.Peek(pad + mpa.CRCLen)
	if err != nil {
		return streamErr(b, err)
	}
	if c.crc {
		want := crc32c.Update(c.rx.crc, b[:pad])
		if got := binary.LittleEndian.Uint32(b[pad:]); got != want {
			return c.fail(violatef(ddp.CauseMPACRC, nil, 0, "FPDU of %d bytes: CRC %#08x, want %#08x", ulen, got, want))
		}
	}
	_, err = c.br.Discard(len(b))
	return err
}

// lockPlacement takes the locks a placement path holds, c.placeMu then
// c.mu, and reports true; or, if the connection has ended, none, and false.
func (c *Conn) lockPlacement() bool {
	c.placeMu.Lock()
	c.mu.Lock()
	if c.state == stateDead {
		c.mu.Unlock()
		c.placeMu.Unlock()
		return false
	}
	return true
}

// placeLocked reads an FPDU's plen payload bytes into dst, then its
// trailer (ulen is its ULPDU_Length), recording r as the region being
// placed into while the payload is read (see waitPlacement). The caller
// holds c.placeMu and c.mu, has checked the FPDU and dst, and both locks
// are released here: c.mu before the read, c.placeMu after the payload.
func (c *Conn) placeLocked(r *memreg.Region, dst *cursor, plen, ulen int) error {
	if plen > 0 {
		c.placing.Store(r)
	}
	c.mu.Unlock()
	err := c.readInto(dst, plen)
	c.placing.Store(nil)
	c.placeMu.Unlock()
	if err != nil {
		return err
	}
	return c.readTrailer(ulen)
}

// unlockFail releases both locks the placement paths hold, ends c with
// v's Terminate and returns errEnded. The caller holds c.placeMu and c.mu
// and has completed the work requests v concerns.
func (c *Conn) unlockFail(v *violation) error {
	c.violateLocked(v)
	c.mu.Unlock()
	c.placeMu.Unlock()
	return errEnded
}

// checkTaggedLocked checks that a tagged segment continues the tagged
// message in progress, if any: same opcode, same STag, TO where the last
// segment ended. The caller holds c.mu.
func (c *Conn) checkTaggedLocked(h *ddp.Header, ulen int) *violation {
	tg := &c.rx.tagged
	switch {
	case !tg.active:
		return nil
	case h.Opcode() != tg.op:
		return violatef(ddp.CauseRDMAPUnexpectedOpcode, h, ulen, "%v inside an unfinished %v", h.Opcode(), tg.op)
	case h.STag != tg.stag:
		return violatef(ddp.CauseDDPTaggedInvalidSTag, h, ulen, "STag %#08x inside a message to STag %#08x", h.STag, tg.stag)
	case h.TO != tg.next:
		return violatef(ddp.CauseDDPTaggedBaseBounds, h, ulen, "TO %#x, want %#x where the last segment ended", h.TO, tg.next)
	}
	return nil
}

// endTagged records that a tagged segment was placed.
func (c *Conn) endTagged(h *ddp.Header, plen int) {
	tg := &c.rx.tagged
	tg.active = !h.Control.Last()
	tg.op, tg.stag, tg.next = h.Opcode(), h.STag, h.TO+uint64(plen)
}

// recvWrite places an RDMA Write segment. A zero-length segment is not
// checked (RFC 5041 section 7.1, docs/linux-interop.md section 2).
func (c *Conn) recvWrite(h *ddp.Header, ulen, plen int) error {
	if !c.lockPlacement() {
		return errEnded
	}
	if v := c.checkTaggedLocked(h, ulen); v != nil {
		return c.unlockFail(v)
	}
	var dst cursor
	var region *memreg.Region
	if plen > 0 {
		b, te, ok := c.checkRemote("remote write", rdma.STag(h.STag), h.TO, plen, rdma.AccessRemoteWrite, &memreg.WriteCodes)
		if !ok {
			return c.unlockFail(violate(te, h, ulen))
		}
		dst.one, region = b, c.p.stags.Lookup(rdma.STag(h.STag).Index())
	}
	if err := c.placeLocked(region, &dst, plen, ulen); err != nil {
		return err
	}
	c.endTagged(h, plen)
	return nil
}

// recvResponse places an RDMA Read Response segment into the sink of the
// oldest outstanding Read, after siw's checks: a Read outstanding, the
// sink STag it named, the TO where the last segment ended, no more than
// the size it asked, exactly that size at L, and its sink still valid.
func (c *Conn) recvResponse(h *ddp.Header, ulen, plen int) error {
	if !c.lockPlacement() {
		return errEnded
	}
	if v := c.checkTaggedLocked(h, ulen); v != nil {
		return c.unlockFail(v)
	}
	if c.orq.Len() == 0 {
		return c.unlockFail(violatef(ddp.CauseDDPLocalCatastrophic, h, ulen, "RDMA Read Response with no RDMA Read outstanding"))
	}
	r := c.orq.Front()
	rs := &c.rx.resp
	switch got := rs.got; {
	case h.STag != r.sinkSTag:
		return c.unlockFail(violatef(ddp.CauseDDPTaggedInvalidSTag, h, ulen, "RDMA Read Response to STag %#08x, want %#08x", h.STag, r.sinkSTag))
	case h.TO != r.sinkTO+uint64(got):
		return c.unlockFail(violatef(ddp.CauseDDPTaggedBaseBounds, h, ulen, "RDMA Read Response TO %#x, want %#x", h.TO, r.sinkTO+uint64(got)))
	case plen > r.size-got, h.Control.Last() && got+plen != r.size:
		return c.unlockFail(violatef(ddp.CauseDDPTaggedBaseBounds, h, ulen, "RDMA Read Response of %d bytes after %d, read size %d", plen, got, r.size))
	}
	w := c.q.SQ.At(r.seq)
	if rs.got == 0 {
		rs.dst = cursor{sgl: w.SGL}
	}
	if plen > 0 && !sglOK(w.SGL, rdma.AccessLocalWrite) {
		_, err := c.checkSGL(w.SGL, rdma.AccessLocalWrite)
		c.q.Finish(r.seq, rdma.StatusLocalProtection, 0)
		return c.unlockFail(violatef(ddp.CauseDDPLocalCatastrophic, nil, 0, "RDMA Read Response into %v %d: %v", w.Op, w.ID, err))
	}
	seq, size := r.seq, r.size
	if err := c.placeLocked(sglRegion(w.SGL), &rs.dst, plen, ulen); err != nil {
		return err
	}
	c.endTagged(h, plen)
	rs.got += plen
	if !h.Control.Last() {
		return nil
	}
	rs.got = 0
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateDead {
		return errEnded
	}
	c.orq.Pop()
	c.q.Finish(seq, rdma.StatusSuccess, size)
	return nil
}

// recvSend places a Send segment into the oldest posted receive and
// delivers the message at its last segment (RFC 5041 section 7.1, RFC 5040
// section 5.3; the invalidation of a Send with Invalidate at the end of
// the message, as siw does: docs/linux-interop.md section 2).
func (c *Conn) recvSend(h *ddp.Header, ulen, plen int) error {
	if !c.lockPlacement() {
		return errEnded
	}
	s := &c.rx.send
	op := h.Opcode()
	if !s.active {
		switch {
		case h.MSN != c.rx.msn[0]:
			return c.unlockFail(violatef(ddp.CauseDDPUntaggedInvalidMSN, h, ulen, "%v MSN %d, want %d", op, h.MSN, c.rx.msn[0]))
		case h.MO != 0:
			return c.unlockFail(violatef(ddp.CauseDDPUntaggedInvalidMO, h, ulen, "%v MSN %d starts at MO %d", op, h.MSN, h.MO))
		case !c.takeRecvLocked():
			return c.unlockFail(violatef(ddp.CauseDDPUntaggedNoBuffer, h, ulen, "%v MSN %d with no receive posted", op, h.MSN))
		}
		s.active, s.op, s.msn, s.got = true, op, h.MSN, 0
		s.dst = cursor{sgl: c.recvFrontLocked().SGL}
	} else {
		switch {
		case h.MSN != s.msn:
			return c.unlockFail(violatef(ddp.CauseDDPUntaggedInvalidMSN, h, ulen, "%v MSN %d inside message MSN %d", op, h.MSN, s.msn))
		case op != s.op:
			return c.unlockFail(violatef(ddp.CauseRDMAPUnexpectedOpcode, h, ulen, "%v inside a %v", op, s.op))
		case int(h.MO) != s.got:
			return c.unlockFail(violatef(ddp.CauseDDPUntaggedInvalidMO, h, ulen, "%v MSN %d at MO %d, want %d", op, h.MSN, h.MO, s.got))
		}
	}
	r := c.recvFrontLocked()
	if plen > r.Length-s.got {
		id, length := r.ID, r.Length
		c.completeRecvLocked(rdma.Completion{Status: rdma.StatusLocalLength})
		return c.unlockFail(violatef(ddp.CauseDDPUntaggedTooLong, h, ulen,
			"%v MSN %d: %d bytes at MO %d into receive %d of %d bytes", op, h.MSN, plen, h.MO, id, length))
	}
	if plen > 0 && !sglOK(r.SGL, rdma.AccessLocalWrite) {
		_, err := c.checkRecvSGLLocked(r.SGL)
		c.completeRecvLocked(rdma.Completion{Status: rdma.StatusLocalProtection})
		return c.unlockFail(violatef(ddp.CauseDDPLocalCatastrophic, nil, 0, "%v into receive %d: %v", op, r.ID, err))
	}
	if err := c.placeLocked(sglRegion(r.SGL), &s.dst, plen, ulen); err != nil {
		return err
	}
	s.got += plen
	if !h.Control.Last() {
		return nil
	}
	s.active = false
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateDead {
		return errEnded
	}
	comp := rdma.Completion{Len: s.got, Solicited: op == ddp.OpSendSE || op == ddp.OpSendSEInvalidate}
	if op.Invalidates() {
		stag := rdma.STag(h.InvalidateSTag)
		if te, ok := c.invalidateRemote(stag); !ok {
			c.completeRecvLocked(rdma.Completion{Status: rdma.StatusRemoteInvalidRequest})
			c.violateLocked(violate(te, h, ulen))
			return errEnded
		}
		comp.Invalidated, comp.InvalidatedSTag = true, stag
	}
	c.completeRecvLocked(comp)
	c.rx.msn[0]++
	return nil
}

// takeRecvLocked finds the receive a new Send fills, and reports whether
// there is one: the oldest posted on c's receive queue, or one taken from
// its shared receive queue. The caller holds c.mu.
func (c *Conn) takeRecvLocked() bool {
	if c.srq == nil {
		return c.q.RQ.Len() > 0
	}
	c.srqHeld = c.srq.Take(&c.srqWR)
	return c.srqHeld
}

// recvFrontLocked returns the receive takeRecvLocked found. The caller
// holds c.mu.
func (c *Conn) recvFrontLocked() *wq.RecvWR {
	if c.srq != nil {
		return &c.srqWR
	}
	return c.q.RQ.Front()
}

// completeRecvLocked completes the receive takeRecvLocked found with
// comp. The caller holds c.mu.
func (c *Conn) completeRecvLocked(comp rdma.Completion) {
	if c.srq == nil {
		c.q.CompleteRecv(comp)
		return
	}
	c.srqHeld = false
	c.srq.Complete(c, c.srqWR.ID, comp)
}

// checkRecvSGLLocked checks the memory of the receive recvFrontLocked
// returns. The caller holds c.mu.
func (c *Conn) checkRecvSGLLocked(sgl []rdma.SGE) (int, error) {
	if c.srq != nil {
		return c.srq.CheckSGL(sgl)
	}
	return c.checkSGL(sgl, rdma.AccessLocalWrite)
}
