package trace

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/trace/tracetest"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// ulpEvent decodes msg as a complete Send on a connection that is known to
// carry RPC-over-RDMA (rpcrdma) or not, and returns the event's JSON.
func ulpEvent(t *testing.T, rpcrdma bool, msg []byte) (*Event, map[string]any) {
	t.Helper()
	c := newConn(NewDecoder(Options{}, func(*Event) {}), 0, testClient, testServer, false)
	c.rpcrdma = rpcrdma
	ev := &Event{Kind: KindFPDU}
	c.side[0].ulp(ev, msg)
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return ev, m
}

func rseg(h, l uint32, o uint64) wire.Segment { return wire.Segment{Handle: h, Length: l, Offset: o} }

// TestULPProcs decodes every message type of both versions.
func TestULPProcs(t *testing.T) {
	const xid = 0x1234
	call := tracetest.Call(xid, 100003, 3, 1, nil, nil)
	reply := tracetest.Reply(xid, nil)
	v1 := func(p wire.Proc) *wire.Header { return &wire.Header{XID: xid, Vers: 1, Credits: 16, Proc: p} }
	v2 := func(p wire.Proc) *wire.Header { return &wire.Header{XID: xid, Vers: 2, Credits: 16, Proc: p} }

	nomsgCall := v1(wire.RDMA_NOMSG)
	nomsgCall.Chunks.Reads = wire.ReadList{{Position: 0, Segment: rseg(1, 200, 0x10)}, {Position: 0, Segment: rseg(2, 100, 0x20)}}
	nomsgReply := v1(wire.RDMA_NOMSG)
	nomsgReply.Chunks.Reply = wire.ReplyChunk{Present: true, Chunk: wire.WriteChunk{rseg(3, 300, 0x30)}}
	msgp := v1(wire.RDMA_MSGP)
	msgp.Padding = wire.Padding{Align: 1024, Thresh: 4096}
	msgp.Chunks.Writes = wire.WriteList{{rseg(4, 8, 0x40), rseg(5, 8, 0x50)}, {rseg(6, 8, 0x60)}}
	errChunk := v1(wire.RDMA_ERROR)
	errChunk.Error.Code = wire.ErrChunk
	v2Err := v2(wire.RDMA_ERROR)
	v2Err.Error.Code = wire.ErrInvalOption
	v2Opt := v2(wire.RDMA_OPTIONAL)
	v2Opt.Optional = wire.Optional{Type: 7, Info: []byte("optional")}
	v2Nomsg := *nomsgReply
	v2Nomsg.Vers = 2
	v2Vers := v2(wire.RDMA_ERROR)
	v2Vers.Error = wire.ErrorBody{Code: wire.ErrVers, Low: 1, High: 2}

	for _, tc := range []struct {
		name string
		msg  []byte
		want map[string]any
	}{
		{"v1 RDMA_MSG call", tracetest.RPCRDMA(v1(wire.RDMA_MSG), call), map[string]any{
			"rpcrdma.proc": "RDMA_MSG", "rpcrdma.reads": []any{}, "rpcrdma.writes": []any{}, "rpcrdma.reply": nil,
			"rpc.msg_type": "CALL", "rpc.proc": 1, "error": absent}},
		{"v1 RDMA_NOMSG long call", nomsgCall.Append(nil), map[string]any{
			"rpcrdma.proc": "RDMA_NOMSG", "rpcrdma.reads.0.position": 0, "rpcrdma.reads.1.handle": 2,
			"rpcrdma.reads.1.length": 100, "rpcrdma.reads.1.offset": 0x20, "rpc": absent, "error": absent}},
		{"v1 RDMA_NOMSG long reply", nomsgReply.Append(nil), map[string]any{
			"rpcrdma.proc": "RDMA_NOMSG", "rpcrdma.reply.0.handle": 3, "rpcrdma.reply.0.length": 300, "rpc": absent, "error": absent}},
		{"v1 RDMA_MSGP", tracetest.RPCRDMA(msgp, reply), map[string]any{
			"rpcrdma.proc": "RDMA_MSGP", "rpcrdma.align": 1024, "rpcrdma.thresh": 4096,
			"rpcrdma.writes.0.1.handle": 5, "rpcrdma.writes.1.0.offset": 0x60, "rpc.msg_type": "REPLY", "error": absent}},
		{"v1 RDMA_DONE", v1(wire.RDMA_DONE).Append(nil), map[string]any{
			"rpcrdma.proc": "RDMA_DONE", "rpcrdma.reads": absent, "rpcrdma.err": absent, "rpc": absent, "error": absent}},
		{"v1 ERR_CHUNK", errChunk.Append(nil), map[string]any{
			"rpcrdma.proc": "RDMA_ERROR", "rpcrdma.err.code": "ERR_CHUNK", "rpcrdma.err.low": absent, "error": absent}},
		{"v2 RDMA_MSG", tracetest.RPCRDMA(v2(wire.RDMA_MSG), call), map[string]any{
			"rpcrdma.vers": 2, "rpcrdma.proc": "RDMA_MSG", "rpc.prog": 100003, "error": absent}},
		{"v2 RDMA_NOMSG", v2Nomsg.Append(nil), map[string]any{
			"rpcrdma.vers": 2, "rpcrdma.proc": "RDMA_NOMSG", "rpcrdma.reply.0.handle": 3, "error": absent}},
		{"v2 RDMA_ERR_VERS", v2Vers.Append(nil), map[string]any{
			"rpcrdma.err.code": "RDMA_ERR_VERS", "rpcrdma.err.low": 1, "rpcrdma.err.high": 2, "error": absent}},
		{"v2 RDMA_ERR_INVAL_OPTION", v2Err.Append(nil), map[string]any{
			"rpcrdma.err.code": wire.ErrInvalOption.Name(2), "error": absent}},
		{"v2 RDMA_OPTIONAL", v2Opt.Append(nil), map[string]any{
			"rpcrdma.proc": "RDMA_OPTIONAL", "rpcrdma.opttype": 7, "rpcrdma.optinfo_length": 8, "rpc": absent, "error": absent}},
		{"v2 RDMA_OPTIONAL with a call", tracetest.RPCRDMA(v2Opt, call), map[string]any{
			"rpcrdma.opttype": 7, "rpc.msg_type": "CALL", "error": absent}},
	} {
		ev, j := ulpEvent(t, false, tc.msg)
		tc.want["rpcrdma.xid"] = xid
		tc.want["rpcrdma.credits"] = 16
		checkJSON(t, tc.name, j, tc.want)
		if ev.Err != nil {
			t.Errorf("%s: %v", tc.name, ev.Err)
		}
	}
}

