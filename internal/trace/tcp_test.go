package trace

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recordSink records what a halfStream delivers: the bytes, with "<gap N>"
// markers where it reports gaps, and checks that offsets are contiguous.
type recordSink struct {
	t      *testing.T
	out    bytes.Buffer
	next   uint64
	frames []int
}

func (r *recordSink) data(off uint64, b []byte, frame int, _ time.Time) {
	if off != r.next {
		r.t.Errorf("data at offset %d, want %d", off, r.next)
	}
	r.out.Write(b)
	r.next = off + uint64(len(b))
	r.frames = append(r.frames, frame)
}

func (r *recordSink) gap(off, n uint64, frame int, _ time.Time) {
	if off != r.next {
		r.t.Errorf("gap at offset %d, want %d", off, r.next)
	}
	fmt.Fprintf(&r.out, "<gap %d>", n)
	r.next = off + n
}

// seg is a test segment: data at stream offset off (0 = first byte after
// the SYN, whose sequence number is isn).
type seg struct {
	off    int
	data   string
	seqLen int // 0: len(data)
}

// testISN is near 2^32 so that every test crosses the wrap.
var testISN uint32 = 0xfffffff0

func runHalf(t *testing.T, syn bool, segs []seg, acks map[int]int) (*recordSink, reasmStats) {
	t.Helper()
	sink := &recordSink{t: t}
	var st reasmStats
	h := &halfStream{sink: sink, stats: &st}
	frame := 0
	if syn {
		frame++
		h.segment(&tcpSegment{frame: frame, seq: testISN, flags: tcpSYN})
	}
	for i, s := range segs {
		frame++
		n := s.seqLen
		if n == 0 {
			n = len(s.data)
		}
		h.segment(&tcpSegment{frame: frame, seq: testISN + 1 + uint32(s.off), flags: tcpACK, payload: []byte(s.data), seqLen: n})
		if a, ok := acks[i]; ok {
			frame++
			h.ack(testISN+1+uint32(a), frame, time.Time{})
		}
	}
	h.flush()
	return sink, st
}

func TestReassemblyInOrder(t *testing.T) {
	sink, st := runHalf(t, true, []seg{{0, "hello ", 0}, {6, "world", 0}}, nil)
	if got := sink.out.String(); got != "hello world" {
		t.Errorf("got %q", got)
	}
	if st != (reasmStats{}) {
		t.Errorf("stats %+v", st)
	}
	if fmt.Sprint(sink.frames) != "[2 3]" {
		t.Errorf("frames %v", sink.frames)
	}
}

func TestReassemblyOutOfOrder(t *testing.T) {
	sink, st := runHalf(t, true, []seg{{6, "world", 0}, {11, "!", 0}, {0, "hello ", 0}}, nil)
	if got := sink.out.String(); got != "hello world!" {
		t.Errorf("got %q", got)
	}
	if st.outOfOrder != 2 || st.gaps != 0 {
		t.Errorf("stats %+v", st)
	}
	// The bytes keep the frame that carried them.
	if fmt.Sprint(sink.frames) != "[4 2 3]" {
		t.Errorf("frames %v", sink.frames)
	}
}

