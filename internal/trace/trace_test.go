package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/trace/tracetest"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// decoded is a capture decoded three ways: events, their text lines and
// their JSON objects, in the same order.
type decoded struct {
	events []*Event
	text   []string
	json   []map[string]any
	stats  Stats
}

// byFrame returns the indexes of the events of a frame.
func (d *decoded) byFrame(frame int) []int {
	var idx []int
	for i, e := range d.events {
		if e.Frame == frame {
			idx = append(idx, i)
		}
	}
	return idx
}

func decodeBytes(t testing.TB, capture []byte, opts Options) *decoded {
	t.Helper()
	r, err := NewReader(bytes.NewReader(capture))
	if err != nil {
		t.Fatal(err)
	}
	d := &decoded{}
	d.stats, err = Decode(r, opts, func(e *Event) {
		d.events = append(d.events, e)
		d.text = append(d.text, e.String())
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("frame %d: %v", e.Frame, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("frame %d: %v\n%s", e.Frame, err, b)
		}
		d.json = append(d.json, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func writeDemo(t testing.TB) (*tracetest.Demo, []byte) {
	t.Helper()
	var buf bytes.Buffer
	demo, err := tracetest.WriteDemo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return demo, buf.Bytes()
}

// jget returns the value at a dotted path ("rpcrdma.reads.0.handle") of
// a decoded JSON object, and whether it is there.
func jget(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// checkJSON checks fields of a JSON object: numbers are given as Go
// integers, strings and booleans as such, nil for JSON null, and absent
// for a key that must not be there.
type absentT struct{}

var absent absentT

func checkJSON(t *testing.T, what string, obj map[string]any, want map[string]any) {
	t.Helper()
	for path, w := range want {
		got, ok := jget(obj, path)
		if w == absent {
			if ok {
				t.Errorf("%s: %s = %v, want absent", what, path, got)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: %s absent, want %v", what, path, w)
			continue
		}
		switch wv := w.(type) {
		case int:
			w = float64(wv)
		case uint32:
			w = float64(wv)
		case uint64:
			w = float64(wv)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %s = %#v, want %#v", what, path, got, w)
		}
	}
}

// TestDemo decodes the synthesized conversation and checks every layer of
// every message, in the Event, its text line and its JSON object.
func TestDemo(t *testing.T) {
	demo, capture := writeDemo(t)
	d := decodeBytes(t, capture, Options{})
	one := func(step string) (*Event, string, map[string]any) {
		t.Helper()
		idx := d.byFrame(demo.Frames[step])
		if len(idx) != 1 {
			t.Fatalf("%s (frame %d): %d events, want 1", step, demo.Frames[step], len(idx))
		}
		return d.events[idx[0]], d.text[idx[0]], d.json[idx[0]]
	}
	c, s := demo.Client.String(), demo.Server.String()

	// The MPA handshake.
	e, line, j := one("request")
	if e.Kind != KindMPAFrame || e.MPA.Kind != mpa.Request || e.MPA.Rev != 2 || e.MPA.Flags != mpa.FlagCRC|mpa.FlagEnhanced ||
		e.MPA.IRDORD != (mpa.IRDORD{IRD: 16, ORD: 16}) || e.PrivateData == nil ||
		*e.PrivateData != (wire.PrivateData{RemoteInvalidation: true, SendSize: 4096, ReceiveSize: 4096}) {
		t.Errorf("request: %+v %+v %+v", e, e.MPA, e.PrivateData)
	}
	if want := "4 s0 i>r MPA Request rev 2 C|S ird=16 ord=16 pd=8 | rpcrdma-pd v1 rinv=true send=4096 recv=4096"; line != want {
		t.Errorf("request text:\n got %s\nwant %s", line, want)
	}
	checkJSON(t, "request", j, map[string]any{
		"frame": 4, "time": "2024-01-01T00:00:00.003Z", "stream": 0, "dir": "i>r", "src": c, "dst": s,
		"offset": 0, "length": 32, "kind": "mpa-frame", "mpa.type": "request", "mpa.rev": 2, "mpa.crc_flag": true, "mpa.marker_flag": false, "mpa.reject_flag": false,
		"mpa.enhanced": true, "mpa.ird": 16, "mpa.ord": 16, "mpa.p2p": false, "mpa.pd_length": 12,
		"mpa.private_data": "f6ab0e1801010303", "mpa.rpcrdma_pd.rinv": true, "mpa.rpcrdma_pd.send_size": 4096,
		"mpa.rpcrdma_pd.recv_size": 4096, "ddp": nil, "rdmap": nil, "rpcrdma": absent, "rpc": absent, "error": absent,
	})
	_, _, j = one("reply")
	checkJSON(t, "reply", j, map[string]any{"dir": "r>i", "mpa.type": "reply", "mpa.ird": 16, "mpa.ord": 8, "src": s})

	// RDMA_MSG WRITE call with all three chunk lists.
	e, line, j = one("write-call")
	if e.FPDU == nil || !e.FPDU.CRCChecked || !e.FPDU.CRCOK || e.DDP == nil || e.DDP.Opcode() != ddp.OpSend ||
		e.Message == nil || e.RPCRDMA == nil || e.RPC == nil || e.Err != nil {
		t.Fatalf("write-call: %v", e)
	}
	h := e.RPCRDMA
	wantReads := wire.ReadList{{Position: demo.WritePosition, Segment: wire.Segment{Handle: tracetest.ReadChunkHandle, Length: tracetest.DataLen, Offset: tracetest.ReadChunkOffset}}}
	if h.XID != tracetest.XIDWrite || h.Vers != 1 || h.Credits != tracetest.Credits || h.Proc != wire.RDMA_MSG ||
		!reflect.DeepEqual(h.Chunks.Reads, wantReads) || len(h.Chunks.Writes) != 1 || !h.Chunks.Reply.Present {
		t.Errorf("write-call header: %v", h)
	}
	if r := e.RPC; r.MsgType != rpc.MsgCall || r.Call.XID != tracetest.XIDWrite || r.Call.Prog != tracetest.NFSProg ||
		r.Call.Vers != tracetest.NFSv3 || r.Call.Proc != tracetest.NFSWrite {
		t.Errorf("write-call rpc: %v", r)
	}
	if want := fmt.Sprintf("6 s0 i>r FPDU len=210 crc=0x%08x | Send L qn=0 msn=1 mo=0 len=192 | "+
		"xid=0x4c414201 vers=1 credits=32 RDMA_MSG reads=[pos=%d 0x11110001:64@0x1000] writes=[[0x22220001:4096@0x2000]] reply=[0x44440001:1024@0x4000] | "+
		"call xid=0x4c414201 prog=100003 vers=3 proc=7 cred=AUTH_NONE verf=AUTH_NONE", e.FPDU.CRC, demo.WritePosition); line != want {
		t.Errorf("write-call text:\n got %s\nwant %s", line, want)
	}
	checkJSON(t, "write-call", j, map[string]any{
		"frame": demo.Frames["write-call"], "kind": "fpdu", "offset": 32, "length": 216,
		"mpa.type": "fpdu", "mpa.ulpdu_length": 210, "mpa.crc": e.FPDU.CRC, "mpa.crc_ok": true, "mpa.markers": 0,
		"ddp.tagged": false, "ddp.last": true, "ddp.dv": 1, "ddp.qn": 0, "ddp.msn": 1, "ddp.mo": 0, "ddp.stag": absent,
		"rdmap.rv": 1, "rdmap.opcode": "Send", "rdmap.payload_length": 192, "rdmap.inval_stag": absent,
		"message.length": 192, "message.fragments": 1, "message.first_frame": demo.Frames["write-call"],
		"rpcrdma.xid": tracetest.XIDWrite, "rpcrdma.vers": 1, "rpcrdma.credits": 32, "rpcrdma.proc": "RDMA_MSG",
		"rpcrdma.reads.0.position": demo.WritePosition, "rpcrdma.reads.0.handle": tracetest.ReadChunkHandle,
		"rpcrdma.reads.0.length": tracetest.DataLen, "rpcrdma.reads.0.offset": tracetest.ReadChunkOffset,
		"rpcrdma.writes.0.0.handle": tracetest.WriteChunkHandle, "rpcrdma.writes.0.0.length": 4096,
		"rpcrdma.writes.0.0.offset": tracetest.WriteChunkOffset, "rpcrdma.writes.1": absent,
		"rpcrdma.reply.0.handle": tracetest.ReplyChunkHandle, "rpcrdma.reply.0.length": 1024,
		"rpcrdma.reply.0.offset": tracetest.ReplyChunkOffset, "rpcrdma.err": absent,
		"rpc.xid": tracetest.XIDWrite, "rpc.msg_type": "CALL", "rpc.rpcvers": 2, "rpc.prog": tracetest.NFSProg,
		"rpc.vers": 3, "rpc.proc": tracetest.NFSWrite, "rpc.cred": "AUTH_NONE", "rpc.verf": "AUTH_NONE", "error": absent,
	})

	// RDMA Read Request and Response for the read chunk.
	e, _, j = one("read-request")
	if !e.DDP.HasReadRequest() || e.DDP.ReadRequest.SourceSTag != tracetest.ReadChunkHandle {
		t.Errorf("read-request: %v", e)
	}
	checkJSON(t, "read-request", j, map[string]any{
		"dir": "r>i", "ddp.tagged": false, "ddp.qn": 1, "ddp.msn": 1, "rdmap.opcode": "RDMA Read Request",
		"rdmap.read_request.sink_stag": tracetest.ReadSinkSTag, "rdmap.read_request.sink_to": 0,
		"rdmap.read_request.size": tracetest.DataLen, "rdmap.read_request.src_stag": tracetest.ReadChunkHandle,
		"rdmap.read_request.src_to": tracetest.ReadChunkOffset, "rpcrdma": absent, "message": absent,
	})
	_, line, j = one("read-response")
	if want := "stag=0x55550001 to=0x0 len=64"; !strings.Contains(line, "RDMA Read Response L "+want) {
		t.Errorf("read-response text: %s", line)
	}
	checkJSON(t, "read-response", j, map[string]any{
		"ddp.tagged": true, "ddp.last": true, "ddp.stag": tracetest.ReadSinkSTag, "ddp.to": 0, "ddp.qn": absent,
		"rdmap.opcode": "RDMA Read Response", "rdmap.payload_length": tracetest.DataLen, "rpcrdma": absent,
	})

	// The WRITE reply echoes the write chunk, unused.
	_, line, j = one("write-reply")
	checkJSON(t, "write-reply", j, map[string]any{
		"rpcrdma.proc": "RDMA_MSG", "rpcrdma.reads": []any{}, "rpcrdma.writes.0.0.length": 0,
		"rpcrdma.writes.0.0.handle": tracetest.WriteChunkHandle, "rpcrdma.reply": nil,
		"rpc.xid": tracetest.XIDWrite, "rpc.msg_type": "REPLY", "rpc.stat": "MSG_ACCEPTED", "rpc.accept_stat": "SUCCESS",
		"rpc.prog": absent,
	})
	if !strings.HasSuffix(line, "| reply xid=0x4c414201 MSG_ACCEPTED SUCCESS verf=AUTH_NONE") {
		t.Errorf("write-reply text: %s", line)
	}

	// READ with a write chunk, the RDMA Write, the reduced reply.
	_, _, j = one("read-call")
	checkJSON(t, "read-call", j, map[string]any{"rpcrdma.writes.0.0.handle": tracetest.ReadResultHandle,
		"rpcrdma.writes.0.0.length": tracetest.DataLen, "rpc.proc": tracetest.NFSRead})
	_, _, j = one("rdma-write")
	checkJSON(t, "rdma-write", j, map[string]any{"rdmap.opcode": "RDMA Write", "ddp.stag": tracetest.ReadResultHandle,
		"ddp.to": tracetest.ReadResultOffset, "rdmap.payload_length": tracetest.DataLen})
	_, _, j = one("read-reply")
	checkJSON(t, "read-reply", j, map[string]any{"rpcrdma.writes.0.0.length": tracetest.DataLen, "rpc.msg_type": "REPLY"})

	// A Send split in three DDP segments: two FPDUs in one TCP segment,
	// the message completes in the next.
	idx := d.byFrame(demo.Frames["getattr-call-1"])
	if len(idx) != 2 {
		t.Fatalf("getattr-call-1: %d events", len(idx))
	}
	first := d.events[idx[0]]
	for n, i := range idx {
		checkJSON(t, "getattr fragment", d.json[i], map[string]any{"ddp.last": false, "ddp.msn": 3,
			"ddp.mo": n * len(first.DDP.Payload), "rpcrdma": absent, "message": absent})
	}
	e, line, j = one("getattr-call-2")
	checkJSON(t, "getattr-call-2", j, map[string]any{"ddp.last": true, "message.fragments": 3,
		"message.first_frame": demo.Frames["getattr-call-1"], "rpcrdma.xid": tracetest.XIDGetattr,
		"rpc.proc": tracetest.NFSGetattr, "rpc.cred": "AUTH_SYS"})
	if e.Message.Len != int(e.DDP.MO)+len(e.DDP.Payload) {
		t.Errorf("message length %d, last segment at MO %d + %d", e.Message.Len, e.DDP.MO, len(e.DDP.Payload))
	}
	if !strings.Contains(line, fmt.Sprintf("| message len=%d frags=3 first=%d |", e.Message.Len, demo.Frames["getattr-call-1"])) {
		t.Errorf("getattr-call-2 text: %s", line)
	}
	_, _, j = one("getattr-reply")
	checkJSON(t, "getattr-reply", j, map[string]any{"rdmap.opcode": "Send with Invalidate",
		"rdmap.inval_stag": tracetest.ReadChunkHandle, "rpc.xid": tracetest.XIDGetattr})

	// An unknown version, and the ERR_VERS answer.
	e, line, j = one("v3-call")
	if e.Err == nil || !strings.Contains(e.Err.Error(), "unsupported version 3") || e.RPCRDMA != nil {
		t.Errorf("v3-call: %v", e)
	}
	if !strings.HasSuffix(line, "| xid=0x4c414204 vers=3 credits=32 | error: "+e.Err.Error()) {
		t.Errorf("v3-call text: %s", line)
	}
	checkJSON(t, "v3-call", j, map[string]any{"rpcrdma.xid": tracetest.XIDV3, "rpcrdma.vers": 3, "rpcrdma.credits": 32,
		"rpcrdma.proc": absent, "rpcrdma.reads": absent, "rpc": absent, "error": e.Err.Error()})
	_, line, j = one("err-vers")
	checkJSON(t, "err-vers", j, map[string]any{"rpcrdma.proc": "RDMA_ERROR", "rpcrdma.err.code": "ERR_VERS",
		"rpcrdma.err.low": 1, "rpcrdma.err.high": 2, "rpcrdma.reads": absent, "rpc": absent})
	if !strings.HasSuffix(line, "| xid=0x4c414204 vers=1 credits=32 RDMA_ERROR ERR_VERS low=1 high=2") {
		t.Errorf("err-vers text: %s", line)
	}

	// Version Two, and a Send with Solicited Event.
	_, _, j = one("v2-call")
	checkJSON(t, "v2-call", j, map[string]any{"rpcrdma.vers": 2, "rpcrdma.proc": "RDMA_MSG", "rpc.vers": 4, "rpc.proc": 0})
	_, line, j = one("v2-reply")
	checkJSON(t, "v2-reply", j, map[string]any{"rdmap.opcode": "Send with SE", "rpcrdma.vers": 2,
		"rpcrdma.xid": tracetest.XIDV2, "rpc.msg_type": "REPLY", "error": absent})
	if !strings.Contains(line, "| Send with SE L qn=0 msn=5 mo=0 len=52 | xid=0x4c414205 vers=2 credits=32 RDMA_MSG") {
		t.Errorf("v2-reply text: %s", line)
	}

	// Terminate, RFC layout.
	e, _, j = one("terminate")
	if !e.DDP.HasTerminate() || e.DDP.Terminate.Layout != ddp.LayoutRFC {
		t.Errorf("terminate: %v", e)
	}
	checkJSON(t, "terminate", j, map[string]any{"ddp.qn": 2, "rdmap.opcode": "Terminate",
		"rdmap.terminate.layer": "RDMAP", "rdmap.terminate.etype": 2, "rdmap.terminate.code": 6,
		"rdmap.terminate.hdrct": "M|D", "rdmap.terminate.layout": "rfc", "rdmap.terminate.segment_length": 100,
		"rdmap.terminate.ddp_header": "Send L qn=0 msn=6 mo=0", "rdmap.terminate.cause": ddp.CauseRDMAPUnexpectedOpcode.String()})

	// The second connection: MPA Rev 1 without CRC, a Send that is not
	// RPC-over-RDMA, and a Terminate in the siw layout.
	_, _, j = one("request2")
	checkJSON(t, "request2", j, map[string]any{"stream": 1, "mpa.rev": 1, "mpa.enhanced": false, "mpa.ird": absent,
		"mpa.crc_flag": false, "mpa.rpcrdma_pd": absent, "mpa.pd_length": 0})
	_, _, j = one("hello")
	checkJSON(t, "hello", j, map[string]any{"stream": 1, "mpa.crc_ok": absent, "mpa.crc": 0, "rdmap.opcode": "Send",
		"message.length": 12, "rpcrdma": absent, "error": absent})
	_, _, j = one("terminate2")
	checkJSON(t, "terminate2", j, map[string]any{"rdmap.terminate.layout": "siw", "rdmap.terminate.layer": "DDP",
		"rdmap.terminate.etype": 2, "rdmap.terminate.code": 3, "rdmap.terminate.segment_length": 12})

	// Every event is accounted for: one per MPA frame or FPDU, one error.
	if d.stats.Streams != 2 || d.stats.IWARP != 2 || d.stats.Errors != 1 || d.stats.Events != len(d.events) ||
		d.stats.Gaps != 0 || d.stats.Frames != demo.Frames["terminate2"] {
		t.Errorf("stats %+v", d.stats)
	}
	for i, e := range d.events {
		if e.Kind != KindMPAFrame && e.Kind != KindFPDU {
			t.Errorf("unexpected event: %s", d.text[i])
		}
	}
}

// TestDemoStreamBytes checks offsets and lengths: the events of each
// direction tile its stream exactly.
func TestDemoStreamBytes(t *testing.T) {
	demo, capture := writeDemo(t)
	d := decodeBytes(t, capture, Options{})
	var next [2]uint64
	for _, e := range d.events {
		if e.Stream != 0 {
			continue
		}
		if e.Offset != next[e.Dir] {
			t.Errorf("frame %d: offset %d, want %d", e.Frame, e.Offset, next[e.Dir])
		}
		next[e.Dir] = e.Offset + e.Len
	}
	for dir := range next {
		if next[dir] != uint64(len(demo.Stream0[dir])) {
			t.Errorf("direction %d: events end at %d, stream is %d bytes", dir, next[dir], len(demo.Stream0[dir]))
		}
	}
}
