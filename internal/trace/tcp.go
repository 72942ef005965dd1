package trace

// TCP reassembly of one direction of a connection.
//
// A halfStream turns the captured segments of one direction into the byte
// stream the receiver saw, in order, each byte once. It keeps next, the
// sequence number of the first byte it has not delivered yet:
//
//   - a segment entirely before next is a retransmission and is dropped
//     (the first copy wins, as in tshark);
//   - a segment that starts before next and ends after it overlaps: its
//     new tail is delivered;
//   - a segment that starts at next is delivered, and then every buffered
//     segment that has become contiguous;
//   - a segment that starts after next arrived out of order, or after bytes
//     the capture missed: it is copied and buffered.
//
// Buffered bytes wait for the missing ones until it is clear these will never
// be captured: the peer has acknowledged the first buffered byte (so it
// received what lies before it, and the capture did not), the buffer
// exceeds maxPending, or the capture ends. Then the hole is reported to the
// sink as a gap and delivery resumes at the first buffered segment, as tshark
// does after "previous segment not captured". A frame truncated by the snap
// length is a gap of its missing tail.
//
// Stream offsets count delivered bytes and gaps from the first byte after the
// SYN (or from the first captured byte when the SYN was not captured).

import (
	"cmp"
	"slices"
	"time"
)

// Reassembly limits.
const (
	// maxPendingBytes and maxPendingSegs bound what one direction buffers
	// while it waits for missing bytes.
	maxPendingBytes = 4 << 20
	maxPendingSegs  = 1024
	// maxWindow is how far ahead of next a segment may start and still be
	// buffered; beyond it the segment is taken for garbage (a 4-tuple
	// reused without a captured SYN).
	maxWindow = 1 << 30
)

// streamSink receives one direction's reassembled bytes. data's b is only
// valid during the call. gap reports n bytes (n > 0) the capture does not
// have, at stream offset off; frame (and its time t) revealed it.
type streamSink interface {
	data(off uint64, b []byte, frame int, t time.Time)
	gap(off, n uint64, frame int, t time.Time)
}

// reasmStats counts what the reassembler saw; the Decoder sums them.
type reasmStats struct {
	retransmissions int    // segments wholly before next
	overlaps        int    // segments partly before next
	outOfOrder      int    // segments buffered
	outOfWindow     int    // segments dropped as too far ahead or behind
	gaps            int    // holes reported
	gapBytes        uint64 // bytes in them
}

type pendingSeg struct {
	seq     uint32
	payload []byte // a copy
	seqLen  int    // >= len(payload), larger for a truncated frame
	frame   int
	time    time.Time
}

type halfStream struct {
	sink    streamSink
	stats   *reasmStats
	started bool
	isn     uint32 // valid if synSeen
	synSeen bool
	next    uint32 // sequence number of the next byte to deliver
	off     uint64 // its stream offset
	// peerAck is the highest acknowledgment the other direction sent for
	// this one, valid if havePeerAck.
	peerAck     uint32
	havePeerAck bool
	pending     []pendingSeg // sorted by seq relative to next
	pendBytes   int
	// discard stops delivery and buffering (a connection that is not
	// iWARP); sequence tracking goes on.
	discard bool
}

// stop makes h drop everything from now on.
func (h *halfStream) stop() {
	h.discard, h.pending, h.pendBytes = true, nil, 0
}

// delivered reports whether any byte or gap has gone to the sink.
func (h *halfStream) delivered() bool { return h.off > 0 }