func TestReassemblyRetransmission(t *testing.T) {
	// A full retransmission with different bytes: the first copy wins, as
	// in tshark.
	sink, st := runHalf(t, true, []seg{{0, "hello ", 0}, {0, "HELLO ", 0}, {6, "world", 0}, {6, "world", 0}}, nil)
	if got := sink.out.String(); got != "hello world" {
		t.Errorf("got %q", got)
	}
	if st.retransmissions != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestReassemblyOverlap(t *testing.T) {
	// Overlapping in order, and overlapping buffered segments.
	sink, st := runHalf(t, true, []seg{{0, "hello", 0}, {3, "LO wor", 0}, {12, "ABCD", 0}, {10, "XdEFG", 0}, {9, "l", 0}}, nil)
	// "hello", then " wor" (the new part of "LO wor"), then "l" at 9.
	// "ABCD" (12..16) and "XdEFG" (10..15) wait; after "l", "XdEFG"
	// comes first, then only the last byte of "ABCD" is new.
	if got, want := sink.out.String(), "hello worlXdEFGD"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if st.overlaps != 1 || st.outOfOrder != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestReassemblyGapResolvedByAck(t *testing.T) {
	// "lost " (offset 6..11) is never captured; the peer acknowledges
	// past it, so the decoder gives up at once, not at the end.
	sink := &recordSink{t: t}
	var st reasmStats
	h := &halfStream{sink: sink, stats: &st}
	h.segment(&tcpSegment{frame: 1, seq: testISN, flags: tcpSYN})
	h.segment(&tcpSegment{frame: 2, seq: testISN + 1, payload: []byte("hello "), seqLen: 6})
	h.segment(&tcpSegment{frame: 3, seq: testISN + 1 + 11, payload: []byte("world"), seqLen: 5})
	if sink.out.String() != "hello " {
		t.Fatalf("before the ack: %q", sink.out.String())
	}
	h.ack(testISN+1+6, 4, time.Time{}) // an ack that does not reach the buffered segment changes nothing
	if sink.out.String() != "hello " {
		t.Fatalf("after a partial ack: %q", sink.out.String())
	}
	h.ack(testISN+1+16, 5, time.Time{})
	if got, want := sink.out.String(), "hello <gap 5>world"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if st.gaps != 1 || st.gapBytes != 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestReassemblyGapAtEnd(t *testing.T) {
	sink, st := runHalf(t, true, []seg{{0, "ab", 0}, {10, "xy", 0}, {5, "fg", 0}}, nil)
	if got, want := sink.out.String(), "ab<gap 3>fg<gap 3>xy"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if st.gaps != 2 || st.gapBytes != 6 {
		t.Errorf("stats %+v", st)
	}
}

func TestReassemblyGapByLimit(t *testing.T) {
	// More buffered than maxPendingSegs: the reassembler stops waiting.
	var segs []seg
	for i := range maxPendingSegs + 1 {
		segs = append(segs, seg{10 + i, "x", 0})
	}
	sink := &recordSink{t: t}
	var st reasmStats
	h := &halfStream{sink: sink, stats: &st}
	h.segment(&tcpSegment{frame: 1, seq: testISN, flags: tcpSYN})
	for i, s := range segs {
		h.segment(&tcpSegment{frame: 2 + i, seq: testISN + 1 + uint32(s.off), payload: []byte(s.data), seqLen: 1})
	}
	if !strings.HasPrefix(sink.out.String(), "<gap 10>x") || len(h.pending) != 0 {
		t.Errorf("got %q, %d pending", sink.out.String(), len(h.pending))
	}
}

func TestReassemblyTruncatedFrame(t *testing.T) {
	// The second frame was cut by the snap length: 3 of its 8 bytes.
	sink, st := runHalf(t, true, []seg{{0, "ab", 0}, {2, "cde", 8}, {10, "kl", 0}}, nil)
	if got, want := sink.out.String(), "abcde<gap 5>kl"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if st.gaps != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestReassemblyNoSYN(t *testing.T) {
	// The capture starts mid-connection: the first segment seen is
	// offset 0.
	sink, _ := runHalf(t, false, []seg{{100, "mid", 0}, {103, "dle", 0}}, nil)
	if got := sink.out.String(); got != "middle" {
		t.Errorf("got %q", got)
	}
}

func TestReassemblyOutOfWindow(t *testing.T) {
	sink, st := runHalf(t, true, []seg{{0, "ok", 0}, {maxWindow + 10, "junk", 0}}, nil)
	if got := sink.out.String(); got != "ok" || st.outOfWindow != 1 {
		t.Errorf("got %q, stats %+v", got, st)
	}
}

func TestReassemblyStop(t *testing.T) {
	sink := &recordSink{t: t}
	var st reasmStats
	h := &halfStream{sink: sink, stats: &st}
	h.segment(&tcpSegment{frame: 1, seq: 10, payload: []byte("ab"), seqLen: 2})
	h.segment(&tcpSegment{frame: 2, seq: 20, payload: []byte("cd"), seqLen: 2})
	h.stop()
	h.segment(&tcpSegment{frame: 3, seq: 12, payload: []byte("ef"), seqLen: 2})
	h.flush()
	if got := sink.out.String(); got != "ab" {
		t.Errorf("got %q", got)
	}
}
