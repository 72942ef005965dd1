package ddp

import (
	"encoding/binary"
	"log/slog"
	"strconv"
)

// ReadRequestLen is the size of the RDMA Read Request header.
const ReadRequestLen = 28

// ReadRequest is the RDMAP header of an RDMA Read Request (RFC 5040
// section 4.4), which follows an untagged DDP header on QN 1:
//
//	 0 Data Sink STag      (requester's buffer; copied into the response)
//	 4 Data Sink TO (8)
//	12 RDMA Read Message Size
//	16 Data Source STag    (responder's buffer)
//	20 Data Source TO (8)
type ReadRequest struct {
	SinkSTag   uint32
	SinkTO     uint64
	Size       uint32
	SourceSTag uint32
	SourceTO   uint64
}

// Append appends the encoded header to b.
func (r *ReadRequest) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, r.SinkSTag)
	b = binary.BigEndian.AppendUint64(b, r.SinkTO)
	b = binary.BigEndian.AppendUint32(b, r.Size)
	b = binary.BigEndian.AppendUint32(b, r.SourceSTag)
	return binary.BigEndian.AppendUint64(b, r.SourceTO)
}

// ParseReadRequest parses the header at the start of b (which may be
// longer).
func ParseReadRequest(b []byte) (ReadRequest, error) { return parseReadRequest(b, 0) }

func parseReadRequest(b []byte, base int) (ReadRequest, error) {
	if len(b) < ReadRequestLen {
		return ReadRequest{}, shortErr("RDMA Read Request header", base, ReadRequestLen, len(b))
	}
	return ReadRequest{
		SinkSTag:   binary.BigEndian.Uint32(b[0:]),
		SinkTO:     binary.BigEndian.Uint64(b[4:]),
		Size:       binary.BigEndian.Uint32(b[12:]),
		SourceSTag: binary.BigEndian.Uint32(b[16:]),
		SourceTO:   binary.BigEndian.Uint64(b[20:]),
	}, nil
}

// String returns e.g. "sink=0x0000a101@0x2000 size=4096
// src=0x3a2b1c00@0x7f0000001000".
func (r ReadRequest) String() string {
	return "sink=0x" + hex8(r.SinkSTag) + "@0x" + strconv.FormatUint(r.SinkTO, 16) +
		" size=" + strconv.FormatUint(uint64(r.Size), 10) +
		" src=0x" + hex8(r.SourceSTag) + "@0x" + strconv.FormatUint(r.SourceTO, 16)
}

// LogValue implements slog.LogValuer.
func (r ReadRequest) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("sink_stag", "0x"+hex8(r.SinkSTag)),
		slog.String("sink_to", "0x"+strconv.FormatUint(r.SinkTO, 16)),
		slog.Uint64("size", uint64(r.Size)),
		slog.String("src_stag", "0x"+hex8(r.SourceSTag)),
		slog.String("src_to", "0x"+strconv.FormatUint(r.SourceTO, 16)),
	)
}
