package trace

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The JSON form of an Event; the package documentation describes it.

type jsonEvent struct {
	Frame   int          `json:"frame"`
	Time    string       `json:"time,omitempty"`
	Stream  int          `json:"stream"`
	Dir     string       `json:"dir"`
	Src     string       `json:"src"`
	Dst     string       `json:"dst"`
	Offset  uint64       `json:"offset"`
	Length  uint64       `json:"length"`
	Kind    string       `json:"kind"`
	MPA     any          `json:"mpa"`
	DDP     *jsonDDP     `json:"ddp"`
	RDMAP   *jsonRDMAP   `json:"rdmap"`
	Message *Message     `json:"message,omitempty"`
	RPCRDMA *jsonRPCRDMA `json:"rpcrdma,omitempty"`
	RPC     *jsonRPC     `json:"rpc,omitempty"`
	Error   string       `json:"error,omitempty"`
}

type jsonMPAFrame struct {
	Type        string      `json:"type"` // "request" or "reply"
	Rev         uint8       `json:"rev"`
	MarkerFlag  bool        `json:"marker_flag"`
	CRCFlag     bool        `json:"crc_flag"`
	RejectFlag  bool        `json:"reject_flag"`
	Enhanced    bool        `json:"enhanced"`
	Reserved    uint8       `json:"reserved,omitempty"`
	PDLength    int         `json:"pd_length"`
	IRD         *uint16     `json:"ird,omitempty"`
	ORD         *uint16     `json:"ord,omitempty"`
	P2P         *bool       `json:"p2p,omitempty"`
	RTR         string      `json:"rtr,omitempty"`
	PrivateData string      `json:"private_data"`
	RPCRDMAPD   *jsonPDInfo `json:"rpcrdma_pd,omitempty"`
}

type jsonPDInfo struct {
	RemoteInvalidation bool `json:"rinv"`
	SendSize           int  `json:"send_size"`
	ReceiveSize        int  `json:"recv_size"`
}

type jsonFPDU struct {
	Type       string `json:"type"` // "fpdu"
	ULPDULen   int    `json:"ulpdu_length"`
	CRC        uint32 `json:"crc"`
	CRCOK      *bool  `json:"crc_ok,omitempty"`
	MarkersLen int    `json:"markers"`
}

type jsonDDP struct {
	Tagged  bool    `json:"tagged"`
	Last    bool    `json:"last"`
	Version uint8   `json:"dv"`
	STag    *uint32 `json:"stag,omitempty"`
	TO      *uint64 `json:"to,omitempty"`
	QN      *uint32 `json:"qn,omitempty"`
	MSN     *uint32 `json:"msn,omitempty"`
	MO      *uint32 `json:"mo,omitempty"`
}

type jsonRDMAP struct {
	Version     uint8            `json:"rv"`
	Opcode      string           `json:"opcode"`
	InvalSTag   *uint32          `json:"inval_stag,omitempty"`
	PayloadLen  int              `json:"payload_length"`
	RTR         string           `json:"rtr,omitempty"`
	ReadRequest *jsonReadRequest `json:"read_request,omitempty"`
	Terminate   *jsonTerminate   `json:"terminate,omitempty"`
}

type jsonReadRequest struct {
	SinkSTag   uint32 `json:"sink_stag"`
	SinkTO     uint64 `json:"sink_to"`
	Size       uint32 `json:"size"`
	SourceSTag uint32 `json:"src_stag"`
	SourceTO   uint64 `json:"src_to"`
}

type jsonTerminate struct {
	Layer       string           `json:"layer"`
	EType       uint8            `json:"etype"`
	Code        uint8            `json:"code"`
	Cause       string           `json:"cause"`
	HdrCt       string           `json:"hdrct"`
	Layout      string           `json:"layout"`
	SegmentLen  *uint16          `json:"segment_length,omitempty"`
	DDPHeader   string           `json:"ddp_header,omitempty"`
	ReadRequest *jsonReadRequest `json:"read_request,omitempty"`
}

type jsonSegment struct {
	Handle uint32 `json:"handle"`
	Length uint32 `json:"length"`
	Offset uint64 `json:"offset"`
}

type jsonReadSegment struct {
	Position uint32 `json:"position"`
	jsonSegment
}

type jsonRPCRDMA struct {
	XID     uint32             `json:"xid"`
	Vers    uint32             `json:"vers"`
	Credits uint32             `json:"credits"`
	Proc    string             `json:"proc,omitempty"`
	Align   *uint32            `json:"align,omitempty"`
	Thresh  *uint32            `json:"thresh,omitempty"`
	Reads   *[]jsonReadSegment `json:"reads,omitempty"`
	Writes  *[][]jsonSegment   `json:"writes,omitempty"`
	Reply   json.RawMessage    `json:"reply,omitempty"`
	Err     *jsonRDMAError     `json:"err,omitempty"`
	OptType *uint32            `json:"opttype,omitempty"`
	OptLen  *int               `json:"optinfo_length,omitempty"`
}

