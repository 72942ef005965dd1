package wire

import "strconv"

// Default limits. A zero field of Limits means its default.
const (
	// DefaultMaxSegments bounds the segments of one header, all lists
	// together. Linux's client puts at most RPCRDMA_MAX_HDR_SEGS = 16
	// segments in each of its three lists (net/sunrpc/xprtrdma/xprt_rdma.h),
	// 48 in all.
	DefaultMaxSegments = 64
	// DefaultMaxChunks bounds the chunks of one header: read chunks,
	// write chunks and the reply chunk together.
	DefaultMaxChunks = 16
	// DefaultMaxHeaderSize is Version One's default inline threshold (RFC
	// 8166 section 3.3.2; shared notes anchors-mission.md section 4.5):
	// a header must fit in the Send that carries it.
	DefaultMaxHeaderSize = 1024
	// DefaultMaxOptInfo leaves room in a default-size header for the rest
	// of an RDMA_OPTIONAL header (24 bytes).
	DefaultMaxOptInfo = DefaultMaxHeaderSize - 24
)

// Limits are the bounds Validate holds a header to. The zero value means
// every default. A connection typically sets MaxHeaderSize to its inline
// threshold for the direction in question once it is negotiated (RFC 8797
// private data, or 4096 bytes in Version Two,
// draft-cel-nfsv4-rpcrdma-version-two-00 section 2.3).
type Limits struct {
	MaxSegments   int // segments in all lists together; default DefaultMaxSegments
	MaxChunks     int // read, write and reply chunks together; default DefaultMaxChunks
	MaxHeaderSize int // bytes of encoded header; default DefaultMaxHeaderSize
	MaxOptInfo    int // bytes of rdma_optinfo; default DefaultMaxOptInfo

	// AllowReadReply accepts read chunks in Version One replies: RFC 5666 let
	// a responder return a reply, or parts of it, as read chunks that the
	// requester pulls and acknowledges with RDMA_DONE (RFC 5666 sections 3.8
	// and 5.2). RFC 8166 removed that, and Version Two
	// (draft-cel-nfsv4-rpcrdma-version-two-00, built on
	// draft-ietf-nfsv4-rfc5666bis) never had it.
	AllowReadReply bool
}

func (l Limits) withDefaults() Limits {
	if l.MaxSegments <= 0 {
		l.MaxSegments = DefaultMaxSegments
	}
	if l.MaxChunks <= 0 {
		l.MaxChunks = DefaultMaxChunks
	}
	if l.MaxHeaderSize <= 0 {
		l.MaxHeaderSize = DefaultMaxHeaderSize
	}
	if l.MaxOptInfo <= 0 {
		l.MaxOptInfo = DefaultMaxOptInfo
	}
	return l
}

