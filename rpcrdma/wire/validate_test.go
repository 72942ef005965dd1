package wire

import (
	"errors"
	"strings"
	"testing"
)

func rs(pos, handle, length uint32) ReadSegment {
	return ReadSegment{Position: pos, Segment: Segment{Handle: handle, Length: length, Offset: uint64(handle) << 12}}
}

func seg(handle, length uint32) Segment {
	return Segment{Handle: handle, Length: length, Offset: uint64(handle) << 12}
}

func v1(p Proc, c ChunkLists) Header {
	return Header{XID: 1, Vers: Version1, Credits: 8, Proc: p, Chunks: c}
}

func v2(p Proc, c ChunkLists) Header {
	return Header{XID: 1, Vers: Version2, Credits: 8, Proc: p, Chunks: c}
}

func reply(segs ...Segment) ReplyChunk { return ReplyChunk{Present: true, Chunk: segs} }

// TestValidate has, for each rule, a header that breaks it and one as close
// as possible that does not.
func TestValidate(t *testing.T) {
	big := Limits{MaxHeaderSize: 1 << 20}
	errVers := func(low, high Version) Header {
		return Header{Vers: Version1, Proc: RDMA_ERROR, Error: ErrorBody{Code: ErrVers, Low: low, High: high}}
	}
	optional := func(n int) Header {
		return Header{Vers: Version2, Proc: RDMA_OPTIONAL, Optional: Optional{Type: 1, Info: make([]byte, n)}}
	}
	many := func(n int) ReadList {
		l := make(ReadList, n)
		for i := range l {
			l[i] = rs(uint32(4*i), uint32(i+1), 8)
		}
		return l
	}
	for _, tc := range []struct {
		name string
		h    Header
		dir  Direction
		lim  Limits
		rule Rule   // 0: valid
		msg  string // the whole error message, when given
	}{
		{name: "version/accept-1", h: v1(RDMA_MSG, ChunkLists{})},
		{name: "version/accept-2", h: v2(RDMA_MSG, ChunkLists{})},
		{name: "version/reject-3", h: Header{Vers: 3}, rule: RuleVersion, msg: "rpcrdma: unsupported version 3"},

		{name: "proc/accept-v2-optional", h: optional(0)},
		{name: "proc/reject-v1-optional", h: Header{Vers: Version1, Proc: RDMA_OPTIONAL}, rule: RuleProc},
		{name: "proc/reject-v2-6", h: v2(6, ChunkLists{}), rule: RuleProc, msg: "rpcrdma: unknown procedure 6 in version 2"},

		{name: "reserved/accept-v1-msgp", h: v1(RDMA_MSGP, ChunkLists{})},
		{name: "reserved/accept-v1-done", h: v1(RDMA_DONE, ChunkLists{})},
		{name: "reserved/reject-v2-msgp", h: v2(RDMA_MSGP, ChunkLists{}), rule: RuleReserved, msg: "rpcrdma: RDMA_MSGP is reserved in version 2"},
		{name: "reserved/reject-v2-done", h: v2(RDMA_DONE, ChunkLists{}), rule: RuleReserved},

		{name: "header-size/accept-28", h: v1(RDMA_MSG, ChunkLists{}), lim: Limits{MaxHeaderSize: 28}},
		{name: "header-size/reject-28", h: v1(RDMA_MSG, ChunkLists{}), lim: Limits{MaxHeaderSize: 27}, rule: RuleHeaderSize,
			msg: "rpcrdma: header of 28 bytes exceeds 27"},
		{name: "header-size/reject-default", h: v1(RDMA_MSG, ChunkLists{Reads: many(42)}), lim: Limits{MaxSegments: 100, MaxChunks: 100},
			rule: RuleHeaderSize},

		{name: "segments/accept-3", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(4, 1, 8)}, Writes: WriteList{{seg(2, 8)}}, Reply: reply(seg(3, 8))}),
			dir: DirCall, lim: Limits{MaxSegments: 3}},
		{name: "segments/reject-4", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(4, 1, 8)}, Writes: WriteList{{seg(2, 8), seg(4, 8)}}, Reply: reply(seg(3, 8))}),
			dir: DirCall, lim: Limits{MaxSegments: 3}, rule: RuleSegments, msg: "rpcrdma: 4 segments exceed 3"},
		{name: "segments/reject-default", h: v1(RDMA_MSG, ChunkLists{Reads: many(65)}), lim: Limits{MaxChunks: 100, MaxHeaderSize: 1 << 20},
			rule: RuleSegments},

		{name: "chunks/accept-3", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(4, 1, 8), rs(4, 2, 8)}, Writes: WriteList{{seg(2, 8)}}, Reply: reply(seg(3, 8))}),
			lim: Limits{MaxChunks: 3}},
		{name: "chunks/reject-4", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(4, 1, 8), rs(8, 2, 8)}, Writes: WriteList{{seg(2, 8)}}, Reply: reply(seg(3, 8))}),
			lim: Limits{MaxChunks: 3}, rule: RuleChunks, msg: "rpcrdma: 4 chunks exceed 3"},
		{name: "chunks/reject-default", h: v1(RDMA_MSG, ChunkLists{Reads: many(17)}), rule: RuleChunks},

		{name: "empty-chunk/reject-write", h: v1(RDMA_MSG, ChunkLists{Writes: WriteList{{seg(1, 8)}, {}}}), rule: RuleEmptyChunk,
			msg: "rpcrdma: empty write chunk 1"},
		{name: "empty-chunk/reject-reply", h: v1(RDMA_MSG, ChunkLists{Reply: ReplyChunk{Present: true}}), rule: RuleEmptyChunk,
			msg: "rpcrdma: empty reply chunk"},
		{name: "empty-chunk/accept-absent-reply", h: v1(RDMA_MSG, ChunkLists{Reply: ReplyChunk{Chunk: WriteChunk{}}})},

		{name: "zero-length/reject-read", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(8, 1, 8), rs(8, 2, 0)}}), dir: DirCall,
			rule: RuleZeroLength, msg: "rpcrdma: read segment 1 has zero length"},
		{name: "zero-length/reject-write-in-call", h: v1(RDMA_MSG, ChunkLists{Writes: WriteList{{seg(1, 8)}, {seg(2, 8), seg(3, 0)}}}), dir: DirCall,
			rule: RuleZeroLength, msg: "rpcrdma: write chunk 1 segment 1 has zero length"},
		{name: "zero-length/accept-write-in-reply", h: v1(RDMA_MSG, ChunkLists{Writes: WriteList{{seg(1, 8)}, {seg(2, 8), seg(3, 0)}}}), dir: DirReply},
		{name: "zero-length/reject-reply-in-call", h: v1(RDMA_MSG, ChunkLists{Reply: reply(seg(1, 0))}), dir: DirCall,
			rule: RuleZeroLength, msg: "rpcrdma: reply chunk segment 0 has zero length"},
		{name: "zero-length/accept-reply-in-reply", h: v1(RDMA_NOMSG, ChunkLists{Reply: reply(seg(1, 64), seg(2, 0))}), dir: DirReply},

		{name: "position-align/accept-8", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(8, 1, 8)}}), dir: DirCall},
		{name: "position-align/reject-6", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(6, 1, 8)}}), dir: DirCall,
			rule: RulePositionAlign, msg: "rpcrdma: read chunk position 6 not 4-byte aligned"},
		{name: "position-align/reject-v2", h: v2(RDMA_MSG, ChunkLists{Reads: ReadList{rs(4, 1, 8), rs(13, 1, 8)}}), dir: DirCall,
			rule: RulePositionAlign},

		{name: "chunk-split/accept-adjacent", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(4, 1, 8), rs(4, 2, 8), rs(8, 3, 8)}}), dir: DirCall},
		{name: "chunk-split/reject", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(4, 1, 8), rs(8, 2, 8), rs(4, 3, 8)}}), dir: DirCall,
			rule: RuleChunkSplit, msg: "rpcrdma: read chunk position 4 split: read segment 2 not adjacent to its chunk"},

		{name: "position-order/accept-increasing", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(4, 1, 8), rs(8, 2, 8)}}), dir: DirCall},
		{name: "position-order/reject-decreasing", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(8, 1, 8), rs(4, 2, 8)}}), dir: DirCall,
			rule: RulePositionOrder, msg: "rpcrdma: read chunk position 4 after position 8"},

		{name: "position-zero/accept-nomsg", h: v1(RDMA_NOMSG, ChunkLists{Reads: ReadList{rs(0, 1, 512), rs(0, 2, 512), rs(96, 3, 8192)}}), dir: DirCall},
		{name: "position-zero/reject-msg", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(0, 1, 512)}}), dir: DirCall,
			rule: RulePositionZero, msg: "rpcrdma: position-zero read chunk in RDMA_MSG"},
		{name: "position-zero/reject-msgp", h: v1(RDMA_MSGP, ChunkLists{Reads: ReadList{rs(0, 1, 512)}}),
			rule: RulePositionZero},

		{name: "nomsg-body/accept-call-pzrc", h: v1(RDMA_NOMSG, ChunkLists{Reads: ReadList{rs(0, 1, 512)}, Reply: reply(seg(2, 4096))}), dir: DirCall},
		{name: "nomsg-body/reject-call-reply-chunk-only", h: v1(RDMA_NOMSG, ChunkLists{Reply: reply(seg(2, 4096))}), dir: DirCall,
			rule: RuleNoMsgBody, msg: "rpcrdma: RDMA_NOMSG call without a position-zero read chunk"},
		{name: "nomsg-body/reject-call-data-chunk-only", h: v1(RDMA_NOMSG, ChunkLists{Reads: ReadList{rs(4, 1, 512)}}), dir: DirCall,
			rule: RuleNoMsgBody},
		{name: "nomsg-body/accept-reply", h: v1(RDMA_NOMSG, ChunkLists{Writes: WriteList{{seg(1, 100)}}, Reply: reply(seg(2, 4096))}), dir: DirReply},
		{name: "nomsg-body/reject-reply", h: v1(RDMA_NOMSG, ChunkLists{Writes: WriteList{{seg(1, 100)}}}), dir: DirReply,
			rule: RuleNoMsgBody, msg: "rpcrdma: RDMA_NOMSG reply without a reply chunk"},
		{name: "nomsg-body/accept-unknown-reply-chunk", h: v1(RDMA_NOMSG, ChunkLists{Reply: reply(seg(2, 4096))})},
		{name: "nomsg-body/accept-unknown-pzrc", h: v1(RDMA_NOMSG, ChunkLists{Reads: ReadList{rs(0, 1, 64)}})},
		{name: "nomsg-body/reject-unknown", h: v1(RDMA_NOMSG, ChunkLists{}),
			rule: RuleNoMsgBody, msg: "rpcrdma: RDMA_NOMSG without a position-zero read chunk or a reply chunk"},

		{name: "read-in-reply/reject", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(96, 1, 8192)}}), dir: DirReply,
			rule: RuleReadInReply, msg: "rpcrdma: read list in a reply"},
		{name: "read-in-reply/accept-rfc5666", h: v1(RDMA_MSG, ChunkLists{Reads: ReadList{rs(96, 1, 8192)}}), dir: DirReply,
			lim: Limits{AllowReadReply: true}},
		{name: "read-in-reply/accept-rfc5666-long-reply", h: v1(RDMA_NOMSG, ChunkLists{Reads: ReadList{rs(0, 1, 8192)}}), dir: DirReply,
			lim: Limits{AllowReadReply: true}},
		{name: "read-in-reply/reject-rfc5666-long-reply-by-default", h: v1(RDMA_NOMSG, ChunkLists{Reads: ReadList{rs(0, 1, 8192)}}), dir: DirReply,
			rule: RuleReadInReply},
		{name: "read-in-reply/reject-v2", h: v2(RDMA_MSG, ChunkLists{Reads: ReadList{rs(96, 1, 8192)}}), dir: DirReply,
			lim: Limits{AllowReadReply: true}, rule: RuleReadInReply},
		{name: "read-in-reply/accept-call", h: v2(RDMA_MSG, ChunkLists{Reads: ReadList{rs(96, 1, 8192)}}), dir: DirCall},

		{name: "reply-chunk-in-msg/accept-unused", h: v1(RDMA_MSG, ChunkLists{Reply: reply(seg(1, 0), seg(2, 0))}), dir: DirReply},
		{name: "reply-chunk-in-msg/accept-call", h: v1(RDMA_MSG, ChunkLists{Reply: reply(seg(1, 452))}), dir: DirCall},
		{name: "reply-chunk-in-msg/reject", h: v1(RDMA_MSG, ChunkLists{Reply: reply(seg(1, 452))}), dir: DirReply,
			rule: RuleReplyChunkInMsg, msg: "rpcrdma: RDMA_MSG reply reports 452 bytes in the reply chunk"},

		{name: "vers-range/accept", h: errVers(1, 2)},
		{name: "vers-range/reject", h: errVers(2, 1), rule: RuleVersRange, msg: "rpcrdma: ERR_VERS range low 2 > high 1"},

		{name: "error-code/accept-v2-inval-option", h: Header{Vers: Version2, Proc: RDMA_ERROR, Error: ErrorBody{Code: ErrInvalOption}}},
		{name: "error-code/reject-v2-9", h: Header{Vers: Version2, Proc: RDMA_ERROR, Error: ErrorBody{Code: 9}}, rule: RuleErrorCode},
		{name: "error-code/accept-v1-default-arm", h: Header{Vers: Version1, Proc: RDMA_ERROR, Error: ErrorBody{Code: 9}}},

		{name: "optinfo-size/accept", h: optional(5), lim: Limits{MaxOptInfo: 5}},
		{name: "optinfo-size/reject", h: optional(6), lim: Limits{MaxOptInfo: 5}, rule: RuleOptInfoSize, msg: "rpcrdma: optinfo of 6 bytes exceeds 5"},
		{name: "optinfo-size/reject-default", h: optional(DefaultMaxOptInfo + 1), lim: big, rule: RuleOptInfoSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.h.Validate(tc.dir, tc.lim)
			if tc.rule == 0 {
				if err != nil {
					t.Fatalf("Validate(%v) = %v, want nil", &tc.h, err)
				}
				return
			}
			var he *HeaderError
			if !errors.As(err, &he) {
				t.Fatalf("Validate(%v) = %v, want a *HeaderError", &tc.h, err)
			}
			if he.Rule != tc.rule || !errors.Is(err, tc.rule) {
				t.Errorf("Validate = %v (rule %v), want rule %v", err, he.Rule, tc.rule)
			}
			wantCode := ErrChunk
			if tc.rule == RuleVersion {
				wantCode = ErrVers
			}
			if he.Code != wantCode || !he.PerMessage() || he.Vers != tc.h.Vers {
				t.Errorf("Validate = %#v, want code %v", he, wantCode)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("Error() = %q, want %q", err.Error(), tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "rpcrdma: ") {
				t.Errorf("Error() = %q: no package prefix", err.Error())
			}
		})
	}
}

