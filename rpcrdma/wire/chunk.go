package wire

import (
	"log/slog"
	"slices"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Chunk lists on the wire (draft-ietf-nfsv4-rpcrdma-01 section 4.2,
// draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). Each XDR optional
// pointer and each link of a linked list is a 4-byte discriminant, 1 when an
// item follows and 0 at the end, so (key: HLOO = handle, length, offset high,
// offset low; P = position; N = count):
//
//	read list:   1 P HLOO 1 P HLOO ... 0
//	write list:  1 N HLOO... 1 N HLOO... ... 0
//	reply chunk: 0  or  1 N HLOO...
//
// An empty list or absent reply chunk is the single word 0.

const (
	segmentSize     = 16 // handle, length, offset (a hyper)
	readSegmentSize = 4 + segmentSize

	// maxDecodeSegments and maxDecodeOptInfo are the explicit maxima Decode
	// passes for a write chunk's count and rdma_optinfo's length: more than
	// the largest Send RFC 8797 can negotiate (MaxInlineSize) could hold.
	// The bytes actually present bound them first; Limits, applied by
	// Validate, are the policy.
	maxDecodeSegments = MaxInlineSize / segmentSize
	maxDecodeOptInfo  = MaxInlineSize
)

// Segment is one registered memory region of the peer: xdr_rdma_segment in
// draft-ietf-nfsv4-rpcrdma-01 section 4.2, rpcrdma2_segment in
// draft-cel-nfsv4-rpcrdma-version-two-00. Handle is the steering tag (for
// iWARP, the STag), Offset the tagged offset or address, both interpreted
// only by the memory's owner.
type Segment struct {
	Handle uint32
	Length uint32
	Offset uint64
}

// EncodedLen returns the size of s's encoding: 16 bytes.
func (Segment) EncodedLen() int { return segmentSize }

// Append appends the encoding of s to b.
func (s Segment) Append(b []byte) []byte {
	b = xdr.AppendUint32(b, s.Handle)
	b = xdr.AppendUint32(b, s.Length)
	return xdr.AppendUint64(b, s.Offset)
}

func (s *Segment) decode(d *xdr.Decoder) {
	s.Handle = d.Uint32()
	s.Length = d.Uint32()
	s.Offset = d.Uint64()
}

func (s Segment) appendText(b []byte) []byte {
	b = append(b, "0x"...)
	b = strconv.AppendUint(b, uint64(s.Handle), 16)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(s.Length), 10)
	b = append(b, "@0x"...)
	return strconv.AppendUint(b, s.Offset, 16)
}

// String returns s as handle:length@offset, e.g. "0xabcd01:8192@0x10000000".
func (s Segment) String() string { return string(s.appendText(nil)) }

// LogValue implements slog.LogValuer.
func (s Segment) LogValue() slog.Value { return slog.StringValue(s.String()) }

// ReadSegment is one entry of a read list: xdr_read_chunk in
// draft-ietf-nfsv4-rpcrdma-01 section 4.2 (RFC 8166 calls it a read segment),
// rpcrdma2_read_segment in draft-cel-nfsv4-rpcrdma-version-two-00. Position
// is the byte offset in the RPC message, before reduction, at which the
// segment's data belongs (RFC 5666 section 3.4); segments that share a
// position form one read chunk.
type ReadSegment struct {
	Position uint32
	Segment
}

// EncodedLen returns the size of r's encoding without the list's
// discriminant: 20 bytes.
func (ReadSegment) EncodedLen() int { return readSegmentSize }

// Append appends the encoding of r (position, then segment) to b.
func (r ReadSegment) Append(b []byte) []byte {
	return r.Segment.Append(xdr.AppendUint32(b, r.Position))
}

func (r ReadSegment) appendText(b []byte) []byte {
	b = append(b, "pos="...)
	b = strconv.AppendUint(b, uint64(r.Position), 10)
	b = append(b, ' ')
	return r.Segment.appendText(b)
}

// String returns r as "pos=112 0xabcd01:8192@0x10000000".
func (r ReadSegment) String() string { return string(r.appendText(nil)) }

// LogValue implements slog.LogValuer.
func (r ReadSegment) LogValue() slog.Value { return slog.StringValue(r.String()) }

// ReadList is the read list, xdr_read_list (draft-ietf-nfsv4-rpcrdma-01
// section 4.2): the read segments of every read chunk in the message, in list
// order. A nil or empty ReadList is the empty list.
type ReadList []ReadSegment

// EncodedLen returns the size of l's encoding, terminator included.
func (l ReadList) EncodedLen() int { return len(l)*(4+readSegmentSize) + 4 }

// Append appends l as a linked list.
func (l ReadList) Append(b []byte) []byte {
	for _, r := range l {
		b = r.Append(xdr.AppendBool(b, true))
	}
	return xdr.AppendBool(b, false)
}

// decode decodes a read list into l, reusing its backing array. Each entry
// is appended only after its bytes were present, so a peer cannot make it
// allocate beyond the size of its message.
func (l *ReadList) decode(d *xdr.Decoder) {
	rl := (*l)[:0]
	for d.Optional() {
		var r ReadSegment
		r.Position = d.Uint32()
		r.Segment.decode(d)
		if d.Err() != nil {
			break
		}
		rl = append(rl, r)
	}
	*l = rl
}

func (l ReadList) appendText(b []byte) []byte {
	b = append(b, '[')
	for i, r := range l {
		if i > 0 {
			b = append(b, ' ')
		}
		b = r.appendText(b)
	}
	return append(b, ']')
}

// String returns l as "[pos=0 0x1:512@0x0 pos=112 0xabcd01:8192@0x10000000]".
func (l ReadList) String() string { return string(l.appendText(nil)) }

// LogValue implements slog.LogValuer.
func (l ReadList) LogValue() slog.Value { return slog.StringValue(l.String()) }

// ReadChunk is one read chunk: the adjacent read segments of a read list
// that share a position (RFC 5666 section 3.4: "all chunks belonging to a
// single RPC argument or result will have the same position"). Its data is
// the concatenation of its segments' data, in list order.
type ReadChunk struct {
	Position uint32
	// Segments aliases the ReadList the chunk came from.
	Segments ReadList
}

// Length returns the number of bytes in the chunk.
func (c ReadChunk) Length() uint64 {
	var n uint64
	for _, s := range c.Segments {
		n += uint64(s.Length)
	}
	return n
}

// String returns c as "pos=112 len=8192 [...]".
func (c ReadChunk) String() string {
	b := append([]byte("pos="), strconv.FormatUint(uint64(c.Position), 10)...)
	b = append(b, " len="...)
	b = strconv.AppendUint(b, c.Length(), 10)
	b = append(b, ' ')
	return string(c.Segments.appendText(b))
}

// LogValue implements slog.LogValuer.
func (c ReadChunk) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Chunks groups l into read chunks, appending them to dst and returning the
// extended slice; runs of adjacent segments with one position become one
// chunk. The chunks alias l. Chunks does not check the list: a position that
// reappears after another starts a second chunk, which Validate rejects
// (RuleChunkSplit). It allocates only if dst lacks capacity.
func (l ReadList) Chunks(dst []ReadChunk) []ReadChunk {
	for i := 0; i < len(l); {
		j := i + 1
		for j < len(l) && l[j].Position == l[i].Position {
			j++
		}
		dst = append(dst, ReadChunk{Position: l[i].Position, Segments: l[i:j:j]})
		i = j
	}
	return dst
}

// WriteChunk is a write chunk, xdr_write_chunk (draft-ietf-nfsv4-rpcrdma-01
// section 4.2): a counted array of segments the responder fills in order. The
// reply chunk has the same form.
type WriteChunk []Segment

// EncodedLen returns the size of c's encoding, count included.
func (c WriteChunk) EncodedLen() int { return 4 + len(c)*segmentSize }

// Append appends c as a counted array.
func (c WriteChunk) Append(b []byte) []byte {
	b = xdr.AppendUint32(b, uint32(len(c)))
	for _, s := range c {
		b = s.Append(b)
	}
	return b
}

// decode decodes a counted array of segments into c's backing array and
// returns the result. The count is checked against the bytes remaining
// before c grows.
func (c WriteChunk) decode(d *xdr.Decoder) WriteChunk {
	n := d.Count(maxDecodeSegments, segmentSize)
	c = slices.Grow(c[:0], n)[:n]
	for i := range c {
		c[i].decode(d)
	}
	return c
}

// Length returns the sum of the segments' lengths. In a reply it is the
// number of bytes the responder wrote (RFC 5666 section 3.6).
func (c WriteChunk) Length() uint64 {
	var n uint64
	for _, s := range c {
		n += uint64(s.Length)
	}
	return n
}

func (c WriteChunk) appendText(b []byte) []byte {
	b = append(b, '[')
	for i, s := range c {
		if i > 0 {
			b = append(b, ' ')
		}
		b = s.appendText(b)
	}
	return append(b, ']')
}

// String returns c as "[0xabcd02:8192@0x20000000 ...]".
func (c WriteChunk) String() string { return string(c.appendText(nil)) }

// LogValue implements slog.LogValuer.
func (c WriteChunk) LogValue() slog.Value { return slog.StringValue(c.String()) }

// WriteList is the write list, xdr_write_list (draft-ietf-nfsv4-rpcrdma-01
// section 4.2): one write chunk per result the requester wants placed
// directly, consumed in the order the results appear in the reply (RFC 5666
// section 3.6).
type WriteList []WriteChunk

// EncodedLen returns the size of l's encoding, terminator included.
func (l WriteList) EncodedLen() int {
	n := 4
	for _, c := range l {
		n += 4 + c.EncodedLen()
	}
	return n
}

// Append appends l as a linked list of counted arrays.
func (l WriteList) Append(b []byte) []byte {
	for _, c := range l {
		b = c.Append(xdr.AppendBool(b, true))
	}
	return xdr.AppendBool(b, false)
}

// decode decodes a write list into l, reusing both its backing array and
// the segment arrays of the chunks it held before.
func (l *WriteList) decode(d *xdr.Decoder) {
	wl := (*l)[:0]
	for d.Optional() {
		if len(wl) < cap(wl) {
			wl = wl[:len(wl)+1]
		} else {
			wl = append(wl, nil)
		}
		last := &wl[len(wl)-1]
		*last = last.decode(d)
		if d.Err() != nil {
			wl = wl[:len(wl)-1]
			break
		}
	}
	*l = wl
}

func (l WriteList) appendText(b []byte) []byte {
	b = append(b, '[')
	for i, c := range l {
		if i > 0 {
			b = append(b, ' ')
		}
		b = c.appendText(b)
	}
	return append(b, ']')
}

// String returns l as "[[0xabcd02:8192@0x20000000] [...]]".
func (l WriteList) String() string { return string(l.appendText(nil)) }

// LogValue implements slog.LogValuer.
func (l WriteList) LogValue() slog.Value { return slog.StringValue(l.String()) }

// ReplyChunk is the reply chunk, rdma_reply: an optional write chunk
// (draft-ietf-nfsv4-rpcrdma-01 section 4.2, "struct xdr_write_chunk
// *rdma_reply") into which the responder writes a reply too long to send
// inline (RFC 5666 section 5.2). Present distinguishes an absent reply chunk
// from one with no segments, which the wire can also express.
type ReplyChunk struct {
	Present bool
	Chunk   WriteChunk
}

// EncodedLen returns the size of r's encoding, discriminant included.
func (r ReplyChunk) EncodedLen() int {
	if !r.Present {
		return 4
	}
	return 4 + r.Chunk.EncodedLen()
}

// Append appends r as optional data.
func (r ReplyChunk) Append(b []byte) []byte {
	b = xdr.AppendBool(b, r.Present)
	if r.Present {
		b = r.Chunk.Append(b)
	}
	return b
}

func (r *ReplyChunk) decode(d *xdr.Decoder) {
	r.Present = d.Optional()
	r.Chunk = r.Chunk[:0]
	if r.Present {
		r.Chunk = r.Chunk.decode(d)
	}
}

func (r ReplyChunk) appendText(b []byte) []byte {
	if !r.Present {
		return append(b, "none"...)
	}
	return r.Chunk.appendText(b)
}

// String returns "none" or the chunk as WriteChunk.String does.
func (r ReplyChunk) String() string { return string(r.appendText(nil)) }

// LogValue implements slog.LogValuer.
func (r ReplyChunk) LogValue() slog.Value { return slog.StringValue(r.String()) }

// ChunkLists is the body of RDMA_MSG and RDMA_NOMSG, and the tail of Version
// One's RDMA_MSGP: rpc_rdma_header in draft-ietf-nfsv4-rpcrdma-01 section
// 4.2, rpcrdma2_chunk_lists in draft-cel-nfsv4-rpcrdma-version-two-00 section
// 4.2 (whose body union calls it rpcrdma2_chunks; they are the same
// structure).
type ChunkLists struct {
	Reads  ReadList
	Writes WriteList
	Reply  ReplyChunk
}

// EncodedLen returns the size of c's encoding.
func (c *ChunkLists) EncodedLen() int {
	return c.Reads.EncodedLen() + c.Writes.EncodedLen() + c.Reply.EncodedLen()
}

// Append appends the three lists to b.
func (c *ChunkLists) Append(b []byte) []byte {
	b = c.Reads.Append(b)
	b = c.Writes.Append(b)
	return c.Reply.Append(b)
}

func (c *ChunkLists) decode(d *xdr.Decoder) {
	c.Reads.decode(d)
	c.Writes.decode(d)
	c.Reply.decode(d)
}

// reset empties the lists, keeping their backing arrays.
func (c *ChunkLists) reset() {
	c.Reads = c.Reads[:0]
	c.Writes = c.Writes[:0]
	c.Reply.Present = false
	c.Reply.Chunk = c.Reply.Chunk[:0]
}

func (c *ChunkLists) appendText(b []byte) []byte {
	b = append(b, "reads="...)
	b = c.Reads.appendText(b)
	b = append(b, " writes="...)
	b = c.Writes.appendText(b)
	b = append(b, " reply="...)
	return c.Reply.appendText(b)
}

// String returns c as "reads=[...] writes=[...] reply=none".
func (c *ChunkLists) String() string { return string(c.appendText(nil)) }

// LogValue implements slog.LogValuer.
func (c *ChunkLists) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("reads", c.Reads.String()),
		slog.String("writes", c.Writes.String()),
		slog.String("reply", c.Reply.String()),
	)
}
