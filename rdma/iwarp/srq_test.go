package iwarp

import (
	"context"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
)

// TestSharedRecvHeldReceiveFlushed: a Send whose first segment has taken
// a receive from the shared queue, and whose connection ends before its
// last segment, gives that receive back as StatusFlushed, naming the
// connection, once nothing is placed into it any more; the queue's other
// receives stay posted.
func TestSharedRecvHeldReceiveFlushed(t *testing.T) {
	p := newProvider(t, Options{CRC: CRCFollow})
	q, err := p.NewSharedRecvQueue(rdma.SharedRecvConfig{Depth: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("close the queue after its connections: %v", err)
		}
	})
	s := serve(t, p, rdma.ConnConfig{SharedRecv: q})
	r := rawDial(t, s.ln.Addr())
	r.initiate(request(false, nil))
	c := s.next(t)
	m, err := q.Alloc(128)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := q.PostRecv(uint64(7+i), []rdma.SGE{{MR: m, Offset: 64 * i, Length: 64}}); err != nil {
			t.Fatal(err)
		}
	}
	// The first of two segments: the Send takes receive 7.
	h := ddp.Untagged(ddp.OpSend, false, ddp.QNSend, r.nextMSN(0), 0)
	r.sendSeg(ddp.Segment{Header: h, Payload: make([]byte, 16)})
	deadline := time.Now().Add(rawTimeout)
	for q.Posted() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d receives posted, want 1 taken by the first segment", q.Posted())
		}
		time.Sleep(time.Millisecond)
	}
	r.nc.Close()
	waitEnd(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), rawTimeout)
	defer cancel()
	cs := make([]rdma.Completion, 2)
	n, err := q.Wait(ctx, cs)
	if err != nil || n != 1 {
		t.Fatalf("wait: %d completions, %v", n, err)
	}
	if got := cs[0]; got.ID != 7 || got.Op != rdma.OpRecv || got.Status != rdma.StatusFlushed || got.Conn != rdma.Conn(c) {
		t.Fatalf("completion %+v, want receive 7 flushed, naming %v", got, c)
	}
	if q.Posted() != 1 {
		t.Errorf("%d receives posted after the connection ended, want 1", q.Posted())
	}
}
