package nfs

// The fore channel's slot table of an NFSv4.1 session (RFC 8881 Section
// 2.10.6.1). Each request takes a free slot and sends SEQUENCE with that
// slot's next sequence ID; the server keeps, per slot, the reply to the
// last sequence ID it ran, so a request retried on the same slot with the
// same sequence ID (after its connection was lost) is answered from that
// cache and never runs twice: exactly once (RFC 8881 Section 2.10.6).
//
// The server says in every SEQUENCE reply the highest slot ID it will
// accept now (sr_highest_slotid) and the one it would like the client to
// use (sr_target_highest_slotid); the table stops handing out slots above
// the target and grows back up to the highest as the server allows, never
// above the table's size (ca_maxrequests from CREATE_SESSION).

import (
	"context"
	"sync"
)

// slotTable is a session's fore-channel slots. Its methods are safe for
// concurrent use.
type slotTable struct {
	mu sync.Mutex
	// freed is closed, and replaced, when a slot is released or the
	// target moves while a request waits (waiting), to wake every waiter
	// to look again. Without waiters it stays: a channel made and closed
	// for every request was one of a READ's allocations for nothing.
	freed   chan struct{}
	waiting bool
	slots   []slotState
	target  uint32 // highest slot ID handed out: min(server's target, len(slots)-1)
}

// slotState is one slot's: the sequence ID of the last request sent on it
// (RFC 8881 Section 2.10.6.1: a new request uses one more), whether a
// request holds it, and whether the last request ended without a reply.
type slotState struct {
	seq         uint32
	busy        bool
	interrupted bool
}

// newSlotTable returns a table of n slots (1 to maxSlots), each at
// sequence ID 0, so the first request on it sends 1 (RFC 8881 Section
// 18.46.3).
func newSlotTable(n uint32) *slotTable {
	n = min(max(n, 1), maxSlots)
	return &slotTable{slots: make([]slotState, n), target: n - 1, freed: make(chan struct{})}
}

// maxSlots bounds a table, whatever a server grants.
const maxSlots = 1024

// slot is one request's hold on a slot.
type slot struct {
	id, seq uint32
	// highest is the highest slot ID the table hands out, for
	// sa_highest_slotid.
	highest uint32
}

// acquire waits for a free slot at or below the target and returns it
// with the sequence ID the request sends: the last one plus one.
func (t *slotTable) acquire(ctx context.Context) (slot, error) {
	for {
		t.mu.Lock()
		for i := range t.target + 1 {
			s := &t.slots[i]
			if !s.busy {
				s.busy = true
				s.seq++
				sl := slot{id: i, seq: s.seq, highest: t.target}
				t.mu.Unlock()
				return sl, nil
			}
		}
		freed := t.freed
		t.waiting = true
		t.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return slot{}, ctx.Err()
		}
	}
}

// slotOutcome says how a request on a slot ended.
type slotOutcome int

const (
	// slotDone: the server ran SEQUENCE (it answered it with NFS4_OK, or
	// with an error raised after it checked the sequence ID): the slot
	// moves on.
	slotDone slotOutcome = iota
	// slotNotSeen: SEQUENCE failed before the server took the sequence
	// ID (NFS4ERR_SEQ_MISORDERED, NFS4ERR_BADSLOT, NFS4ERR_DELAY on the
	// SEQUENCE itself): the next request reuses it.
	slotNotSeen
	// slotInterrupted: no reply came and the request is abandoned; the
	// server may or may not have run it, so the next request sends one
	// more, and falls back to this one if the server says it is
	// misordered (see misordered).
	slotInterrupted
)

// release frees sl after its request ended as out says; highest and
// target are the server's sr_highest_slotid and sr_target_highest_slotid
// when a SEQUENCE reply came (pass ok false otherwise).
func (t *slotTable) release(sl slot, out slotOutcome, highest, target uint32, ok bool) {
	t.mu.Lock()
	s := &t.slots[sl.id]
	s.busy = false
	switch out {
	case slotNotSeen:
		s.seq--
		s.interrupted = false
	case slotInterrupted:
		s.interrupted = true
	default:
		s.interrupted = false
	}
	if ok {
		t.target = min(target, highest, uint32(len(t.slots)-1))
	}
	if t.waiting {
		close(t.freed)
		t.freed = make(chan struct{})
		t.waiting = false
	}
	t.mu.Unlock()
}

// misordered handles NFS4ERR_SEQ_MISORDERED on sl: if the slot's previous
// request was interrupted, the server never saw it, so the request is
// retried with that sequence ID (one less), and misordered returns the
// slot to resend with and true. Otherwise the session is out of step and
// misordered returns false; the caller releases sl.
func (t *slotTable) misordered(sl slot) (slot, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.slots[sl.id]
	if !s.interrupted || s.seq != sl.seq {
		return sl, false
	}
	s.interrupted = false
	s.seq--
	sl.seq = s.seq
	return sl, true
}

// size returns the number of slots and the highest slot ID handed out.
func (t *slotTable) size() (int, uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.slots), t.target
}
