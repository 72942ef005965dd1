package trace

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// Link types (LINKTYPE_ values, tcpdump.org link-layer header types) the
// decoder understands. Frames of other link types are counted and skipped.
const (
	LinkNull     = 0   // BSD loopback: 4-byte address family, host byte order
	LinkEthernet = 1   // Ethernet II, optionally with 802.1Q/802.1ad tags
	LinkRaw      = 101 // raw IPv4 or IPv6
	LinkLoop     = 108 // OpenBSD loopback: 4-byte address family, big-endian
	LinkLinuxSLL = 113 // Linux "cooked" capture
	LinkIPv4     = 228
	LinkIPv6     = 229
	LinkSLL2     = 276 // Linux "cooked" capture v2
)

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// tcpSegment is one TCP segment of a capture. payload is what was
// captured; seqLen is the payload length the IP header announces, larger
// when the frame was truncated by the snap length.
type tcpSegment struct {
	frame    int
	time     time.Time
	src, dst netip.AddrPort
	seq, ack uint32
	flags    uint8
	payload  []byte
	seqLen   int
}

// skipReason says why a frame carries no TCP segment for us.
type skipReason uint8

const (
	skipNone      skipReason = iota
	skipLink                 // link type or EtherType not IPv4/IPv6
	skipNotTCP               // IP, but not TCP
	skipFragment             // an IP fragment: not reassembled
	skipMalformed            // headers cut short or inconsistent
)

// parseFrame decodes the link layer, IPv4 or IPv6 and TCP headers of a
// frame. It never panics on any input; seg.payload aliases data.
func parseFrame(linkType uint32, data []byte) (seg tcpSegment, why skipReason) {
	l3, ipv, why := linkPayload(linkType, data)
	if why != skipNone {
		return seg, why
	}
	var tcp []byte
	var tcpLen int // TCP header + payload per the IP header
	switch ipv {
	case 4:
		tcp, tcpLen, why = parseIPv4(l3, &seg)
	case 6:
		tcp, tcpLen, why = parseIPv6(l3, &seg)
	default:
		return seg, skipLink
	}
	if why != skipNone {
		return seg, why
	}
	return seg, parseTCP(tcp, tcpLen, &seg)
}

// linkPayload returns what a frame of linkType carries after its
// link-layer header, and the IP version the header says that is (0 for
// none).
func linkPayload(linkType uint32, data []byte) (l3 []byte, ipv byte, why skipReason) {
	switch linkType {
	case LinkEthernet:
		if len(data) < 14 {
			return nil, 0, skipMalformed
		}
		etype, rest := binary.BigEndian.Uint16(data[12:]), data[14:]
		for tags := 0; (etype == 0x8100 || etype == 0x88a8) && tags < 2; tags++ {
			if len(rest) < 4 {
				return nil, 0, skipMalformed
			}
			etype, rest = binary.BigEndian.Uint16(rest[2:]), rest[4:]
		}
		return rest, etherIPVersion(etype), skipNone
	case LinkLinuxSLL:
		if len(data) < 16 {
			return nil, 0, skipMalformed
		}
		return data[16:], etherIPVersion(binary.BigEndian.Uint16(data[14:])), skipNone
	case LinkSLL2:
		if len(data) < 20 {
			return nil, 0, skipMalformed
		}
		return data[20:], etherIPVersion(binary.BigEndian.Uint16(data[0:])), skipNone
	case LinkRaw:
		if len(data) == 0 {
			return nil, 0, skipMalformed
		}
		return data, data[0] >> 4, skipNone
	case LinkIPv4:
		return data, 4, skipNone
	case LinkIPv6:
		return data, 6, skipNone
	case LinkNull, LinkLoop:
		if len(data) < 4 {
			return nil, 0, skipMalformed
		}
		fam := binary.BigEndian.Uint32(data)
		if linkType == LinkNull && fam > 0xffff {
			fam = binary.LittleEndian.Uint32(data) // written in the capturing host's order
		}
		switch fam {
		case 2:
			ipv = 4
		case 10, 24, 28, 30: // AF_INET6 on Linux, NetBSD/OpenBSD, FreeBSD, macOS
			ipv = 6
		}
		return data[4:], ipv, skipNone
	}
	return nil, 0, skipLink
}

// parseIPv4 decodes an IPv4 header, setting seg's addresses, and returns
// the TCP segment it carries, as captured, and its length per the
// header.
func parseIPv4(l3 []byte, seg *tcpSegment) (tcp []byte, tcpLen int, why skipReason) {
	if len(l3) < 20 || l3[0]>>4 != 4 {
		return nil, 0, skipMalformed
	}
	ihl, total := int(l3[0]&0xf)*4, int(binary.BigEndian.Uint16(l3[2:]))
	if total == 0 {
		total = len(l3) // TCP segmentation offload: the length is left 0
	}
	if ihl < 20 || ihl > len(l3) || total < ihl {
		return nil, 0, skipMalformed
	}
	if l3[9] != 6 {
		return nil, 0, skipNotTCP
	}
	if frag := binary.BigEndian.Uint16(l3[6:]); frag&0x3fff != 0 {
		return nil, 0, skipFragment // MF set or a non-zero offset
	}
	seg.src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(l3[12:16])), 0)
	seg.dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(l3[16:20])), 0)
	return l3[ihl:min(total, len(l3))], total - ihl, skipNone
}

// parseIPv6 is parseIPv4 for an IPv6 header and the extension headers
// before TCP, of which it follows eight at most.
func parseIPv6(l3 []byte, seg *tcpSegment) (tcp []byte, tcpLen int, why skipReason) {
	if len(l3) < 40 || l3[0]>>4 != 6 {
		return nil, 0, skipMalformed
	}
	plen := int(binary.BigEndian.Uint16(l3[4:]))
	if plen == 0 {
		plen = len(l3) - 40 // jumbogram or offload
	}
	next, off := l3[6], 40
	for hops := 0; next != 6; hops++ {
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
		case 44:
			return nil, 0, skipFragment
		default:
			return nil, 0, skipNotTCP
		}
		if hops == 8 || off+8 > len(l3) {
			return nil, 0, skipMalformed
		}
		next, off = l3[off], off+8*(int(l3[off+1])+1)
	}
	if off > len(l3) || off-40 > plen {
		return nil, 0, skipMalformed
	}
	seg.src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(l3[8:24])), 0)
	seg.dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(l3[24:40])), 0)
	return l3[off:min(40+plen, len(l3))], 40 + plen - off, skipNone
}

// parseTCP decodes the TCP header of tcp, tcpLen bytes long per the IP
// header, into seg, whose addresses the IP header has set.
func parseTCP(tcp []byte, tcpLen int, seg *tcpSegment) skipReason {
	if len(tcp) < 20 {
		return skipMalformed
	}
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || doff > len(tcp) || doff > tcpLen {
		return skipMalformed
	}
	seg.src = netip.AddrPortFrom(seg.src.Addr(), binary.BigEndian.Uint16(tcp[0:]))
	seg.dst = netip.AddrPortFrom(seg.dst.Addr(), binary.BigEndian.Uint16(tcp[2:]))
	seg.seq = binary.BigEndian.Uint32(tcp[4:])
	seg.ack = binary.BigEndian.Uint32(tcp[8:])
	seg.flags = tcp[13]
	seg.payload = tcp[doff:]
	seg.seqLen = tcpLen - doff
	return skipNone
}

func etherIPVersion(etype uint16) byte {
	switch etype {
	case 0x0800:
		return 4
	case 0x86dd:
		return 6
	}
	return 0
}
