package wire

import (
	"encoding/binary"
	"log/slog"
	"strconv"
)

// RFC 8797 private data (RFC 8797 section 4): eight octets that each peer
// of an RPC-over-RDMA Version One connection places in the RDMA-CM private
// data of its connect request or accept. It is not XDR:
//
//	octets 0-3  Format Identifier, 0xf6ab0e18, big-endian
//	octet  4    Version, 1
//	octet  5    Flags
//	octet  6    Send Size
//	octet  7    Receive Size
//
// Sizes are encoded as size/1024 - 1, so one octet spans 1 KiB to 256 KiB
// (RFC 8797 section 5.2). The figure numbers the remote-invalidation flag
// bit 15 of the second word, which is the least significant bit of the Flags
// octet, value 0x01 (Linux: RPCRDMA_CMP_F_SND_W_INV_OK).
const (
	// PrivateDataFormatID is the Format Identifier of RPC-over-RDMA
	// Version One private data (RFC 8797 section 4).
	PrivateDataFormatID = 0xf6ab0e18
	// PrivateDataVersion is the only message format version defined.
	PrivateDataVersion = 1
	// PrivateDataLen is the size of a version 1 message.
	PrivateDataLen = 8
	// FlagRemoteInvalidation is the remote-invalidation bit of the Flags
	// octet (RFC 8797 section 5.1, "Bit 15").
	FlagRemoteInvalidation = 0x01

	// MinInlineSize and MaxInlineSize are the sizes the Send Size and
	// Receive Size octets can express (RFC 8797 section 5.2). MinInlineSize
	// is also Version One's default inline threshold.
	MinInlineSize = 1024
	MaxInlineSize = 256 * 1024
)

// PrivateData is the content of an RFC 8797 private data message.
type PrivateData struct {
	// RemoteInvalidation says the sender may receive (as requester) or
	// send (as responder) RDMA Send With Invalidate; the responder uses it
	// only if both peers set it (RFC 8797 section 5.1).
	RemoteInvalidation bool
	// SendSize is the largest RDMA Send, in bytes, the sender will post
	// on the connection.
	SendSize int
	// ReceiveSize is the largest RDMA Send, in bytes, the sender can
	// receive.
	ReceiveSize int
}

// DefaultPrivateData is what a peer that sent no private data is taken to
// have sent (RFC 8797 section 4.1.1): no remote invalidation and both size
// octets zero, that is 1 KiB each way.
func DefaultPrivateData() PrivateData {
	return PrivateData{SendSize: MinInlineSize, ReceiveSize: MinInlineSize}
}

// EncodedLen returns PrivateDataLen.
func (PrivateData) EncodedLen() int { return PrivateDataLen }

// Append appends the 8-byte message, version 1, to b. Reserved flag bits are
// zero. A size the octet cannot express exactly is rounded in the safe
// direction: SendSize up (the peer's receives are then big enough),
// ReceiveSize down (the peer then never sends more than fits); both are
// clamped to [MinInlineSize, MaxInlineSize].
func (p PrivateData) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, PrivateDataFormatID)
	var flags byte
	if p.RemoteInvalidation {
		flags |= FlagRemoteInvalidation
	}
	return append(b, PrivateDataVersion, flags,
		encodeInlineSize(ceilDiv(p.SendSize, MinInlineSize)),
		encodeInlineSize(p.ReceiveSize/MinInlineSize))
}

func ceilDiv(a, b int) int {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}

// encodeInlineSize encodes a size in KiB, clamped to 1..256, as KiB - 1.
func encodeInlineSize(kib int) byte { return byte(min(max(kib, 1), 256) - 1) }

// Decode decodes private data received from the peer. It reports false, and
// sets p to DefaultPrivateData, if b does not carry RPC-over-RDMA Version One
// private data: if b is shorter than PrivateDataLen, does not begin with
// PrivateDataFormatID (RFC 8797 section 4.1.2: ignore it, it may belong to
// another upper layer), or has a Version other than 1. For the last case
// RFC 8797 defines no format, and section 4.1.1 says a peer that receives no
// message conforming to section 4 acts as if the defaults were sent; Linux
// does the same (rpcrdma_update_cm_private, svc_rdma_parse_connect_private).
// Flag bits other than FlagRemoteInvalidation are ignored, and so are bytes
// after the eighth: transports pad private data (an InfiniBand REQ carries
// a fixed-size area, MPA a length of the initiator's choosing).
func (p *PrivateData) Decode(b []byte) bool {
	if len(b) < PrivateDataLen || binary.BigEndian.Uint32(b) != PrivateDataFormatID || b[4] != PrivateDataVersion {
		*p = DefaultPrivateData()
		return false
	}
	*p = PrivateData{
		RemoteInvalidation: b[5]&FlagRemoteInvalidation != 0,
		SendSize:           (int(b[6]) + 1) * MinInlineSize,
		ReceiveSize:        (int(b[7]) + 1) * MinInlineSize,
	}
	return true
}

// String returns p as "v1 rinv=true send=4096 recv=4096".
func (p PrivateData) String() string {
	b := []byte("v1 rinv=")
	b = strconv.AppendBool(b, p.RemoteInvalidation)
	b = append(b, " send="...)
	b = strconv.AppendInt(b, int64(p.SendSize), 10)
	b = append(b, " recv="...)
	b = strconv.AppendInt(b, int64(p.ReceiveSize), 10)
	return string(b)
}

// LogValue implements slog.LogValuer.
func (p PrivateData) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Bool("rinv", p.RemoteInvalidation),
		slog.Int("send", p.SendSize),
		slog.Int("recv", p.ReceiveSize),
	)
}
