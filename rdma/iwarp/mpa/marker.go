package mpa

import (
	"encoding/binary"
	"log/slog"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/internal/crc32c"
)

// Marker sizes (RFC 5044 section 4.3).
const (
	// MarkerLen is the size of a marker: 16 reserved bits and FPDUPTR.
	MarkerLen = 4
	// MarkerInterval is the spacing of markers in the TCP stream.
	MarkerInterval = 512
)

// Marker is one MPA marker (RFC 5044 section 4.3).
type Marker struct {
	// Reserved is the first 16 bits: sent as 0.
	Reserved uint16
	// FPDUPTR is the number of stream bytes from the ULPDU_Length field
	// of the FPDU that contains the marker to the marker. 0 means the
	// marker sits right before an FPDU and belongs to it. Its low two bits
	// are always 0.
	FPDUPTR uint16
}

// ParseMarker decodes the marker in the first MarkerLen bytes of b, which
// the caller guarantees are there.
func ParseMarker(b []byte) Marker {
	return Marker{Reserved: binary.BigEndian.Uint16(b), FPDUPTR: binary.BigEndian.Uint16(b[2:])}
}

// Append appends the encoded marker to b.
func (m Marker) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, m.Reserved)
	return binary.BigEndian.AppendUint16(b, m.FPDUPTR)
}

// String returns e.g. "marker fpduptr=20".
func (m Marker) String() string {
	s := "marker fpduptr=" + strconv.Itoa(int(m.FPDUPTR))
	if m.Reserved != 0 {
		s += " res=0x" + strconv.FormatUint(uint64(m.Reserved), 16)
	}
	return s
}

// LogValue implements slog.LogValuer.
func (m Marker) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("fpduptr", int(m.FPDUPTR)), slog.Int("reserved", int(m.Reserved)))
}

// Markers inserts or removes the markers of one direction of an MPA
// connection (RFC 5044 sections 4.2 and 4.3). Markers are on in a direction
// when its receiver set M in its startup frame. The first marker sits at the
// first byte of that direction's full-operation stream (right after the
// Request or Reply); then one follows every MarkerInterval bytes of TCP
// stream, counted from that first marker. A marker inside an FPDU, or right
// before it, is covered by the FPDU's CRC and is not counted in
// ULPDU_Length or in the pad.
//
// The zero Markers is positioned at the start of full operation. A Markers
// tracks exactly one direction: use one to send and another to receive, and
// feed it every FPDU of that direction in order. It is not safe for
// concurrent use.
//
// Linux siw never uses markers and our provider refuses them; this type
// exists so that streams from peers that used them can be parsed. Note that
// the 2008 IBM software iWARP stack of the Wireshark sample captures does
// not place markers as RFC 5044 says (after the first FPDU their positions
// drift by 4 bytes per FPDU, and it writes FPDUPTR little-endian); ParseFPDU
// rejects such a stream with ErrMarker, as a conformant receiver must.
type Markers struct {
	// pos is the stream offset from the first marker modulo 2^32. Only pos
	// mod 512 matters and 512 divides 2^32, so wrapping is harmless.
	pos uint32
}

// Offset returns the stream offset, modulo 2^32, from the first marker to
// the next byte to be sent or parsed.
func (m *Markers) Offset() uint32 { return m.pos }

// firstMarker returns the offset, from stream offset pos, of the first
// marker at or after pos. The next ones follow every MarkerInterval bytes.
func firstMarker(pos uint32) int {
	return int((MarkerInterval - pos%MarkerInterval) % MarkerInterval)
}

// rawLen returns how many stream bytes, markers included, n bytes of FPDU
// data occupy when they start at stream offset pos. A marker at the very end
// belongs to the next FPDU.
func rawLen(pos uint32, n int) int {
	for off := firstMarker(pos); off < n; off += MarkerInterval {
		n += MarkerLen
	}
	return n
}

// FPDULen returns the number of stream bytes, markers included, that an
// FPDU carrying a ULPDU of ulpduLen bytes occupies when it is the next FPDU
// of this direction.
func (m *Markers) FPDULen(ulpduLen int) int { return rawLen(m.pos, FPDULen(ulpduLen)) }

// PeekFPDULen is PeekFPDULen for a stream with markers: it returns the
// length, markers included, of the next FPDU, whose first bytes are b. It
// needs LengthFieldLen bytes, plus MarkerLen when a marker precedes the
// FPDU.
func (m *Markers) PeekFPDULen(b []byte) (int, error) {
	off := 0
	if m.pos%MarkerInterval == 0 {
		off = MarkerLen
	}
	if len(b) < off+LengthFieldLen {
		return 0, shortErr("ULPDU_Length", off, off+LengthFieldLen, len(b))
	}
	return m.FPDULen(int(binary.BigEndian.Uint16(b[off:]))), nil
}

