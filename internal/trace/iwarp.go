package trace

// Decoding one TCP connection as iWARP.
//
// Each direction (a side) receives its reassembled bytes in order and goes
// through these states:
//
//	handshake: the stream must begin with an MPA Request or Reply (RFC 5044
//	    section 7.1). The first data of the whole connection decides whether
//	    it is iWARP at all: it is if that data starts with either key, or if
//	    the connection is on a port the caller forced. A connection that is
//	    not iWARP is dropped; its reassembly stops. A side of an iWARP
//	    connection whose stream does not start with its frame (capture
//	    started late, or a forced port without handshake) goes on without
//	    it.
//	wait: the frame is done; FPDUs follow, but how to parse them (CRC,
//	    markers) depends on both frames, so bytes wait until the other
//	    side's frame is known too. If it never comes, the capture's end (or
//	    maxWaitBytes) settles the negotiation from what is known.
//	fpdu: FPDUs are parsed one by one (with markers removed when the
//	    receiver asked for them, CRC checked when negotiated); each is an
//	    Event. The DDP segment inside is decoded, untagged Send messages are
//	    reassembled per (QN, MSN) and each complete one is decoded as
//	    RPC-over-RDMA and ONC RPC.
//	rejected: the Reply rejected the connection; any byte after the frames
//	    is an error.
//	dead: framing was lost (an MPA error other than a bad CRC, a gap in a
//	    stream with markers, bytes after a rejected connection). Bytes are
//	    dropped until a gap, after which a stream without markers resumes
//	    in fpdu at the first byte after the gap: that is the only place a
//	    new FPDU can be assumed to start (tshark does the same).
//
// A gap in fpdu discards the partial FPDU and the partial untagged messages
// of that side, and resumes after the gap.

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

const (
	// maxWaitBytes bounds what a side buffers while the MPA negotiation is
	// unknown.
	maxWaitBytes = 1 << 20
	// maxMessage bounds a reassembled untagged message. RFC 8797 private
	// data cannot announce inline sizes above 256 KiB; leave room.
	maxMessage = 1 << 20
	// maxOpenMessages bounds the untagged messages a side reassembles at
	// once.
	maxOpenMessages = 64
)

type sideState uint8

const (
	stHandshake sideState = iota
	stWait
	stFPDU
	stRejected
	stDead
)

type connClass uint8

const (
	classUnknown connClass = iota
	classIWARP
	classOther
)

// negotiation is what both MPA frames decided for the FPDUs.
type negotiation struct {
	crc bool
	// markers[d]: the bytes side d sends carry markers, because the other
	// side set M (RFC 5044 section 7.1).
	markers [2]bool
	reject  bool
	p2p     bool
}

type conn struct {
	d      *Decoder
	stream int
	addr   [2]netip.AddrPort // by Dir
	half   [2]halfStream
	side   [2]side
	class  connClass
	forced bool
	// frames[d] is side d's MPA frame; missing[d] says side d's stream did
	// not start with one.
	frames  [2]*mpa.Frame
	missing [2]bool
	neg     *negotiation
	done    bool // finish has run
	// rpcrdma says the connection carries RPC-over-RDMA: its private data
	// said so, it uses port 20049, or a Send decoded as such. Then every
	// Send is decoded and failures are errors; before, Sends that do not
	// decode as RPC-over-RDMA are taken for another protocol's.
	rpcrdma bool
}

// run maps stream bytes [start, end) to the frame that delivered them.
type run struct {
	start, end uint64
	frame      int
	time       time.Time
}

type msgKey struct{ qn, msn uint32 }

type openMessage struct {
	data       []byte
	frags      int
	firstFrame int
	offset     uint64
}

type side struct {
	c      *conn
	dir    Dir
	st     sideState
	buf    []byte // bytes received and not yet decoded
	bufOff uint64 // stream offset of buf[0]
	runs   []run  // covering buf

	crc        bool
	useMarkers bool
	markers    mpa.Markers
	fpdus      int
	open       map[msgKey]*openMessage
}

