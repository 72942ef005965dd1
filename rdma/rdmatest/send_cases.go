package rdmatest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

var (
	termNoBuffer = rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeUntaggedBuffer, Code: rdma.CodeNoBuffer}
	termTooLong  = rdma.TerminateError{Layer: rdma.LayerDDP, Type: rdma.TypeUntaggedBuffer, Code: rdma.CodeMessageTooLong}
)

// testSendRecvOrder sends rounds of messages of varied sizes; each receive
// completes in posting order with the matching message.
func testSendRecvOrder(t *testing.T, cfg Config) {
	const (
		rounds = 10
		batch  = 32
		slot   = 256
	)
	a, b := Pair(t, cfg, rdma.ConnConfig{SendQueueDepth: batch}, rdma.ConnConfig{RecvQueueDepth: batch})
	src := Alloc(t, a, batch*slot, 0)
	dst := Alloc(t, b, batch*slot, rdma.AccessLocalWrite)
	msg := 0
	for r := 0; r < rounds; r++ {
		for i := 0; i < batch; i++ {
			PostRecv(t, b, uint64(msg+i), rdma.SGE{MR: dst, Offset: i * slot, Length: slot})
		}
		for i := 0; i < batch; i++ {
			n := (msg + i) * 37 % (slot + 1)
			fill(src.Bytes()[i*slot:i*slot+n], byte(msg+i))
			Post(t, a, rdma.WorkRequest{ID: uint64(msg + i), Op: rdma.OpSend,
				Local: []rdma.SGE{{MR: src, Offset: i * slot, Length: n}}})
		}
		sent := WaitN(t, cfg, a, batch)
		got := WaitN(t, cfg, b, batch)
		for i := 0; i < batch; i++ {
			id, n := msg+i, (msg+i)*37%(slot+1)
			Want(t, sent[i], uint64(id), rdma.OpSend, rdma.StatusSuccess, n)
			Want(t, got[i], uint64(id), rdma.OpRecv, rdma.StatusSuccess, n)
			if got[i].Solicited || got[i].Invalidated {
				t.Fatalf("plain Send delivered with flags: %+v", got[i])
			}
			wantBytes(t, fmt.Sprintf("message %d", id), dst.Bytes()[i*slot:i*slot+n], pattern(n, byte(id)))
		}
		msg += batch
	}
}

// testSendVariants sends each Send variant and checks the receive flags
// and the invalidations.
func testSendVariants(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	src := Alloc(t, a, 16, 0)
	fill(src.Bytes(), 9)
	dst := Alloc(t, b, 4*16, rdma.AccessLocalWrite)
	r1 := Alloc(t, b, 32, rdma.AccessRemoteWrite)
	r2 := Alloc(t, b, 32, rdma.AccessRemoteRead)
	ops := []struct {
		op  rdma.Op
		inv rdma.MR
	}{{rdma.OpSend, nil}, {rdma.OpSendSE, nil}, {rdma.OpSendInvalidate, r1}, {rdma.OpSendSEInvalidate, r2}}
	if !b.Limits().RemoteInvalidation {
		ops = ops[:2] // testRemoteInvalidateUnsupported covers the others
	}
	for i, o := range ops {
		PostRecv(t, b, uint64(i), rdma.SGE{MR: dst, Offset: i * 16, Length: 16})
		wr := rdma.WorkRequest{ID: uint64(i), Op: o.op, Local: []rdma.SGE{Whole(src)}}
		if o.inv != nil {
			wr.InvalidateSTag = o.inv.STag()
		}
		Post(t, a, wr)
	}
	sent := WaitN(t, cfg, a, len(ops))
	got := WaitN(t, cfg, b, len(ops))
	for i, o := range ops {
		Want(t, sent[i], uint64(i), o.op, rdma.StatusSuccess, 16)
		Want(t, got[i], uint64(i), rdma.OpRecv, rdma.StatusSuccess, 16)
		if (got[i].Solicited != o.op.Solicited() && !cfg.NoSolicitedFlag) || got[i].Invalidated != o.op.Invalidates() {
			t.Fatalf("%v delivered as %+v", o.op, got[i])
		}
		if o.inv != nil && (got[i].InvalidatedSTag != o.inv.STag() || o.inv.Valid()) {
			t.Fatalf("%v: completion names %v, MR %v valid %v", o.op, got[i].InvalidatedSTag, o.inv.STag(), o.inv.Valid())
		}
		wantBytes(t, o.op.String(), dst.Bytes()[i*16:i*16+16], src.Bytes())
	}
}

