// Package trace decodes packet captures of RPC-over-RDMA over iWARP layer by
// layer: TCP, MPA (RFC 5044, RFC 6581), DDP and RDMAP (RFC 5041, RFC 5040),
// RPC-over-RDMA Version One and Two (RFC 8166,
// draft-cel-nfsv4-rpcrdma-version-two-00) with the RFC 8797 private data, and
// the ONC RPC header (RFC 5531). It is the library behind `rpcrdma trace`,
// and it is built on the project's codecs: every layer is decoded by the
// package that encodes it, and printed with that package's String.
//
// Input: classic pcap or pcapng, optionally gzip-compressed (Reader), with
// Ethernet, Linux cooked (v1, v2), raw IP or loopback link types, IPv4 or
// IPv6. TCP streams are followed by 4-tuple in both directions and
// reassembled by sequence number (tcp.go): retransmitted and overlapping
// bytes are taken once, out-of-order segments wait for the bytes before them,
// and a hole the capture will never fill is reported as a gap, after which
// decoding resumes at the next captured segment, as tshark does.
//
// A connection is iWARP when its first data is an MPA Request or Reply (or it
// uses a port in Options.Ports). Its MPA frames decide CRC and markers for the
// FPDUs that follow (iwarp.go); untagged Send messages are reassembled from
// their DDP segments by QN, MSN and MO, and each complete Send is decoded as an
// RPC-over-RDMA header and the RPC call or reply header that follows it. A
// connection is taken to carry RPC-over-RDMA when its MPA private data holds
// RFC 8797 private data, it uses port 20049, or a Send decodes as a transport
// header; before that, Sends that do not decode are left alone (they belong to
// another upper layer, such as SMB Direct), after it, failures are reported.
// Sends with Solicited Event, Version Two headers, the RFC 6581 IRD/ORD word,
// RFC 8797 private data and both Terminate layouts (RFC 5040 and Linux siw)
// are decoded; tshark 4.0 decodes none of these.
//
// Each decoded unit is an Event, delivered in the order it completes:
// one per MPA frame, one per FPDU (with the DDP segment, and on the FPDU that
// completes a Send the RPC-over-RDMA and RPC headers), one per gap, and one
// per run of bytes that could not be decoded. Decoding errors and rule
// violations (a bad CRC, DDP receiver checks, wire.Header.Validate, an RPC XID
// that differs from rdma_xid) are recorded on the event, which still shows
// what was decoded. Nothing in a capture makes the decoder panic, and its
// memory is bounded per connection.
//
// # JSON
//
// Event.MarshalJSON writes one object per event. Keys always present:
//
//	frame    number  capture frame holding the event's last byte (from 1)
//	time     string  RFC 3339 time of that frame (absent if unknown)
//	stream   number  TCP connection index, from 0, in order of first packet
//	dir      string  "i>r" (from the TCP initiator) or "r>i"
//	src, dst string  "address:port"
//	offset   number  stream offset of the event's first byte
//	length   number  stream bytes the event covers (markers included)
//	kind     string  "mpa-frame", "fpdu", "gap", "error" or "incomplete"
//	mpa      object or null
//	ddp      object or null
//	rdmap    object or null
//
// mpa, for an MPA Request or Reply:
//
//	{"type": "request"|"reply", "rev", "marker_flag", "crc_flag",
//	 "reject_flag", "enhanced", "reserved" (if non-zero), "pd_length",
//	 "ird", "ord", "p2p", "rtr" (enhanced frames only: the RFC 6581 word),
//	 "private_data" (hex, after the IRD/ORD word),
//	 "rpcrdma_pd": {"rinv", "send_size", "recv_size"} (RFC 8797, if present)}
//
// mpa, for an FPDU:
//
//	{"type": "fpdu", "ulpdu_length", "crc" (the field as a little-endian
//	 number), "crc_ok" (only when CRC was negotiated), "markers" (count)}
//
// ddp: {"tagged", "last", "dv", then "stag", "to" (tagged) or "qn", "msn",
// "mo" (untagged)}.
//
// rdmap: {"rv", "opcode" (RFC 5040 name, e.g. "Send with SE"), "inval_stag"
// (invalidating Sends), "payload_length", "rtr" (peer-to-peer RTR message),
// "read_request": {"sink_stag", "sink_to", "size", "src_stag", "src_to"},
// "terminate": {"layer", "etype", "code", "cause", "hdrct", "layout"
// ("rfc" or "siw"), "segment_length", "ddp_header", "read_request"}}.
//
// Keys present when the event has the layer:
//
//	message  {"length", "fragments", "first_frame"}: the untagged message
//	         this FPDU completed
//	rpcrdma  {"xid", "vers", "credits", "proc" (token, e.g. "RDMA_MSG"),
//	          for RDMA_MSG, RDMA_NOMSG and v1 RDMA_MSGP:
//	            "reads":  [{"position", "handle", "length", "offset"}],
//	            "writes": [[{"handle", "length", "offset"}]],
//	            "reply":  [{"handle", "length", "offset"}] or null,
//	          for RDMA_MSGP: "align", "thresh",
//	          for RDMA_ERROR: "err": {"code" (e.g. "ERR_VERS"), "low", "high"},
//	          for v2 RDMA_OPTIONAL: "opttype", "optinfo_length";
//	          only "xid", "vers", "credits" when the rest did not decode)
//	rpc      {"xid", "msg_type" ("CALL"|"REPLY"),
//	          call:  "rpcvers", "prog", "vers", "proc", "cred", "verf",
//	          reply: "stat", "accept_stat" | "reject_stat", "auth_stat",
//	                 "low", "high"}
//	error    string: every error found in the event, joined by "; "
//
// All numbers are JSON numbers (handles, STags and offsets included, exact up
// to 2^64-1 in Go; consumers limited to doubles lose precision above 2^53).
//
// The text form (Event.String) is one line per event: frame, "s" and the
// stream, direction, then the String of each layer joined by " | ".
package trace
