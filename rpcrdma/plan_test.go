package rpcrdma

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The chunk plans, on plain data: no provider, no registration.

func TestReplyHeaderLen(t *testing.T) {
	// xid, vers, credits, proc; an empty read list, an empty write list
	// and an absent reply chunk: one word each (RFC 5666 section 4.3).
	if n := replyHeaderLen(wire.Version1, nil); n != 28 {
		t.Errorf("reply header with no write list: %d bytes, want 28", n)
	}
	// One write chunk of two segments: a discriminant, a count and two
	// 16-byte segments more.
	w := wire.WriteList{{{Length: 1}, {Length: 2}}}
	if n := replyHeaderLen(wire.Version1, w); n != 28+4+4+2*16 {
		t.Errorf("reply header with one two-segment write chunk: %d bytes, want %d", n, 28+4+4+2*16)
	}
}

// planMsg returns a message of n bytes of XDR with items at the given
// offsets and sizes.
func planMsg(n int, items ...[2]int) *rpc.Msg {
	m := &rpc.Msg{Body: rpc.Body{XDR: make([]byte, n)}}
	for _, it := range items {
		m.Items = append(m.Items, rpc.DDPItem{Offset: it[0], Data: make([]byte, it[1])})
	}
	return m
}

func TestPlanCall(t *testing.T) {
	base := callShape{threshold: 1024, sendLimit: 1024, replyLimit: 1024}
	seg := func(pos, length, off int) wire.ReadSegment {
		return wire.ReadSegment{Position: uint32(pos), Segment: wire.Segment{Length: uint32(length), Offset: uint64(off)}}
	}
	cases := []struct {
		name  string
		m     *rpc.Msg
		shape func(*callShape)
		proc  wire.Proc
		reads wire.ReadList
		// writes are the write chunks' segment lengths
		writes    [][]uint32
		replyLen  int
		inlineLen int
		chunked   []int
		err       error
	}{
		{name: "inline", m: planMsg(100), proc: wire.RDMA_MSG, inlineLen: 100},
		{name: "small item inline with pad", m: planMsg(100, [2]int{40, 5}),
			proc: wire.RDMA_MSG, inlineLen: 108},
		{name: "large item in a read chunk", m: planMsg(100, [2]int{40, 2000}),
			proc: wire.RDMA_MSG, reads: wire.ReadList{seg(40, 2000, 0)}, inlineLen: 100, chunked: []int{0}},
		{name: "positions count the items before", m: planMsg(100, [2]int{20, 10}, [2]int{40, 2001}, [2]int{60, 3000}),
			// 12 bytes of the first item inline; the second shifts the
			// third by 2004 bytes.
			proc: wire.RDMA_MSG, reads: wire.ReadList{seg(40+12, 2001, 0), seg(60+12+2004, 3000, 0)}, inlineLen: 112, chunked: []int{1, 2}},
		{name: "padded chunk", m: planMsg(100, [2]int{40, 2001}), shape: func(s *callShape) { s.cut.pad = true },
			proc: wire.RDMA_MSG, reads: wire.ReadList{seg(40, 2004, 0)}, inlineLen: 100, chunked: []int{0}},
		{name: "segments", m: planMsg(100, [2]int{40, 2500}), shape: func(s *callShape) { s.cut.seg = 1000 },
			proc: wire.RDMA_MSG, reads: wire.ReadList{seg(40, 1000, 0), seg(40, 1000, 1000), seg(40, 500, 2000)}, inlineLen: 100, chunked: []int{0}},
		{name: "write chunks", m: func() *rpc.Msg {
			m := planMsg(100)
			m.ResultBufs = [][]byte{make([]byte, 4096), make([]byte, 10)}
			return m
		}(), proc: wire.RDMA_MSG, writes: [][]uint32{{4096}, {10}}, inlineLen: 100},
		{name: "small MaxReply, no reply chunk", m: func() *rpc.Msg {
			m := planMsg(100)
			m.MaxReply = 1024 - 28
			return m
		}(), proc: wire.RDMA_MSG, inlineLen: 100},
		{name: "MaxReply one byte over, reply chunk", m: func() *rpc.Msg {
			m := planMsg(100)
			m.MaxReply = 1024 - 28 + 1
			return m
		}(), proc: wire.RDMA_MSG, replyLen: 1000, inlineLen: 100},
		{name: "reply header counts the write list", m: func() *rpc.Msg {
			m := planMsg(100)
			m.MaxReply = 1024 - 28
			m.ResultBufs = [][]byte{make([]byte, 8)}
			return m
		}(), proc: wire.RDMA_MSG, writes: [][]uint32{{8}}, replyLen: 996, inlineLen: 100},
		{name: "exactly the send limit stays inline", m: planMsg(1024 - 28), proc: wire.RDMA_MSG, inlineLen: 1024 - 28},
		{name: "one byte over is a long call", m: planMsg(1024 - 28 + 4), proc: wire.RDMA_NOMSG,
			reads: wire.ReadList{seg(0, 1000, 0)}, inlineLen: 1000},
		{name: "long call ahead of data chunks", m: planMsg(1500, [2]int{40, 2000}), proc: wire.RDMA_NOMSG,
			reads: wire.ReadList{seg(0, 1500, 0), seg(40, 2000, 0)}, inlineLen: 1500, chunked: []int{0}},
		{name: "header beyond the limit", m: planMsg(100, [2]int{40, 100000}), shape: func(s *callShape) { s.cut.seg = 1000 },
			err: ErrCallTooLarge},
		{name: "items out of order", m: planMsg(100, [2]int{60, 1}, [2]int{40, 1}), err: errOrder},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			if tc.shape != nil {
				tc.shape(&s)
			}
			h := wire.Header{XID: 7, Vers: wire.Version1, Credits: 1}
			var p callPlan
			err := planCall(&h, tc.m, &s, &p)
			if tc.err != nil {
				if tc.err == errOrder {
					if err == nil || !strings.Contains(err.Error(), "out of order") {
						t.Fatalf("err = %v, want out of order", err)
					}
					return
				}
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Proc != tc.proc {
				t.Errorf("proc %v, want %v", h.Proc, tc.proc)
			}
			if !reflect.DeepEqual(h.Chunks.Reads, tc.reads) && (len(h.Chunks.Reads) > 0 || len(tc.reads) > 0) {
				t.Errorf("reads %v, want %v", h.Chunks.Reads, tc.reads)
			}
			var writes [][]uint32
			for _, wc := range h.Chunks.Writes {
				var l []uint32
				for _, s := range wc {
					l = append(l, s.Length)
				}
				writes = append(writes, l)
			}
			if !reflect.DeepEqual(writes, tc.writes) {
				t.Errorf("writes %v, want %v", writes, tc.writes)
			}
			if p.replyLen != tc.replyLen || h.Chunks.Reply.Present != (tc.replyLen > 0) {
				t.Errorf("reply chunk %d bytes (present %v), want %d", p.replyLen, h.Chunks.Reply.Present, tc.replyLen)
			}
			if p.inlineLen != tc.inlineLen {
				t.Errorf("inline %d bytes, want %d", p.inlineLen, tc.inlineLen)
			}
			n := 0
			for _, piece := range p.pieces {
				n += len(piece)
			}
			if n != p.inlineLen {
				t.Errorf("pieces hold %d bytes, inlineLen says %d", n, p.inlineLen)
			}
			if !reflect.DeepEqual(p.chunked, tc.chunked) && (len(p.chunked) > 0 || len(tc.chunked) > 0) {
				t.Errorf("chunked items %v, want %v", p.chunked, tc.chunked)
			}
			if p.long != (tc.proc == wire.RDMA_NOMSG) {
				t.Errorf("long %v with proc %v", p.long, h.Proc)
			}
			if !p.long && h.EncodedLen()+p.inlineLen > s.sendLimit {
				t.Errorf("inline call of %d bytes behind a %d-byte header exceeds the limit %d", p.inlineLen, h.EncodedLen(), s.sendLimit)
			}
		})
	}
}

