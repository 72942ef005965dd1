package rpcrdma

import (
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
