package nfs

import (
	"context"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// cbCall runs one CB_COMPOUND through cb and decodes the reply.
func cbCall(t *testing.T, cb *callbacks, ops ...nfs4.CBArgOp) nfs4.CBCompoundRes {
	t.Helper()
	var b rpc.Body
	args := nfs4.CBCompoundArgs{MinorVersion: nfs4.MinorVersion, Ops: ops}
	args.Append(&b)
	out, err := cb.compound(context.Background(), &rpc.Call{Args: b})
	if err != nil {
		t.Fatal(err)
	}
	var res nfs4.CBCompoundRes
	d := rpc.NewBodyDecoder(out)
	if err := res.Decode(&d); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestCallbacks: CB_SEQUENCE checks the session, slot and sequence ID and
// answers a retry from its cache; CB_RECALL of a delegation not held
// fails with NFS4ERR_BAD_STATEID and of one held succeeds; nothing runs
// without CB_SEQUENCE; an operation the client does not know is
// NFS4ERR_OP_ILLEGAL.
func TestCallbacks(t *testing.T) {
	sid := nfs4.SessionID{1, 2, 3}
	c := &Client4{s: &session4{id: sid}}
	cb := newCallbacks(c)
	c.cb = cb
	cb.closed = true // returns are not started: there is no fore channel here
	held := nfs4.StateID{Seqid: 1, Other: [12]byte{9}}
	f := &File4{c: c, deleg: held, delegated: true}
	cb.hold(held, f)
	seq := func(n uint32) *nfs4.CBSequenceArgs {
		return &nfs4.CBSequenceArgs{SessionID: sid, SequenceID: n, SlotID: 0}
	}
	for _, tc := range []struct {
		name string
		ops  []nfs4.CBArgOp
		want nfs4.Stat
	}{
		{"recall held", []nfs4.CBArgOp{seq(1), &nfs4.CBRecallArgs{StateID: held}}, nfs4.OK},
		{"recall unknown", []nfs4.CBArgOp{seq(2), &nfs4.CBRecallArgs{StateID: nfs4.StateID{Other: [12]byte{7}}}}, nfs4.ErrBadStateID},
		{"misordered", []nfs4.CBArgOp{seq(5)}, nfs4.ErrSeqMisordered},
		{"bad slot", []nfs4.CBArgOp{&nfs4.CBSequenceArgs{SessionID: sid, SequenceID: 1, SlotID: backSlots}}, nfs4.ErrBadSlot},
		{"bad session", []nfs4.CBArgOp{&nfs4.CBSequenceArgs{SessionID: nfs4.SessionID{9}, SequenceID: 3}}, nfs4.ErrBadSession},
		{"no CB_SEQUENCE", []nfs4.CBArgOp{&nfs4.CBRecallArgs{StateID: held}}, nfs4.ErrOpNotInSession},
		{"recall any", []nfs4.CBArgOp{seq(3), &nfs4.CBRecallAnyArgs{}}, nfs4.OK},
	} {
		res := cbCall(t, cb, tc.ops...)
		if res.Status != tc.want || len(res.Ops) == 0 || res.Ops[len(res.Ops)-1].OpStatus() != tc.want {
			t.Errorf("%s: status %v, ops %v; want %v", tc.name, res.Status, res.Ops, tc.want)
		}
	}
	cb.mu.Lock()
	recalls := cb.recalls
	cb.mu.Unlock()
	if recalls != 1 {
		t.Errorf("%d recalls counted, want 1", recalls)
	}
	// A retry of the last request is answered from the cache: the same
	// reply, not run again.
	before := recalls
	res := cbCall(t, cb, seq(3), &nfs4.CBRecallAnyArgs{})
	if res.Status != nfs4.OK || len(res.Ops) != 2 {
		t.Errorf("retry: %v %v", res.Status, res.Ops)
	}
	res = cbCall(t, cb, seq(4), &nfs4.CBRecallArgs{StateID: held})
	cb.mu.Lock()
	if cb.recalls != before+1 || res.Status != nfs4.OK {
		t.Errorf("a new request after the retry: %v, recalls %d", res.Status, cb.recalls)
	}
	cb.mu.Unlock()
	// A new session starts the slots afresh.
	cb.reset()
	if res := cbCall(t, cb, seq(1)); res.Status != nfs4.OK {
		t.Errorf("after reset: %v", res.Status)
	}
}

// FuzzCallbacks: no CB_COMPOUND a server sends crashes the client.
func FuzzCallbacks(f *testing.F) {
	sid := nfs4.SessionID{1, 2, 3}
	for _, ops := range [][]nfs4.CBArgOp{
		{&nfs4.CBSequenceArgs{SessionID: sid, SequenceID: 1}, &nfs4.CBRecallArgs{StateID: nfs4.StateID{Other: [12]byte{9}}}},
		{&nfs4.CBSequenceArgs{SessionID: sid, SequenceID: 1, SlotID: 1}, &nfs4.CBRecallAnyArgs{}},
		{&nfs4.CBSequenceArgs{SessionID: sid, SequenceID: 1}, &nfs4.CBGetattrArgs{FH: nfs4.FileHandle("fh"), AttrRequest: nfs4.BitmapOf(nfs4.AttrChange, nfs4.AttrSize)}},
		{&nfs4.CBRecallArgs{}},
	} {
		var b rpc.Body
		args := nfs4.CBCompoundArgs{MinorVersion: nfs4.MinorVersion, Ops: ops}
		args.Append(&b)
		f.Add(b.XDR)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &Client4{s: &session4{id: sid}}
		cb := newCallbacks(c)
		c.cb = cb
		cb.closed = true
		cb.hold(nfs4.StateID{Other: [12]byte{9}}, &File4{c: c, delegated: true})
		cb.hold(nfs4.StateID{Other: [12]byte{8}}, &File4{c: c, FH: nfs4.FileHandle("fh"), delegated: true, delegType: nfs4.DelegWrite})
		for range 2 { // the second time, perhaps a retry from the cache
			cb.compound(context.Background(), &rpc.Call{Args: rpc.Body{XDR: data}})
		}
	})
}
