package iwarp

import (
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

// violation is a protocol violation detected on this side of a connection:
// what its RDMAP Terminate (RFC 5040 section 4.8) reports. Only the first
// one of a connection is reported.
type violation struct {
	cause  ddp.Cause
	hdr    ddp.Header // the offending segment's DDP header, if hasHdr
	hasHdr bool
	ulen   int             // the offending segment's ULPDU_Length
	rr     ddp.ReadRequest // the offending Read Request header, if hasRR
	hasRR  bool
	detail string
}

// causeOf returns the wire cause of te.
func causeOf(te rdma.TerminateError) ddp.Cause {
	return ddp.MakeCause(ddp.Layer(te.Layer), uint8(te.Type), uint8(te.Code))
}

// termErr returns the TerminateError that carries cause.
func termErr(cause ddp.Cause, remote bool, detail string) rdma.TerminateError {
	return rdma.TerminateError{
		Layer:  rdma.Layer(cause.Layer()),
		Type:   rdma.ErrorType(cause.EType()),
		Code:   rdma.ErrorCode(cause.Code()),
		Remote: remote,
		Detail: detail,
	}
}

// violate returns the violation of te about the segment with header h and
// ULPDU length ulen; h may be nil.
func violate(te rdma.TerminateError, h *ddp.Header, ulen int) *violation {
	v := &violation{cause: causeOf(te), ulen: ulen, detail: te.Detail}
	if h != nil {
		v.hdr, v.hasHdr = *h, true
	}
	return v
}

// violatef is violate for a cause, with a formatted detail.
func violatef(cause ddp.Cause, h *ddp.Header, ulen int, format string, args ...any) *violation {
	v := &violation{cause: cause, ulen: ulen, detail: fmt.Sprintf(format, args...)}
	if h != nil {
		v.hdr, v.hasHdr = *h, true
	}
	return v
}

// terminate returns the Terminate header that reports v, including what
// RFC 5040 section 7.1 and Figure 10 ask for:
// nothing for a local catastrophic error or an MPA error; the offending DDP
// header with its segment length (D and M) for every other error where
// there is one; and the offending Read Request (R) for an RDMAP remote
// protection error about one. DDP Segment Length is the offending
// segment's ULPDU_Length, as RFC 5040 reads (siw sends the payload length).
func (v *violation) terminate() ddp.Terminate {
	t := ddp.Terminate{Cause: v.cause, Layout: ddp.LayoutRFC}
	if v.cause.EType() == 0 || v.cause.Layer() == ddp.LayerLLP {
		return t
	}
	if v.hasHdr {
		t.HdrCt |= ddp.HdrCtM | ddp.HdrCtD
		t.SegmentLen = uint16(v.ulen)
		t.DDPHeader = v.hdr
	}
	if v.hasRR && v.cause.Layer() == ddp.LayerRDMAP && v.cause.EType() == uint8(rdma.TypeRemoteProtection) {
		t.HdrCt |= ddp.HdrCtR
		t.ReadRequest = v.rr
	}
	return t
}

// fpdu returns the Terminate message as an FPDU: untagged, QN 2, MSN 1
// (the one Terminate of the stream), MO 0, L.
func (v *violation) fpdu(crc bool) []byte {
	seg := ddp.Segment{
		Header:    ddp.Untagged(ddp.OpTerminate, true, ddp.QNTerminate, 1, 0),
		Terminate: v.terminate(),
	}
	return mpa.AppendFPDU(nil, crc, seg.Append(nil))
}

// violateLocked ends c because this side detected v: the writer sends the
// Terminate, and both sides see v's TerminateError. The caller holds c.mu
// and has completed the work requests v concerns.
func (c *Conn) violateLocked(v *violation) {
	if c.state == stateDead {
		return
	}
	c.p.stats.termSent.Add(1)
	c.log.Debug("iwarp: sending terminate", "conn", c.String(), "cause", v.cause, "detail", v.detail)
	c.endLocked(termErr(v.cause, false, v.detail), v.fpdu(c.crc))
}
