package rpcrdma

// The hostile-client suite for Bounds: calls whose chunks add up past
// every budget, stalled pulls (Read Responses withheld), many connections
// each holding its share. For each, what the server holds (its budgets,
// its registered bytes, its heap) stays under the configured bounds, the
// offending call or connection ends with the right error, and a
// well-behaved client is served throughout.

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// hostile is a raw requester on the loopback provider, speaking the
// transport header itself, with memory its calls' read chunks name.
type hostile struct {
	*rawPeer
	src rdma.MR // remote-readable source of read chunks
}

// dialHostile connects a raw requester to l on n, with src bytes of
// remote-readable memory.
func dialHostile(t testing.TB, n *loopback.Network, l *Listener, src int) *hostile {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := &rawPeer{cs: make([]rdma.Completion, 4)}
	h := &hostile{rawPeer: p}
	rc, err := n.Dial(ctx, l.Addr().String(), rdma.ConnConfig{
		PrivateData: wire.PrivateData{SendSize: 4096, ReceiveSize: rawSize}.Append(nil),
		Prepare: func(rc rdma.Conn) error {
			var err error
			if p.recv, err = rc.Alloc(rawSlots*rawSize, rdma.AccessLocalWrite); err != nil {
				return err
			}
			for i := range rawSlots {
				if err := rc.PostRecv(uint64(i), []rdma.SGE{{MR: p.recv, Offset: i * rawSize, Length: rawSize}}); err != nil {
					return err
				}
			}
			if p.send, err = rc.Alloc(rawSize, 0); err != nil {
				return err
			}
			h.src, err = rc.Alloc(src, rdma.AccessRemoteRead)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.rc = rc
	t.Cleanup(func() { rc.Close() })
	return h
}

// sumCall is a procSum call whose argument, n bytes, travels in a read
// chunk naming stag/to, offering a reply chunk of replyChunk bytes (none
// if 0) and one write chunk of writeChunk bytes (none if 0).
func sumCall(xid uint32, stag rdma.STag, to uint64, n, writeChunk, replyChunk uint32) []byte {
	ch := rpc.CallHeader{XID: xid, RPCVers: 2, Prog: testProg, Vers: testVers, Proc: procSum}
	call := ch.Append(nil)
	h := wire.Header{XID: xid, Vers: wire.Version1, Credits: 8, Proc: wire.RDMA_MSG}
	h.Chunks.Reads = wire.ReadList{{Position: uint32(len(call) + 4), Segment: wire.Segment{Handle: uint32(stag), Length: n, Offset: to}}}
	if writeChunk > 0 {
		h.Chunks.Writes = wire.WriteList{{{Handle: uint32(stag), Length: writeChunk, Offset: to}}}
	}
	if replyChunk > 0 {
		h.Chunks.Reply = wire.ReplyChunk{Present: true, Chunk: wire.WriteChunk{{Handle: uint32(stag), Length: replyChunk, Offset: to}}}
	}
	call = xdr.AppendUint32(call, n)
	return append(h.Append(nil), call...)
}

// wantErrChunk checks that answer is RDMA_ERROR ERR_CHUNK to xid.
func wantErrChunk(t testing.TB, answer []byte, xid uint32) {
	t.Helper()
	if len(answer) < 20 || binary.BigEndian.Uint32(answer) != xid ||
		wire.Proc(binary.BigEndian.Uint32(answer[12:])) != wire.RDMA_ERROR ||
		wire.ErrorCode(binary.BigEndian.Uint32(answer[16:])) != wire.ErrChunk {
		t.Fatalf("answer %x, want RDMA_ERROR ERR_CHUNK to xid %#x", answer, xid)
	}
}

// hostileServer listens on a fresh loopback network with b and serves
// testServer on every connection; it returns a well-behaved client too.
func hostileServer(t *testing.T, b Bounds) (*loopback.Network, *Listener, *rpc.Client) {
	n := loopback.New()
	l := listenBounded(t, n, "", b)
	good, err := dialNull(t, ctxT(t), n, l)
	if err != nil {
		t.Fatal(err)
	}
	return n, l, good
}

// goodSum makes a procSum call of size bytes on the well-behaved client.
func goodSum(t testing.TB, ctx context.Context, cli *rpc.Client, size int) error {
	data := pattern(size, 9)
	rep, err := cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procSum, Args: ddpArgs(data)})
	if err != nil {
		return err
	}
	d := rpc.NewBodyDecoder(rep.Results)
	if got := d.Uint32(); got != uint32(size) {
		t.Errorf("procSum answered length %d, want %d", got, size)
	}
	return nil
}

// TestBoundsRefuseBeforePull: calls whose chunks add up past what one call
// may hold, or past what the procedure takes, are answered ERR_CHUNK
// before any RDMA Read: their read chunks name memory that does not
// exist, which a Read would have turned into a fatal error. The
// connection carries on and nothing stays held.
func TestBoundsRefuseBeforePull(t *testing.T) {
	const callMem = 64 << 10
	b := Bounds{
		CallMemory: callMem,
		ArgLimit: func(prog, vers, proc uint32) int64 {
			if prog == testProg && proc == procSum {
				return 8 << 10
			}
			return 0
		},
	}
	n, l, good := hostileServer(t, b)
	h := dialHostile(t, n, l, 64<<10)
	const bogus = rdma.STag(0x100)
	cases := []struct {
		name             string
		read, wc, rc     uint32
		reasonsAfterCase uint64
	}{
		{"read-chunk-beyond-call", callMem + 4, 0, 0, 1},
		{"read-and-reply-chunks-beyond-call", callMem / 2, 0, callMem/2 + 4, 2},
		{"write-chunk-beyond-call", 4, callMem, 0, 3},
		{"beyond-the-procedure", 8<<10 + 4, 0, 0, 4},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			xid := uint32(0x5000 + i)
			wantErrChunk(t, h.exchange(t, sumCall(xid, bogus, 0, tc.read, tc.wc, tc.rc), 5*time.Second), xid)
			if err := h.rc.Err(); err != nil {
				t.Fatalf("the connection ended: %v", err)
			}
			if got := l.Stats().Limits[RejectTooLarge]; got != tc.reasonsAfterCase {
				t.Errorf("listener counts %d calls refused as too large, want %d", got, tc.reasonsAfterCase)
			}
		})
	}
	// A call within every bound is served on the same connection.
	xid := uint32(0x6000)
	copy(h.src.Bytes(), pattern(4096, 1))
	answer := h.exchange(t, sumCall(xid, h.src.STag(), h.src.TO(), 4096, 0, 0), 5*time.Second)
	if len(answer) < 16 || wire.Proc(binary.BigEndian.Uint32(answer[12:])) != wire.RDMA_MSG {
		t.Fatalf("answer %x to a call within bounds", answer)
	}
	if err := goodSum(t, ctxT(t), good, 4096); err != nil {
		t.Fatal(err)
	}
	// The responder gives a call's memory back once its reply is
	// posted, which may be after the requester has the reply.
	waitFor(t, "every call's memory given back after its answer", func() bool { return l.Stats().Memory == 0 })
}