type jsonRDMAError struct {
	Code string  `json:"code"`
	Low  *uint32 `json:"low,omitempty"`
	High *uint32 `json:"high,omitempty"`
}

type jsonRPC struct {
	XID     uint32 `json:"xid"`
	MsgType string `json:"msg_type"`
	// call
	RPCVers *uint32 `json:"rpcvers,omitempty"`
	Prog    *uint32 `json:"prog,omitempty"`
	Vers    *uint32 `json:"vers,omitempty"`
	Proc    *uint32 `json:"proc,omitempty"`
	Cred    string  `json:"cred,omitempty"`
	Verf    string  `json:"verf,omitempty"`
	// reply
	Stat       string  `json:"stat,omitempty"`
	AcceptStat string  `json:"accept_stat,omitempty"`
	RejectStat string  `json:"reject_stat,omitempty"`
	AuthStat   string  `json:"auth_stat,omitempty"`
	Low        *uint32 `json:"low,omitempty"`
	High       *uint32 `json:"high,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// MarshalJSON encodes the event as the JSON object the package
// documentation describes.
func (e *Event) MarshalJSON() ([]byte, error) {
	j := jsonEvent{Frame: e.Frame, Stream: e.Stream, Dir: e.Dir.String(), Src: e.Src.String(), Dst: e.Dst.String(),
		Offset: e.Offset, Length: e.Len, Kind: e.Kind.String(), Message: e.Message}
	if !e.Time.IsZero() {
		j.Time = e.Time.Format(time.RFC3339Nano)
	}
	if e.MPA != nil {
		j.MPA = mpaJSON(e.MPA, e.PrivateData)
	}
	if f := e.FPDU; f != nil {
		jf := &jsonFPDU{Type: "fpdu", ULPDULen: f.ULPDULen, CRC: f.CRC, MarkersLen: f.Markers}
		if f.CRCChecked {
			jf.CRCOK = ptr(f.CRCOK)
		}
		j.MPA = jf
	}
	if s := e.DDP; s != nil {
		j.DDP, j.RDMAP = ddpJSON(s)
		if e.RTR != 0 {
			j.RDMAP.RTR = e.RTR.String()
		}
	}
	if h := e.RPCRDMA; h != nil {
		j.RPCRDMA = rpcrdmaJSON(h)
	} else if p := e.RPCRDMAPrefix; p != nil {
		j.RPCRDMA = &jsonRPCRDMA{XID: p.XID, Vers: uint32(p.Vers), Credits: p.Credits}
	}
	if r := e.RPC; r != nil {
		j.RPC = rpcJSON(r)
	}
	if e.Err != nil {
		j.Error = e.Err.Error()
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep "i>r" readable
	if err := enc.Encode(&j); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func mpaJSON(f *mpa.Frame, pd *wire.PrivateData) *jsonMPAFrame {
	typ := "request"
	if f.Kind == mpa.Reply {
		typ = "reply"
	}
	j := &jsonMPAFrame{Type: typ, Rev: f.Rev, MarkerFlag: f.Flags&mpa.FlagMarker != 0, CRCFlag: f.Flags&mpa.FlagCRC != 0,
		RejectFlag: f.Flags&mpa.FlagReject != 0, Enhanced: f.Enhanced(), Reserved: uint8(f.Flags & mpa.FlagsReserved),
		PDLength: f.PDLength(), PrivateData: hex.EncodeToString(f.PrivateData)}
	if f.Enhanced() {
		w := f.IRDORD
		j.IRD, j.ORD, j.P2P = ptr(w.IRD), ptr(w.ORD), ptr(w.PeerToPeer)
		if w.RTR != 0 {
			j.RTR = w.RTR.String()
		}
	}
	if pd != nil {
		j.RPCRDMAPD = &jsonPDInfo{RemoteInvalidation: pd.RemoteInvalidation, SendSize: pd.SendSize, ReceiveSize: pd.ReceiveSize}
	}
	return j
}

func ddpJSON(s *ddp.Segment) (*jsonDDP, *jsonRDMAP) {
	d := &jsonDDP{Tagged: s.Control.Tagged(), Last: s.Control.Last(), Version: s.Control.Version()}
	if d.Tagged {
		d.STag, d.TO = ptr(s.STag), ptr(s.TO)
	} else {
		d.QN, d.MSN, d.MO = ptr(s.QN), ptr(s.MSN), ptr(s.MO)
	}
	r := &jsonRDMAP{Version: s.RDMAP.Version(), Opcode: s.Opcode().String(), PayloadLen: len(s.Payload)}
	if s.Opcode().Invalidates() && !d.Tagged {
		r.InvalSTag = ptr(s.InvalidateSTag)
	}
	if s.HasReadRequest() {
		r.ReadRequest = readRequestJSON(&s.ReadRequest)
	}
	if s.HasTerminate() {
		t := &s.Terminate
		jt := &jsonTerminate{Layer: t.Cause.Layer().String(), EType: t.Cause.EType(), Code: t.Cause.Code(),
			Cause: t.Cause.String(), HdrCt: t.HdrCt.String(), Layout: t.Layout.String()}
		if t.HdrCt&ddp.HdrCtD != 0 {
			jt.SegmentLen = ptr(t.SegmentLen)
			jt.DDPHeader = t.DDPHeader.String()
		}
		if t.HdrCt&ddp.HdrCtR != 0 && !t.ReadRequestOmitted {
			jt.ReadRequest = readRequestJSON(&t.ReadRequest)
		}
		r.Terminate = jt
	}
	return d, r
}

func readRequestJSON(rr *ddp.ReadRequest) *jsonReadRequest {
	return &jsonReadRequest{SinkSTag: rr.SinkSTag, SinkTO: rr.SinkTO, Size: rr.Size, SourceSTag: rr.SourceSTag, SourceTO: rr.SourceTO}
}

func segmentsJSON(c wire.WriteChunk) []jsonSegment {
	out := make([]jsonSegment, 0, len(c))
	for _, s := range c {
		out = append(out, jsonSegment{s.Handle, s.Length, s.Offset})
	}
	return out
}

func rpcrdmaJSON(h *wire.Header) *jsonRPCRDMA {
	j := &jsonRPCRDMA{XID: h.XID, Vers: uint32(h.Vers), Credits: h.Credits, Proc: h.Proc.String()}
	chunks := false
	switch h.Proc {
	case wire.RDMA_MSG, wire.RDMA_NOMSG:
		chunks = true
	case wire.RDMA_MSGP:
		if h.Vers != wire.Version2 {
			j.Align, j.Thresh = ptr(h.Padding.Align), ptr(h.Padding.Thresh)
			chunks = true
		}
	case wire.RDMA_ERROR:
		e := &jsonRDMAError{Code: h.Error.Code.Name(h.Vers)}
		if h.Error.Code == wire.ErrVers {
			e.Low, e.High = ptr(uint32(h.Error.Low)), ptr(uint32(h.Error.High))
		}
		j.Err = e
	case wire.RDMA_OPTIONAL:
		if h.Vers == wire.Version2 {
			j.OptType, j.OptLen = ptr(h.Optional.Type), ptr(len(h.Optional.Info))
		}
	}
	if chunks {
		reads := make([]jsonReadSegment, 0, len(h.Chunks.Reads))
		for _, r := range h.Chunks.Reads {
			reads = append(reads, jsonReadSegment{r.Position, jsonSegment{r.Handle, r.Length, r.Offset}})
		}
		writes := make([][]jsonSegment, 0, len(h.Chunks.Writes))
		for _, w := range h.Chunks.Writes {
			writes = append(writes, segmentsJSON(w))
		}
		j.Reads, j.Writes = &reads, &writes
		j.Reply = json.RawMessage("null")
		if h.Chunks.Reply.Present {
			j.Reply, _ = json.Marshal(segmentsJSON(h.Chunks.Reply.Chunk))
		}
	}
	return j
}

func rpcJSON(r *RPC) *jsonRPC {
	j := &jsonRPC{XID: r.XID(), MsgType: r.MsgType.String()}
	switch r.MsgType {
	case rpc.MsgCall:
		c := &r.Call
		j.RPCVers, j.Prog, j.Vers, j.Proc = ptr(c.RPCVers), ptr(c.Prog), ptr(c.Vers), ptr(c.Proc)
		j.Cred, j.Verf = c.Cred.Flavor.String(), c.Verf.Flavor.String()
	case rpc.MsgReply:
		h := &r.Reply
		j.Stat = h.Stat.String()
		if h.Stat == rpc.MsgAccepted {
			j.AcceptStat = h.AcceptStat.String()
			if h.AcceptStat == rpc.ProgMismatch {
				j.Low, j.High = ptr(h.Low), ptr(h.High)
			}
		} else {
			j.RejectStat = h.RejectStat.String()
			if h.RejectStat == rpc.AuthError {
				j.AuthStat = h.AuthStat.String()
			} else {
				j.Low, j.High = ptr(h.Low), ptr(h.High)
			}
		}
	}
	return j
}
