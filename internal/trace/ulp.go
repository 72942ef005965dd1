package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// traceLimits hold headers to the protocol's rules but not to a receiver's
// local policy: a trace should not flag a peer for a large inline
// threshold or many segments. RFC 5666 allowed read chunks in replies.
var traceLimits = wire.Limits{
	MaxSegments:    1 << 16,
	MaxChunks:      1 << 16,
	MaxHeaderSize:  wire.MaxInlineSize,
	MaxOptInfo:     wire.MaxInlineSize,
	AllowReadReply: true,
}

// looksLikeRPCoRDMA is the test applied to Sends on connections not yet
// known to carry RPC-over-RDMA: a transport header prefix with a version
// this decoder knows and a proc some version defines.
func looksLikeRPCoRDMA(msg []byte) bool {
	if len(msg) < 16 {
		return false
	}
	vers, proc := binary.BigEndian.Uint32(msg[4:]), binary.BigEndian.Uint32(msg[12:])
	return (vers == uint32(wire.Version1) || vers == uint32(wire.Version2)) && proc <= uint32(wire.RDMA_OPTIONAL)
}

// ulp decodes a complete Send message as an RPC-over-RDMA transport header
// and the ONC RPC header after it. On a connection not yet known to carry
// RPC-over-RDMA, a message that does not look like a transport header, or
// does not decode as one, is taken for another upper layer's and left
// alone; once a header has decoded, every later failure is reported.
func (s *side) ulp(ev *Event, msg []byte) {
	c := s.c
	if !c.rpcrdma && !looksLikeRPCoRDMA(msg) {
		return
	}
	h := new(wire.Header)
	n, err := h.Decode(msg)
	if err != nil {
		if !c.rpcrdma {
			return
		}
		if p, perr := wire.DecodePrefix(msg); perr == nil {
			ev.RPCRDMAPrefix = &p
		}
		ev.addErr(err)
		return
	}
	c.rpcrdma = true
	h.Optional.Info = bytes.Clone(h.Optional.Info)
	ev.RPCRDMA = h
	dir := wire.DirUnknown
	var payload []byte
	if h.HasPayload() {
		payload = msg[n:]
		dir = wire.PayloadDirection(payload)
	}
	if err := h.Validate(dir, traceLimits); err != nil {
		ev.addErr(err)
	}
	if !h.HasPayload() || (len(payload) == 0 && h.Proc == wire.RDMA_OPTIONAL) {
		return
	}
	ev.RPC = decodeRPC(ev, h.XID, payload)
}

// decodeRPC decodes the RPC call or reply header at the start of payload.
// Bodies of credentials and verifiers are copied.
func decodeRPC(ev *Event, rdmaXID uint32, payload []byte) *RPC {
	xid, mt, ok := rpc.PeekHeader(payload)
	if !ok {
		ev.addErr(fmt.Errorf("rpc: %d-byte message is too short for an RPC header", len(payload)))
		return nil
	}
	r := &RPC{MsgType: mt}
	d := xdr.NewDecoder(payload)
	var err error
	switch mt {
	case rpc.MsgCall:
		err = r.Call.Decode(&d)
		r.Call.Cred.Body = bytes.Clone(r.Call.Cred.Body)
		r.Call.Verf.Body = bytes.Clone(r.Call.Verf.Body)
	case rpc.MsgReply:
		err = r.Reply.Decode(&d)
		r.Reply.Verf.Body = bytes.Clone(r.Reply.Verf.Body)
	default:
		r.Call.XID = xid
		err = fmt.Errorf("msg_type %d is neither CALL nor REPLY", int32(mt))
	}
	if err != nil {
		ev.addErr(fmt.Errorf("rpc: %w", err))
	}
	if xid != rdmaXID {
		// RFC 8166 section 4.2.1: rdma_xid mirrors the RPC XID.
		ev.addErr(fmt.Errorf("rpc: xid 0x%08x differs from rdma_xid 0x%08x", xid, rdmaXID))
	}
	return r
}