func newConn(d *Decoder, stream int, initiator, responder netip.AddrPort, forced bool) *conn {
	c := &conn{d: d, stream: stream, addr: [2]netip.AddrPort{initiator, responder}, forced: forced}
	c.rpcrdma = initiator.Port() == 20049 || responder.Port() == 20049
	for i := range c.side {
		c.side[i] = side{c: c, dir: Dir(i)}
		c.half[i] = halfStream{sink: &c.side[i], stats: &d.reasm}
	}
	return c
}

// dirOf returns the direction of a segment sent from src.
func (c *conn) dirOf(src netip.AddrPort) Dir {
	if src == c.addr[FromInitiator] {
		return FromInitiator
	}
	return FromResponder
}

// notIWARP drops the connection.
func (c *conn) notIWARP() {
	c.class = classOther
	for i := range c.side {
		c.half[i].stop()
		c.side[i].st, c.side[i].buf, c.side[i].runs = stDead, nil, nil
	}
}

// finish is called when the capture ends.
func (c *conn) finish() {
	if c.done {
		return
	}
	c.done = true
	for i := range c.half {
		c.half[i].flush()
	}
	if c.class != classIWARP && !c.forced {
		return
	}
	if c.neg == nil && (c.side[0].st == stWait || c.side[1].st == stWait) {
		c.settle("the capture ends before both MPA frames")
	}
	for i := range c.side {
		c.side[i].finish()
	}
}

// tryNegotiate computes the negotiation once both sides' frames are known
// (or known to be missing), or a rejecting Reply is seen.
func (c *conn) tryNegotiate() {
	if c.neg != nil {
		return
	}
	for d := range c.frames {
		if f := c.frames[d]; f != nil && f.Kind == mpa.Reply && f.Flags&mpa.FlagReject != 0 {
			c.neg = &negotiation{reject: true}
			c.resume()
			return
		}
	}
	for d := range c.frames {
		if c.frames[d] == nil && !c.missing[d] {
			return
		}
	}
	c.settle("")
}

// settle computes the negotiation from the frames known. why, if not
// empty, says why a frame is unknown; the assumption made is reported.
func (c *conn) settle(why string) {
	n := &negotiation{}
	nframes := 0
	for d, f := range c.frames {
		if f == nil {
			continue
		}
		nframes++
		n.crc = n.crc || f.Flags&mpa.FlagCRC != 0
		n.markers[1-d] = f.Flags&mpa.FlagMarker != 0
		n.reject = n.reject || (f.Kind == mpa.Reply && f.Flags&mpa.FlagReject != 0)
	}
	if nframes < 2 {
		n.crc = n.crc || c.d.opts.CRC
	}
	if nframes == 2 {
		a, b := c.frames[0], c.frames[1]
		n.p2p = a.Enhanced() && b.Enhanced() && a.IRDORD.PeerToPeer && b.IRDORD.PeerToPeer
	}
	c.neg = n
	if why != "" {
		for d := range c.side {
			if s := &c.side[d]; s.st == stWait && len(s.buf) > 0 {
				ev := s.event(KindError, 0)
				ev.Err = fmt.Errorf("%s: decoding the FPDUs that follow with CRC %v and markers %v", why, n.crc, n.markers[d])
				c.d.emit(ev)
			}
		}
	}
	c.resume()
}

// resume lets waiting sides go on after the negotiation is known.
func (c *conn) resume() {
	for d := range c.side {
		if c.side[d].st == stWait {
			c.side[d].process()
		}
	}
}

// event returns an event of this side covering n bytes from the start of
// buf.
func (s *side) event(k Kind, n int) *Event {
	end := s.bufOff + uint64(n)
	last := end
	if n > 0 {
		last--
	}
	fr, t := s.frameAt(last)
	return &Event{Kind: k, Frame: fr, Time: t, Stream: s.c.stream, Dir: s.dir,
		Src: s.c.addr[s.dir], Dst: s.c.addr[1-s.dir], Offset: s.bufOff, Len: uint64(n)}
}

// frameAt returns the frame that delivered the byte at stream offset off,
// or the last known frame.
func (s *side) frameAt(off uint64) (int, time.Time) {
	i, found := slices.BinarySearchFunc(s.runs, off, func(r run, off uint64) int {
		switch {
		case r.end <= off:
			return -1
		case r.start > off:
			return 1
		}
		return 0
	})
	if !found {
		if len(s.runs) == 0 {
			return 0, time.Time{}
		}
		i = min(i, len(s.runs)-1)
	}
	return s.runs[i].frame, s.runs[i].time
}