// segment processes one captured segment of this direction.
func (h *halfStream) segment(s *tcpSegment) {
	seq := s.seq
	if s.flags&tcpSYN != 0 {
		if !h.started || (!h.delivered() && len(h.pending) == 0) {
			h.started, h.synSeen, h.isn, h.next = true, true, s.seq, s.seq+1
		}
		seq++ // the SYN occupies one sequence number; data follows it
	}
	if s.seqLen == 0 {
		return
	}
	if !h.started {
		h.started, h.next = true, seq
	}
	d := int64(int32(seq - h.next))
	switch {
	case d+int64(s.seqLen) <= 0:
		if -d > maxWindow {
			h.stats.outOfWindow++
		} else {
			h.stats.retransmissions++
		}
		return
	case d > maxWindow:
		h.stats.outOfWindow++
		return
	case d <= 0:
		if d < 0 {
			h.stats.overlaps++
		}
		h.deliverSeg(seq, s.payload, s.seqLen, s.frame, s.time)
		h.drain()
	default:
		h.stats.outOfOrder++
		if h.discard {
			return
		}
		p := pendingSeg{seq: seq, payload: slices.Clone(s.payload), seqLen: s.seqLen, frame: s.frame, time: s.time}
		i, _ := slices.BinarySearchFunc(h.pending, d, func(e pendingSeg, d int64) int {
			return cmp.Compare(int64(int32(e.seq-h.next)), d)
		})
		h.pending = slices.Insert(h.pending, i, p)
		h.pendBytes += len(p.payload)
		h.resolve(s.frame, s.time)
	}
}

// ack records an acknowledgment the other direction sent for this one.
func (h *halfStream) ack(ack uint32, frame int, t time.Time) {
	if !h.havePeerAck || int32(ack-h.peerAck) > 0 {
		h.peerAck, h.havePeerAck = ack, true
	}
	h.resolve(frame, t)
}

// resolve gives up waiting for missing bytes when they cannot come any more
// (see the file comment) and skips to the first buffered segment.
func (h *halfStream) resolve(frame int, t time.Time) {
	for len(h.pending) > 0 {
		first := h.pending[0].seq
		acked := h.havePeerAck && int32(h.peerAck-first) >= 0
		if !acked && h.pendBytes <= maxPendingBytes && len(h.pending) <= maxPendingSegs {
			return
		}
		h.skipTo(first, frame, t)
		h.drain()
	}
}

// flush ends the capture: every remaining hole becomes a gap.
func (h *halfStream) flush() {
	for len(h.pending) > 0 {
		h.skipTo(h.pending[0].seq, h.pending[0].frame, h.pending[0].time)
		h.drain()
	}
}

// skipTo reports the bytes from next to seq as a gap.
func (h *halfStream) skipTo(seq uint32, frame int, t time.Time) {
	n := uint64(uint32(seq - h.next))
	if int32(seq-h.next) <= 0 {
		return
	}
	h.stats.gaps++
	h.stats.gapBytes += n
	if !h.discard {
		h.sink.gap(h.off, n, frame, t)
	}
	h.next, h.off = seq, h.off+n
}

// drain delivers the buffered segments that next has reached.
func (h *halfStream) drain() {
	for len(h.pending) > 0 && int32(h.pending[0].seq-h.next) <= 0 {
		p := h.pending[0]
		h.pending = h.pending[1:]
		h.pendBytes -= len(p.payload)
		if int32(p.seq+uint32(p.seqLen)-h.next) <= 0 {
			h.stats.retransmissions++
			continue
		}
		h.deliverSeg(p.seq, p.payload, p.seqLen, p.frame, p.time)
	}
	if len(h.pending) == 0 {
		h.pending = nil // let the backing array go
	}
}

// deliverSeg delivers the part of a segment at or after next. The caller
// has checked that it ends after next and starts at or before it.
func (h *halfStream) deliverSeg(seq uint32, payload []byte, seqLen int, frame int, t time.Time) {
	skip := int(h.next - seq)
	if skip < len(payload) {
		b := payload[skip:]
		if !h.discard {
			h.sink.data(h.off, b, frame, t)
		}
		h.next += uint32(len(b))
		h.off += uint64(len(b))
		skip = len(payload)
	}
	if missing := seqLen - skip; missing > 0 {
		// Truncated by the snap length: the tail is a hole that no later
		// segment will fill except a retransmission, which we would not
		// wait for anyway.
		h.skipTo(h.next+uint32(missing), frame, t)
	}
}
