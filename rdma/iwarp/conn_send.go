package iwarp

// The transmit path: one writer goroutine per connection.
//
// The writer takes one message at a time, under c.mu, in this order: the
// RDMA Read Responses owed (first, as siw's transmit path favours them),
// then the send queue in posting order. It segments the message, outside
// the lock, into FPDUs of at most MULPDU bytes (RFC 5041 section 5.2):
// Sends untagged on QN 0 with one MSN per message and MO per segment, RDMA
// Writes and Read Responses tagged with the sink STag and TO, Read Requests
// untagged on QN 1 with their 28-byte header; L on the last segment.
// Several FPDUs, of one or several messages, are written with one vectored
// write (net.Buffers): a header and trailer slot per FPDU from a fixed
// scratch area and the payload straight from registered memory, so the
// steady state allocates nothing; a batch of at most flatMax bytes is
// copied into one buffer and written with a plain write instead. A Send or
// Write completes when the write holding its last FPDU has returned.

import (
	"net"
	"runtime"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

const (
	maxBatchFPDUs = 64        // FPDUs per vectored write
	maxBatchBytes = 512 << 10 // bytes per vectored write, roughly
	hdrSlot       = mpa.LengthFieldLen + ddp.UntaggedHeaderLen + ddp.ReadRequestLen
	trailerSlot   = 8 // pad (at most 3) and CRC (4)

	// flatMax is the largest batch copied into one buffer and written
	// with write(2) rather than writev(2). For a small Send the copy
	// costs less than the vectored write's per-piece work (a small
	// latency gain on a 64-byte Send ping-pong and an RPC NULL, measured
	// with BenchmarkPingPong in alternating runs).
	flatMax = 4 << 10

	// rtrSTag is the STag of the zero-length RDMA Write an initiator
	// sends first: index 0, never valid, as Linux siw's RTR messages use.
	// A zero-length Write is not checked (RFC 5040 section 4.3).
	rtrSTag = 1
)

type msgKind uint8

const (
	msgWR       msgKind = iota // a send-queue work request
	msgResponse                // an RDMA Read Response
	msgRTR                     // the initiator's first, zero-length RDMA Write
)

// txMsg is the message being segmented.
type txMsg struct {
	kind     msgKind
	seq      uint64     // send-queue sequence (msgWR)
	hdr      ddp.Header // first segment's header; TO, MO and L vary
	rr       ddp.ReadRequest
	src      cursor
	total    int
	off      int  // payload bytes segmented so far
	segs     int  // segments so far
	complete bool // complete the work request once written (Send, Write)
}

// txState is the writer's own state; nothing else touches it.
type txState struct {
	msn     [2]uint32 // last MSN sent on QN 0 (Send) and QN 1 (Read Request)
	rtrSent bool
	// kick, when not zero, makes the first write hold back its last byte
	// for this long (see flush).
	kick time.Duration
	busy bool // cur is not fully segmented
	cur  txMsg
	// The batch's buffers, from a batch's first FPDU until it is
	// written; nil between batches.
	*txBufs
	nfpdu    int
	nbytes   int
	lastMsgs int // work requests the last batch completed
}

// txBufs are what a batch is built in: maxBatchFPDUs header and trailer
// slots, the list of its pieces, a flatMax-byte buffer to copy a small
// batch into and the work requests it completes. Nothing in them outlives
// the batch, so a connection takes them from its provider's pool when it
// segments a batch's first FPDU and gives them back once the batch is
// written: an idle connection holds none, and a provider's connections
// hold as many as are writing at once.
type txBufs struct {
	bufs     net.Buffers // the batch being built
	out      net.Buffers // the batch being written; WriteTo consumes it
	hdrs     []byte      // maxBatchFPDUs header slots
	trailers []byte      // maxBatchFPDUs trailer slots
	pieces   [][]byte    // one FPDU's pieces, for its CRC
	flat     []byte      // flatMax bytes: a small batch, copied whole
	written  []uint64    // send-queue sequences completed by the batch
}

// takeTxBufs returns a batch's buffers from p's pool, or new ones.
func (p *Provider) takeTxBufs() *txBufs {
	if b, ok := p.txBufs.Get().(*txBufs); ok {
		return b
	}
	return &txBufs{
		hdrs:     make([]byte, maxBatchFPDUs*hdrSlot),
		trailers: make([]byte, maxBatchFPDUs*trailerSlot),
		bufs:     make(net.Buffers, 0, 4*maxBatchFPDUs),
		pieces:   make([][]byte, 0, MaxSGE+2),
		written:  make([]uint64, 0, maxBatchFPDUs),
		flat:     make([]byte, flatMax),
	}
}

// giveTxBufs gives b back to p's pool once flush has written its batch
// and emptied its list of pieces.
func (p *Provider) giveTxBufs(b *txBufs) {
	b.out, b.written = nil, b.written[:0]
	p.txBufs.Put(b)
}

// writer is the goroutine that transmits for c. notBefore is when the
// first FPDU may go (FirstSendDelay after the Reply, for an initiator).
func (c *Conn) writer(notBefore time.Time) {
	defer close(c.writerDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		// The transmit role (txMu) is held for each batch: a direct
		// owner takes it between them (direct.go).
		c.txMu.Lock()
		alive, delay := c.fill(notBefore)
		if !alive {
			c.txMu.Unlock()
			break
		}
		if c.tx.nfpdu > 0 {
			c.flush()
			c.txMu.Unlock()
			continue
		}
		busy := c.tx.lastMsgs > 1
		c.txMu.Unlock()
		if delay > 0 {
			timer.Reset(delay)
			select {
			case <-c.kick:
			case <-c.done:
			case <-timer.C:
			}
			timer.Stop()
			continue
		}
		// Whatever gives the writer work signals kick, the end of the
		// connection included (endLocked), so one channel is enough: a
		// wait on one costs less than a select on three.
		<-c.kick
		if busy {
			// The last batch carried several messages: the connection
			// is busy, and the goroutines that woke us are likely
			// posting more. Let them run first, so that one write
			// carries them all. With 64 NULL calls in flight this
			// took the writes per call from 1.4 to 0.5; one call at a
			// time never yields.
			runtime.Gosched()
		}
	}
	c.mu.Lock()
	term := c.term
	c.mu.Unlock()
	if term != nil {
		// endLocked set a deadline; the Terminate goes at an FPDU boundary
		// since batches are written whole (a direct owner's too: txMu).
		// A FIN then tells the peer we are done, as siw closes after its
		// Terminate.
		c.txMu.Lock()
		c.nc.Write(term)
		c.txMu.Unlock()
		if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}
}

// fill adds FPDUs to the batch until it is full or nothing more can be
// sent. It returns false once the connection has ended, and how long to
// wait before the first FPDU may go when that is what holds it back.
func (c *Conn) fill(notBefore time.Time) (alive bool, delay time.Duration) {
	for c.tx.nfpdu < maxBatchFPDUs && c.tx.nbytes < maxBatchBytes {
		if !c.tx.busy {
			c.mu.Lock()
			ok, d := c.pickLocked(notBefore)
			dead := c.state == stateDead
			c.mu.Unlock()
			if dead {
				return false, 0
			}
			if !ok {
				return true, d
			}
		}
		c.segment()
	}
	return true, 0
}

// pickLocked makes the next message current, if there is one that may be
// sent now. The caller holds c.mu.
func (c *Conn) pickLocked(notBefore time.Time) (bool, time.Duration) {
	switch {
	case c.state == stateDead, c.fenced:
		return false, 0
	case !c.tx.rtrSent:
		if d := time.Until(notBefore); d > 0 {
			return false, d
		}
		c.tx.rtrSent = true
		c.tx.cur = txMsg{kind: msgRTR, hdr: ddp.Tagged(ddp.OpRDMAWrite, true, rtrSTag, 0)}
	case c.irq.Len() > 0:
		if !c.startResponseLocked() {
			return false, 0
		}
	case c.sqNext < c.q.SQ.Tail:
		if !c.startWRLocked() {
			return false, 0
		}
	default:
		return false, 0
	}
	c.tx.busy = true
	return true, 0
}

// startResponseLocked makes the Read Response to the oldest inbound Read
// Request current, after checking its source (RFC 5040 section 7.2: at
// response time, as siw does). A zero-length Read is not checked. It
// returns false if the check ended the connection. The caller holds c.mu.
func (c *Conn) startResponseLocked() bool {
	q := c.irq.Front()
	c.irq.Pop()
	var src []byte
	if q.rr.Size > 0 {
		b, te, ok := c.checkRemote("remote read", rdma.STag(q.rr.SourceSTag), q.rr.SourceTO, int(q.rr.Size), rdma.AccessRemoteRead, &memreg.ReadCodes)
		if !ok {
			v := violate(te, &q.hdr, q.ulen)
			v.rr, v.hasRR = q.rr, true
			c.violateLocked(v)
			return false
		}
		src = b
	}
	c.serving = true
	c.tx.cur = txMsg{
		kind:  msgResponse,
		hdr:   ddp.Tagged(ddp.OpRDMAReadResponse, true, q.rr.SinkSTag, q.rr.SinkTO),
		src:   cursor{one: src},
		total: len(src),
	}
	return true
}

var sendOpcodes = [...]ddp.Opcode{
	rdma.OpSend:             ddp.OpSend,
	rdma.OpSendInvalidate:   ddp.OpSendInvalidate,
	rdma.OpSendSE:           ddp.OpSendSE,
	rdma.OpSendSEInvalidate: ddp.OpSendSEInvalidate,
}

// startWRLocked makes the next send-queue work request current. Its MRs
// were checked at post; they may have been invalidated or released since,
// which is a local protection error, fatal as on an RNIC. It returns false
// if that ended the connection. The caller holds c.mu.
func (c *Conn) startWRLocked() bool {
	seq := c.sqNext
	c.sqNext++
	w := c.q.SQ.At(seq)
	var need rdma.Access
	if w.Op == rdma.OpRead {
		need = rdma.AccessLocalWrite
	}
	if !sglOK(w.SGL, need) {
		_, err := c.checkSGL(w.SGL, need)
		c.q.Finish(seq, rdma.StatusLocalProtection, 0)
		c.violateLocked(violatef(ddp.MakeCause(ddp.LayerRDMAP, 0, 0xff), nil, 0, "%v %d: local %v", w.Op, w.ID, err))
		return false
	}
	m := txMsg{kind: msgWR, seq: seq, src: cursor{sgl: w.SGL}, total: w.Length, complete: true}
	switch {
	case w.Op.IsSend():
		c.tx.msn[0]++
		w.MSN = c.tx.msn[0]
		m.hdr = ddp.Untagged(sendOpcodes[w.Op], true, ddp.QNSend, w.MSN, 0)
		if w.Op.Invalidates() {
			m.hdr.InvalidateSTag = uint32(w.Invalidate)
		}
	case w.Op == rdma.OpWrite:
		m.hdr = ddp.Tagged(ddp.OpRDMAWrite, true, uint32(w.RemoteSTag), w.RemoteTO)
	default:
		// The response is placed by walking the SGL; the sink STag and TO
		// are those of the first SGE, for the peer to echo and for
		// tracers (tshark matches them) to follow.
		c.tx.msn[1]++
		w.MSN = c.tx.msn[1]
		var sink rdma.STag
		var sinkTO uint64
		if len(w.SGL) > 0 {
			sm := w.SGL[0].MR.(*mr)
			sink, sinkTO = sm.STag(), sm.Base+uint64(w.SGL[0].Offset)
		}
		m.hdr = ddp.Untagged(ddp.OpRDMAReadRequest, true, ddp.QNReadRequest, c.tx.msn[1], 0)
		m.rr = ddp.ReadRequest{
			SinkSTag:   uint32(sink),
			SinkTO:     sinkTO,
			Size:       uint32(w.Length),
			SourceSTag: uint32(w.RemoteSTag),
			SourceTO:   w.RemoteTO,
		}
		m.src, m.total, m.complete = cursor{}, 0, false
		*c.orq.Push() = outRead{seq: seq, sinkSTag: uint32(sink), sinkTO: sinkTO, size: w.Length}
	}
	c.tx.cur = m
	return true
}

// segment adds the current message's next FPDUs to the batch, until the
// message is done or the batch is full.
func (c *Conn) segment() {
	tx := &c.tx
	if tx.txBufs == nil {
		tx.txBufs = c.p.takeTxBufs()
	}
	m := &tx.cur
	tagged := m.hdr.Control.Tagged()
	hlen := m.hdr.Len()
	if m.hdr.HasReadRequest() {
		hlen += ddp.ReadRequestLen
	}
	room := c.mulpdu - hlen
	for tx.nfpdu < maxBatchFPDUs && tx.nbytes < maxBatchBytes {
		n := min(room, m.total-m.off)
		last := m.off+n == m.total
		seg := ddp.Segment{Header: m.hdr, ReadRequest: m.rr}
		seg.Control = ddp.MakeControl(tagged, last)
		if tagged {
			seg.TO = m.hdr.TO + uint64(m.off)
		} else {
			seg.MO = uint32(m.off)
		}
		i := tx.nfpdu
		hb := tx.hdrs[i*hdrSlot : i*hdrSlot : (i+1)*hdrSlot]
		hb = mpa.AppendHeader(hb, hlen+n)
		hb = seg.AppendHeaders(hb)
		tx.bufs = append(tx.bufs, hb)
		tx.pieces = append(tx.pieces[:0], hb)
		for k := n; k > 0; {
			p := m.src.next(k)
			if p == nil {
				panic("iwarp: scatter/gather list shorter than its checked length")
			}
			tx.bufs = append(tx.bufs, p)
			tx.pieces = append(tx.pieces, p)
			k -= len(p)
		}
		tb := tx.trailers[i*trailerSlot : i*trailerSlot : (i+1)*trailerSlot]
		tb = mpa.AppendTrailer(tb, c.crc, tx.pieces...)
		tx.bufs = append(tx.bufs, tb)
		tx.nfpdu++
		tx.nbytes += mpa.FPDULen(hlen + n)
		m.off += n
		m.segs++
		if last {
			if m.complete {
				tx.written = append(tx.written, m.seq)
			}
			tx.busy = false
			return
		}
	}
}

// flush writes the batch and completes the work requests it finished. A
// write error ends the connection (ErrConnectionLost) unless it has
// already ended, which is what cut the write short.
func (c *Conn) flush() {
	tx := &c.tx
	tx.out = tx.bufs
	var err error
	if n := len(tx.out); tx.kick > 0 && n > 1 && len(tx.out[n-1]) > 0 {
		// Linux 6.1 siw as responder reads nothing that arrives before
		// its QP is wired to the socket until another segment arrives
		// (siw_cm.c writes the Reply before siw_accept hooks the
		// socket; docs/linux-interop.md section 1, "Race in siw's
		// accept"; SiwFirstSendDelay). FirstSendDelay usually
		// covers that window; the last FPDU's trailer (pad and CRC),
		// sent a FirstSendDelay later as a segment of its own, gives a
		// slow host (a VM under load) a second chance. The trailer goes
		// whole: siw 6.1 copies every piece of a trailer split across
		// segments to the trailer's start (siw_get_trailer), so any
		// other split of it fails its CRC check.
		d := tx.kick
		tx.kick = 0
		hold := tx.out[n-1]
		tx.out = tx.out[:n-1]
		if _, err = tx.out.WriteTo(c.nc); err == nil {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.done:
			}
			t.Stop()
			_, err = c.nc.Write(hold)
		}
	} else if tx.nbytes <= flatMax {
		b := tx.flat[:0]
		for _, p := range tx.out {
			b = append(b, p...)
		}
		_, err = c.nc.Write(b)
	} else {
		_, err = tx.out.WriteTo(c.nc)
	}
	clear(tx.bufs) // drop the references to registered memory
	tx.bufs = tx.bufs[:0]
	tx.nfpdu, tx.nbytes = 0, 0
	c.mu.Lock()
	switch {
	case err != nil:
		c.endLocked(rdma.ErrConnectionLost, nil)
	case c.state != stateDead:
		for _, seq := range tx.written {
			c.q.Finish(seq, rdma.StatusSuccess, c.q.SQ.At(seq).Length)
		}
		if len(tx.written) > 0 {
			c.kickSoonLocked()
		}
	}
	if c.state == stateDead {
		tx.busy = false // abandon the rest of the message
	}
	if !tx.busy || tx.cur.kind != msgResponse {
		c.serving = false
	}
	c.mu.Unlock()
	tx.lastMsgs = len(tx.written)
	c.p.giveTxBufs(tx.txBufs)
	tx.txBufs = nil
}