// consume drops n decoded bytes from buf.
func (s *side) consume(n int) {
	s.buf = s.buf[n:]
	s.bufOff += uint64(n)
	i := 0
	for i < len(s.runs) && s.runs[i].end <= s.bufOff {
		i++
	}
	s.runs = s.runs[i:]
	if len(s.buf) == 0 {
		s.buf = s.buf[:0:0] // do not pin a large array
		if len(s.runs) == 0 {
			s.runs = nil
		}
	}
}

// data implements streamSink.
func (s *side) data(off uint64, b []byte, frame int, t time.Time) {
	if s.st == stDead || s.c.class == classOther {
		return
	}
	if len(s.buf) == 0 {
		s.bufOff = off
	}
	s.buf = append(s.buf, b...)
	if n := len(s.runs); n > 0 && s.runs[n-1].frame == frame && s.runs[n-1].end == off {
		s.runs[n-1].end += uint64(len(b))
	} else {
		s.runs = append(s.runs, run{start: off, end: off + uint64(len(b)), frame: frame, time: t})
	}
	s.process()
}

// gap implements streamSink.
func (s *side) gap(off, n uint64, frame int, t time.Time) {
	if s.c.class == classOther {
		return
	}
	ev := &Event{Kind: KindGap, Frame: frame, Time: t, Stream: s.c.stream, Dir: s.dir,
		Src: s.c.addr[s.dir], Dst: s.c.addr[1-s.dir], Offset: off, Len: n}
	lost := len(s.buf)
	partial := len(s.open)
	s.buf, s.runs, s.open = nil, nil, nil
	s.bufOff = off + n
	switch s.st {
	case stHandshake:
		if lost > 0 {
			ev.Err = fmt.Errorf("the MPA frame at the start of the stream is cut by the gap")
			s.c.missing[s.dir] = true
			s.st = stWait
		}
	case stWait:
		if lost > 0 {
			ev.Err = fmt.Errorf("%d bytes waiting for the MPA negotiation are dropped", lost)
		}
	case stFPDU, stDead:
		switch {
		case s.useMarkers:
			ev.Err = errors.New("cannot find FPDU boundaries after a gap in a stream with markers: direction not decoded further")
			s.st = stDead
		case s.c.neg != nil && !s.c.neg.reject:
			s.st = stFPDU
		}
		if lost > 0 && s.st == stFPDU {
			ev.addErr(fmt.Errorf("the gap cuts an FPDU: its first %d bytes are dropped", lost))
		}
		if partial > 0 {
			ev.addErr(fmt.Errorf("%d partial untagged messages dropped", partial))
		}
	}
	s.c.d.emit(ev)
	if s.st == stWait {
		s.c.tryNegotiate()
	}
}

// process decodes what buf holds.
func (s *side) process() {
	for {
		switch s.st {
		case stHandshake:
			if !s.handshake() {
				return
			}
		case stWait:
			if s.c.neg == nil {
				if len(s.buf) <= maxWaitBytes {
					return
				}
				s.c.settle("no MPA negotiation after " + fmt.Sprint(maxWaitBytes) + " bytes")
				if s.st != stWait {
					return // settle's resume processed this side
				}
			}
			s.startFPDU()
		case stFPDU:
			s.parseFPDUs()
			return
		case stRejected:
			if len(s.buf) > 0 {
				s.fatal(fmt.Errorf("%d bytes after the MPA Reply rejected the connection", len(s.buf)))
			}
			return
		case stDead:
			s.buf, s.runs = nil, nil
			return
		}
	}
}

// keyMatch reports whether b starts with an MPA key: the kind, or need=true
// if b is a strict prefix of a key and more bytes are needed to tell.
func keyMatch(b []byte) (k mpa.Kind, ok, need bool) {
	for _, key := range [...]struct {
		k   mpa.Kind
		key string
	}{{mpa.Request, mpa.RequestKey}, {mpa.Reply, mpa.ReplyKey}} {
		n := min(len(b), mpa.KeyLen)
		if string(b[:n]) == key.key[:n] {
			if n < mpa.KeyLen {
				return 0, false, true
			}
			return key.k, true, false
		}
	}
	return 0, false, false
}