func TestValidateAllocs(t *testing.T) {
	h := v1(RDMA_NOMSG, ChunkLists{Reads: ReadList{rs(0, 1, 512), rs(0, 2, 512), rs(96, 3, 8192)},
		Writes: WriteList{{seg(4, 8192), seg(5, 8192)}}, Reply: reply(seg(6, 4096))})
	if n := testing.AllocsPerRun(100, func() {
		if err := h.Validate(DirCall, Limits{}); err != nil {
			panic(err)
		}
	}); n != 0 {
		t.Errorf("Validate allocates %v times, want 0", n)
	}
}

func TestReadChunks(t *testing.T) {
	l := ReadList{rs(0, 1, 512), rs(0, 2, 256), rs(96, 3, 8192), rs(200, 4, 4), rs(200, 5, 4), rs(96, 6, 1)}
	got := l.Chunks(nil)
	want := []struct {
		pos  uint32
		n    int
		size uint64
	}{{0, 2, 768}, {96, 1, 8192}, {200, 2, 8}, {96, 1, 1}}
	if len(got) != len(want) {
		t.Fatalf("Chunks = %v", got)
	}
	for i, c := range got {
		if c.Position != want[i].pos || len(c.Segments) != want[i].n || c.Length() != want[i].size {
			t.Errorf("chunk %d = %v, want %+v", i, c, want[i])
		}
	}
	if &got[2].Segments[0] != &l[3] {
		t.Error("chunk segments do not alias the list")
	}
	if s := got[0].String(); s != "pos=0 len=768 [pos=0 0x1:512@0x1000 pos=0 0x2:256@0x2000]" {
		t.Errorf("String = %q", s)
	}
	if got := ReadList(nil).Chunks(nil); len(got) != 0 {
		t.Errorf("empty list: %v", got)
	}
	dst := make([]ReadChunk, 0, 8)
	if n := testing.AllocsPerRun(10, func() { dst = l.Chunks(dst[:0]) }); n != 0 {
		t.Errorf("Chunks allocates %v times into a large enough dst", n)
	}
}
