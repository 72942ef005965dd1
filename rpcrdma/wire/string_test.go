package wire

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// logText logs v under the key "v" with a text handler and returns the line
// without time and level.
func logText(v any) string {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
				return slog.Attr{}
			}
			return a
		},
	}))
	l.Info("m", "v", v)
	return strings.TrimSpace(buf.String())
}

func TestEnumStrings(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{RDMA_MSG.String(), "RDMA_MSG"},
		{RDMA_NOMSG.String(), "RDMA_NOMSG"},
		{RDMA_MSGP.String(), "RDMA_MSGP"},
		{RDMA_DONE.String(), "RDMA_DONE"},
		{RDMA_ERROR.String(), "RDMA_ERROR"},
		{RDMA_OPTIONAL.String(), "RDMA_OPTIONAL"},
		{Proc(6).String(), "Proc(6)"},
		{Proc(0xffffffff).String(), "Proc(4294967295)"},
		{ErrVers.String(), "ERR_VERS"},
		{ErrChunk.String(), "ERR_CHUNK"},
		{ErrInvalOption.String(), "RDMA_ERR_INVAL_OPTION"},
		{ErrorCode(0).String(), "ErrorCode(0)"},
		{ErrVers.Name(Version1), "ERR_VERS"},
		{ErrChunk.Name(Version1), "ERR_CHUNK"},
		{ErrInvalOption.Name(Version1), "ErrorCode(3)"},
		{ErrVers.Name(Version2), "RDMA_ERR_VERS"},
		{ErrBadHeader.Name(Version2), "RDMA_ERR_BAD_HEADER"},
		{ErrInvalOption.Name(Version2), "RDMA_ERR_INVAL_OPTION"},
		{ErrorCode(9).Name(Version2), "ErrorCode(9)"},
		{Version2.String(), "2"},
		{DirCall.String(), "call"},
		{DirReply.String(), "reply"},
		{DirUnknown.String(), "unknown"},
		{Direction(7).String(), "Direction(7)"},
		{RulePositionAlign.String(), "position-align"},
		{RulePositionAlign.Error(), "rpcrdma: position-align"},
		{RuleReplyChunkInMsg.String(), "reply-chunk-in-msg"},
		{Rule(0).String(), "Rule(0)"},
		{Rule(200).String(), "Rule(200)"},
		{logText(RDMA_NOMSG), "msg=m v=RDMA_NOMSG"},
		{logText(ErrChunk), "msg=m v=ERR_CHUNK"},
		{logText(Version1), "msg=m v=1"},
		{logText(DirReply), "msg=m v=reply"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	for r := RuleMalformed; r <= RuleReplyChunkInMsg; r++ {
		if strings.HasPrefix(r.String(), "Rule(") {
			t.Errorf("rule %d has no token", r)
		}
		if e := (&HeaderError{Rule: r}).Error(); !strings.HasPrefix(e, "rpcrdma: ") {
			t.Errorf("rule %v: message %q", r, e)
		}
	}
	if e := (&HeaderError{Rule: Rule(99)}).Error(); e != "rpcrdma: Rule(99)" {
		t.Errorf("unknown rule message %q", e)
	}
}

func TestHeaderString(t *testing.T) {
	want := map[string]string{
		"seed004-4.2-rdma-msg-no-chunks":       "xid=0x1a2b3c4d vers=1 credits=128 RDMA_MSG reads=[] writes=[] reply=none",
		"lab-full-probe-write-read-chunk-call": "xid=0x4c414206 vers=1 credits=32 RDMA_MSG reads=[pos=112 0xabcd01:8192@0x10000000] writes=[] reply=none",
		"lab-full-knfsd-read-write-list-reply": "xid=0x4c414207 vers=1 credits=64 RDMA_MSG reads=[] writes=[[0xabcd02:8192@0x20000000]] reply=none",
		"lab-full-knfsd-readdirplus-nomsg-reply": "xid=0x4c414208 vers=1 credits=64 RDMA_NOMSG reads=[] writes=[] " +
			"reply=[0xabcd03:452@0x30000000]",
		"seed004-4.2-rdma-msg-write-list": "xid=0x3 vers=1 credits=32 RDMA_MSG reads=[] " +
			"writes=[[0x21:4096@0x40000000 0x22:2048@0x40001000] [0x23:512@0xfffffffffffff000]] reply=none",
		"seed004-4.2-rdma-msgp":                "xid=0x6 vers=1 credits=32 RDMA_MSGP align=4096 thresh=1024 reads=[] writes=[] reply=none",
		"seed004-3.8-rdma-done":                "xid=0x7 vers=1 credits=32 RDMA_DONE",
		"seed004-5.3-rdma-error-err-vers":      "xid=0x8 vers=1 credits=64 RDMA_ERROR ERR_VERS low=1 high=1",
		"seed004-5.3-rdma-error-err-chunk":     "xid=0x9 vers=1 credits=64 RDMA_ERROR ERR_CHUNK",
		"seed000-4.2-v2-rdma-err-bad-header":   "xid=0x106 vers=2 credits=16 RDMA_ERROR RDMA_ERR_BAD_HEADER",
		"seed000-4.2-v2-rdma-err-vers":         "xid=0x105 vers=2 credits=16 RDMA_ERROR RDMA_ERR_VERS low=1 high=2",
		"seed000-4.2-v2-rdma-msgp-reserved":    "xid=0x103 vers=2 credits=16 RDMA_MSGP",
		"seed000-4.2-v2-rdma-optional-payload": "xid=0x108 vers=2 credits=16 RDMA_OPTIONAL opttype=7 optinfo=5B",
	}
	for _, v := range allVectors() {
		if w, ok := want[v.name]; ok {
			if got := v.want.String(); got != w {
				t.Errorf("%s:\n got %q\nwant %q", v.name, got, w)
			}
			delete(want, v.name)
		}
	}
	if len(want) != 0 {
		t.Errorf("no vectors named %v", want)
	}
}

func TestHeaderLogValue(t *testing.T) {
	for _, tc := range []struct {
		h    Header
		want string
	}{
		{labVectors[2].want, "msg=m v.xid=0x4c414206 v.vers=1 v.credits=32 v.proc=RDMA_MSG " +
			`v.chunks.reads="[pos=112 0xabcd01:8192@0x10000000]" v.chunks.writes=[] v.chunks.reply=none`},
		{v1Vectors[5].want, "msg=m v.xid=0x6 v.vers=1 v.credits=32 v.proc=RDMA_MSGP v.align=4096 v.thresh=1024 " +
			"v.chunks.reads=[] v.chunks.writes=[] v.chunks.reply=none"},
		{v1Vectors[7].want, "msg=m v.xid=0x8 v.vers=1 v.credits=64 v.proc=RDMA_ERROR v.err=ERR_VERS v.low=1 v.high=1"},
		{v2Vectors[7].want, "msg=m v.xid=0x108 v.vers=2 v.credits=16 v.proc=RDMA_OPTIONAL v.opttype=7 v.optinfo=5"},
		{v1Vectors[6].want, "msg=m v.xid=0x7 v.vers=1 v.credits=32 v.proc=RDMA_DONE"},
	} {
		if got := logText(&tc.h); got != tc.want {
			t.Errorf("LogValue:\n got %s\nwant %s", got, tc.want)
		}
	}
	// The parts log as their Strings.
	c := v1Vectors[3].want.Chunks
	for _, tc := range []struct {
		v    any
		want string
	}{
		{c.Reads[0].Segment, "0x31:4096@0x0"},
		{c.Reads[1], `"pos=0 0x32:904@0x1000"`},
		{c.Reads, `"[pos=0 0x31:4096@0x0 pos=0 0x32:904@0x1000]"`},
		{c.Reads.Chunks(nil)[0], `"pos=0 len=5000 [pos=0 0x31:4096@0x0 pos=0 0x32:904@0x1000]"`},
		{c.Reply.Chunk, "[0x33:8192@0x200000000000]"},
		{c.Reply, "[0x33:8192@0x200000000000]"},
		{WriteList{c.Reply.Chunk}, "[[0x33:8192@0x200000000000]]"},
		{ReplyChunk{}, "none"},
		{Prefix{XID: 1, Vers: 2, Credits: 3}, "v.xid=0x1 v.vers=2 v.credits=3"},
	} {
		got := strings.TrimPrefix(logText(tc.v), "msg=m v=")
		got = strings.TrimPrefix(got, "msg=m ")
		if got != tc.want {
			t.Errorf("LogValue(%T) = %s, want %s", tc.v, got, tc.want)
		}
	}
	if got := c.String(); got != "reads=[pos=0 0x31:4096@0x0 pos=0 0x32:904@0x1000] writes=[] reply=[0x33:8192@0x200000000000]" {
		t.Errorf("ChunkLists.String = %q", got)
	}
}