// handshake handles the start of the stream. It reports whether the state
// changed (so that process should go on).
func (s *side) handshake() bool {
	c := s.c
	kind, isKey, need := keyMatch(s.buf)
	if need {
		return false
	}
	if !isKey {
		switch {
		case c.class == classUnknown && !c.forced:
			c.notIWARP()
			return false
		case c.class == classUnknown: // forced, and no handshake at all
			c.class = classIWARP
			c.missing = [2]bool{true, true}
			c.settle("")
		default:
			c.missing[s.dir] = true
			if !c.forced || c.frames[1-s.dir] != nil {
				ev := s.event(KindError, 0)
				ev.Err = fmt.Errorf("the stream does not start with an MPA frame (% x...)", s.buf[:min(len(s.buf), 8)])
				c.d.emit(ev)
			}
		}
		s.st = stWait
		c.tryNegotiate()
		return true
	}
	c.class = classIWARP
	if len(s.buf) < mpa.FrameHeaderLen {
		return false
	}
	n, err := mpa.FrameLen(s.buf[:mpa.FrameHeaderLen], mpa.MaxPrivateDataLen)
	if err == nil && len(s.buf) < n {
		return false
	}
	f, n, err := mpa.ParseFrame(s.buf, mpa.MaxPrivateDataLen)
	if err != nil {
		s.fatal(fmt.Errorf("MPA %v at stream offset %d: %w", kind, s.bufOff, err))
		c.missing[s.dir] = true
		c.tryNegotiate()
		return false
	}
	ev := s.event(KindMPAFrame, n)
	f.PrivateData = bytes.Clone(f.PrivateData)
	ev.MPA = &f
	var pd wire.PrivateData
	if pd.Decode(f.PrivateData) {
		ev.PrivateData = &pd
		c.rpcrdma = true
	}
	c.d.emit(ev)
	s.consume(n)
	c.frames[s.dir] = &f
	s.st = stWait
	c.tryNegotiate()
	return true
}

// fatal reports undecodable bytes and stops decoding this side until a gap.
func (s *side) fatal(err error) {
	ev := s.event(KindError, len(s.buf))
	ev.Err = err
	s.c.d.emit(ev)
	s.st, s.buf, s.runs = stDead, nil, nil
}

// startFPDU enters the fpdu state once the negotiation is known.
func (s *side) startFPDU() {
	n := s.c.neg
	if n.reject {
		s.st = stRejected
		return
	}
	s.crc, s.useMarkers = n.crc, n.markers[s.dir]
	s.st = stFPDU
}

// parseFPDUs decodes every complete FPDU in buf.
func (s *side) parseFPDUs() {
	for len(s.buf) > 0 {
		var f mpa.FPDU
		var n int
		var err error
		if s.useMarkers {
			f, n, err = s.markers.ParseFPDU(s.buf, s.crc)
		} else {
			f, n, err = mpa.ParseFPDU(s.buf, s.crc)
		}
		if errors.Is(err, mpa.ErrShort) {
			return
		}
		if err != nil && !errors.Is(err, mpa.ErrCRC) {
			s.fatal(fmt.Errorf("FPDU at stream offset %d: %w", s.bufOff, err))
			return
		}
		ev := s.event(KindFPDU, n)
		ev.FPDU = &FPDUInfo{ULPDULen: len(f.ULPDU), CRC: f.CRC, CRCChecked: s.crc, CRCOK: s.crc && err == nil,
			Markers: (n - mpa.FPDULen(len(f.ULPDU))) / mpa.MarkerLen}
		if err != nil {
			ev.addErr(err)
		}
		s.segment(ev, f.ULPDU)
		s.c.d.emit(ev)
		s.consume(n)
	}
}

