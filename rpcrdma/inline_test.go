package rpcrdma

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// TestReplyFromLoop: a short call (a NULL, which has no handler) that
// offers nothing for its reply runs on the responder's loop, which sends
// the reply itself (ReserveReply; rpc.ServerStats.Inline); one offering a
// reply chunk, whose reply could need an RDMA Write the loop would have to
// wait for, and one to an ordinary procedure go to a worker. Whichever
// way, every send slot and send-queue entry is free again afterwards.
func TestReplyFromLoop(t *testing.T) {
	forProviders(t, func(t *testing.T, newP pairFunc) {
		p := newP(t, nil, nil)
		ctx := ctxT(t)
		inline := func() uint64 { return p.srv.Stats().Inline }

		before := inline()
		for range 5 {
			if err := p.cli.Null(ctx, testProg, testVers); err != nil {
				t.Fatal(err)
			}
		}
		if got := inline() - before; got != 5 {
			t.Errorf("%d of 5 NULL calls ran on the loop, want 5", got)
		}

		before = inline()
		if _, err := p.cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: 0, MaxReply: 8192}); err != nil {
			t.Fatal(err)
		}
		if got := inline() - before; got != 0 {
			t.Errorf("a NULL offering a reply chunk ran on the loop (%d)", got)
		}

		before = inline()
		if _, err := p.cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procBig, Args: u32Args(100)}); err != nil {
			t.Fatal(err)
		}
		if got := inline() - before; got != 0 {
			t.Errorf("a call to a procedure not registered with HandleShort ran on the loop (%d)", got)
		}
		waitAllSendsFree(t, p.resp)
	})
}

// TestReplyFromLoopDropped: a reservation taken for a short call whose
// reply is never sent (the rpc.Server drops a call it cannot decode) goes
// back when the call is released.
func TestReplyFromLoopDropped(t *testing.T) {
	forProviders(t, func(t *testing.T, newP pairFunc) {
		p := newP(t, nil, nil)
		// A call header cut short after its program: short by
		// isShort's reading (too short to name a procedure), dropped
		// by the Server.
		call := make([]byte, 16)
		binary.BigEndian.PutUint32(call[0:], 0x5eed)
		binary.BigEndian.PutUint32(call[8:], 2) // rpcvers
		binary.BigEndian.PutUint32(call[12:], testProg)
		before := p.srv.Stats().Dropped
		if err := p.conn.Send(ctxT(t), &rpc.Msg{Body: rpc.Body{XDR: call}}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); p.srv.Stats().Dropped == before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the Server did not drop the malformed call")
			}
		}
		waitAllSendsFree(t, p.resp)
	})
}

// TestReserveSendRefused: a reservation that cannot have both a send slot
// and a send-queue entry at once takes neither, and waits for nothing.
func TestReserveSendRefused(t *testing.T) {
	p := newPair(t, nil, nil)
	c := p.resp
	waitAllSendsFree(t, c)
	var slots []int
	for {
		s, ok := c.sendFree.tryTake()
		if !ok {
			break
		}
		slots = append(slots, s)
	}
	if _, ok := c.reserveSend(); ok {
		t.Error("reserved with no free send slot")
	}
	if n := c.sqFree.available(); n != c.sqFree.n {
		t.Errorf("a refused reservation kept a send-queue entry: %d of %d free", n, c.sqFree.n)
	}
	for _, s := range slots {
		c.sendFree.put(s)
	}
	var entries []int
	for {
		e, ok := c.sqFree.tryTake()
		if !ok {
			break
		}
		entries = append(entries, e)
	}
	if _, ok := c.reserveSend(); ok {
		t.Error("reserved with no free send-queue entry")
	}
	if n := c.sendFree.available(); n != c.sendFree.n {
		t.Errorf("a refused reservation kept a send slot: %d of %d free", n, c.sendFree.n)
	}
	for _, e := range entries {
		c.sqFree.put(e)
	}
	res, ok := c.reserveSend()
	if !ok {
		t.Fatal("no reservation with everything free")
	}
	c.unreserveSend(&res)
	waitAllSendsFree(t, c)
}

// waitAllSendsFree fails t unless every send slot and send-queue entry
// of c is free within a few seconds (the last Sends' completions are
// taken by the loop soon after they are posted).
func waitAllSendsFree(t *testing.T, c *Conn) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); c.sendFree.available() != c.sendFree.n || c.sqFree.available() != c.sqFree.n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d send slots and %d of %d send-queue entries free", c.sendFree.available(), c.sendFree.n, c.sqFree.available(), c.sqFree.n)
		}
	}
}

// TestSendSlotsReused: one call at a time keeps to the send slot freed
// last, on both ends, so that its buffer is still in the CPU's cache,
// where taking the slots in turn would write each of them once per round.
func TestSendSlotsReused(t *testing.T) {
	for _, name := range []string{"iwarp", "loopback"} {
		t.Run(name, func(t *testing.T) {
			var pr *pair
			if name == "iwarp" {
				pr = newPairOver(t, newIWARP(t), "127.0.0.1:0", nil, nil)
			} else {
				pr = newPair(t, nil, nil)
			}
			const calls = 40
			for range calls {
				if err := pr.cli.Null(context.Background(), testProg, testVers); err != nil {
					t.Fatal(err)
				}
			}
			for _, side := range []struct {
				name string
				c    *Conn
			}{{"requester", pr.conn}, {"responder", pr.resp}} {
				buf, size := side.c.sendMR.Bytes(), side.c.sendSize
				used := 0
				for off := 0; off < len(buf); off += size {
					if slices.ContainsFunc(buf[off:off+size], func(b byte) bool { return b != 0 }) {
						used++
					}
				}
				if used > 3 {
					t.Errorf("%s: %d calls one at a time wrote %d of its %d send slots", side.name, calls, used, len(buf)/size)
				}
			}
		})
	}
}
