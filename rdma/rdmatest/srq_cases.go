package rdmatest

import (
	"errors"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// sharedRecv returns a shared receive queue of depth on cfg's provider, or
// skips the test if the provider has none. The queue is closed at the end
// of the test, after the connections Pair made (cleanups run last first),
// and its Close must succeed then.
func sharedRecv(t *testing.T, cfg Config, depth int) rdma.SharedRecvQueue {
	t.Helper()
	sp, ok := cfg.Provider.(rdma.SharedRecvProvider)
	if !ok {
		t.Skipf("provider %T has no shared receive queues", cfg.Provider)
	}
	q, err := sp.NewSharedRecvQueue(rdma.SharedRecvConfig{Depth: depth})
	if err != nil {
		t.Fatalf("new shared receive queue: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("close shared receive queue after its connections: %v", err)
		}
	})
	return q
}

// sharedAlloc allocates size bytes of q's memory.
func sharedAlloc(t *testing.T, q rdma.SharedRecvQueue, size int) rdma.MR {
	t.Helper()
	m, err := q.Alloc(size)
	if err != nil {
		t.Fatalf("alloc %d bytes on the shared receive queue: %v", size, err)
	}
	return m
}

// waitShared waits for exactly n completions on q.
func waitShared(t *testing.T, cfg Config, q rdma.SharedRecvQueue, n int) []rdma.Completion {
	t.Helper()
	ctx := Context(t, cfg)
	out := make([]rdma.Completion, 0, n)
	buf := make([]rdma.Completion, n)
	for len(out) < n {
		k, err := q.Wait(ctx, buf[:n-len(out)])
		if err != nil {
			t.Fatalf("wait for %d shared receive completions after %+v: %v", n, out, err)
		}
		out = append(out, buf[:k]...)
	}
	return out
}

// testSharedRecv: two connections attached to one queue consume its
// receives in posting order, whichever connection each Send arrives on;
// each completion names its connection, and each connection's messages
// complete in the order they were sent. An attached connection has no
// receive queue of its own.
func testSharedRecv(t *testing.T, cfg Config) {
	const size = 100 << 10 // several segments on a segmenting provider
	q := sharedRecv(t, cfg, 8)
	a1, b1 := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{SharedRecv: q})
	a2, b2 := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{SharedRecv: q})
	if d := b1.Limits().RecvQueueDepth; d != 0 {
		t.Errorf("attached connection's RecvQueueDepth %d, want 0", d)
	}
	own := Alloc(t, b1, 64, rdma.AccessLocalWrite)
	if err := b1.PostRecv(1, []rdma.SGE{Whole(own)}); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("PostRecv on an attached connection: %v, want ErrInvalid", err)
	}
	rm := sharedAlloc(t, q, 4*size)
	if rm.Access() != rdma.AccessLocalWrite {
		t.Errorf("shared receive memory has access %v, want local-write", rm.Access())
	}
	for i := range 4 {
		if err := q.PostRecv(uint64(10+i), []rdma.SGE{{MR: rm, Offset: i * size, Length: size}}); err != nil {
			t.Fatalf("post shared recv: %v", err)
		}
	}
	if n := q.Posted(); n != 4 {
		t.Errorf("Posted %d, want 4", n)
	}
	src1, src2 := Alloc(t, a1, size, 0), Alloc(t, a2, size, 0)
	fill(src1.Bytes(), 1)
	fill(src2.Bytes(), 2)
	var cs []rdma.Completion
	send := func(a rdma.Conn, src rdma.MR, id uint64, n int) {
		Post(t, a, rdma.WorkRequest{ID: id, Op: rdma.OpSend, Local: []rdma.SGE{{MR: src, Length: n}}})
		Want(t, WaitN(t, cfg, a, 1)[0], id, rdma.OpSend, rdma.StatusSuccess, n)
		cs = append(cs, waitShared(t, cfg, q, 1)...)
	}
	// One at a time, each received before the next is sent, so that the
	// order in which the queue hands out its receives is known.
	send(a2, src2, 1, 16)
	send(a1, src1, 2, size)
	send(a2, src2, 3, 32)
	wants := []struct {
		id   uint64
		conn rdma.Conn
		n    int
	}{{10, b2, 16}, {11, b1, size}, {12, b2, 32}}
	for i, w := range wants {
		Want(t, cs[i], w.id, rdma.OpRecv, rdma.StatusSuccess, w.n)
		if cs[i].Conn != unwrap(w.conn) {
			t.Errorf("completion %d names connection %v, want %v", i, cs[i].Conn, w.conn)
		}
	}
	wantBytes(t, "receive 10", rm.Bytes()[:16], pattern(16, 2))
	wantBytes(t, "receive 11", rm.Bytes()[size:2*size], pattern(size, 1))
	wantBytes(t, "receive 12", rm.Bytes()[2*size:2*size+32], pattern(32, 2))
	if n := q.Posted(); n != 1 {
		t.Errorf("Posted %d after three Sends, want 1", n)
	}
	if n := q.Poll(make([]rdma.Completion, 4)); n != 0 {
		t.Errorf("Poll returned %d more completions", n)
	}
	if n := b1.Poll(make([]rdma.Completion, 4)); n != 0 {
		t.Errorf("an attached connection's own Poll returned %d completions", n)
	}
}

