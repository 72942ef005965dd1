package rpcrdma

import (
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Chunk plans: how a call or a reply travels, decided from plain data
// before any memory is registered, as Linux's xprtrdma decides a call's
// read and write chunk types (rpcrdma_marshal_req) before it encodes and
// registers them, and svcrdma a reply's. A plan is a transport header whose
// segments carry lengths, positions and offsets relative to the memory
// they will describe but no handles, and the inline payload as pieces.
// Registration (requester.register, responder.sendReply) then fills in
// each segment's handle and adds the registered region's tagged offset
// (locate); encoding sizes do not depend on those values, so every size
// check is done here, on the header itself (wire.Header.EncodedLen),
// never by hand.

var zeroPad [4]byte

// callShape is what the requester's chunk plan depends on besides the
// call: the negotiated limits and how chunks are cut.
type callShape struct {
	threshold  int         // DDP-eligible items of at least this many bytes go in read chunks
	sendLimit  int         // largest message the responder receives inline
	replyLimit int         // largest message this requester receives inline
	cut        chunkCut    // how chunks are cut into segments
	lim        wire.Limits // what the header must satisfy; MaxHeaderSize is set from sendLimit
}

// chunkCut is how a requester cuts its chunks. Ours is the zero value: one
// segment per chunk, and read chunks without the XDR pad (RFC 8166
// section 3.4.5). Other requesters cut otherwise: Linux's into a segment
// per page, RFC 5666 requesters with the pad, which RFC 8166 section
// 3.4.5 says a responder must accept. The tests plan calls as they do
// (cutFor, requester.go) to check that our responder does.
type chunkCut struct {
	seg int  // segments of at most this many bytes; 0: one per chunk
	pad bool // read chunks include the XDR pad
}

// callPlan is how one call travels. hdr, given to planCall, holds the
// chunk lists.
type callPlan struct {
	pieces    [][]byte // the reduced call, inline or (long) in the position-zero chunk
	inlineLen int      // bytes in pieces
	chunked   []int    // indexes of the call's Items that travel in read chunks
	long      bool     // RDMA_NOMSG: the reduced call goes in a position-zero read chunk
	replyLen  int      // bytes of the reply chunk offered; 0 for none
	cut       chunkCut // how the chunks were cut, for registration to follow
}

// planCall decides how the call m travels in version h.Vers: which items go in
// read chunks, whether each ResultBuf becomes a write chunk (all do),
// whether a reply chunk is offered and how large, and whether the call is
// long. It fills h, whose XID, Vers and Credits the caller has set, with
// the header's Proc and chunk lists (segment handles zero, offsets
// relative to each chunk's memory) and p with the rest; p.pieces and
// p.chunked reuse the backing arrays they are given. It fails, with
// ErrCallTooLarge or a description of a malformed m; it registers nothing
// and is safe to call from any goroutine on its own h, m and p.
func planCall(h *wire.Header, m *rpc.Msg, s *callShape, p *callPlan) error {
	h.Proc = wire.RDMA_MSG
	h.Chunks = wire.ChunkLists{}
	p.pieces, p.chunked = p.pieces[:0], p.chunked[:0]
	p.inlineLen, p.long, p.replyLen, p.cut = 0, false, 0, s.cut

	// Reduce: inline the small items; the others go in read chunks at
	// their positions in the un-reduced XDR stream, with their length
	// word left inline (RFC 8166 section 3.4.5).
	shift := 0
	var err error
	p.pieces, p.inlineLen, err = reduce(m, p.pieces, func(i int, it rpc.DDPItem) bool {
		pos := it.Offset + shift
		shift += xdr.RoundUp(len(it.Data))
		if !readChunked(len(it.Data), s.threshold) {
			return false
		}
		n := len(it.Data)
		if s.cut.pad {
			n = xdr.RoundUp(n)
		}
		for _, seg := range segments(n, s.cut.seg) {
			h.Chunks.Reads = append(h.Chunks.Reads, wire.ReadSegment{Position: uint32(pos), Segment: seg})
		}
		p.chunked = append(p.chunked, i)
		return true
	})
	if err != nil {
		return fmt.Errorf("rpcrdma: call 0x%x: %w", h.XID, err)
	}

	for _, buf := range m.ResultBufs {
		h.Chunks.Writes = append(h.Chunks.Writes, segments(len(buf), s.cut.seg))
	}

	// A reply chunk when a reply of MaxReply bytes would not fit inline
	// behind the reply's transport header, which repeats the write list.
	if m.MaxReply > 0 && replyHeaderLen(h.Vers, h.Chunks.Writes)+m.MaxReply > s.replyLimit {
		p.replyLen = xdr.RoundUp(m.MaxReply)
		h.Chunks.Reply = wire.ReplyChunk{Present: true, Chunk: wire.WriteChunk{{Length: uint32(p.replyLen)}}}
	}

	if h.EncodedLen()+p.inlineLen > s.sendLimit {
		// Long call: the reduced message goes in a position-zero read
		// chunk ahead of the data chunks (RFC 5666 section 5.1).
		pzrc := wire.ReadSegment{Segment: wire.Segment{Length: uint32(p.inlineLen)}}
		h.Chunks.Reads = append(wire.ReadList{pzrc}, h.Chunks.Reads...)
		h.Proc = wire.RDMA_NOMSG
		p.long = true
		if n := h.EncodedLen(); n > s.sendLimit {
			return fmt.Errorf("%w: call 0x%x needs a %d-byte transport header, inline limit %d", ErrCallTooLarge, h.XID, n, s.sendLimit)
		}
	}
	lim := s.lim
	lim.MaxHeaderSize = s.sendLimit
	if err := h.Validate(wire.DirCall, lim); err != nil {
		return fmt.Errorf("%w: call 0x%x: %v", ErrCallTooLarge, h.XID, err)
	}
	return nil
}

// readChunked reports whether planCall sends a DDP-eligible item of n
// bytes in a read chunk rather than inline: from threshold bytes up
// (Config.DDPThreshold).
func readChunked(n, threshold int) bool { return n >= threshold }

// reduce walks m's held-apart items in order and returns the message as
// pieces appended to pieces, and their length: the XDR stream with each
// item either inlined (its data and XDR pad) or, where apart(i, item)
// reports true, left out for a chunk to carry. It fails if the items are
// out of order.
func reduce(m *rpc.Msg, pieces [][]byte, apart func(i int, it rpc.DDPItem) bool) ([][]byte, int, error) {
	prev, n := 0, 0
	for i, it := range m.Items {
		if it.Offset < prev || it.Offset > len(m.XDR) {
			return pieces, n, fmt.Errorf("item at offset %d out of order", it.Offset)
		}
		pieces = append(pieces, m.XDR[prev:it.Offset])
		n += it.Offset - prev
		prev = it.Offset
		if !apart(i, it) {
			pieces = append(pieces, it.Data, zeroPad[:xdr.Pad(len(it.Data))])
			n += xdr.RoundUp(len(it.Data))
		}
	}
	pieces = append(pieces, m.XDR[prev:])
	return pieces, n + len(m.XDR) - prev, nil
}

// replyHeaderLen returns the size of the transport header of an inline
// reply that returns the write list writes.
func replyHeaderLen(v wire.Version, writes wire.WriteList) int {
	h := wire.Header{Vers: v, Proc: wire.RDMA_MSG, Chunks: wire.ChunkLists{Writes: writes}}
	return h.EncodedLen()
}

// segments describes n bytes of memory as one segment, or as segments of
// at most size bytes; offsets are relative to the memory's start and
// handles zero.
func segments(n, size int) wire.WriteChunk {
	if size <= 0 || size >= n {
		return wire.WriteChunk{{Length: uint32(n)}}
	}
	segs := make(wire.WriteChunk, 0, segmentCount(n, size))
	for off := 0; off < n; off += size {
		segs = append(segs, wire.Segment{Length: uint32(min(size, n-off)), Offset: uint64(off)})
	}
	return segs
}

// segmentCount returns how many segments segments(n, size) returns.
func segmentCount(n, size int) int {
	if size <= 0 || size >= n {
		return 1
	}
	return (n + size - 1) / size
}

// replyKind is how a reply travels.
type replyKind uint8

const (
	replyInline    replyKind = iota // RDMA_MSG, the reply after the header
	replyChunk                      // RDMA_NOMSG, the reply written into the reply chunk
	replyReadChunk                  // RDMA_NOMSG, the reply in a position-zero read chunk (RFC 5666 only)
)

// replyShape is what the responder's reply plan depends on besides the
// reply: what the call offered and the negotiated limits.
type replyShape struct {
	writes    wire.WriteList  // the call's write list
	reply     wire.ReplyChunk // the call's reply chunk
	sendLimit int             // largest message the requester receives inline
	readReply bool            // Config.ReadChunkReplies, in Version One
}

// replyPlan is how one reply travels.
type replyPlan struct {
	kind      replyKind
	pieces    [][]byte // the reduced reply: inline, or for a chunk
	inlineLen int      // bytes in pieces
	results   []int    // indexes of the reply's Items written into write chunks 0, 1, ...
}

// planError is a reply the call's chunks cannot carry; the responder
// answers the call with ERR_CHUNK.
type planError struct {
	xid uint32
	why string
}

func (e *planError) Error() string {
	return fmt.Sprintf("rpcrdma: reply 0x%x: %s", e.xid, e.why)
}

// planReply decides how the reply m travels: each of its held-apart
// results goes into the next write chunk the call offered, while there
// is one (an empty result stays inline); the rest is sent inline if it
// fits, else written into the reply chunk if the call offered one large
// enough, else, with readReply, offered as a read chunk. It fills h, whose
// XID, Vers and Credits the caller has set, with the Proc and the chunk
// lists returned: the write list with the lengths written, the reply
// chunk with the length written (segment handles and offsets as the call
// sent them). A reply that fits none of these fails with a *planError
// that gives the sizes.
func planReply(h *wire.Header, m *rpc.Msg, s *replyShape, p *replyPlan) error {
	h.Proc = wire.RDMA_MSG
	h.Chunks = wire.ChunkLists{}
	p.kind, p.inlineLen = replyInline, 0
	p.pieces, p.results = p.pieces[:0], p.results[:0]

	if len(s.writes) > 0 {
		h.Chunks.Writes = make(wire.WriteList, len(s.writes))
		for i, wc := range s.writes {
			h.Chunks.Writes[i] = fill(wc, 0)
		}
	}
	var tooLarge error
	var err error
	p.pieces, p.inlineLen, err = reduce(m, p.pieces, func(i int, it rpc.DDPItem) bool {
		next := len(p.results)
		if next >= len(s.writes) || len(it.Data) == 0 || tooLarge != nil {
			return false
		}
		if n := s.writes[next].Length(); uint64(len(it.Data)) > n {
			tooLarge = &planError{xid: h.XID, why: fmt.Sprintf("result of %d bytes exceeds write chunk %d of %d bytes", len(it.Data), next, n)}
			return false
		}
		h.Chunks.Writes[next] = fill(s.writes[next], len(it.Data))
		p.results = append(p.results, i)
		return true
	})
	if err != nil {
		return fmt.Errorf("rpcrdma: reply 0x%x: %w", h.XID, err)
	}
	if tooLarge != nil {
		return tooLarge
	}

	if h.EncodedLen()+p.inlineLen <= s.sendLimit {
		return nil
	}
	if s.reply.Present && s.reply.Chunk.Length() >= uint64(p.inlineLen) {
		h.Proc = wire.RDMA_NOMSG
		h.Chunks.Reply = wire.ReplyChunk{Present: true, Chunk: fill(s.reply.Chunk, p.inlineLen)}
		p.kind = replyChunk
		return nil
	}
	if s.readReply {
		h.Proc = wire.RDMA_NOMSG
		h.Chunks.Reads = wire.ReadList{{Segment: wire.Segment{Length: uint32(p.inlineLen)}}}
		p.kind = replyReadChunk
		return nil
	}
	why := fmt.Sprintf("%d bytes fit neither inline (%d bytes with a %d-byte header) nor the reply chunk the call offered (%d bytes)",
		p.inlineLen, s.sendLimit, h.EncodedLen(), s.reply.Chunk.Length())
	if unused := len(s.writes) - len(p.results); unused > 0 {
		// The requester offered room for results that the handler did
		// not hold apart: the fix is on this side.
		why += fmt.Sprintf("; %d of the %d write chunks the call offered went unused: the handler marks a result for one with rpc.Body.AppendDDPOpaque",
			unused, len(s.writes))
	}
	return &planError{xid: h.XID, why: why}
}

// locate completes a planned segment, whose offset is relative to the
// memory it describes, with the handle and tagged offset of mr, that
// memory's registration.
func locate(seg *wire.Segment, mr rdma.MR) {
	seg.Handle = uint32(mr.STag())
	seg.Offset += mr.TO()
}

// fill returns a copy of chunk whose segments report n bytes written, in
// order, as a reply returns them. The caller has checked that chunk holds
// n bytes.
func fill(chunk wire.WriteChunk, n int) wire.WriteChunk {
	out := append(wire.WriteChunk(nil), chunk...)
	for j := range out {
		k := min(n, int(out[j].Length))
		out[j].Length = uint32(k)
		n -= k
	}
	return out
}

// flatten returns the n bytes of pieces in one buffer.
func flatten(pieces [][]byte, n int) []byte {
	return flattenInto(make([]byte, 0, n), pieces)
}

// flattenInto appends pieces to flat.
func flattenInto(flat []byte, pieces [][]byte) []byte {
	for _, p := range pieces {
		flat = append(flat, p...)
	}
	return flat
}