// TestBoundsStalledPull: a requester that withholds the Read Responses
// for its call's chunk loses its connection after PullTimeout, which
// releases what the call held; a well-behaved client is served meanwhile.
func TestBoundsStalledPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 256 << 10
		n, l, good := hostileServer(t, Bounds{PullTimeout: 200 * time.Millisecond})
		h := dialHostile(t, n, l, size)
		reg0 := l.Stats().Registered
		// Message 1 is the call's Send, message 2 the Read Response: lost,
		// and the link stays silent for an hour.
		if err := h.rc.(*loopback.Conn).SetFaults(loopback.Faults{Drop: 2, LinkTimeout: time.Hour}); err != nil {
			t.Fatal(err)
		}
		copy(h.send.Bytes(), sumCall(1, h.src.STag(), h.src.TO(), size, 0, 0))
		msg := sumCall(1, h.src.STag(), h.src.TO(), size, 0, 0)
		if err := h.rc.PostSend(&rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{{MR: h.send, Length: len(msg)}}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the call to take its share", func() bool { return l.Stats().Memory == size })
		if s := l.Stats(); s.Registered-reg0 > size {
			t.Errorf("%d bytes registered for a %d-byte pull", s.Registered-reg0, size)
		}
		ctx := ctxT(t)
		if err := goodSum(t, ctx, good, 64<<10); err != nil {
			t.Fatalf("the well-behaved client during the stall: %v", err)
		}
		select {
		case <-h.rc.Done():
		case <-ctx.Done():
			t.Fatal("the stalled connection was not closed")
		}
		waitFor(t, "the stalled call's memory to be released", func() bool {
			s := l.Stats()
			return s.Memory == 0 && s.Conns == 1
		})
		if s := l.Stats(); s.Limits[LimitPullTimeout] != 1 || s.Registered > reg0 {
			t.Errorf("stats %+v: want one limit_pull_timeout and no more than %d bytes registered", s, reg0)
		}
		if err := goodSum(t, ctx, good, 64<<10); err != nil {
			t.Fatalf("the well-behaved client after the stall: %v", err)
		}
	})
}