// testSharedRecvEmpty: a Send arriving while the queue holds no receive
// ends that connection, as on iWARP; another attached connection and the
// queue go on.
func testSharedRecvEmpty(t *testing.T, cfg Config) {
	q := sharedRecv(t, cfg, 4)
	a1, b1 := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{SharedRecv: q})
	a2, b2 := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{SharedRecv: q})
	src := Alloc(t, a1, 8, 0)
	Post(t, a1, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{Whole(src)}})
	if dc := (fatal{detector: b1, other: a1, wants: []rdma.TerminateError{termNoBuffer}}).check(t, cfg, 1); len(dc) != 0 {
		t.Fatalf("receiver completions %+v, want none", dc)
	}
	rm := sharedAlloc(t, q, 8)
	if err := q.PostRecv(5, []rdma.SGE{Whole(rm)}); err != nil {
		t.Fatal(err)
	}
	src2 := Alloc(t, a2, 8, 0)
	fill(src2.Bytes(), 3)
	Post(t, a2, rdma.WorkRequest{ID: 2, Op: rdma.OpSend, Local: []rdma.SGE{Whole(src2)}})
	c := waitShared(t, cfg, q, 1)[0]
	Want(t, c, 5, rdma.OpRecv, rdma.StatusSuccess, 8)
	if c.Conn != unwrap(b2) {
		t.Errorf("completion names %v, want %v", c.Conn, b2)
	}
	wantBytes(t, "receive", rm.Bytes(), pattern(8, 3))
}

// testSharedRecvTooLong: a Send longer than the receive it takes ends
// that connection; the receive completes with StatusLocalLength, naming
// the connection, and the next receive stays posted.
func testSharedRecvTooLong(t *testing.T, cfg Config) {
	q := sharedRecv(t, cfg, 4)
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{SharedRecv: q})
	rm := sharedAlloc(t, q, 72)
	if err := q.PostRecv(7, []rdma.SGE{{MR: rm, Length: 8}}); err != nil {
		t.Fatal(err)
	}
	if err := q.PostRecv(8, []rdma.SGE{{MR: rm, Offset: 8, Length: 64}}); err != nil {
		t.Fatal(err)
	}
	src := Alloc(t, a, 16, 0)
	Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{Whole(src)}})
	(fatal{detector: b, other: a, wants: []rdma.TerminateError{termTooLong}}).check(t, cfg, 1)
	c := waitShared(t, cfg, q, 1)[0]
	if cfg.NoTerminate && c.Status != rdma.StatusSuccess && c.Status != rdma.StatusFlushed {
		// As in testSendTooSmall: rxe reports the responder's length
		// error as a remote invalid request on the receive.
		c.Status = rdma.StatusLocalLength
	}
	Want(t, c, 7, rdma.OpRecv, rdma.StatusLocalLength, 0)
	if c.Conn != unwrap(b) {
		t.Errorf("completion names %v, want %v", c.Conn, b)
	}
	if n := q.Posted(); n != 1 {
		t.Errorf("Posted %d, want 1: the connection's end does not flush the queue", n)
	}
}

