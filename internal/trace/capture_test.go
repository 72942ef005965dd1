package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// ngWriter writes pcapng blocks in the byte order bo.
type ngWriter struct {
	bo  binary.AppendByteOrder
	buf bytes.Buffer
}

func (w *ngWriter) block(typ uint32, body []byte) {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	n := uint32(12 + len(body))
	var b []byte
	b = w.bo.AppendUint32(b, typ)
	b = w.bo.AppendUint32(b, n)
	b = append(b, body...)
	b = w.bo.AppendUint32(b, n)
	w.buf.Write(b)
}

func (w *ngWriter) section() {
	var b []byte
	b = w.bo.AppendUint32(b, pcapngBOM)
	b = w.bo.AppendUint16(b, 1)
	b = w.bo.AppendUint16(b, 0)
	b = w.bo.AppendUint64(b, ^uint64(0)) // section length unknown
	w.block(pcapngSHB, b)
}

// iface writes an Interface Description Block; tsresol 0 leaves the
// default (microseconds).
func (w *ngWriter) iface(linkType uint16, tsresol byte) {
	var b []byte
	b = w.bo.AppendUint16(b, linkType)
	b = w.bo.AppendUint16(b, 0)
	b = w.bo.AppendUint32(b, 0)
	if tsresol != 0 {
		b = w.bo.AppendUint16(b, 9)
		b = w.bo.AppendUint16(b, 1)
		b = append(b, tsresol, 0, 0, 0)
		b = w.bo.AppendUint16(b, 0) // opt_endofopt
		b = w.bo.AppendUint16(b, 0)
	}
	w.block(pcapngIDB, b)
}

func (w *ngWriter) epb(ifid uint32, ts uint64, data []byte) {
	var b []byte
	b = w.bo.AppendUint32(b, ifid)
	b = w.bo.AppendUint32(b, uint32(ts>>32))
	b = w.bo.AppendUint32(b, uint32(ts))
	b = w.bo.AppendUint32(b, uint32(len(data)))
	b = w.bo.AppendUint32(b, uint32(len(data)))
	w.block(pcapngEPB, append(b, data...))
}

func (w *ngWriter) spb(data []byte) {
	b := w.bo.AppendUint32(nil, uint32(len(data)))
	w.block(pcapngSPB, append(b, data...))
}

func readAll(t testing.TB, capture []byte) ([]Packet, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(capture))
	if err != nil {
		return nil, err
	}
	var pkts []Packet
	for {
		var p Packet
		err := r.Next(&p)
		if err == io.EOF {
			return pkts, nil
		}
		if err != nil {
			return pkts, err
		}
		p.Data = bytes.Clone(p.Data)
		pkts = append(pkts, p)
	}
}

// toPcapng rewrites a capture as pcapng: the first half of the packets in a
// little-endian section with nanosecond timestamps, the rest in a
// big-endian section with the default microseconds, every third packet of
// it as a Simple Packet Block (which has no timestamp).
func toPcapng(t testing.TB, pkts []Packet) []byte {
	t.Helper()
	var out bytes.Buffer
	half := len(pkts) / 2
	w := &ngWriter{bo: binary.LittleEndian}
	w.section()
	w.iface(LinkRaw, 0) // an unused interface: packets name interface 1
	w.iface(LinkEthernet, 9)
	for _, p := range pkts[:half] {
		w.epb(1, uint64(p.Time.UnixNano()), p.Data)
	}
	out.Write(w.buf.Bytes())
	w = &ngWriter{bo: binary.BigEndian}
	w.section()
	w.iface(LinkEthernet, 0)
	for i, p := range pkts[half:] {
		if i%3 == 2 {
			w.spb(p.Data)
		} else {
			w.epb(0, uint64(p.Time.UnixMicro()), p.Data)
		}
	}
	out.Write(w.buf.Bytes())
	return out.Bytes()
}

