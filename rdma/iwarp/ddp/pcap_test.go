package ddp

// A minimal reader for the classic pcap format (all the captures in
// testdata are classic pcap with Ethernet link type; pcapng is detected and
// refused) and a TCP reassembler good enough for those captures: it orders
// each direction's payload by sequence number, drops retransmitted bytes,
// and records holes where segments were not captured.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// extractCaptures unpacks a .tar.gz of captures or a .pcap.gz into dir and
// returns the paths of the regular files written.
func extractCaptures(archive, dir string) ([]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(archive, ".tar.gz") {
		out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(archive), ".gz"))
		b, err := io.ReadAll(io.LimitReader(zr, 64<<20))
		if err != nil {
			return nil, err
		}
		return []string{out}, os.WriteFile(out, b, 0o600)
	}
	var paths []string
	tr := tar.NewReader(zr)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return paths, nil
		}
		if err != nil {
			return nil, err
		}
		if hd.Typeflag != tar.TypeReg {
			continue
		}
		// Flatten the name: never write outside dir.
		out := filepath.Join(dir, strings.ReplaceAll(filepath.Clean(hd.Name), string(filepath.Separator), "_"))
		b, err := io.ReadAll(io.LimitReader(tr, 64<<20))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(out, b, 0o600); err != nil {
			return nil, err
		}
		paths = append(paths, out)
	}
}

// tcpPacket is one TCP segment of a capture.
type tcpPacket struct {
	frame    int // 1-based, as tshark numbers frames
	src, dst netip.AddrPort
	seq      uint32
	syn, ack bool
	payload  []byte
}

const (
	pcapMagicMicro = 0xa1b2c3d4
	pcapMagicNano  = 0xa1b23c4d
	pcapngMagic    = 0x0a0d0d0a
	linkEthernet   = 1
)

// readPcap returns the IPv4 TCP segments of a classic pcap file.
func readPcap(path string) ([]tcpPacket, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 24 {
		return nil, fmt.Errorf("%s: too short for a pcap header", path)
	}
	var bo binary.ByteOrder
	switch {
	case binary.LittleEndian.Uint32(b) == pcapngMagic:
		return nil, fmt.Errorf("%s: pcapng is not supported by this reader", path)
	case binary.LittleEndian.Uint32(b) == pcapMagicMicro || binary.LittleEndian.Uint32(b) == pcapMagicNano:
		bo = binary.LittleEndian
	case binary.BigEndian.Uint32(b) == pcapMagicMicro || binary.BigEndian.Uint32(b) == pcapMagicNano:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("%s: not a pcap file (magic % x)", path, b[:4])
	}
	if lt := bo.Uint32(b[20:]); lt != linkEthernet {
		return nil, fmt.Errorf("%s: link type %d, want Ethernet", path, lt)
	}
	var pkts []tcpPacket
	frame := 0
	for off := 24; off < len(b); {
		if len(b)-off < 16 {
			return nil, fmt.Errorf("%s: truncated record header at %d", path, off)
		}
		n := int(bo.Uint32(b[off+8:]))
		off += 16
		if n > len(b)-off {
			return nil, fmt.Errorf("%s: truncated record at %d", path, off)
		}
		frame++
		if p, ok := parseEthernetTCP(b[off : off+n]); ok {
			p.frame = frame
			pkts = append(pkts, p)
		}
		off += n
	}
	return pkts, nil
}

// parseEthernetTCP decodes Ethernet (optionally 802.1Q), IPv4 and TCP. The
// payload length comes from the IP total length, so Ethernet padding is
// dropped.
func parseEthernetTCP(f []byte) (p tcpPacket, ok bool) {
	if len(f) < 14 {
		return p, false
	}
	etype, l3 := binary.BigEndian.Uint16(f[12:]), f[14:]
	if etype == 0x8100 && len(f) >= 18 {
		etype, l3 = binary.BigEndian.Uint16(f[16:]), f[18:]
	}
	if etype != 0x0800 || len(l3) < 20 || l3[0]>>4 != 4 || l3[9] != 6 {
		return p, false
	}
	ihl, total := int(l3[0]&0xf)*4, int(binary.BigEndian.Uint16(l3[2:]))
	if ihl < 20 || total < ihl || total > len(l3) {
		return p, false
	}
	src := netip.AddrFrom4([4]byte(l3[12:16]))
	dst := netip.AddrFrom4([4]byte(l3[16:20]))
	tcp := l3[ihl:total]
	if len(tcp) < 20 {
		return p, false
	}
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || doff > len(tcp) {
		return p, false
	}
	p.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:]))
	p.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(tcp[2:]))
	p.seq = binary.BigEndian.Uint32(tcp[4:])
	p.syn, p.ack = tcp[13]&0x02 != 0, tcp[13]&0x10 != 0
	p.payload = tcp[doff:]
	return p, true
}