// Validate applies the rules that relate a header's fields to each other,
// the second pass after Decode (or the check before Append). dir is the
// direction of the RPC message the header carries or stands for; DirUnknown
// skips the rules that need it. The rules, in the order they are checked:
//
//   - the version is 1 or 2 and the proc a member of its enum (RuleVersion,
//     RuleProc), and Version Two's RDMA_MSGP and RDMA_DONE are not used
//     (RuleReserved; draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2);
//   - at most lim.MaxSegments segments and lim.MaxChunks chunks
//     (RuleSegments, RuleChunks), and an encoded size of at most
//     lim.MaxHeaderSize (RuleHeaderSize);
//   - write and reply chunks have segments (RuleEmptyChunk); read segments
//     have a length, and so do write and reply segments in a call
//     (RuleZeroLength; in a reply a zero length reports an unused segment,
//     RFC 5666 section 3.4);
//   - read positions are multiples of four (RulePositionAlign; XDR items
//     start on 4-byte boundaries, RFC 5666 section 3.7, and Linux rejects
//     other positions), the segments of one read chunk are adjacent
//     (RuleChunkSplit; RFC 5666 section 3.4) and positions never decrease
//     (RulePositionOrder; the order XDR encoding produces them in, which
//     later Version Two drafts require);
//   - a position-zero read chunk, which carries the whole RPC message, only
//     with RDMA_NOMSG (RulePositionZero; RFC 5666 section 5.1: a long
//     message is "the first entry in the read chunk list with an XDR
//     position of zero" of an RDMA_NOMSG header);
//   - RDMA_NOMSG has somewhere for the RPC message: a position-zero read
//     chunk in a call, a reply chunk in a reply (or, with AllowReadReply, a
//     position-zero read chunk), either when the direction is unknown
//     (RuleNoMsgBody; RFC 5666 sections 5.1 and 5.2);
//   - a reply has no read list unless lim.AllowReadReply and Version One
//     (RuleReadInReply), and an RDMA_MSG or RDMA_MSGP reply reports no bytes
//     in a reply chunk, since its message is inline (RuleReplyChunkInMsg;
//     Linux's client rejects it, rpcrdma_decode_msg);
//   - an ERR_VERS range has low <= high (RuleVersRange), and rdma_optinfo
//     is at most lim.MaxOptInfo bytes (RuleOptInfoSize).
//
// It returns nil or a *HeaderError whose Code is ErrVers for RuleVersion and
// ErrChunk (ErrBadHeader) otherwise. Validate does not allocate unless it
// fails, and does not modify h.
func (h *Header) Validate(dir Direction, lim Limits) error {
	lim = lim.withDefaults()
	if !h.Vers.supported() {
		return &HeaderError{Vers: h.Vers, Code: ErrVers, Rule: RuleVersion, Value: uint64(h.Vers)}
	}
	fail := func(r Rule) *HeaderError {
		return &HeaderError{Vers: h.Vers, Code: ErrChunk, Rule: r, Proc: h.Proc, Dir: dir}
	}
	if !h.Proc.validIn(h.Vers) {
		e := fail(RuleProc)
		e.Value = uint64(h.Proc)
		return e
	}
	if h.Vers == Version2 && (h.Proc == RDMA_MSGP || h.Proc == RDMA_DONE) {
		return fail(RuleReserved)
	}
	if n := h.EncodedLen(); n > lim.MaxHeaderSize {
		e := fail(RuleHeaderSize)
		e.Value, e.Limit = uint64(n), uint64(lim.MaxHeaderSize)
		return e
	}
	switch h.Proc {
	case RDMA_MSG, RDMA_NOMSG, RDMA_MSGP:
		if e := h.validateChunks(dir, lim); e != nil {
			e.Vers, e.Code, e.Proc, e.Dir = h.Vers, ErrChunk, h.Proc, dir
			return e
		}
	case RDMA_ERROR:
		if h.Error.Code == ErrVers && h.Error.Low > h.Error.High {
			e := fail(RuleVersRange)
			e.Value, e.Limit = uint64(h.Error.Low), uint64(h.Error.High)
			return e
		}
		if h.Vers == Version2 && h.Error.Code != ErrVers && h.Error.Code != ErrBadHeader && h.Error.Code != ErrInvalOption {
			e := fail(RuleErrorCode)
			e.Value = uint64(h.Error.Code)
			return e
		}
	case RDMA_OPTIONAL:
		if n := len(h.Optional.Info); n > lim.MaxOptInfo {
			e := fail(RuleOptInfoSize)
			e.Value, e.Limit = uint64(n), uint64(lim.MaxOptInfo)
			return e
		}
	}
	return nil
}

// validateChunks checks the chunk lists of an RDMA_MSG, RDMA_NOMSG or
// RDMA_MSGP header, in the order Validate documents. It returns an error
// with Rule, Where, Value and Limit set; the caller fills in the rest.
func (h *Header) validateChunks(dir Direction, lim Limits) *HeaderError {
	c := &h.Chunks
	if len(c.Reads) == 0 && len(c.Writes) == 0 && !c.Reply.Present {
		// Most messages offer no chunk; of the rules below only an
		// RDMA_NOMSG's need of one applies then.
		if h.Proc == RDMA_NOMSG {
			return &HeaderError{Rule: RuleNoMsgBody}
		}
		return nil
	}
	if e := checkCounts(c, lim); e != nil {
		return e
	}
	if e := checkWriteSegments(c, dir); e != nil {
		return e
	}
	if e := checkReadPositions(c.Reads); e != nil {
		return e
	}
	return h.checkChunksOfProc(dir, lim)
}

