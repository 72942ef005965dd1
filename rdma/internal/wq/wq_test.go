package wq

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

func TestRing(t *testing.T) {
	r := NewRing[int](2)
	*r.Push() = 1
	*r.Push() = 2
	if !r.Full() || *r.Front() != 1 || *r.At(1) != 2 || r.Len() != 2 {
		t.Fatalf("ring %+v", r)
	}
	r.Pop()
	*r.Push() = 3 // reuses slot 0, as sequence 2
	if *r.Front() != 2 || *r.At(2) != 3 || r.Buf[0] != 3 {
		t.Fatalf("ring %+v", r)
	}
	r.Clear()
	if r.Len() != 0 || r.Head != 3 {
		t.Fatalf("cleared ring %+v", r)
	}
	if z := NewRing[int](0); len(z.Buf) != 1 {
		t.Fatalf("a ring of 0 slots has %d", len(z.Buf))
	}
	defer func() {
		if recover() == nil {
			t.Fatalf("push onto a full ring did not panic")
		}
	}()
	*r.Push() = 4
	*r.Push() = 5
	r.Push()
}

// post queues an 8-byte send-queue work request and returns its sequence.
func post(q *Queues, id uint64, op rdma.Op) uint64 {
	q.PostSend(&rdma.WorkRequest{ID: id, Op: op}, 8)
	return q.SQ.Tail - 1
}

// TestPostingOrder: send-queue completions keep posting order when later
// work finishes first; a failed one reports no bytes.
func TestPostingOrder(t *testing.T) {
	q := New(4, 4)
	a := post(&q, 10, rdma.OpRead)
	b := post(&q, 11, rdma.OpSend)
	c := post(&q, 12, rdma.OpWrite)
	q.Finish(b, rdma.StatusSuccess, 8)
	q.Finish(c, rdma.StatusRemoteAccess, 8)
	cs := make([]rdma.Completion, 4)
	if n := q.Poll(cs); n != 0 {
		t.Fatalf("%d completions before the first work request finished", n)
	}
	q.Finish(a, rdma.StatusSuccess, 8)
	n := q.Poll(cs)
	want := []rdma.Completion{
		{ID: 10, Op: rdma.OpRead, Status: rdma.StatusSuccess, Len: 8},
		{ID: 11, Op: rdma.OpSend, Status: rdma.StatusSuccess, Len: 8},
		{ID: 12, Op: rdma.OpWrite, Status: rdma.StatusRemoteAccess},
	}
	if n != 3 {
		t.Fatalf("%d completions, want 3", n)
	}
	for i := range want {
		if cs[i] != want[i] {
			t.Errorf("completion %d: %+v, want %+v", i, cs[i], want[i])
		}
	}
	if q.SQUsed != 0 || q.Reads != 0 {
		t.Errorf("after polling: %d send-queue slots, %d reads in use", q.SQUsed, q.Reads)
	}
}

// TestPostAllocs: once every slot has been used, posting allocates
// nothing: slots keep their SGLs' arrays.
func TestPostAllocs(t *testing.T) {
	q := New(2, 2)
	sgl := []rdma.SGE{{Length: 1}, {Length: 2}, {Length: 3}} // longer than the presized SGLs
	wr := &rdma.WorkRequest{Op: rdma.OpSend, Local: sgl}
	cs := make([]rdma.Completion, 2)
	round := func() {
		seq := q.SQ.Tail
		q.PostSend(wr, 6)
		q.PostRecv(1, sgl, 6)
		q.Finish(seq, rdma.StatusSuccess, 6)
		q.CompleteRecv(rdma.Completion{Len: 6})
		q.Poll(cs)
	}
	round()
	round()
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Errorf("%.1f allocations per post and completion", n)
	}
}

// TestFlush: at the end, unfinished work and every posted receive complete
// flushed, after what finished before them; Poll passes the Ready token on
// while completions are left.
func TestFlush(t *testing.T) {
	q := New(4, 4)
	a := post(&q, 1, rdma.OpSend)
	post(&q, 2, rdma.OpWrite)
	q.Finish(a, rdma.StatusSuccess, 8)
	for id := uint64(7); id < 9; id++ {
		q.PostRecv(id, nil, 16)
	}
	q.Flush()
	cs := make([]rdma.Completion, 1)
	var got []rdma.Completion
	for q.Poll(cs) == 1 {
		got = append(got, cs[0])
		select {
		case <-q.Ready:
		default:
			if q.CQ.Len() > 0 {
				t.Fatal("completions left and no Ready token")
			}
		}
	}
	want := []rdma.Completion{
		{ID: 1, Op: rdma.OpSend, Status: rdma.StatusSuccess, Len: 8},
		{ID: 2, Op: rdma.OpWrite, Status: rdma.StatusFlushed},
		{ID: 7, Op: rdma.OpRecv, Status: rdma.StatusFlushed},
		{ID: 8, Op: rdma.OpRecv, Status: rdma.StatusFlushed},
	}
	if len(got) != len(want) {
		t.Fatalf("completions %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("completion %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if q.SQUsed != 0 || q.RQUsed != 0 {
		t.Errorf("after polling: %d send, %d receive slots in use", q.SQUsed, q.RQUsed)
	}
}
