package trace

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// Kind is what an Event reports.
type Kind uint8

// Event kinds.
const (
	// KindMPAFrame is an MPA Request or Reply (RFC 5044 section 7.1).
	KindMPAFrame Kind = iota + 1
	// KindFPDU is one FPDU with the DDP segment it carries, and, on the
	// FPDU that completes an untagged message, that message decoded.
	KindFPDU
	// KindGap is a run of stream bytes the capture does not have.
	KindGap
	// KindError is a problem of the stream that no message carries: Len
	// bytes that could not be framed (the direction is then not decoded
	// until the next gap), or, with Len 0, a missing MPA frame and the
	// assumption made in its place.
	KindError
	// KindIncomplete is what remains undecoded when the capture ends: part
	// of a frame or FPDU, an untagged message missing its last segment,
	// or FPDUs whose MPA negotiation was never seen.
	KindIncomplete
)

// String returns the token used in text and JSON output.
func (k Kind) String() string {
	switch k {
	case KindMPAFrame:
		return "mpa-frame"
	case KindFPDU:
		return "fpdu"
	case KindGap:
		return "gap"
	case KindError:
		return "error"
	case KindIncomplete:
		return "incomplete"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Dir is the direction of a TCP connection an event travelled in.
type Dir uint8

// Directions. The initiator is the side that sent the SYN; when the SYN is
// not in the capture, the side whose packet the capture shows first.
const (
	FromInitiator Dir = 0
	FromResponder Dir = 1
)

// String returns "i>r" or "r>i".
func (d Dir) String() string {
	if d == FromInitiator {
		return "i>r"
	}
	return "r>i"
}

// FPDUInfo is the MPA framing of one FPDU (RFC 5044 section 4).
type FPDUInfo struct {
	ULPDULen int
	// CRC is the CRC field read as the little-endian number it is.
	CRC uint32
	// CRCChecked says CRC was negotiated, so the field was checked;
	// CRCOK is the verdict.
	CRCChecked, CRCOK bool
	// Markers is the number of markers removed from the FPDU.
	Markers int
}

// Message describes the untagged DDP message (RFC 5041 section 5.3) that
// an FPDU completed: all its segments, same QN and MSN, reassembled by MO.
type Message struct {
	Len        int `json:"length"`
	Fragments  int `json:"fragments"`
	FirstFrame int `json:"first_frame"`
}

// RPC is the ONC RPC header (RFC 5531 section 9) at the start of the RPC
// message an RPC-over-RDMA Send carries inline.
type RPC struct {
	MsgType rpc.MsgType
	Call    rpc.CallHeader  // meaningful iff MsgType is rpc.MsgCall
	Reply   rpc.ReplyHeader // meaningful iff MsgType is rpc.MsgReply
}

// XID returns the RPC transaction id.
func (r *RPC) XID() uint32 {
	if r.MsgType == rpc.MsgReply {
		return r.Reply.XID
	}
	return r.Call.XID
}

// String returns the codec's one-line form of the header.
func (r *RPC) String() string {
	switch r.MsgType {
	case rpc.MsgCall:
		return r.Call.String()
	case rpc.MsgReply:
		return r.Reply.String()
	}
	return fmt.Sprintf("rpc xid=0x%08x msg_type=%d", r.Call.XID, int32(r.MsgType))
}

// Event is one decoded message of a capture: an MPA frame, an FPDU with
// every layer it carries, a gap, or bytes that could not be decoded. The
// layer fields are nil when the event has no such layer. An Event owns all
// its memory (nothing aliases the capture), so receivers may keep it.
type Event struct {
	Kind Kind
	// Frame is the capture frame that holds the event's last byte (for
	// a gap, the frame that revealed it), numbered from 1 as tshark does.
	Frame  int
	Time   time.Time
	Stream int // TCP connection index, from 0, in order of first packet
	Dir    Dir
	Src    netip.AddrPort
	Dst    netip.AddrPort
	// Offset and Len locate the event in its direction's TCP stream:
	// offset of its first byte from the first byte after the SYN, and its
	// length in stream bytes (markers included).
	Offset uint64
	Len    uint64

	// MPA is the Request or Reply of a KindMPAFrame event.
	MPA *mpa.Frame
	// PrivateData is the RFC 8797 RPC-over-RDMA private data inside the
	// MPA private data, when it is there.
	PrivateData *wire.PrivateData
	// FPDU is the framing of a KindFPDU event.
	FPDU *FPDUInfo
	// DDP is the DDP segment with its RDMAP header; Payload is a copy.
	DDP *ddp.Segment
	// RTR is set when the FPDU is the RTR message of MPA peer-to-peer mode
	// (RFC 6581 section 9.2).
	RTR mpa.RTR
	// Message is set on the FPDU that completes an untagged message.
	Message *Message
	// RPCRDMA is the RPC-over-RDMA header of a completed Send message.
	RPCRDMA *wire.Header
	// RPCRDMAPrefix is set instead when the header could not be decoded
	// (an unknown version, a truncated chunk list) but its first three
	// words could.
	RPCRDMAPrefix *wire.Prefix
	// RPC is the ONC RPC header that follows an RDMA_MSG, RDMA_MSGP or
	// RDMA_OPTIONAL transport header.
	RPC *RPC
	// Err is the first decoding error or rule violation found in this
	// event, with any later ones joined to it. The fields above hold what
	// was decoded nevertheless.
	Err error
}

// addErr records err on e, after any earlier error.
func (e *Event) addErr(err error) {
	if e.Err == nil {
		e.Err = err
	} else {
		e.Err = fmt.Errorf("%w; %w", e.Err, err)
	}
}

// String returns the event as one line of text: frame, stream, direction,
// then each layer's compact String joined by " | ", e.g.
//
//	7 s0 i>r FPDU len=172 crc=0x1c2d3e4f | Send L qn=0 msn=1 mo=0 len=154 | xid=0x4c414201 vers=1 credits=32 RDMA_MSG reads=[] writes=[] reply=none | call xid=0x4c414201 prog=100003 vers=3 proc=0 cred=AUTH_NONE verf=AUTH_NONE
func (e *Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d s%d %s ", e.Frame, e.Stream, e.Dir)
	sep := func() { b.WriteString(" | ") }
	switch e.Kind {
	case KindMPAFrame:
		b.WriteString(e.MPA.String())
		if e.PrivateData != nil {
			sep()
			b.WriteString("rpcrdma-pd ")
			b.WriteString(e.PrivateData.String())
		}
	case KindFPDU:
		f := e.FPDU
		fmt.Fprintf(&b, "FPDU len=%d crc=0x%08x", f.ULPDULen, f.CRC)
		if f.CRCChecked && !f.CRCOK {
			b.WriteString(" BAD-CRC")
		}
		if f.Markers > 0 {
			fmt.Fprintf(&b, " markers=%d", f.Markers)
		}
		if e.DDP != nil {
			sep()
			b.WriteString(e.DDP.String())
		}
		if e.RTR != 0 {
			b.WriteString(" rtr=" + e.RTR.String())
		}
		if m := e.Message; m != nil && m.Fragments > 1 {
			sep()
			fmt.Fprintf(&b, "message len=%d frags=%d first=%d", m.Len, m.Fragments, m.FirstFrame)
		}
		if e.RPCRDMA != nil {
			sep()
			b.WriteString(e.RPCRDMA.String())
		} else if e.RPCRDMAPrefix != nil {
			sep()
			b.WriteString(e.RPCRDMAPrefix.String())
		}
		if e.RPC != nil {
			sep()
			b.WriteString(e.RPC.String())
		}
	case KindGap:
		fmt.Fprintf(&b, "gap: %d bytes not captured at stream offset %d", e.Len, e.Offset)
	case KindError:
		fmt.Fprintf(&b, "undecodable: %d bytes at stream offset %d", e.Len, e.Offset)
	case KindIncomplete:
		fmt.Fprintf(&b, "incomplete: %d bytes at stream offset %d", e.Len, e.Offset)
	}
	if e.Err != nil {
		sep()
		b.WriteString("error: ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}