// TestULPErrors: what cannot be decoded, or breaks a rule, is reported on
// the event with what could be decoded.
func TestULPErrors(t *testing.T) {
	const xid = 0x99
	good := &wire.Header{XID: xid, Vers: 1, Credits: 1, Proc: wire.RDMA_MSG}
	good.Chunks.Reads = wire.ReadList{{Position: 16, Segment: rseg(1, 64, 0)}}
	full := tracetest.RPCRDMA(good, tracetest.Call(xid, 1, 1, 1, nil, nil))

	// A read list cut short: only the prefix is known. On a connection
	// not known to carry RPC-over-RDMA, that is not reported.
	if ev, j := ulpEvent(t, false, full[:30]); ev.Err != nil || j["rpcrdma"] != nil {
		t.Errorf("truncated, unknown connection: %v", ev)
	}
	ev, j := ulpEvent(t, true, full[:30])
	if ev.Err == nil || ev.RPCRDMA != nil || ev.RPCRDMAPrefix == nil {
		t.Errorf("truncated: %v", ev)
	}
	checkJSON(t, "truncated", j, map[string]any{"rpcrdma.xid": xid, "rpcrdma.proc": absent, "rpc": absent})

	// A misaligned read position: decoded, and the rule reported.
	bad := *good
	bad.Chunks.Reads = wire.ReadList{{Position: 6, Segment: rseg(1, 64, 0)}}
	ev, j = ulpEvent(t, false, tracetest.RPCRDMA(&bad, tracetest.Call(xid, 1, 1, 1, nil, nil)))
	if ev.Err == nil || !strings.Contains(ev.Err.Error(), "position") {
		t.Errorf("misaligned: %v", ev.Err)
	}
	checkJSON(t, "misaligned", j, map[string]any{"rpcrdma.reads.0.position": 6, "rpc.xid": xid})

	// The RPC XID differs from rdma_xid.
	ev, _ = ulpEvent(t, false, tracetest.RPCRDMA(good, tracetest.Call(xid+1, 1, 1, 1, nil, nil)))
	if ev.Err == nil || !strings.Contains(ev.Err.Error(), "differs from rdma_xid") {
		t.Errorf("xid mismatch: %v", ev.Err)
	}

	// The RPC message is cut short.
	ev, _ = ulpEvent(t, false, tracetest.RPCRDMA(good, tracetest.Call(xid, 1, 1, 1, nil, nil)[:20]))
	if ev.Err == nil || !strings.HasPrefix(ev.Err.Error(), "rpc: ") || ev.RPC == nil {
		t.Errorf("short RPC: %v", ev.Err)
	}

	// A denied reply.
	denied := rpc.ReplyHeader{XID: xid, Stat: rpc.MsgDenied, RejectStat: rpc.AuthError, AuthStat: rpc.AuthTooWeak}
	_, j = ulpEvent(t, false, tracetest.RPCRDMA(good, denied.Append(nil)))
	checkJSON(t, "denied", j, map[string]any{"rpc.stat": "MSG_DENIED", "rpc.reject_stat": "AUTH_ERROR",
		"rpc.auth_stat": "AUTH_TOOWEAK", "rpc.accept_stat": absent})

	// A payload that is not RPC-over-RDMA: ignored on an unknown
	// connection, an error on an RPC-over-RDMA one.
	other := []byte("SMB2 message, not RPC-over-RDMA at all")
	if ev, j := ulpEvent(t, false, other); ev.Err != nil || j["rpcrdma"] != nil {
		t.Errorf("other protocol: %v %v", ev.Err, j["rpcrdma"])
	}
	if ev, _ := ulpEvent(t, true, other); ev.Err == nil {
		t.Errorf("other protocol on an RPC-over-RDMA connection: no error")
	}
	if ev, _ := ulpEvent(t, true, nil); ev.Err == nil || ev.RPCRDMAPrefix != nil {
		t.Errorf("empty Send: %v", ev)
	}
}
