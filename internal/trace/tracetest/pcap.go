// Package tracetest builds packet captures for tests: a pcap writer that
// wraps chosen bytes in Ethernet, IPv4 and TCP headers with consistent
// sequence numbers, helpers that frame DDP segments into FPDUs with the
// project's codecs, and Demo, an RPC-over-RDMA conversation over iWARP that
// exercises every layer the trace decoder knows.
//
// It is for tests only: encoders panic on misuse (a test bug), and nothing
// here validates what it is asked to write, so tests can write broken
// captures on purpose.
package tracetest

import (
	"cmp"
	"encoding/binary"
	"io"
	"net/netip"
	"slices"
	"time"
)

// TCP flags.
const (
	FIN = 0x01
	SYN = 0x02
	RST = 0x04
	PSH = 0x08
	ACK = 0x10
)

// Pcap writes a classic little-endian pcap file (microsecond timestamps,
// LINKTYPE_ETHERNET) of synthesized IPv4 TCP packets. Frame times start at
// 2024-01-01 00:00:00 UTC and advance by one millisecond per frame. The
// first write error sticks and later writes do nothing (see Err).
type Pcap struct {
	w      io.Writer
	frames int
	t      time.Time
	err    error
}

// NewPcap writes the file header to w and returns the writer.
func NewPcap(w io.Writer) *Pcap {
	p := &Pcap{w: w, t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 262144)
	binary.LittleEndian.PutUint32(h[20:], 1)
	_, p.err = w.Write(h[:])
	return p
}

// Frames returns the number of frames written.
func (p *Pcap) Frames() int { return p.frames }

// Err returns the first write error.
func (p *Pcap) Err() error { return p.err }

// Time returns the time the next frame will carry.
func (p *Pcap) Time() time.Time { return p.t }

// Packet writes one IPv4/TCP frame and returns its number (from 1). The
// addresses must be IPv4.
func (p *Pcap) Packet(src, dst netip.AddrPort, seq, ack uint32, flags uint8, payload []byte) int {
	frame := make([]byte, 0, 54+len(payload))
	frame = append(frame, 0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00) // dst MAC, src MAC, IPv4
	ip := len(frame)
	total := 20 + 20 + len(payload)
	frame = append(frame, 0x45, 0, byte(total>>8), byte(total), 0, 0, 0x40, 0, 64, 6, 0, 0)
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	frame = append(frame, s4[:]...)
	frame = append(frame, d4[:]...)
	binary.BigEndian.PutUint16(frame[ip+10:], checksum(frame[ip:ip+20], 0))
	tcp := len(frame)
	frame = binary.BigEndian.AppendUint16(frame, src.Port())
	frame = binary.BigEndian.AppendUint16(frame, dst.Port())
	frame = binary.BigEndian.AppendUint32(frame, seq)
	frame = binary.BigEndian.AppendUint32(frame, ack)
	frame = append(frame, 5<<4, flags, 0xff, 0xff, 0, 0, 0, 0) // window 65535, checksum, urgent
	frame = append(frame, payload...)
	// TCP checksum over the pseudo-header, so that tools that check it
	// are content.
	var pseudo uint32
	for i := 0; i < 4; i += 2 {
		pseudo += (uint32(s4[i])<<8 | uint32(s4[i+1])) + (uint32(d4[i])<<8 | uint32(d4[i+1]))
	}
	pseudo += 6 + uint32(len(frame)-tcp)
	binary.BigEndian.PutUint16(frame[tcp+16:], checksum(frame[tcp:], pseudo))
	p.Raw(frame, len(frame))
	return p.frames
}

