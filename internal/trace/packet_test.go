package trace

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/trace/tracetest"
)

// TestParseFrameLinkTypes wraps one IPv4 TCP segment in every link layer
// the decoder knows, and an IPv6 one with an extension header.
func TestParseFrameLinkTypes(t *testing.T) {
	var buf bytes.Buffer
	p := tracetest.NewPcap(&buf)
	p.Packet(testClient, testServer, 1000, 2000, tracetest.ACK, []byte("payload"))
	pkts, err := readAll(t, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	eth := pkts[0].Data
	ip4 := eth[14:]
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	sll := cat(make([]byte, 14), []byte{0x08, 0x00}, ip4)
	sll2 := cat([]byte{0x08, 0x00}, make([]byte, 18), ip4)
	vlan := cat(eth[:12], []byte{0x81, 0x00, 0, 5}, eth[12:])
	padded := cat(eth, make([]byte, 10)) // Ethernet padding after the IP packet

	// IPv6 with a hop-by-hop options header before TCP.
	tcp := ip4[20:]
	src6, dst6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	ip6 := []byte{0x60, 0, 0, 0, 0, byte(8 + len(tcp)), 0, 64}
	ip6 = append(ip6, src6.AsSlice()...)
	ip6 = append(ip6, dst6.AsSlice()...)
	ip6 = append(ip6, 6, 0, 1, 4, 0, 0, 0, 0) // next header TCP, 8 bytes, PadN
	ip6 = append(ip6, tcp...)

	for _, tc := range []struct {
		name     string
		linkType uint32
		data     []byte
		v6       bool
	}{
		{"ethernet", LinkEthernet, eth, false},
		{"ethernet padded", LinkEthernet, padded, false},
		{"802.1Q", LinkEthernet, vlan, false},
		{"raw", LinkRaw, ip4, false},
		{"ipv4", LinkIPv4, ip4, false},
		{"sll", LinkLinuxSLL, sll, false},
		{"sll2", LinkSLL2, sll2, false},
		{"null little-endian", LinkNull, cat(le32(2), ip4), false},
		{"null big-endian", LinkNull, cat(be32(2), ip4), false},
		{"loop", LinkLoop, cat(be32(2), ip4), false},
		{"ipv6 raw", LinkRaw, ip6, true},
		{"ipv6", LinkIPv6, ip6, true},
		{"ipv6 ethernet", LinkEthernet, cat(eth[:12], []byte{0x86, 0xdd}, ip6), true},
		{"ipv6 null", LinkNull, cat(le32(30), ip6), true},
	} {
		seg, why := parseFrame(tc.linkType, tc.data)
		wantSrc, wantDst := testClient, testServer
		if tc.v6 {
			wantSrc = netip.AddrPortFrom(src6, testClient.Port())
			wantDst = netip.AddrPortFrom(dst6, testServer.Port())
		}
		if why != skipNone || seg.src != wantSrc || seg.dst != wantDst || seg.seq != 1000 || seg.ack != 2000 ||
			seg.flags != tracetest.ACK || string(seg.payload) != "payload" || seg.seqLen != 7 {
			t.Errorf("%s: %v %+v", tc.name, why, seg)
		}
	}

	// Truncated by the snap length: the IP length still counts.
	seg, why := parseFrame(LinkEthernet, eth[:len(eth)-3])
	if why != skipNone || string(seg.payload) != "payl" || seg.seqLen != 7 {
		t.Errorf("truncated: %v %+v", why, seg)
	}
	// Fragments, other protocols, other link types, garbage.
	frag := bytes.Clone(eth)
	frag[14+6] = 0x20 // MF
	udp := bytes.Clone(eth)
	udp[14+9] = 17
	for _, tc := range []struct {
		name     string
		linkType uint32
		data     []byte
		want     skipReason
	}{
		{"fragment", LinkEthernet, frag, skipFragment},
		{"udp", LinkEthernet, udp, skipNotTCP},
		{"arp", LinkEthernet, cat(eth[:12], []byte{0x08, 0x06}, make([]byte, 28)), skipLink},
		{"802.11", 105, eth, skipLink},
		{"short ethernet", LinkEthernet, eth[:10], skipMalformed},
		{"short ip", LinkEthernet, eth[:30], skipMalformed},
		{"short tcp", LinkEthernet, eth[:14+20+10], skipMalformed},
		{"bad ihl", LinkRaw, cat([]byte{0x41}, ip4[1:]), skipMalformed},
		{"ipv6 fragment", LinkIPv6, cat(ip6[:6], []byte{44}, ip6[7:]), skipFragment},
	} {
		if _, why := parseFrame(tc.linkType, tc.data); why != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, why, tc.want)
		}
	}
}