// testSendScatterGather gathers a Send from three SGEs and scatters it
// into two, split at odd offsets.
func testSendScatterGather(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	s1, s2 := Alloc(t, a, 100, 0), Alloc(t, a, 5000, 0)
	fill(s1.Bytes(), 1)
	fill(s2.Bytes(), 2)
	local := []rdma.SGE{{MR: s1, Offset: 3, Length: 50}, {MR: s2, Offset: 1, Length: 4099}, {MR: s1, Offset: 90, Length: 7}}
	var want []byte
	for _, e := range local {
		want = append(want, e.MR.Bytes()[e.Offset:e.Offset+e.Length]...)
	}
	d1, d2 := Alloc(t, b, 1000, rdma.AccessLocalWrite), Alloc(t, b, 8000, rdma.AccessLocalWrite)
	PostRecv(t, b, 1, rdma.SGE{MR: d1, Offset: 11, Length: 989}, rdma.SGE{MR: d2, Offset: 13, Length: 7000})
	Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: local})
	Want(t, WaitN(t, cfg, a, 1)[0], 1, rdma.OpSend, rdma.StatusSuccess, len(want))
	Want(t, WaitN(t, cfg, b, 1)[0], 1, rdma.OpRecv, rdma.StatusSuccess, len(want))
	got := append(append([]byte(nil), d1.Bytes()[11:]...), d2.Bytes()[13:13+len(want)-989]...)
	wantBytes(t, "scattered message", got, want)
	wantZero(t, "receive buffer before the SGE", d1.Bytes()[:11])
	wantZero(t, "receive buffer after the message", d2.Bytes()[13+len(want)-989:])
}

// testSendConcurrent posts from several goroutines: every message arrives
// once and each goroutine's messages keep their order.
func testSendConcurrent(t *testing.T, cfg Config) {
	const (
		senders = 4
		each    = 16
	)
	a, b := Pair(t, cfg, rdma.ConnConfig{SendQueueDepth: senders * each}, rdma.ConnConfig{RecvQueueDepth: senders * each})
	dst := Alloc(t, b, senders*each*8, rdma.AccessLocalWrite)
	for i := 0; i < senders*each; i++ {
		PostRecv(t, b, uint64(i), rdma.SGE{MR: dst, Offset: i * 8, Length: 8})
	}
	src := Alloc(t, a, senders*each*8, 0)
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				k := g*each + i
				buf := src.Bytes()[k*8 : k*8+8]
				buf[0], buf[1] = byte(g), byte(i)
				wr := rdma.WorkRequest{ID: uint64(k), Op: rdma.OpSend, Local: []rdma.SGE{{MR: src, Offset: k * 8, Length: 8}}}
				if err := a.PostSend(&wr); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent post: %v", err)
	}
	WaitN(t, cfg, a, senders*each)
	got := WaitN(t, cfg, b, senders*each)
	next := make([]int, senders)
	for i, c := range got {
		Want(t, c, uint64(i), rdma.OpRecv, rdma.StatusSuccess, 8)
		g, n := int(dst.Bytes()[i*8]), int(dst.Bytes()[i*8+1])
		if g >= senders || n != next[g] {
			t.Fatalf("receive %d holds message %d of sender %d, want message %d", i, n, g, next[min(g, senders-1)])
		}
		next[g]++
	}
}

// testSendTooSmall: a Send longer than the posted receive ends the
// connection; the receive completes with StatusLocalLength.
func testSendTooSmall(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	am := Alloc(t, a, 64, rdma.AccessLocalWrite)
	PostRecv(t, a, 50, Whole(am))
	bm := Alloc(t, b, 72, rdma.AccessLocalWrite)
	PostRecv(t, b, 7, rdma.SGE{MR: bm, Length: 8})
	PostRecv(t, b, 8, rdma.SGE{MR: bm, Offset: 8, Length: 64})
	Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{{MR: am, Length: 16}}})
	dc := fatal{detector: b, other: a, wants: []rdma.TerminateError{termTooLong, termNoBuffer}}.check(t, cfg, 1)
	if len(dc) != 2 {
		t.Fatalf("receiver completions %+v, want 2", dc)
	}
	if cfg.NoTerminate && dc[0].Status != rdma.StatusSuccess && dc[0].Status != rdma.StatusFlushed {
		// rxe reports the responder's length error as a remote invalid
		// request on the receive.
		dc[0].Status = rdma.StatusLocalLength
	}
	Want(t, dc[0], 7, rdma.OpRecv, rdma.StatusLocalLength, 0)
	Want(t, dc[1], 8, rdma.OpRecv, rdma.StatusFlushed, 0)
}

// testSendNoRecv: a Send with no posted receive ends the connection on both
// sides (RNR is fatal in iWARP), and a waiter on the receiver returns.
func testSendNoRecv(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	am := Alloc(t, a, 64, rdma.AccessLocalWrite)
	PostRecv(t, a, 50, rdma.SGE{MR: am, Length: 32})
	PostRecv(t, a, 51, rdma.SGE{MR: am, Offset: 32, Length: 32})
	Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{{MR: am, Length: 4}}})
	dc := fatal{detector: b, other: a, wants: []rdma.TerminateError{termNoBuffer}}.check(t, cfg, 1)
	if len(dc) != 0 {
		t.Fatalf("receiver completions %+v, want none", dc)
	}
}