// testSharedRecvLimit: the limit event fires once when fewer than the
// limit receives remain posted, and not again until re-armed.
func testSharedRecvLimit(t *testing.T, cfg Config) {
	q := sharedRecv(t, cfg, 8)
	a, _ := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{SharedRecv: q})
	rm := sharedAlloc(t, q, 4*8)
	for i := range 4 {
		if err := q.PostRecv(uint64(i), []rdma.SGE{{MR: rm, Offset: 8 * i, Length: 8}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.ArmLimit(q.Depth() + 1); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("ArmLimit above the depth: %v, want ErrInvalid", err)
	}
	if err := q.ArmLimit(4); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.LimitReached():
		t.Fatal("limit event with 4 receives posted, limit 4")
	default:
	}
	src := Alloc(t, a, 8, 0)
	for i := range 2 {
		Post(t, a, rdma.WorkRequest{ID: uint64(i), Op: rdma.OpSend, Local: []rdma.SGE{Whole(src)}})
		waitShared(t, cfg, q, 1)
		select {
		case <-q.LimitReached():
			if i != 0 {
				t.Fatal("limit event delivered twice without re-arming")
			}
		default:
			if i == 0 {
				t.Fatal("no limit event with 3 receives posted, limit 4")
			}
		}
	}
	if err := q.ArmLimit(3); err != nil { // 2 posted: fires at once
		t.Fatal(err)
	}
	select {
	case <-q.LimitReached():
	default:
		t.Fatal("no limit event when armed above what is posted")
	}
}

// testSharedRecvClose: Close refuses while a connection is attached;
// afterwards it flushes the posted receives (naming no connection),
// releases the memory, and Wait reports the end.
func testSharedRecvClose(t *testing.T, cfg Config) {
	sp, ok := cfg.Provider.(rdma.SharedRecvProvider)
	if !ok {
		t.Skipf("provider %T has no shared receive queues", cfg.Provider)
	}
	q, err := sp.NewSharedRecvQueue(rdma.SharedRecvConfig{Depth: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d := q.Depth(); d != 2 {
		t.Errorf("Depth %d, want 2", d)
	}
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{SharedRecv: q})
	rm := sharedAlloc(t, q, 16)
	own := Alloc(t, b, 8, rdma.AccessLocalWrite)
	if err := q.PostRecv(9, []rdma.SGE{Whole(own)}); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("PostRecv of a connection's memory: %v, want ErrInvalid", err)
	}
	for i := range 2 {
		if err := q.PostRecv(uint64(i), []rdma.SGE{{MR: rm, Offset: 8 * i, Length: 8}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.PostRecv(2, []rdma.SGE{{MR: rm, Length: 8}}); !errors.Is(err, rdma.ErrQueueFull) {
		t.Errorf("PostRecv beyond the depth: %v, want ErrQueueFull", err)
	}
	if err := q.Close(); !errors.Is(err, rdma.ErrInvalid) {
		t.Fatalf("Close with a connection attached: %v, want ErrInvalid", err)
	}
	a.Close()
	b.Close()
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if rm.Valid() {
		t.Error("the queue's memory is still registered after Close")
	}
	// Still safe to touch (rdma.SharedRecvQueue.Alloc).
	fill(rm.Bytes(), 7)
	wantBytes(t, "the queue's memory written after Close", rm.Bytes(), pattern(16, 7))
	cs := waitShared(t, cfg, q, 2)
	for i, c := range cs {
		Want(t, c, uint64(i), rdma.OpRecv, rdma.StatusFlushed, 0)
		if c.Conn != nil {
			t.Errorf("flushed receive names connection %v", c.Conn)
		}
	}
	if _, err := q.Wait(Context(t, cfg), make([]rdma.Completion, 1)); !errors.Is(err, rdma.ErrClosed) {
		t.Errorf("Wait on a closed, drained queue: %v, want ErrClosed", err)
	}
	if err := q.PostRecv(3, []rdma.SGE{{MR: rm, Length: 8}}); !errors.Is(err, rdma.ErrClosed) {
		t.Errorf("PostRecv after Close: %v, want ErrClosed", err)
	}
	if _, err := cfg.Provider.Dial(Context(t, cfg), "unused", rdma.ConnConfig{SharedRecv: q}); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("Dial attached to a closed queue: %v, want ErrInvalid", err)
	}
}