// segment decodes the DDP segment an FPDU carries into ev.
func (s *side) segment(ev *Event, ulpdu []byte) {
	first := s.fpdus == 0
	s.fpdus++
	seg, err := ddp.ParseSegment(ulpdu)
	if err != nil {
		ev.addErr(err)
		if h, herr := ddp.ParseHeader(ulpdu); herr == nil {
			ev.DDP = &ddp.Segment{Header: h, Payload: bytes.Clone(ulpdu[h.Len():])}
		}
		return
	}
	cp := seg
	cp.Payload = bytes.Clone(seg.Payload)
	ev.DDP = &cp
	if err := seg.Check(); err != nil {
		ev.addErr(err)
	}
	if first && s.c.neg.p2p {
		if rtr, err := mpa.ParseRTR(ulpdu); err == nil {
			ev.RTR = rtr
			return
		}
	}
	switch seg.Opcode() {
	case ddp.OpSend, ddp.OpSendInvalidate, ddp.OpSendSE, ddp.OpSendSEInvalidate:
		if seg.Control.Tagged() {
			return // Check has reported it; no untagged message to build
		}
		if msg := s.reassemble(ev, &seg); msg != nil {
			s.ulp(ev, msg)
		}
	}
}

// reassemble adds an untagged Send segment to its message (RFC 5041
// section 5.3: segments of a message share QN and MSN, MO counts payload
// bytes, L marks the last) and returns the message when it is complete.
// The result may alias seg.Payload.
func (s *side) reassemble(ev *Event, seg *ddp.Segment) []byte {
	k := msgKey{seg.QN, seg.MSN}
	m := s.open[k]
	if m == nil {
		if seg.MO != 0 {
			ev.addErr(fmt.Errorf("untagged message qn=%d msn=%d: first segment captured has MO %d", seg.QN, seg.MSN, seg.MO))
			return nil
		}
		if seg.Control.Last() {
			ev.Message = &Message{Len: len(seg.Payload), Fragments: 1, FirstFrame: ev.Frame}
			return seg.Payload
		}
		if len(s.open) >= maxOpenMessages {
			ev.addErr(fmt.Errorf("untagged message qn=%d msn=%d: more than %d messages open", seg.QN, seg.MSN, maxOpenMessages))
			return nil
		}
		if s.open == nil {
			s.open = map[msgKey]*openMessage{}
		}
		m = &openMessage{firstFrame: ev.Frame, offset: ev.Offset}
		s.open[k] = m
	} else if seg.MO != uint32(len(m.data)) {
		ev.addErr(fmt.Errorf("untagged message qn=%d msn=%d: segment at MO %d, want %d; message dropped", seg.QN, seg.MSN, seg.MO, len(m.data)))
		delete(s.open, k)
		return nil
	}
	if len(m.data)+len(seg.Payload) > maxMessage {
		ev.addErr(fmt.Errorf("untagged message qn=%d msn=%d: longer than %d bytes; dropped", seg.QN, seg.MSN, maxMessage))
		delete(s.open, k)
		return nil
	}
	m.data = append(m.data, seg.Payload...)
	m.frags++
	if !seg.Control.Last() {
		return nil
	}
	delete(s.open, k)
	ev.Message = &Message{Len: len(m.data), Fragments: m.frags, FirstFrame: m.firstFrame}
	return m.data
}

// finish reports what the capture's end leaves undecoded.
func (s *side) finish() {
	if s.st == stWait && s.c.neg != nil {
		s.process()
	}
	if len(s.buf) > 0 && s.st != stDead {
		ev := s.event(KindIncomplete, len(s.buf))
		what := "an FPDU"
		if s.st == stHandshake {
			what = "the MPA frame"
		}
		ev.Err = fmt.Errorf("the capture ends inside %s", what)
		s.c.d.emit(ev)
	}
	for _, k := range sortedKeys(s.open) {
		m := s.open[k]
		ev := &Event{Kind: KindIncomplete, Frame: m.firstFrame, Stream: s.c.stream, Dir: s.dir,
			Src: s.c.addr[s.dir], Dst: s.c.addr[1-s.dir], Offset: m.offset, Len: uint64(len(m.data))}
		ev.Err = fmt.Errorf("untagged message qn=%d msn=%d: the capture ends after %d segments (%d bytes) without its last", k.qn, k.msn, m.frags, len(m.data))
		s.c.d.emit(ev)
	}
	s.buf, s.runs, s.open = nil, nil, nil
}

func sortedKeys(m map[msgKey]*openMessage) []msgKey {
	keys := make([]msgKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b msgKey) int {
		return cmp.Or(cmp.Compare(a.qn, b.qn), cmp.Compare(a.msn, b.msn))
	})
	return keys
}