// AppendFPDU is AppendFPDU for a stream with markers: it appends the next
// FPDU of this direction, markers inserted at their stream positions and
// covered by the CRC, and advances m. The pieces are copied (markers cut
// through them, so there is no zero-copy form).
func (m *Markers) AppendFPDU(b []byte, crc bool, ulpdu ...[]byte) []byte {
	n := 0
	for _, p := range ulpdu {
		n += len(p)
	}
	checkULPDULen(n)
	start := len(b)
	fpdu := m.pos // stream offset of ULPDU_Length, fixed below if a marker leads
	if m.pos%MarkerInterval == 0 {
		fpdu += MarkerLen
	}
	var hdr [LengthFieldLen]byte
	binary.BigEndian.PutUint16(hdr[:], uint16(n))
	b = m.put(b, fpdu, hdr[:])
	for _, p := range ulpdu {
		b = m.put(b, fpdu, p)
	}
	b = m.put(b, fpdu, zeroPad[:PadLen(n)])
	if m.pos%MarkerInterval == 0 {
		// A marker between the pad and the CRC still belongs to this FPDU.
		b = m.marker(b, fpdu)
	}
	var sum uint32
	if crc {
		sum = crc32c.Update(0, b[start:])
	}
	var trailer [CRCLen]byte
	binary.LittleEndian.PutUint32(trailer[:], sum)
	return m.put(b, fpdu, trailer[:])
}

// put appends data bytes, inserting markers that point back to the FPDU at
// stream offset fpdu.
func (m *Markers) put(b []byte, fpdu uint32, p []byte) []byte {
	for len(p) > 0 {
		if m.pos%MarkerInterval == 0 {
			b = m.marker(b, fpdu)
		}
		c := min(len(p), int(MarkerInterval-m.pos%MarkerInterval))
		b = append(b, p[:c]...)
		m.pos += uint32(c)
		p = p[c:]
	}
	return b
}

func (m *Markers) marker(b []byte, fpdu uint32) []byte {
	var ptr uint16 // 0 for the marker that leads the FPDU
	if m.pos+MarkerLen != fpdu {
		ptr = uint16(m.pos - fpdu)
	}
	b = Marker{FPDUPTR: ptr}.Append(b)
	m.pos += MarkerLen
	return b
}

// ParseFPDU is ParseFPDU for a stream with markers. b[0] must be the next
// byte of this direction's stream. It checks that every marker's FPDUPTR
// points at the FPDU (reserved bits and the two low FPDUPTR bits are
// ignored), checks the CRC over the raw bytes, markers included, when crc
// is true, then removes the markers by moving the FPDU's bytes within b -
// so b is modified - and advances m past the FPDU. On success, and on ErrCRC
// (as in ParseFPDU), f.ULPDU aliases b and n is the number of stream bytes
// consumed. On any other error neither b nor m is changed.
func (m *Markers) ParseFPDU(b []byte, crc bool) (f FPDU, n int, err error) {
	n, err = m.PeekFPDULen(b)
	if err != nil {
		return FPDU{}, 0, err
	}
	if len(b) < n {
		return FPDU{}, 0, shortErr("ULPDU", LengthFieldLen, n, len(b))
	}
	raw := b[:n:n]
	lead := 0
	if m.pos%MarkerInterval == 0 {
		lead = MarkerLen
	}
	first := firstMarker(m.pos)
	for off := first; off < n; off += MarkerInterval {
		want := uint16(off - lead) // distance from ULPDU_Length; 0 for the lead
		if off < lead {
			want = 0
		}
		if got := ParseMarker(raw[off:]).FPDUPTR; got&^3 != want {
			return FPDU{}, 0, &ParseError{Field: "FPDUPTR", Offset: off + 2, Err: ErrMarker, Value: uint64(got), Limit: uint64(want)}
		}
	}
	f.CRC = binary.LittleEndian.Uint32(raw[n-CRCLen:])
	if crc {
		if want := Checksum(raw[:n-CRCLen]); want != f.CRC {
			err = &ParseError{Field: "CRC", Offset: n - CRCLen, Err: ErrCRC, Value: uint64(f.CRC), Limit: uint64(want)}
		}
	}
	// Move the data between markers down over them, towards the first data
	// byte (markers are never inside the ULPDU_Length or CRC fields: both
	// sit at 4-byte stream offsets, as markers do).
	w, r := lead, lead
	for next := first; r < n; next += MarkerInterval {
		if next < r {
			continue // the leading marker
		}
		end := min(next, n)
		w += copy(raw[w:], raw[r:end])
		r = end + MarkerLen
	}
	m.pos += uint32(n)
	l := int(binary.BigEndian.Uint16(raw[lead:]))
	f.ULPDU = raw[lead+LengthFieldLen : lead+LengthFieldLen+l : lead+LengthFieldLen+l]
	return f, n, err
}