var errOrder = errors.New("out of order")

func TestPlanReply(t *testing.T) {
	wc := func(lens ...uint32) wire.WriteChunk {
		var c wire.WriteChunk
		for i, l := range lens {
			c = append(c, wire.Segment{Handle: uint32(0x100 + i), Length: l, Offset: uint64(i) << 20})
		}
		return c
	}
	lengths := func(c wire.WriteChunk) []uint32 {
		var l []uint32
		for _, s := range c {
			l = append(l, s.Length)
		}
		return l
	}
	cases := []struct {
		name      string
		m         *rpc.Msg
		shape     replyShape
		kind      replyKind
		writes    [][]uint32 // lengths written, per offered write chunk
		reply     []uint32   // lengths written into the reply chunk
		results   []int
		inlineLen int
		err       string
	}{
		{name: "inline", m: planMsg(100), shape: replyShape{sendLimit: 1024}, kind: replyInline, inlineLen: 100},
		{name: "exactly the limit", m: planMsg(1024 - 28), shape: replyShape{sendLimit: 1024}, kind: replyInline, inlineLen: 996},
		{name: "result into a write chunk", m: planMsg(100, [2]int{40, 3000}),
			shape: replyShape{sendLimit: 1024, writes: wire.WriteList{wc(2048, 2048)}},
			kind:  replyInline, writes: [][]uint32{{2048, 952}}, results: []int{0}, inlineLen: 100},
		{name: "unused write chunk reports nothing", m: planMsg(100),
			shape: replyShape{sendLimit: 1024, writes: wire.WriteList{wc(4096)}},
			kind:  replyInline, writes: [][]uint32{{0}}, inlineLen: 100},
		{name: "empty result stays inline", m: planMsg(100, [2]int{40, 0}, [2]int{60, 9}),
			shape: replyShape{sendLimit: 1024, writes: wire.WriteList{wc(4096)}},
			kind:  replyInline, writes: [][]uint32{{9}}, results: []int{1}, inlineLen: 100},
		{name: "more results than write chunks", m: planMsg(100, [2]int{40, 8}, [2]int{60, 5}),
			shape: replyShape{sendLimit: 1024, writes: wire.WriteList{wc(4096)}},
			kind:  replyInline, writes: [][]uint32{{8}}, results: []int{0}, inlineLen: 108},
		{name: "result beyond its write chunk", m: planMsg(100, [2]int{40, 5000}),
			shape: replyShape{sendLimit: 1024, writes: wire.WriteList{wc(4096)}},
			err:   "result of 5000 bytes exceeds write chunk 0 of 4096 bytes"},
		{name: "reply chunk", m: planMsg(3000),
			shape: replyShape{sendLimit: 1024, reply: wire.ReplyChunk{Present: true, Chunk: wc(2048, 2048)}},
			kind:  replyChunk, reply: []uint32{2048, 952}, inlineLen: 3000},
		{name: "reply chunk too small, read chunk", m: planMsg(3000),
			shape: replyShape{sendLimit: 1024, reply: wire.ReplyChunk{Present: true, Chunk: wc(2048)}, readReply: true},
			kind:  replyReadChunk, inlineLen: 3000},
		{name: "fits nothing", m: planMsg(3000),
			shape: replyShape{sendLimit: 1024, reply: wire.ReplyChunk{Present: true, Chunk: wc(2048)}},
			err:   "3000 bytes fit neither inline (1024 bytes with a 28-byte header) nor the reply chunk the call offered (2048 bytes)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := wire.Header{XID: 9, Vers: wire.Version1, Credits: 1}
			var p replyPlan
			err := planReply(&h, tc.m, &tc.shape, &p)
			if tc.err != "" {
				var pe *planError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want a planError with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.kind != tc.kind {
				t.Errorf("kind %d, want %d", p.kind, tc.kind)
			}
			want := map[replyKind]wire.Proc{replyInline: wire.RDMA_MSG, replyChunk: wire.RDMA_NOMSG, replyReadChunk: wire.RDMA_NOMSG}[tc.kind]
			if h.Proc != want {
				t.Errorf("proc %v, want %v", h.Proc, want)
			}
			var writes [][]uint32
			for i, c := range h.Chunks.Writes {
				writes = append(writes, lengths(c))
				for j := range c {
					if c[j].Handle != tc.shape.writes[i][j].Handle || c[j].Offset != tc.shape.writes[i][j].Offset {
						t.Errorf("write chunk %d segment %d: handle or offset changed", i, j)
					}
				}
			}
			if !reflect.DeepEqual(writes, tc.writes) {
				t.Errorf("writes %v, want %v", writes, tc.writes)
			}
			if got := lengths(h.Chunks.Reply.Chunk); !reflect.DeepEqual(got, tc.reply) {
				t.Errorf("reply chunk %v, want %v", got, tc.reply)
			}
			if !reflect.DeepEqual(p.results, tc.results) && (len(p.results) > 0 || len(tc.results) > 0) {
				t.Errorf("results %v, want %v", p.results, tc.results)
			}
			if p.inlineLen != tc.inlineLen {
				t.Errorf("inline %d bytes, want %d", p.inlineLen, tc.inlineLen)
			}
			if tc.kind == replyReadChunk {
				if len(h.Chunks.Reads) != 1 || h.Chunks.Reads[0].Position != 0 || int(h.Chunks.Reads[0].Length) != p.inlineLen {
					t.Errorf("read-chunk reply: reads %v, want one position-zero segment of %d bytes", h.Chunks.Reads, p.inlineLen)
				}
			}
			lim := wire.Limits{MaxHeaderSize: tc.shape.sendLimit, AllowReadReply: tc.shape.readReply}
			if err := h.Validate(wire.DirReply, lim); err != nil {
				t.Errorf("planned header does not validate: %v", err)
			}
		})
	}
}
