// Package wire encodes and decodes the RPC-over-RDMA transport headers and
// the small messages around them: no I/O, no goroutines, and imports of the
// xdr package and the standard library only.
//
// What it covers:
//
//   - Header: the transport header of Version One (RFC 5666 section 4; XDR in
//     draft-ietf-nfsv4-rpcrdma-01 section 4.2) and of Version Two
//     (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2). One type serves
//     both: they share the prefix and the chunk lists, and Vers selects the
//     body layout. Segment, ReadSegment, ReadList, WriteChunk, WriteList and
//     ReplyChunk are the chunk lists' parts; ReadList.Chunks groups read
//     segments into read chunks.
//   - Prefix and DecodePrefix: the three words every version starts with,
//     enough to answer a header of any version with ERR_VERS.
//   - Validate and Limits: the second pass, which holds a header to the rules
//     that relate its fields (positions, chunk combinations, sizes) and
//     reports a *HeaderError carrying the code to send back.
//   - PrivateData: the RFC 8797 RDMA-CM private data (RFC 8797).
//   - ConfigReq and ConfigReply: the Connection Configuration Protocol's
//     CONF_RDMA (RFC 5666 section 6, draft-ietf-nfsv4-rpcrdma-01 section 6.2).
//
// Every message type has Append (append its encoding to a buffer),
// EncodedLen (the size Append writes), a decoder, and a compact String and
// slog.LogValue shared by logs, tests and the trace decoder.
//
// A receiver's path through the package:
//
//	var h wire.Header // one per receive context, reused
//	n, err := h.Decode(buf)
//	if err == nil {
//		err = h.Validate(dir, limits)
//	}
//	// err is a *HeaderError: answer a call with RDMA_ERROR and its Code,
//	// unless DecodePrefix(buf) also fails (no XID to answer).
//	payload := buf[n:] // the RPC message, if h.HasPayload()
//
// Decoding never panics, allocates nothing once a Header's lists have grown
// to the sizes it sees, and never allocates for a count before checking it
// against the bytes present. Errors name the rule and the item, e.g.
// "rpcrdma: read chunk position 6 not 4-byte aligned".
//
// Where the specifications are ambiguous this package decides as follows.
//
// RDMA_MSGP carries rdma_align and rdma_thresh before its chunk lists, as
// draft-ietf-nfsv4-rpcrdma-01 section 4.1 says in prose ("inserted prior to
// the Read and Write chunk lists") and section 4.2 in XDR
// (rpc_rdma_header_padded).
//
// ERR_CHUNK has no body: RFC 5666's union (section 4.3) is ERR_VERS: low,
// high; ERR_CHUNK: void; default: rdma_extra[8]. Version One errors with
// other codes therefore carry eight words (ErrorBody.Extra). RDMA_DONE
// likewise has no body (draft-ietf-nfsv4-rpcrdma-01 section 3.8: the message
// "is only 16 bytes").
//
// Version Two's RDMA_MSGP and RDMA_DONE decode as the void bodies the XDR
// gives them and fail Validate as reserved. Version Two errors with a code
// outside rpcrdma2_errcode fail to decode: its union has no default arm.
//
// A header after which no RPC message may follow (RDMA_NOMSG, RDMA_DONE,
// RDMA_ERROR; Version Two's reserved types) must fill its buffer: trailing
// bytes are malformed (draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2:
// "MUST NOT follow").
//
// Private data with an unknown Version is treated as absent, as Linux does
// (see PrivateData.Decode).
package wire
