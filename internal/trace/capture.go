package trace

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"time"
)

// Capture file formats: classic pcap (both byte orders, micro- and
// nanosecond timestamps) and pcapng (draft-ietf-opsawg-pcapng: Section
// Header, Interface Description, Enhanced, Simple and obsolete Packet
// blocks; other blocks are skipped). Either may be gzip-compressed.
//
// Why a reader of our own rather than gopacket's pcapgo, which reads both
// formats: a requirement in go.mod is listed in the module graph of every
// user of this module (go list -m all), whatever package they import, and
// the library's graph is to hold only what the library uses; only this
// internal package would use gopacket. The reader is small, bounds every
// length before it allocates (maxRecord), and is fuzzed (FuzzCapture)
// and checked against real captures (capture_real_test.go).
const (
	pcapMagicMicro = 0xa1b2c3d4
	pcapMagicNano  = 0xa1b23c4d
	pcapngSHB      = 0x0a0d0d0a
	pcapngBOM      = 0x1a2b3c4d

	pcapngIDB = 1
	pcapngPB  = 2 // obsolete Packet Block
	pcapngSPB = 3
	pcapngEPB = 6

	// maxRecord bounds one pcap record or pcapng block, so that a corrupt
	// length cannot make the reader allocate without limit. Real snap
	// lengths are at most 256 KiB.
	maxRecord = 16 << 20
)

// ErrFormat is wrapped by every error that reports a file that is not a
// well-formed capture.
var ErrFormat = errors.New("malformed capture")

// Packet is one captured frame.
type Packet struct {
	// Frame is the 1-based number of the frame in the file, counting every
	// packet record as tshark does.
	Frame int
	Time  time.Time
	// LinkType is the LINKTYPE_ value of the interface the frame came from.
	LinkType uint32
	// Data is the captured bytes; it aliases the Reader's buffer and is
	// valid until the next call to Next.
	Data []byte
	// OrigLen is the frame's length on the wire, at least len(Data).
	OrigLen int
}

// Reader reads the packets of a pcap or pcapng capture, gzip-compressed or
// not. It is not safe for concurrent use.
type Reader struct {
	r      *bufio.Reader
	closer io.Closer
	ng     bool
	frame  int
	buf    []byte

	// classic pcap
	bo       binary.ByteOrder
	nano     bool
	linkType uint32

	// pcapng: the current section's byte order and interfaces
	ifaces []ngIface
}

type ngIface struct {
	linkType uint32
	snapLen  uint32
	// ts converts a timestamp in interface units to a time.
	unitsPerSec uint64
	offset      int64 // seconds, if_tsoffset
}

// Open opens the capture file name. The caller closes the Reader.
func Open(name string) (*Reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r.closer = f
	return r, nil
}

// NewReader returns a Reader for the capture r holds, after reading and
// checking the file header. gzip compression is detected and removed.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	rd := &Reader{r: br}
	hdr, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%w: file shorter than a capture header", ErrFormat)
	}
	switch {
	case binary.LittleEndian.Uint32(hdr) == pcapngSHB:
		rd.ng = true
		return rd, nil // the Section Header is read by Next like any block
	case binary.LittleEndian.Uint32(hdr) == pcapMagicMicro, binary.LittleEndian.Uint32(hdr) == pcapMagicNano:
		rd.bo = binary.LittleEndian
	case binary.BigEndian.Uint32(hdr) == pcapMagicMicro, binary.BigEndian.Uint32(hdr) == pcapMagicNano:
		rd.bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("%w: not pcap or pcapng (magic % x)", ErrFormat, hdr)
	}
	var fh [24]byte
	if _, err := io.ReadFull(br, fh[:]); err != nil {
		return nil, fmt.Errorf("%w: pcap file header: %v", ErrFormat, err)
	}
	rd.nano = rd.bo.Uint32(fh[0:]) == pcapMagicNano
	// The upper bits of the link-type field may carry FCS information
	// (LINKTYPE_ in the low 16 bits).
	rd.linkType = rd.bo.Uint32(fh[20:]) & 0xffff
	return rd, nil
}

