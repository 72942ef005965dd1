package rpcrdma

import (
	"context"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// TestLinuxErrChunk sends knfsd transport headers it refuses, built by
// hand, and checks its RDMA_ERROR answers as our requester decodes them:
// ERR_CHUNK for RDMA_MSGP (RFC 8166 dropped it) and for a procedure
// Version One does not define (RDMA_OPTIONAL, from Version Two). Each
// error is counted and dropped (no call of ours has its XID), and the
// connection carries on: a NULL after each still completes. The lab
// README listed knfsd's RDMA_ERROR generation as untested beyond ERR_VERS.
// (Two write chunks, which svcrdma refused before Linux 5.11, are taken
// by 6.1.)
func TestLinuxErrChunk(t *testing.T) {
	addr := lab.Knfsd(t)
	p, err := iwarp.New(iwarp.Options{FirstSendDelay: iwarp.SiwFirstSendDelay})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*lab.CmdTimeout)
	defer cancel()
	c, err := Dial(ctx, p, addr, nil)
	if err != nil {
		t.Fatalf("connecting to knfsd at %s: %v", addr, err)
	}
	cli := rpc.NewClient(c)
	defer func() { cli.Close(); c.Close() }()
	if err := cli.Null(ctx, 100003, 3); err != nil {
		t.Fatal(err)
	}

	nullCall := func(xid uint32) []byte {
		return (&rpc.CallHeader{XID: xid, RPCVers: rpc.RPCVersion, Prog: 100003, Vers: 3}).Append(nil)
	}
	msgp := wire.Header{Proc: wire.RDMA_MSGP, Padding: wire.Padding{Align: 4096, Thresh: 1024}}
	for i, tc := range []struct {
		name string
		h    wire.Header
	}{
		{"RDMA_MSGP", msgp},
		{"RDMA_OPTIONAL in Version One", wire.Header{Proc: wire.RDMA_OPTIONAL, Optional: wire.Optional{Type: 1}}},
	} {
		xid := uint32(0x5a5a0000 + i)
		h := tc.h
		h.XID, h.Vers, h.Credits = xid, wire.Version1, 8
		before := c.Stats()
		if err := c.sendMsg(ctx, &h, [][]byte{nullCall(xid)}, 0, false); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		deadline := time.Now().Add(2 * lab.CmdTimeout)
		for c.Stats().ErrorsReceived[wire.ErrChunk] == before.ErrorsReceived[wire.ErrChunk] && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		after := c.Stats()
		if after.ErrorsReceived[wire.ErrChunk] != before.ErrorsReceived[wire.ErrChunk]+1 {
			t.Errorf("%s: no ERR_CHUNK from knfsd within %v (errors received %v)", tc.name, 2*lab.CmdTimeout, after.ErrorsReceived)
		}
		if after.Dropped != before.Dropped+1 {
			t.Errorf("%s: %d messages dropped, want the error for no call of ours", tc.name, after.Dropped-before.Dropped)
		}
		if err := cli.Null(ctx, 100003, 3); err != nil {
			t.Fatalf("NULL after %s: %v", tc.name, err)
		}
	}
}