// checkCounts holds c's segments and chunks, all lists together, to
// lim (RuleSegments, RuleChunks). The read segments that share a
// position make one chunk.
func checkCounts(c *ChunkLists, lim Limits) *HeaderError {
	segs, chunks := len(c.Reads), len(c.Writes)
	for i := range c.Reads {
		if i == 0 || c.Reads[i].Position != c.Reads[i-1].Position {
			chunks++
		}
	}
	for _, w := range c.Writes {
		segs += len(w)
	}
	if c.Reply.Present {
		segs += len(c.Reply.Chunk)
		chunks++
	}
	if segs > lim.MaxSegments {
		return &HeaderError{Rule: RuleSegments, Value: uint64(segs), Limit: uint64(lim.MaxSegments)}
	}
	if chunks > lim.MaxChunks {
		return &HeaderError{Rule: RuleChunks, Value: uint64(chunks), Limit: uint64(lim.MaxChunks)}
	}
	return nil
}

// checkWriteSegments checks that c's write chunks and reply chunk have
// segments (RuleEmptyChunk) and, in a call, that each segment has a
// length (RuleZeroLength; in a reply a zero length reports an unused
// segment).
func checkWriteSegments(c *ChunkLists, dir Direction) *HeaderError {
	for i, w := range c.Writes {
		if len(w) == 0 {
			return &HeaderError{Rule: RuleEmptyChunk, Where: "write chunk " + strconv.Itoa(i)}
		}
		if dir == DirCall {
			for j, s := range w {
				if s.Length == 0 {
					return &HeaderError{Rule: RuleZeroLength, Where: "write chunk " + strconv.Itoa(i) + " segment " + strconv.Itoa(j)}
				}
			}
		}
	}
	if c.Reply.Present {
		if len(c.Reply.Chunk) == 0 {
			return &HeaderError{Rule: RuleEmptyChunk, Where: "reply chunk"}
		}
		if dir == DirCall {
			for j, s := range c.Reply.Chunk {
				if s.Length == 0 {
					return &HeaderError{Rule: RuleZeroLength, Where: "reply chunk segment " + strconv.Itoa(j)}
				}
			}
		}
	}
	return nil
}

// checkReadPositions checks that each read segment has a length
// (RuleZeroLength) and a position that is a multiple of four
// (RulePositionAlign), and that positions never decrease: going back
// to the position of a segment before the one just before splits that
// chunk (RuleChunkSplit), any other decrease is out of order
// (RulePositionOrder).
func checkReadPositions(reads ReadList) *HeaderError {
	for i, r := range reads {
		if r.Length == 0 {
			return &HeaderError{Rule: RuleZeroLength, Where: readWhere(i), Value: uint64(r.Position)}
		}
		if r.Position%4 != 0 {
			return &HeaderError{Rule: RulePositionAlign, Where: readWhere(i), Value: uint64(r.Position)}
		}
		if i > 0 && r.Position < reads[i-1].Position {
			rule := RulePositionOrder
			for _, q := range reads[:i-1] {
				if q.Position == r.Position {
					rule = RuleChunkSplit
					break
				}
			}
			return &HeaderError{Rule: rule, Where: readWhere(i), Value: uint64(r.Position), Limit: uint64(reads[i-1].Position)}
		}
	}
	return nil
}

// checkChunksOfProc applies the rules that relate the chunk lists to
// h's proc and to dir: where the RPC message is (RulePositionZero,
// RuleNoMsgBody), and what a reply may carry (RuleReadInReply,
// RuleReplyChunkInMsg). It assumes checkReadPositions has passed.
func (h *Header) checkChunksOfProc(dir Direction, lim Limits) *HeaderError {
	c := &h.Chunks
	// Positions never decrease, so a position-zero chunk comes first.
	pzrc := len(c.Reads) > 0 && c.Reads[0].Position == 0
	if pzrc && h.Proc != RDMA_NOMSG {
		return &HeaderError{Rule: RulePositionZero, Where: "read segment 0"}
	}
	readReply := lim.AllowReadReply && h.Vers == Version1
	if dir == DirReply && len(c.Reads) > 0 && !readReply {
		return &HeaderError{Rule: RuleReadInReply, Where: "read segment 0"}
	}
	if h.Proc == RDMA_NOMSG {
		// A reply's position-zero chunk got past RuleReadInReply only
		// under AllowReadReply.
		ok := pzrc || dir != DirCall && c.Reply.Present
		if !ok {
			return &HeaderError{Rule: RuleNoMsgBody}
		}
	}
	if dir == DirReply && h.Proc != RDMA_NOMSG && c.Reply.Present {
		if n := c.Reply.Chunk.Length(); n != 0 {
			return &HeaderError{Rule: RuleReplyChunkInMsg, Where: "reply chunk", Value: n}
		}
	}
	return nil
}

func readWhere(i int) string { return "read segment " + strconv.Itoa(i) }