// Raw writes a frame of any content, claiming an original length of orig
// (larger than len(data) for a frame cut by the snap length).
func (p *Pcap) Raw(data []byte, orig int) {
	p.frames++
	if p.err != nil {
		return
	}
	var rh [16]byte
	binary.LittleEndian.PutUint32(rh[0:], uint32(p.t.Unix()))
	binary.LittleEndian.PutUint32(rh[4:], uint32(p.t.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(rh[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(rh[12:], uint32(orig))
	p.t = p.t.Add(time.Millisecond)
	if _, p.err = p.w.Write(rh[:]); p.err == nil {
		_, p.err = p.w.Write(data)
	}
}

func checksum(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// Conn writes the packets of one TCP connection. Direction 0 is the client
// (the side that sends the SYN), 1 the server. Offsets are stream offsets:
// 0 is the first byte after the SYN.
type Conn struct {
	p    *Pcap
	addr [2]netip.AddrPort
	isn  [2]uint32
	next [2]uint32 // stream offset of the next new byte
	// got[d] are the byte ranges of d's stream the peer has received,
	// merged and sorted: what the peer's cumulative ACK covers is the
	// range that starts at 0.
	got [2][][2]uint32
}

// received records that the peer of dir received bytes [from, to).
func (c *Conn) received(dir int, from, to uint32) {
	rs := append(c.got[dir], [2]uint32{from, to})
	slices.SortFunc(rs, func(a, b [2]uint32) int { return cmp.Compare(a[0], b[0]) })
	out := rs[:1]
	for _, r := range rs[1:] {
		if last := &out[len(out)-1]; r[0] <= last[1] {
			last[1] = max(last[1], r[1])
		} else {
			out = append(out, r)
		}
	}
	c.got[dir] = out
}

// acked returns the offset up to which the peer of dir acknowledges.
func (c *Conn) acked(dir int) uint32 {
	if rs := c.got[dir]; len(rs) > 0 && rs[0][0] == 0 {
		return rs[0][1]
	}
	return 0
}

// Connect writes the three-way handshake of a connection from client to
// server. The initial sequence numbers are chosen near 2^32 so that every
// test crosses the sequence-number wrap, and differ from one connection to
// the next.
func (p *Pcap) Connect(client, server netip.AddrPort) *Conn {
	base := 0xffffff00 - uint32(p.frames)<<16
	c := &Conn{p: p, addr: [2]netip.AddrPort{client, server}, isn: [2]uint32{base, base - 0xf00}}
	p.Packet(client, server, c.isn[0], 0, SYN, nil)
	p.Packet(server, client, c.isn[1], c.isn[0]+1, SYN|ACK, nil)
	p.Packet(client, server, c.isn[0]+1, c.isn[1]+1, ACK, nil)
	return c
}

// Accept is Connect without the handshake: the capture starts with the
// connection established, as if the capture started late.
func (p *Pcap) Accept(client, server netip.AddrPort) *Conn {
	return &Conn{p: p, addr: [2]netip.AddrPort{client, server}, isn: [2]uint32{0x1000, 0x2000}}
}

// Send writes payload as one segment from dir at its next offset,
// acknowledging everything the other side sent, and returns the frame.
func (c *Conn) Send(dir int, payload []byte) int {
	return c.SendAt(dir, int(c.next[dir]), payload)
}

// SendAt writes payload as a segment from dir at stream offset off, which
// may be anywhere (a retransmission, an overlap, a segment ahead of a hole).
// The next offset moves past the segment if it ends beyond it. The segment
// acknowledges what the other side sent that has no hole before it, as a
// cumulative TCP ACK does.
func (c *Conn) SendAt(dir, off int, payload []byte) int {
	end := uint32(off + len(payload))
	if end > c.next[dir] {
		c.next[dir] = end
	}
	f := c.p.Packet(c.addr[dir], c.addr[1-dir], c.isn[dir]+1+uint32(off), c.isn[1-dir]+1+c.acked(1-dir), ACK|PSH, payload)
	c.received(dir, uint32(off), end)
	return f
}

// Skip advances dir's next offset by n bytes without writing them: bytes
// the peer received but the capture missed.
func (c *Conn) Skip(dir, n int) {
	c.received(dir, c.next[dir], c.next[dir]+uint32(n))
	c.next[dir] += uint32(n)
}

// Ack writes a segment without data from dir acknowledging what the other
// side sent (see SendAt).
func (c *Conn) Ack(dir int) int {
	return c.p.Packet(c.addr[dir], c.addr[1-dir], c.isn[dir]+1+c.next[dir], c.isn[1-dir]+1+c.acked(1-dir), ACK, nil)
}

// Next returns dir's next stream offset.
func (c *Conn) Next(dir int) int { return int(c.next[dir]) }
