package trace

import (
	"errors"
	"io"
	"net/netip"
	"slices"
)

// Options configure a Decoder.
type Options struct {
	// Ports are TCP ports whose connections are decoded as iWARP even if
	// they do not start with an MPA Request (the capture started late,
	// or the handshake is missing).
	Ports []uint16
	// CRC says that FPDUs carry a CRC when no MPA frame says whether they
	// do (forced ports, missing frames). With a captured handshake the
	// frames decide.
	CRC bool
}

// Stats count what a Decoder saw.
type Stats struct {
	Frames      int // capture frames
	TCPSegments int // frames holding an IPv4 or IPv6 TCP segment
	Skipped     int // frames of other link types, protocols, or IP fragments
	Malformed   int // frames whose link, IP or TCP headers are cut short or inconsistent
	Streams     int // TCP connections
	IWARP       int // of which decoded as iWARP
	Events      int
	Errors      int // events with an error
	// From TCP reassembly:
	Retransmissions int // segments holding only bytes already seen
	Overlaps        int // segments holding some bytes already seen
	OutOfOrder      int // segments that arrived before bytes preceding them
	OutOfWindow     int // segments too far from the expected sequence number, dropped
	Gaps            int // holes in a stream: bytes the capture missed
	GapBytes        uint64
}

type connKey struct{ a, b netip.AddrPort }

func makeConnKey(x, y netip.AddrPort) connKey {
	if x.Compare(y) > 0 {
		x, y = y, x
	}
	return connKey{x, y}
}

// Decoder decodes the frames of a capture into Events. It keeps the state
// of every TCP connection it has seen until Close. It is not safe for
// concurrent use; emit is called synchronously from Packet and Close.
type Decoder struct {
	opts  Options
	emit0 func(*Event)
	conns map[connKey]*conn
	order []*conn // every connection, in order of creation
	stats Stats
	reasm reasmStats
}

// NewDecoder returns a Decoder that calls emit with each event, in the
// order the events complete.
func NewDecoder(opts Options, emit func(*Event)) *Decoder {
	return &Decoder{opts: opts, emit0: emit, conns: map[connKey]*conn{}}
}

func (d *Decoder) emit(ev *Event) {
	d.stats.Events++
	if ev.Err != nil {
		d.stats.Errors++
	}
	d.emit0(ev)
}

// Packet decodes one capture frame. p.Data is not retained.
func (d *Decoder) Packet(p *Packet) {
	d.stats.Frames++
	seg, why := parseFrame(p.LinkType, p.Data)
	switch why {
	case skipNone:
	case skipMalformed:
		d.stats.Malformed++
		return
	default:
		d.stats.Skipped++
		return
	}
	d.stats.TCPSegments++
	seg.frame, seg.time = p.Frame, p.Time
	k := makeConnKey(seg.src, seg.dst)
	c := d.conns[k]
	if c != nil && c.reopened(&seg) {
		c.finish()
		c = nil
	}
	if c == nil {
		initiator, responder := seg.src, seg.dst
		if seg.flags&(tcpSYN|tcpACK) == tcpSYN|tcpACK {
			initiator, responder = responder, initiator
		}
		forced := slices.Contains(d.opts.Ports, seg.src.Port()) || slices.Contains(d.opts.Ports, seg.dst.Port())
		c = newConn(d, len(d.order), initiator, responder, forced)
		d.conns[k] = c
		d.order = append(d.order, c)
	}
	dir := c.dirOf(seg.src)
	if seg.flags&tcpACK != 0 {
		c.half[1-dir].ack(seg.ack, seg.frame, seg.time)
	}
	c.half[dir].segment(&seg)
}

// reopened reports whether seg opens a new connection on c's 4-tuple: a
// SYN without ACK, from the initiator, with a new ISN, after data flowed.
func (c *conn) reopened(seg *tcpSegment) bool {
	if seg.flags&(tcpSYN|tcpACK) != tcpSYN {
		return false
	}
	h := &c.half[c.dirOf(seg.src)]
	return (h.delivered() || c.half[0].delivered() || c.half[1].delivered()) && !(h.synSeen && h.isn == seg.seq)
}

// Close ends the capture: every connection's remaining holes become gaps and
// whatever is left undecoded is reported. It returns the final Stats.
func (d *Decoder) Close() Stats {
	for _, c := range d.order {
		c.finish()
	}
	d.conns = map[connKey]*conn{}
	return d.Stats()
}

// Stats returns the counts so far.
func (d *Decoder) Stats() Stats {
	s := d.stats
	s.Streams = len(d.order)
	s.IWARP = 0
	for _, c := range d.order {
		if c.class == classIWARP {
			s.IWARP++
		}
	}
	s.Retransmissions = d.reasm.retransmissions
	s.Overlaps = d.reasm.overlaps
	s.OutOfOrder = d.reasm.outOfOrder
	s.OutOfWindow = d.reasm.outOfWindow
	s.Gaps = d.reasm.gaps
	s.GapBytes = d.reasm.gapBytes
	return s
}

// Decode reads every packet of r, decodes them and calls emit with each
// event. It returns the Stats, and the error that stopped reading if the
// capture is malformed (the events decoded before it have been emitted,
// and the connections closed).
func Decode(r *Reader, opts Options, emit func(*Event)) (Stats, error) {
	d := NewDecoder(opts, emit)
	var p Packet
	for {
		err := r.Next(&p)
		if errors.Is(err, io.EOF) {
			return d.Close(), nil
		}
		if err != nil {
			return d.Close(), err
		}
		d.Packet(&p)
	}
}