// tcpStream is one direction of a connection, reassembled. Stream offsets
// count from the byte after the SYN.
type tcpStream struct {
	src, dst netip.AddrPort
	// runs map stream offsets to the frame that first delivered them.
	runs []frameRun
	// chunks are the captured bytes; a gap between two chunks is a hole
	// (segments the capture missed).
	chunks []streamChunk
}

type frameRun struct{ start, end, frame int }

// streamChunk is a contiguous run of captured bytes: stream offset start,
// bytes data.
type streamChunk struct {
	start int
	data  []byte
}

// frameAt returns the frame that delivered the byte at stream offset off.
func (s *tcpStream) frameAt(off int) int {
	i, _ := slices.BinarySearchFunc(s.runs, off, func(r frameRun, off int) int {
		switch {
		case r.end <= off:
			return -1
		case r.start > off:
			return 1
		}
		return 0
	})
	if i < len(s.runs) && s.runs[i].start <= off && off < s.runs[i].end {
		return s.runs[i].frame
	}
	return 0
}

// connection is a TCP connection with both directions; initiator is the
// side that sent the SYN.
type connection struct {
	initiator, responder *tcpStream
}

// reassemble groups the packets into connections and orders each
// direction's payload. Stream offset 0 is the byte after the SYN.
func reassemble(pkts []tcpPacket) ([]*connection, error) {
	type dirKey struct{ src, dst netip.AddrPort }
	type dirState struct {
		isn     uint32
		haveSYN bool
		pkts    []tcpPacket
		first   int
	}
	dirs := map[dirKey]*dirState{}
	var order []dirKey
	for _, p := range pkts {
		k := dirKey{p.src, p.dst}
		d := dirs[k]
		if d == nil {
			d = &dirState{first: p.frame}
			dirs[k] = d
			order = append(order, k)
		}
		if p.syn {
			d.isn, d.haveSYN = p.seq, true
		}
		if len(p.payload) > 0 {
			d.pkts = append(d.pkts, p)
		}
	}
	streams := map[dirKey]*tcpStream{}
	for _, k := range order {
		d := dirs[k]
		if !d.haveSYN {
			return nil, fmt.Errorf("%v -> %v: no SYN captured", k.src, k.dst)
		}
		s := &tcpStream{src: k.src, dst: k.dst}
		type seg struct {
			off   int
			data  []byte
			frame int
		}
		var segs []seg
		for _, p := range d.pkts {
			segs = append(segs, seg{int(p.seq - d.isn - 1), p.payload, p.frame})
		}
		slices.SortStableFunc(segs, func(a, b seg) int { return a.off - b.off })
		next := 0
		for _, sg := range segs {
			if sg.off > next || len(s.chunks) == 0 {
				s.chunks = append(s.chunks, streamChunk{start: sg.off})
				next = sg.off
			}
			end := sg.off + len(sg.data)
			if end <= next {
				continue // retransmission or keep-alive of bytes we have
			}
			c := &s.chunks[len(s.chunks)-1]
			if have := sg.data[:next-sg.off]; !bytes.Equal(have, c.data[len(c.data)-len(have):]) {
				return nil, fmt.Errorf("frame %d: retransmitted bytes differ", sg.frame)
			}
			c.data = append(c.data, sg.data[next-sg.off:]...)
			s.runs = append(s.runs, frameRun{next, end, sg.frame})
			next = end
		}
		streams[k] = s
	}
	var conns []*connection
	for _, k := range order {
		d := dirs[k]
		if !d.haveSYN || !containsSYNOnly(pkts, k.src, k.dst) {
			continue
		}
		c := &connection{initiator: streams[k], responder: streams[dirKey{k.dst, k.src}]}
		if c.responder == nil {
			return nil, fmt.Errorf("%v -> %v: no packets from the responder", k.src, k.dst)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// containsSYNOnly reports whether src sent dst a SYN without ACK, i.e. src
// opened the connection.
func containsSYNOnly(pkts []tcpPacket, src, dst netip.AddrPort) bool {
	for _, p := range pkts {
		if p.src == src && p.dst == dst && p.syn && !p.ack {
			return true
		}
	}
	return false
}
