package wire

import (
	"log/slog"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// PrefixLen is the size of the words every version of the transport header
// begins with: rdma_xid, rdma_vers, rdma_credit. The fourth word, rdma_proc,
// is also at a fixed offset in every version (draft-ietf-nfsv4-rpcrdma-01
// section 4.1), but a responder needs only these three to answer ERR_VERS.
const PrefixLen = 12

// minHeaderLen is the prefix plus rdma_proc.
const minHeaderLen = PrefixLen + 4

// Prefix is the version-independent start of a transport header.
type Prefix struct {
	XID     uint32
	Vers    Version
	Credits uint32
}

// DecodePrefix decodes the first PrefixLen bytes of b, whatever version
// they announce. It fails only if b is shorter than that, in which case the
// message cannot be answered (there is no XID to answer) and is dropped.
func DecodePrefix(b []byte) (Prefix, error) {
	var d xdr.Decoder
	d.Reset(b)
	p := Prefix{XID: d.Uint32(), Vers: Version(d.Uint32()), Credits: d.Uint32()}
	if err := d.Err(); err != nil {
		return Prefix{}, &HeaderError{Code: ErrChunk, Rule: RuleMalformed, Err: err}
	}
	return p, nil
}

func (p Prefix) appendText(b []byte) []byte {
	b = append(b, "xid=0x"...)
	b = strconv.AppendUint(b, uint64(p.XID), 16)
	b = append(b, " vers="...)
	b = strconv.AppendUint(b, uint64(p.Vers), 10)
	b = append(b, " credits="...)
	return strconv.AppendUint(b, uint64(p.Credits), 10)
}

// String returns p as "xid=0x4c414201 vers=1 credits=32".
func (p Prefix) String() string { return string(p.appendText(nil)) }

// LogValue implements slog.LogValuer.
func (p Prefix) LogValue() slog.Value { return slog.GroupValue(p.attrs()...) }

func (p Prefix) attrs() []slog.Attr {
	return []slog.Attr{
		slog.String("xid", "0x"+strconv.FormatUint(uint64(p.XID), 16)),
		slog.Uint64("vers", uint64(p.Vers)),
		slog.Uint64("credits", uint64(p.Credits)),
	}
}

// Padding is the part of a Version One RDMA_MSGP body that precedes its chunk
// lists (rpc_rdma_header_padded, draft-ietf-nfsv4-rpcrdma-01 section 4.2):
// the alignment the sender padded large opaque items to, and the size at or
// above which it did (draft-ietf-nfsv4-rpcrdma-01 section 3.5). RFC 8166 no
// longer uses RDMA_MSGP.
type Padding struct {
	Align  uint32 // rdma_align
	Thresh uint32 // rdma_thresh
}

// ErrorBody is the body of RDMA_ERROR: rpc_rdma_error
// (draft-ietf-nfsv4-rpcrdma-01 section 4.2) or rpcrdma2_error
// (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2).
type ErrorBody struct {
	Code ErrorCode
	// Low and High are the inclusive range of versions the sender supports,
	// present when Code is ErrVers.
	Low, High Version
	// Extra is the body of a Version One error with a code other than
	// ERR_VERS and ERR_CHUNK: the default arm of rpc_rdma_error, "uint32
	// rdma_extra[8]" (RFC 5666 section 4.3). ERR_CHUNK itself is void, and
	// Linux sends it with no body.
	// Version Two has no default arm: an unknown code there is undecodable.
	Extra [8]uint32
}

// Optional is the body of a Version Two RDMA_OPTIONAL message,
// rpcrdma2_optional (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). The
// meaning of Type and Info is defined by the optional feature; an RPC message
// may follow (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2).
type Optional struct {
	Type uint32 // rdma_opttype
	// Info is rdma_optinfo. After Decode it aliases the decoded buffer.
	Info []byte
}

// Header is a transport header of either version: rdma_msg
// (draft-ietf-nfsv4-rpcrdma-01 section 4.2) or rpcrdma2_xprt_hdr
// (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). The two share their
// prefix and their chunk lists; Vers selects which body layout Proc names.
// Only the body member Proc selects is meaningful: Chunks for RDMA_MSG and
// RDMA_NOMSG, Padding and Chunks for Version One's RDMA_MSGP, Error for
// RDMA_ERROR, Optional for Version Two's RDMA_OPTIONAL; RDMA_DONE and Version
// Two's reserved RDMA_MSGP have no body.
//
// A Header is meant to be reused: Decode overwrites it in place and keeps
// the backing arrays of its lists, so steady-state decoding allocates
// nothing. A Header is not safe for concurrent use.
type Header struct {
	XID     uint32  // rdma_xid: the XID of the RPC message carried or answered
	Vers    Version // rdma_vers
	Credits uint32  // rdma_credit: requested in a call, granted in a reply
	Proc    Proc    // rdma_proc

	Chunks   ChunkLists
	Padding  Padding
	Error    ErrorBody
	Optional Optional
}

// Prefix returns the version-independent part of h.
func (h *Header) Prefix() Prefix { return Prefix{XID: h.XID, Vers: h.Vers, Credits: h.Credits} }

// HasPayload reports whether an RPC message follows a header of h's version
// and type in the same Send: after RDMA_MSG, Version One's RDMA_MSGP and
// (optionally) Version Two's RDMA_OPTIONAL. Every other type stands alone
// (draft-ietf-nfsv4-rpcrdma-01 section 4.1,
// draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2).
func (h *Header) HasPayload() bool {
	switch h.Proc {
	case RDMA_MSG:
		return true
	case RDMA_MSGP:
		return h.Vers != Version2
	case RDMA_OPTIONAL:
		return h.Vers == Version2
	}
	return false
}

// Decode decodes the transport header at the start of b into h and returns
// its length. For a header that HasPayload, the RPC message is b[n:],
// unconsumed and uncopied; for every other type the header must fill b, and
// bytes after it are an error. Decode reuses h's list arrays, so lists
// read from h before the call are overwritten; segments are copied out of
// b, but Optional.Info aliases it and, like the payload, is valid only as
// long as b is.
//
// Decode checks only what the XDR defines: that every item is present, that
// discriminants are 0 or 1, that rdma_vers is 1 or 2 and rdma_proc and the
// error code are members of that version's enums. Every count and length is
// checked against the bytes remaining before anything is allocated for it,
// so memory use is bounded by len(b). The rules that relate fields to each
// other, and the policy limits, are Validate's.
//
// Errors are *HeaderError. An unsupported rdma_vers fails with Code ErrVers
// once the prefix is decoded, whatever follows; h then holds that prefix,
// enough to answer. Any other failure has Code ErrChunk (ErrBadHeader in
// Version Two) and Rule RuleMalformed, RuleProc or RuleErrorCode; if b is
// shorter than PrefixLen there is nothing to answer. On error h's body is
// unspecified and n is 0.
func (h *Header) Decode(b []byte) (n int, err error) {
	var d xdr.Decoder
	d.Reset(b)
	h.XID = d.Uint32()
	h.Vers = Version(d.Uint32())
	h.Credits = d.Uint32()
	if err := d.Err(); err != nil {
		return 0, &HeaderError{Code: ErrChunk, Rule: RuleMalformed, Err: err}
	}
	if !h.Vers.supported() {
		return 0, &HeaderError{Vers: h.Vers, Code: ErrVers, Rule: RuleVersion, Value: uint64(h.Vers)}
	}
	h.Proc = Proc(d.Uint32())
	if err := d.Err(); err != nil {
		return 0, &HeaderError{Vers: h.Vers, Code: ErrChunk, Rule: RuleMalformed, Err: err}
	}
	if !h.Proc.validIn(h.Vers) {
		return 0, &HeaderError{Vers: h.Vers, Code: ErrChunk, Rule: RuleProc, Proc: h.Proc, Value: uint64(h.Proc)}
	}
	h.Chunks.reset()
	h.Padding = Padding{}
	h.Error = ErrorBody{}
	h.Optional = Optional{}

	switch h.Proc {
	case RDMA_MSG, RDMA_NOMSG:
		h.Chunks.decode(&d)
	case RDMA_MSGP:
		if h.Vers == Version1 {
			h.Padding.Align = d.Uint32()
			h.Padding.Thresh = d.Uint32()
			h.Chunks.decode(&d)
		}
	case RDMA_ERROR:
		if rule := h.Error.decode(&d, h.Vers); rule != 0 {
			return 0, &HeaderError{Vers: h.Vers, Code: ErrChunk, Rule: rule, Proc: h.Proc, Value: uint64(h.Error.Code)}
		}
	case RDMA_OPTIONAL:
		h.Optional.Type = d.Uint32()
		h.Optional.Info = d.Opaque(maxDecodeOptInfo)
	}
	if !h.HasPayload() {
		d.Done()
	}
	if err := d.Err(); err != nil {
		return 0, &HeaderError{Vers: h.Vers, Code: ErrChunk, Rule: RuleMalformed, Proc: h.Proc, Where: h.Proc.String() + " header", Err: err}
	}
	return d.Offset(), nil
}

// decode decodes an error body of version v. It returns RuleErrorCode for a
// Version Two code outside the enum, otherwise 0 (failures of the decoder
// itself stick in d).
func (e *ErrorBody) decode(d *xdr.Decoder, v Version) Rule {
	e.Code = ErrorCode(d.Uint32())
	switch {
	case e.Code == ErrVers:
		e.Low = Version(d.Uint32())
		e.High = Version(d.Uint32())
	case e.Code == ErrChunk, v == Version2 && e.Code == ErrInvalOption:
	case v == Version2:
		if d.Err() == nil {
			return RuleErrorCode
		}
	default:
		for i := range e.Extra {
			e.Extra[i] = d.Uint32()
		}
	}
	return 0
}

func (e *ErrorBody) encodedLen(v Version) int {
	switch {
	case e.Code == ErrVers:
		return 12
	case e.Code == ErrChunk, v == Version2:
		return 4
	}
	return 4 + 4*len(e.Extra)
}

func (e *ErrorBody) append(b []byte, v Version) []byte {
	b = xdr.AppendUint32(b, uint32(e.Code))
	switch {
	case e.Code == ErrVers:
		b = xdr.AppendUint32(b, uint32(e.Low))
		b = xdr.AppendUint32(b, uint32(e.High))
	case e.Code == ErrChunk, v == Version2:
	default:
		for _, w := range e.Extra {
			b = xdr.AppendUint32(b, w)
		}
	}
	return b
}

// EncodedLen returns the size of h's encoding: the prefix, rdma_proc and the
// body Proc selects in h.Vers's layout. A version other than 2 is laid out
// as Version One; a Proc with no arm in that layout has no body.
func (h *Header) EncodedLen() int {
	n := minHeaderLen
	switch h.Proc {
	case RDMA_MSG, RDMA_NOMSG:
		n += h.Chunks.EncodedLen()
	case RDMA_MSGP:
		if h.Vers != Version2 {
			n += 8 + h.Chunks.EncodedLen()
		}
	case RDMA_ERROR:
		n += h.Error.encodedLen(h.Vers)
	case RDMA_OPTIONAL:
		if h.Vers == Version2 {
			n += 4 + xdr.OpaqueLen(len(h.Optional.Info))
		}
	}
	return n
}

// Append appends the encoding of h to b and returns the extended slice; it
// writes exactly EncodedLen bytes and allocates only if b lacks capacity.
// It encodes whatever h holds: call Validate first to hold a header to the
// rules. The RPC message, when one follows, is the caller's to append.
func (h *Header) Append(b []byte) []byte {
	b = xdr.AppendUint32(b, h.XID)
	b = xdr.AppendUint32(b, uint32(h.Vers))
	b = xdr.AppendUint32(b, h.Credits)
	b = xdr.AppendUint32(b, uint32(h.Proc))
	switch h.Proc {
	case RDMA_MSG, RDMA_NOMSG:
		b = h.Chunks.Append(b)
	case RDMA_MSGP:
		if h.Vers != Version2 {
			b = xdr.AppendUint32(b, h.Padding.Align)
			b = xdr.AppendUint32(b, h.Padding.Thresh)
			b = h.Chunks.Append(b)
		}
	case RDMA_ERROR:
		b = h.Error.append(b, h.Vers)
	case RDMA_OPTIONAL:
		if h.Vers == Version2 {
			b = xdr.AppendUint32(b, h.Optional.Type)
			b = xdr.AppendOpaque(b, h.Optional.Info)
		}
	}
	return b
}

func (h *Header) appendText(b []byte) []byte {
	b = h.Prefix().appendText(b)
	b = append(b, ' ')
	b = append(b, h.Proc.String()...)
	switch h.Proc {
	case RDMA_MSG, RDMA_NOMSG:
		b = append(b, ' ')
		b = h.Chunks.appendText(b)
	case RDMA_MSGP:
		if h.Vers != Version2 {
			b = append(b, " align="...)
			b = strconv.AppendUint(b, uint64(h.Padding.Align), 10)
			b = append(b, " thresh="...)
			b = strconv.AppendUint(b, uint64(h.Padding.Thresh), 10)
			b = append(b, ' ')
			b = h.Chunks.appendText(b)
		}
	case RDMA_ERROR:
		b = append(b, ' ')
		b = append(b, h.Error.Code.Name(h.Vers)...)
		if h.Error.Code == ErrVers {
			b = append(b, " low="...)
			b = strconv.AppendUint(b, uint64(h.Error.Low), 10)
			b = append(b, " high="...)
			b = strconv.AppendUint(b, uint64(h.Error.High), 10)
		}
	case RDMA_OPTIONAL:
		if h.Vers == Version2 {
			b = append(b, " opttype="...)
			b = strconv.AppendUint(b, uint64(h.Optional.Type), 10)
			b = append(b, " optinfo="...)
			b = strconv.AppendInt(b, int64(len(h.Optional.Info)), 10)
			b = append(b, 'B')
		}
	}
	return b
}

// String returns a one-line rendering shared by logs, tests and the trace
// decoder, e.g.
//
//	xid=0x4c414206 vers=1 credits=32 RDMA_MSG reads=[pos=112 0xabcd01:8192@0x10000000] writes=[] reply=none
//	xid=0x4c414201 vers=1 credits=1 RDMA_ERROR ERR_VERS low=1 high=1
func (h *Header) String() string { return string(h.appendText(nil)) }

// LogValue implements slog.LogValuer: a group of the prefix, proc and body
// fields, with chunk lists rendered as String renders them.
func (h *Header) LogValue() slog.Value {
	as := append(h.Prefix().attrs(), slog.String("proc", h.Proc.String()))
	switch h.Proc {
	case RDMA_MSG, RDMA_NOMSG:
		as = append(as, slog.Any("chunks", &h.Chunks))
	case RDMA_MSGP:
		if h.Vers != Version2 {
			as = append(as,
				slog.Uint64("align", uint64(h.Padding.Align)),
				slog.Uint64("thresh", uint64(h.Padding.Thresh)),
				slog.Any("chunks", &h.Chunks))
		}
	case RDMA_ERROR:
		as = append(as, slog.String("err", h.Error.Code.Name(h.Vers)))
		if h.Error.Code == ErrVers {
			as = append(as, slog.Uint64("low", uint64(h.Error.Low)), slog.Uint64("high", uint64(h.Error.High)))
		}
	case RDMA_OPTIONAL:
		if h.Vers == Version2 {
			as = append(as, slog.Uint64("opttype", uint64(h.Optional.Type)), slog.Int("optinfo", len(h.Optional.Info)))
		}
	}
	return slog.GroupValue(as...)
}

// Direction is whether a transport header carries (or stands for) an RPC
// call or an RPC reply. Some of Validate's rules depend on it, and the
// header does not say: for RDMA_MSG the RPC message's msg_type does
// (PayloadDirection), for the other types the receiver knows from its role.
type Direction uint8

// The directions.
const (
	// DirUnknown skips the rules that depend on direction.
	DirUnknown Direction = iota
	// DirCall is a message carrying an RPC call: from requester to
	// responder, in either direction of the connection (RFC 8167).
	DirCall
	// DirReply is a message carrying or completing an RPC reply.
	DirReply
)

var directionNames = [...]string{DirUnknown: "unknown", DirCall: "call", DirReply: "reply"}

// String returns "call", "reply" or "unknown".
func (d Direction) String() string {
	if int(d) < len(directionNames) {
		return directionNames[d]
	}
	return "Direction(" + strconv.Itoa(int(d)) + ")"
}

// LogValue implements slog.LogValuer.
func (d Direction) LogValue() slog.Value { return slog.StringValue(d.String()) }

// PayloadDirection reads the msg_type of the RPC message that starts
// payload (RFC 5531: the word after the XID, CALL = 0, REPLY = 1). It
// returns DirUnknown if payload is too short or the word is neither. This is
// how a receiver tells a backward-direction call from a reply (RFC 8167).
func PayloadDirection(payload []byte) Direction {
	var d xdr.Decoder
	d.Reset(payload)
	d.Skip(4)
	switch t := d.Uint32(); {
	case d.Err() != nil:
		return DirUnknown
	case t == 0:
		return DirCall
	case t == 1:
		return DirReply
	}
	return DirUnknown
}