// TestBoundsConnectionsAtTheirShare: several requesters each stall a call
// holding their connection's whole share; the Listener's budget holds
// what it allows and no more, later calls wait for it in arrival order, a
// well-behaved client's NULL calls go on meanwhile, and its call that
// needs memory is served once the stalled connections are closed.
func TestBoundsConnectionsAtTheirShare(t *testing.T) {
	const (
		share   = 128 << 10
		holders = 5
	)
	b := Bounds{ConnMemory: share, ServerMemory: 3 * share, PullTimeout: time.Second}
	n, l, good := hostileServer(t, b)
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var hs []*hostile
	for range holders {
		h := dialHostile(t, n, l, share)
		if err := h.rc.(*loopback.Conn).SetFaults(loopback.Faults{Drop: 2, LinkTimeout: time.Hour}); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	reg0 := l.Stats().Registered // the connections' rings
	for i, h := range hs {
		msg := sumCall(uint32(i+1), h.src.STag(), h.src.TO(), share, 0, 0)
		copy(h.send.Bytes(), msg)
		if err := h.rc.PostSend(&rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{{MR: h.send, Length: len(msg)}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three calls to hold the server's budget", func() bool { return l.Stats().Memory == 3*share })
	ctx := ctxT(t)
	var peakMem, peakReg int64
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			s := l.Stats()
			mu.Lock()
			peakMem, peakReg = max(peakMem, s.Memory), max(peakReg, s.Registered-reg0)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for range 10 {
		if err := good.Null(ctx, testProg, testVers); err != nil {
			t.Fatalf("NULL on the well-behaved client while the budget is held: %v", err)
		}
	}
	// This call needs memory: it waits behind the stalled ones, then is
	// served when their connections are closed.
	if err := goodSum(t, ctx, good, 32<<10); err != nil {
		t.Fatalf("the well-behaved client's call: %v", err)
	}
	for _, h := range hs {
		select {
		case <-h.rc.Done():
		case <-ctx.Done():
			t.Fatal("a stalled connection was not closed")
		}
	}
	waitFor(t, "every share to be given back", func() bool { return l.Stats().Memory == 0 })
	close(stop)
	<-sampled
	if peakMem > b.ServerMemory {
		t.Errorf("the calls held %d bytes at the peak, more than ServerMemory %d", peakMem, b.ServerMemory)
	}
	// Pulled sinks are registered only while held: at most the
	// Listener's budget, plus the well-behaved client's call.
	if peakReg > b.ServerMemory+64<<10 {
		t.Errorf("%d bytes registered for calls at the peak, more than the budget allows", peakReg)
	}
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	if grew := int64(m1.HeapInuse) - int64(m0.HeapInuse); grew > 16<<20 {
		t.Errorf("heap grew by %d bytes", grew)
	}
	if got := l.Stats().Limits[LimitPullTimeout]; got != holders {
		t.Errorf("%d connections closed for their pull, want %d", got, holders)
	}
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	t.Logf("peak: %d bytes held, %d registered for calls, heap +%d KiB", peakMem, peakReg, (int64(m1.HeapInuse)-int64(m0.HeapInuse))>>10)
}

// sleepCall is a procSleep call of ms milliseconds that also carries n
// bytes in a read chunk, which the handler ignores: the call holds its
// share while it sleeps.
func sleepCall(xid uint32, ms uint32, stag rdma.STag, to uint64, n uint32) []byte {
	ch := rpc.CallHeader{XID: xid, RPCVers: 2, Prog: testProg, Vers: testVers, Proc: procSleep}
	call := xdr.AppendUint32(ch.Append(nil), ms)
	h := wire.Header{XID: xid, Vers: wire.Version1, Credits: 8, Proc: wire.RDMA_MSG}
	h.Chunks.Reads = wire.ReadList{{Position: uint32(len(call) + 4), Segment: wire.Segment{Handle: uint32(stag), Length: n, Offset: to}}}
	call = xdr.AppendUint32(call, n)
	return append(h.Append(nil), call...)
}

// TestBoundsConnectionWaitsForItsOwnCalls: a connection whose first call
// holds its whole share (its handler is busy) pulls its second only once
// the first is done, while another connection's call is served at once.
func TestBoundsConnectionWaitsForItsOwnCalls(t *testing.T) {
	const (
		share = 64 << 10
		sleep = 300 // milliseconds the first call's handler holds it
	)
	n, l, good := hostileServer(t, Bounds{ConnMemory: share})
	h := dialHostile(t, n, l, share)
	bufs, err := h.rc.Alloc(2*rawSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, msg := range [][]byte{
		sleepCall(10, sleep, h.src.STag(), h.src.TO(), share),
		sumCall(11, h.src.STag(), h.src.TO(), share, 0, 0),
	} {
		copy(bufs.Bytes()[i*rawSize:], msg)
		if err := h.rc.PostSend(&rdma.WorkRequest{ID: uint64(10 + i), Op: rdma.OpSend, Local: []rdma.SGE{{MR: bufs, Offset: i * rawSize, Length: len(msg)}}}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	waitFor(t, "the first call to hold the share", func() bool { return l.Stats().Memory == share })
	ctx := ctxT(t)
	if err := goodSum(t, ctx, good, share); err != nil {
		t.Fatal(err)
	}
	// The good call gives its share back once its reply has been sent,
	// which can be a moment after the reply arrived.
	waitFor(t, "the good call's share to be given back", func() bool { return l.Stats().Memory <= share })
	// Both Sends have long arrived; the second call waits for its
	// connection's share, so the two never hold memory at once.
	for time.Since(start) < sleep*time.Millisecond*2/3 {
		if m := l.Stats().Memory; m > share {
			t.Fatalf("%d bytes held while the first call holds the connection's share of %d", m, share)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Both calls are answered, one after the other.
	replies := 0
	for replies < 2 {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		k, err := h.rc.Wait(ctx, h.cs)
		cancel()
		if err != nil {
			t.Fatalf("waiting for the replies: %v", err)
		}
		for _, c := range h.cs[:k] {
			if c.Op == rdma.OpRecv {
				if c.Status != rdma.StatusSuccess {
					t.Fatalf("reply %+v", c)
				}
				replies++
			}
		}
	}
	waitFor(t, "the shares to be given back", func() bool { return l.Stats().Memory == 0 })
}
