package rpcrdma

import (
	"bytes"
	"context"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/race"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// TestInlineCallAllocs: in steady state an inline call allocates nothing,
// requester and responder together, over either provider: NULL (whose
// reply Client.Null puts in scratch memory) and a call with arguments and
// results whose caller supplies a ReplyBuf (the handler's own results
// aside: procSum's handler appends its result to a fresh slice).
func TestInlineCallAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop values")
	}
	forProviders(t, func(t *testing.T, newP pairFunc) {
		p := newP(t, nil, nil)
		ctx := context.Background()
		null := func() {
			if err := p.cli.Null(ctx, testProg, testVers); err != nil {
				t.Fatal(err)
			}
		}
		var args rpc.Body // a 40-byte DDP-eligible opaque, under the DDP threshold: inline
		args.AppendDDPOpaque(make([]byte, 40))
		replyBuf := make([]byte, 0, 256)
		sum := func() {
			rep, err := p.cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procSum, Args: args, ReplyBuf: replyBuf})
			if err != nil {
				t.Fatal(err)
			}
			if d := rpc.NewBodyDecoder(rep.Results); d.Uint32() != 40 {
				t.Fatalf("sum: %v", d.Err())
			}
		}
		for range 50 { // fill the pools
			null()
			sum()
		}
		if n := testing.AllocsPerRun(300, null); n != 0 {
			t.Errorf("NULL: %.2f allocations per call, want 0", n)
		}
		if n := testing.AllocsPerRun(300, sum); n > 1 {
			t.Errorf("SUM: %.2f allocations per call, want at most 1 (the handler's)", n)
		}
	})
}

// TestReplyChunkIntoReplyBuf: a call offering a reply chunk uses the
// caller's ReplyBuf as that chunk when it holds it, so the reply lands
// there and Reply.Results aliases it; with a ReplyBuf too small the chunk
// is memory of the transport's own, and the reply is the same.
func TestReplyChunkIntoReplyBuf(t *testing.T) {
	forProviders(t, func(t *testing.T, newP pairFunc) {
		p := newP(t, nil, nil)
		const n, maxReply = 20000, 20100
		want := pattern(n, 5)
		for _, tc := range []struct {
			name  string
			cap   int
			alias bool
		}{
			{"holds the chunk", maxReply + 4, true},
			{"too small", maxReply - 100, false},
			{"none", 0, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var replyBuf []byte
				if tc.cap > 0 {
					replyBuf = make([]byte, 0, tc.cap)
				}
				before := p.conn.Stats().ReplyChunks
				rep, err := p.cli.Call(ctxT(t), &rpc.Request{Prog: testProg, Vers: testVers, Proc: procBig, Args: u32Args(n), MaxReply: maxReply, ReplyBuf: replyBuf})
				if err != nil {
					t.Fatal(err)
				}
				if p.conn.Stats().ReplyChunks != before+1 {
					t.Fatal("the reply did not come in the reply chunk")
				}
				d := rpc.NewBodyDecoder(rep.Results)
				if got := d.Opaque(n); d.Err() != nil || !bytes.Equal(got, want) {
					t.Fatalf("reply: %d bytes, equal %v, %v", len(got), bytes.Equal(got, want), d.Err())
				}
				aliased := false
				full := replyBuf[:cap(replyBuf)]
				for i := range full {
					if &full[i] == &rep.Results.XDR[0] {
						aliased = true
						break
					}
				}
				if aliased != tc.alias {
					t.Errorf("Reply.Results aliases the ReplyBuf: %v, want %v", aliased, tc.alias)
				}
			})
		}
	})
}
