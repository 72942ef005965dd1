package iwarp

// A recorder of one connection's two byte streams and a writer of classic
// pcap files for them, with made-up Ethernet, IPv4 and TCP headers, so
// that tshark can decode our traffic without a capture privilege
// (docs/tshark.md, "Capturing without privileges").

import (
	"encoding/binary"
	"net"
	"os"
	"sync"
)

// recorder keeps, in order, what one side of a connection wrote and read.
type recorder struct {
	mu     sync.Mutex
	events []streamEvent
}

type streamEvent struct {
	fromClient bool
	b          []byte
}

func (r *recorder) add(fromClient bool, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, streamEvent{fromClient, append([]byte(nil), b...)})
}

func (r *recorder) snapshot() []streamEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]streamEvent(nil), r.events...)
}

// recConn records the bytes of a client-side connection.
type recConn struct {
	net.Conn
	rec *recorder
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.rec.add(false, p[:n])
	}
	return n, err
}

// Write records p before writing it: recorded after, it could land behind
// the peer's answer to it, which the reader records as soon as it arrives.
func (c *recConn) Write(p []byte) (int, error) {
	c.rec.add(true, p)
	return c.Conn.Write(p)
}

const (
	pcapClientPort = 40000
	pcapServerPort = 20049 // NFS/RDMA: no other dissector claims it
	maxSegment     = 16000
)

// writePcap writes the recorded streams as one TCP connection: the
// three-way handshake, then the events, adjacent ones of the same
// direction merged and cut into segments of at most maxSegment bytes.
func writePcap(path string, events []streamEvent) error {
	var merged []streamEvent
	for _, e := range events {
		if n := len(merged); n > 0 && merged[n-1].fromClient == e.fromClient {
			merged[n-1].b = append(merged[n-1].b, e.b...)
			continue
		}
		merged = append(merged, streamEvent{e.fromClient, append([]byte(nil), e.b...)})
	}
	w := pcapWriter{seq: [2]uint32{1000, 5000}}
	w.buf = binary.LittleEndian.AppendUint32(w.buf, 0xa1b2c3d4)
	w.buf = binary.LittleEndian.AppendUint16(w.buf, 2)
	w.buf = binary.LittleEndian.AppendUint16(w.buf, 4)
	w.buf = binary.LittleEndian.AppendUint64(w.buf, 0) // thiszone, sigfigs
	w.buf = binary.LittleEndian.AppendUint32(w.buf, 262144)
	w.buf = binary.LittleEndian.AppendUint32(w.buf, 1) // Ethernet
	const syn, ack, psh = 0x02, 0x10, 0x08
	w.segment(true, syn, nil)
	w.seq[0]++
	w.segment(false, syn|ack, nil)
	w.seq[1]++
	w.segment(true, ack, nil)
	for _, e := range merged {
		for b := e.b; len(b) > 0; {
			n := min(len(b), maxSegment)
			w.segment(e.fromClient, psh|ack, b[:n])
			b = b[n:]
		}
	}
	return os.WriteFile(path, w.buf, 0o600)
}

type pcapWriter struct {
	buf   []byte
	seq   [2]uint32 // next sequence number: client, server
	usec  uint32
	ipID  uint16
	frame int
}

func (w *pcapWriter) segment(fromClient bool, flags byte, payload []byte) {
	me, peer := 0, 1
	src, dst := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	sport, dport := uint16(pcapClientPort), uint16(pcapServerPort)
	if !fromClient {
		me, peer = 1, 0
		src, dst = dst, src
		sport, dport = dport, sport
	}
	var f []byte
	f = append(f, 2, 0, 0, 0, 0, byte(2-me)) // destination MAC
	f = append(f, 2, 0, 0, 0, 0, byte(1+me)) // source MAC
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	ip := len(f)
	f = append(f, 0x45, 0)
	f = binary.BigEndian.AppendUint16(f, uint16(20+20+len(payload)))
	w.ipID++
	f = binary.BigEndian.AppendUint16(f, w.ipID)
	f = append(f, 0x40, 0, 64, 6, 0, 0) // DF, TTL, TCP, checksum below
	f = append(f, src[:]...)
	f = append(f, dst[:]...)
	binary.BigEndian.PutUint16(f[ip+10:], ipChecksum(f[ip:ip+20]))
	f = binary.BigEndian.AppendUint16(f, sport)
	f = binary.BigEndian.AppendUint16(f, dport)
	f = binary.BigEndian.AppendUint32(f, w.seq[me])
	var ackNo uint32
	if flags&0x10 != 0 {
		ackNo = w.seq[peer]
	}
	f = binary.BigEndian.AppendUint32(f, ackNo)
	f = append(f, 5<<4, flags)
	f = binary.BigEndian.AppendUint16(f, 65535)
	f = append(f, 0, 0, 0, 0) // checksum (not verified by tshark), urgent
	f = append(f, payload...)
	w.seq[me] += uint32(len(payload))
	w.usec += 10
	w.buf = binary.LittleEndian.AppendUint32(w.buf, 1_700_000_000)
	w.buf = binary.LittleEndian.AppendUint32(w.buf, w.usec)
	w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(len(f)))
	w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(len(f)))
	w.buf = append(w.buf, f...)
	w.frame++
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