func TestReaderFormats(t *testing.T) {
	_, capture := writeDemo(t)
	pkts, err := readAll(t, capture)
	if err != nil || len(pkts) == 0 {
		t.Fatalf("pcap: %d packets, %v", len(pkts), err)
	}
	if pkts[0].Frame != 1 || pkts[0].LinkType != LinkEthernet || !pkts[0].Time.Equal(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("first packet %+v", pkts[0])
	}
	want := decodeBytes(t, capture, Options{})

	ng := toPcapng(t, pkts)
	ngPkts, err := readAll(t, ng)
	if err != nil || len(ngPkts) != len(pkts) {
		t.Fatalf("pcapng: %d packets, %v", len(ngPkts), err)
	}
	for i, p := range ngPkts {
		if p.Frame != i+1 || !bytes.Equal(p.Data, pkts[i].Data) || p.LinkType != LinkEthernet {
			t.Fatalf("pcapng packet %d: %+v", i, p)
		}
		half := len(pkts) / 2
		if sp := i >= half && (i-half)%3 == 2; !sp && !p.Time.Equal(pkts[i].Time) {
			t.Errorf("pcapng packet %d: time %v, want %v", i, p.Time, pkts[i].Time)
		}
	}
	if got := decodeBytes(t, ng, Options{}); strings.Join(signatures(got), "\n") != strings.Join(signatures(want), "\n") {
		t.Errorf("pcapng decodes differently")
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(ng)
	zw.Close()
	if got := decodeBytes(t, gz.Bytes(), Options{}); len(got.events) != len(want.events) {
		t.Errorf("gzip pcapng: %d events, want %d", len(got.events), len(want.events))
	}

	// Big-endian classic pcap with nanosecond timestamps.
	var be bytes.Buffer
	h := binary.BigEndian.AppendUint32(nil, pcapMagicNano)
	h = binary.BigEndian.AppendUint16(h, 2)
	h = binary.BigEndian.AppendUint16(h, 4)
	h = append(h, make([]byte, 8)...)
	h = binary.BigEndian.AppendUint32(h, 65535)
	h = binary.BigEndian.AppendUint32(h, LinkEthernet)
	be.Write(h)
	for _, p := range pkts {
		var rh []byte
		rh = binary.BigEndian.AppendUint32(rh, uint32(p.Time.Unix()))
		rh = binary.BigEndian.AppendUint32(rh, uint32(p.Time.Nanosecond()))
		rh = binary.BigEndian.AppendUint32(rh, uint32(len(p.Data)))
		rh = binary.BigEndian.AppendUint32(rh, uint32(len(p.Data)))
		be.Write(rh)
		be.Write(p.Data)
	}
	bePkts, err := readAll(t, be.Bytes())
	if err != nil || len(bePkts) != len(pkts) || !bePkts[3].Time.Equal(pkts[3].Time) || !bytes.Equal(bePkts[3].Data, pkts[3].Data) {
		t.Errorf("big-endian pcap: %d packets, %v", len(bePkts), err)
	}
}

func TestReaderTimeResolution(t *testing.T) {
	for _, tc := range []struct {
		tsresol byte
		ts      uint64
		want    time.Time
	}{
		{6, 1_700_000_000_123_456, time.Unix(1_700_000_000, 123_456_000)},
		{9, 1_700_000_000_123_456_789, time.Unix(1_700_000_000, 123_456_789)},
		{0x80 | 10, 1_700_000_000<<10 | 512, time.Unix(1_700_000_000, 500_000_000)},
		{0, 5_000_001, time.Unix(5, 1000)}, // default: microseconds
	} {
		w := &ngWriter{bo: binary.LittleEndian}
		w.section()
		w.iface(LinkEthernet, tc.tsresol)
		w.epb(0, tc.ts, []byte{1})
		pkts, err := readAll(t, w.buf.Bytes())
		if err != nil || len(pkts) != 1 || !pkts[0].Time.Equal(tc.want) {
			t.Errorf("tsresol %#x: %v, %v; want %v", tc.tsresol, pkts, err, tc.want)
		}
	}
}

func TestReaderErrors(t *testing.T) {
	_, capture := writeDemo(t)
	ngOK := func(f func(w *ngWriter)) []byte {
		w := &ngWriter{bo: binary.LittleEndian}
		w.section()
		f(w)
		return w.buf.Bytes()
	}
	for _, tc := range []struct {
		name, capture, want string
	}{
		{"empty", "", "shorter than a capture header"},
		{"not a capture", "GIF89a, not a capture at all......", "not pcap or pcapng"},
		{"header cut", string(capture[:20]), "pcap file header"},
		{"record cut", string(capture[:24+16+10]), "frame 1: record cut short"},
		{"record header cut", string(capture[:24+16+54+5]), "frame 2: record header cut short"},
		{"huge record", string(append(bytes.Clone(capture[:24]), 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0)), "exceeds"},
		{"pcapng bad byte-order magic", string(binary.LittleEndian.AppendUint32([]byte{0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0}, 0x12345678)), "byte-order magic"},
		{"pcapng unknown interface", string(ngOK(func(w *ngWriter) { w.epb(3, 0, []byte{1}) })), "interface 3 not described"},
		{"pcapng bad length", string(ngOK(func(w *ngWriter) { w.buf.Write([]byte{6, 0, 0, 0, 13, 0, 0, 0}) })), "length 13"},
		{"pcapng cut", string(ngOK(func(w *ngWriter) { w.iface(LinkEthernet, 0); w.epb(0, 0, make([]byte, 40)) })[:70]), "cut short"},
		{"pcapng caplen", string(ngOK(func(w *ngWriter) {
			w.iface(LinkEthernet, 0)
			b := binary.LittleEndian.AppendUint32(nil, 0)
			b = append(b, make([]byte, 8)...)
			b = binary.LittleEndian.AppendUint32(b, 1000)
			b = binary.LittleEndian.AppendUint32(b, 1000)
			w.block(pcapngEPB, append(b, 1, 2, 3, 4))
		})), "captured length 1000 exceeds its block"},
		{"pcapng tsresol", string(ngOK(func(w *ngWriter) { w.iface(LinkEthernet, 99) })), "if_tsresol"},
	} {
		_, err := readAll(t, []byte(tc.capture))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		} else if tc.name != "empty" && tc.name != "not a capture" && !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v does not wrap ErrFormat", tc.name, err)
		}
	}
}

// TestDecodeTruncatedFile: a capture cut inside a record yields the events
// before the cut, and the error.
func TestDecodeTruncatedFile(t *testing.T) {
	demo, capture := writeDemo(t)
	pkts, _ := readAll(t, capture)
	cut := 24
	for _, p := range pkts[:demo.Frames["read-request"]] {
		cut += 16 + len(p.Data)
	}
	r, err := NewReader(bytes.NewReader(capture[:cut+30]))
	if err != nil {
		t.Fatal(err)
	}
	var events []*Event
	_, err = Decode(r, Options{}, func(e *Event) { events = append(events, e) })
	if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "frame 8") {
		t.Errorf("error %v", err)
	}
	if len(events) != 4 { // Request, Reply, WRITE call, Read Request
		t.Errorf("%d events", len(events))
	}
}