// Close closes the file Open opened; it does nothing for a Reader made by
// NewReader.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// Next returns the next packet, or io.EOF at the clean end of the capture.
// A file that ends inside a record, or holds an impossible record, gives an
// error wrapping ErrFormat that names the frame or block. The Packet and its
// Data are valid until the next call.
func (r *Reader) Next(p *Packet) error {
	if r.ng {
		return r.nextNG(p)
	}
	var rh [16]byte
	if _, err := io.ReadFull(r.r, rh[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return fmt.Errorf("%w: frame %d: record header cut short", ErrFormat, r.frame+1)
	}
	incl, orig := r.bo.Uint32(rh[8:]), r.bo.Uint32(rh[12:])
	if incl > maxRecord {
		return fmt.Errorf("%w: frame %d: record length %d exceeds %d", ErrFormat, r.frame+1, incl, maxRecord)
	}
	if err := r.read(int(incl)); err != nil {
		return fmt.Errorf("%w: frame %d: record cut short (%d bytes announced)", ErrFormat, r.frame+1, incl)
	}
	r.frame++
	sec, frac := int64(r.bo.Uint32(rh[0:])), int64(r.bo.Uint32(rh[4:]))
	if !r.nano {
		frac *= 1000
	}
	*p = Packet{Frame: r.frame, Time: time.Unix(sec, frac).UTC(), LinkType: r.linkType, Data: r.buf, OrigLen: max(int(orig), int(incl))}
	return nil
}

// read reads n bytes into r.buf.
func (r *Reader) read(n int) error {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	_, err := io.ReadFull(r.r, r.buf)
	return err
}

// nextNG is Next for pcapng: it reads blocks until one holds a packet,
// taking in Section Headers and Interface Descriptions on the way and
// skipping blocks of other types.
func (r *Reader) nextNG(p *Packet) error {
	for {
		var bh [8]byte
		if _, err := io.ReadFull(r.r, bh[:]); err != nil {
			if err == io.EOF {
				return io.EOF
			}
			return fmt.Errorf("%w: block after frame %d: header cut short", ErrFormat, r.frame)
		}
		typ := binary.LittleEndian.Uint32(bh[:]) // SHB's type reads the same either way
		if typ == pcapngSHB {
			if err := r.readSection(bh); err != nil {
				return err
			}
			continue
		}
		if r.bo == nil {
			return fmt.Errorf("%w: pcapng block before the section header", ErrFormat)
		}
		typ = r.bo.Uint32(bh[:])
		total := r.bo.Uint32(bh[4:])
		if total < 12 || total%4 != 0 || total > maxRecord {
			return fmt.Errorf("%w: block type %d after frame %d: length %d", ErrFormat, typ, r.frame, total)
		}
		if err := r.read(int(total) - 8); err != nil {
			return fmt.Errorf("%w: block type %d after frame %d cut short", ErrFormat, typ, r.frame)
		}
		body := r.buf[:len(r.buf)-4] // without the trailing length
		switch typ {
		case pcapngIDB:
			if err := r.addIface(body); err != nil {
				return err
			}
		case pcapngEPB, pcapngPB:
			return r.packetBlock(p, typ, body)
		case pcapngSPB:
			return r.simplePacketBlock(p, body)
		}
	}
}

// readSection reads the rest of a Section Header Block whose first 8
// bytes are bh, and starts a new section: its byte order, no interfaces
// yet.
func (r *Reader) readSection(bh [8]byte) error {
	// The byte-order magic follows the length; read it first.
	var bom [4]byte
	if _, err := io.ReadFull(r.r, bom[:]); err != nil {
		return fmt.Errorf("%w: section header after frame %d cut short", ErrFormat, r.frame)
	}
	switch {
	case binary.LittleEndian.Uint32(bom[:]) == pcapngBOM:
		r.bo = binary.LittleEndian
	case binary.BigEndian.Uint32(bom[:]) == pcapngBOM:
		r.bo = binary.BigEndian
	default:
		return fmt.Errorf("%w: section header after frame %d: byte-order magic % x", ErrFormat, r.frame, bom)
	}
	r.ifaces = r.ifaces[:0]
	total := r.bo.Uint32(bh[4:])
	if total < 28 || total%4 != 0 || total > maxRecord {
		return fmt.Errorf("%w: section header after frame %d: block length %d", ErrFormat, r.frame, total)
	}
	if err := r.read(int(total) - 12); err != nil {
		return fmt.Errorf("%w: section header after frame %d cut short", ErrFormat, r.frame)
	}
	return nil
}

// packetBlock decodes the body of an Enhanced Packet Block (typ
// pcapngEPB) or of an obsolete Packet Block (pcapngPB) into p. The two
// lay out their 20-byte header alike, but for the interface ID: 32 bits
// in an EPB, 16 bits (then a drops count) in a PB.
func (r *Reader) packetBlock(p *Packet, typ uint32, body []byte) error {
	const hdrLen = 20
	if len(body) < hdrLen {
		what := "enhanced packet block"
		if typ == pcapngPB {
			what = "packet block"
		}
		return fmt.Errorf("%w: frame %d: %s too short", ErrFormat, r.frame+1, what)
	}
	ifid := r.bo.Uint32(body)
	if typ == pcapngPB {
		ifid = uint32(r.bo.Uint16(body))
	}
	hi, lo, capLen, origLen := r.bo.Uint32(body[4:]), r.bo.Uint32(body[8:]), r.bo.Uint32(body[12:]), r.bo.Uint32(body[16:])
	if capLen > uint32(len(body)-hdrLen) {
		return fmt.Errorf("%w: frame %d: captured length %d exceeds its block", ErrFormat, r.frame+1, capLen)
	}
	if int(ifid) >= len(r.ifaces) {
		return fmt.Errorf("%w: frame %d: interface %d not described", ErrFormat, r.frame+1, ifid)
	}
	r.frame++
	ifc := &r.ifaces[ifid]
	*p = Packet{Frame: r.frame, Time: ifc.time(uint64(hi)<<32 | uint64(lo)), LinkType: ifc.linkType,
		Data: body[hdrLen : hdrLen+int(capLen)], OrigLen: max(int(origLen), int(capLen))}
	return nil
}

// simplePacketBlock decodes the body of a Simple Packet Block into p: a
// packet of the section's first interface, without a timestamp,
// captured up to that interface's snap length.
func (r *Reader) simplePacketBlock(p *Packet, body []byte) error {
	if len(body) < 4 {
		return fmt.Errorf("%w: frame %d: simple packet block too short", ErrFormat, r.frame+1)
	}
	if len(r.ifaces) == 0 {
		return fmt.Errorf("%w: frame %d: simple packet block without an interface", ErrFormat, r.frame+1)
	}
	ifc := &r.ifaces[0]
	orig := r.bo.Uint32(body)
	n := min(uint32(len(body)-4), orig)
	if ifc.snapLen != 0 {
		n = min(n, ifc.snapLen)
	}
	r.frame++
	*p = Packet{Frame: r.frame, LinkType: ifc.linkType, Data: body[4 : 4+n], OrigLen: max(int(orig), int(n))}
	return nil
}

// addIface decodes an Interface Description Block body.
func (r *Reader) addIface(body []byte) error {
	if len(body) < 8 {
		return fmt.Errorf("%w: interface description after frame %d too short", ErrFormat, r.frame)
	}
	ifc := ngIface{linkType: uint32(r.bo.Uint16(body)), snapLen: r.bo.Uint32(body[4:]), unitsPerSec: 1e6}
	for opts := body[8:]; len(opts) >= 4; {
		code, n := r.bo.Uint16(opts), int(r.bo.Uint16(opts[2:]))
		if code == 0 || 4+n > len(opts) {
			break
		}
		v := opts[4 : 4+n]
		switch {
		case code == 9 && n == 1: // if_tsresol
			e := v[0] & 0x7f
			base := uint64(10)
			if v[0]&0x80 != 0 {
				base = 2
			}
			if (base == 10 && e > 19) || (base == 2 && e > 63) {
				return fmt.Errorf("%w: interface %d: if_tsresol 0x%02x out of range", ErrFormat, len(r.ifaces), v[0])
			}
			u := uint64(1)
			for range e {
				u *= base
			}
			ifc.unitsPerSec = u
		case code == 14 && n == 8: // if_tsoffset
			ifc.offset = int64(r.bo.Uint64(v))
		}
		opts = opts[4+(n+3)&^3:]
	}
	if len(r.ifaces) >= 1024 {
		return fmt.Errorf("%w: more than 1024 interfaces in a section", ErrFormat)
	}
	r.ifaces = append(r.ifaces, ifc)
	return nil
}

func (i *ngIface) time(ts uint64) time.Time {
	sec, rem := ts/i.unitsPerSec, ts%i.unitsPerSec
	// rem < unitsPerSec, so the quotient is below 1e9 and Div64 cannot
	// overflow.
	hi, lo := bits.Mul64(rem, 1e9)
	ns, _ := bits.Div64(hi, lo, i.unitsPerSec)
	return time.Unix(int64(sec)+i.offset, int64(ns)).UTC()
}
