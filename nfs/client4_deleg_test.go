package nfs

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// openWriteDeleg mounts the fake server, which grants write delegations,
// and opens name for writing with one. The session is marked as having
// a backchannel, as over RDMA it would: the test makes the server's
// callbacks itself, through the client's callback service.
func openWriteDeleg(t *testing.T, name string) (*fake4, *Client4, *File4) {
	t.Helper()
	f := newFake4(4)
	f.files.grantWrite = true
	addr, _ := startFake4(t, f)
	c := mountFake(t, addr, 1)
	c.mu.Lock()
	c.s.flags |= nfs4.CreateSessionFlagConnBackChan
	c.mu.Unlock()
	fl, err := c.Open(ctxT(t), fakeRoot, name, OpenOptions{Access: nfs4.ShareAccessBoth, Create: true, Delegation: true})
	if err != nil {
		t.Fatal(err)
	}
	if fl.Delegation() != nfs4.DelegWrite {
		t.Fatalf("delegation %v, want OPEN_DELEGATE_WRITE", fl.Delegation())
	}
	return f, c, fl
}

// fakeLog returns the fake's log of file operations, and its data of
// file name.
func fakeLog(f *fake4, name string) ([]string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.files.log), string(f.files.data["file-"+name])
}

// TestFile4WriteDelegation: under a write delegation UNSTABLE writes are
// kept by the client; CB_GETATTR is answered with the size and change
// they gave the file; on CB_RECALL the client sends them (WRITE, COMMIT)
// before DELEGRETURN, and writes after the return go to the server at
// once.
func TestFile4WriteDelegation(t *testing.T) {
	f, c, fl := openWriteDeleg(t, "w")
	ctx := ctxT(t)
	for _, w := range []struct {
		s   string
		off uint64
	}{{"hello", 0}, {" world", 5}} {
		if n, how, _, err := fl.WriteAt(ctx, []byte(w.s), w.off, nfs4.Unstable); err != nil || n != len(w.s) || how != nfs4.Unstable {
			t.Fatalf("WriteAt under the delegation: %d %v %v", n, how, err)
		}
	}
	if log, _ := fakeLog(f, "w"); len(log) != 0 {
		t.Fatalf("the server saw %v before any flush", log)
	}
	sid := c.Info().SessionID
	seq := func(n uint32) *nfs4.CBSequenceArgs { return &nfs4.CBSequenceArgs{SessionID: sid, SequenceID: n} }
	res := cbCall(t, c.cb, seq(1), &nfs4.CBGetattrArgs{FH: fl.FH, AttrRequest: nfs4.BitmapOf(nfs4.AttrChange, nfs4.AttrSize)})
	if res.Status != nfs4.OK || len(res.Ops) != 2 {
		t.Fatalf("CB_GETATTR: %v %v", res.Status, res.Ops)
	}
	if a := res.Ops[1].(*nfs4.CBGetattrRes).Attr; a.Size != 11 || a.Change != fl.Attr.Change+2 || !a.Mask.Has(nfs4.AttrSize) || !a.Mask.Has(nfs4.AttrChange) {
		t.Errorf("CB_GETATTR: size %d change %d (mask %v), want 11 and %d", a.Size, a.Change, a.Mask, fl.Attr.Change+2)
	}
	res = cbCall(t, c.cb, seq(2), &nfs4.CBGetattrArgs{FH: nfs4.FileHandle("other"), AttrRequest: nfs4.BitmapOf(nfs4.AttrSize)})
	if res.Status != nfs4.ErrBadHandle {
		t.Errorf("CB_GETATTR of a file not delegated: %v, want NFS4ERR_BADHANDLE", res.Status)
	}

	fl.mu.Lock()
	deleg := fl.deleg
	fl.mu.Unlock()
	if res := cbCall(t, c.cb, seq(3), &nfs4.CBRecallArgs{StateID: deleg}); res.Status != nfs4.OK {
		t.Fatalf("CB_RECALL: %v", res.Status)
	}
	var log []string
	var data string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if log, data = fakeLog(f, "w"); slices.Contains(log, "DELEGRETURN") {
			break
		}
	}
	if strings.Join(log, " ") != "WRITE WRITE COMMIT DELEGRETURN" || data != "hello world" {
		t.Fatalf("after the recall the server saw %v and holds %q; want WRITE WRITE COMMIT DELEGRETURN and \"hello world\"", log, data)
	}
	if fl.Delegated() {
		t.Error("the file still holds the delegation it returned")
	}
	if _, _, _, err := fl.WriteAt(ctx, []byte("!"), 11, nfs4.Unstable); err != nil {
		t.Fatal(err)
	}
	if log, data := fakeLog(f, "w"); len(log) != 5 || log[4] != "WRITE" || data != "hello world!" {
		t.Errorf("a write after the return: the server saw %v and holds %q", log, data)
	}
	if err := fl.Close(ctx); err != nil {
		t.Error(err)
	}
}

// TestFile4WriteDelegationFlush: what a file keeps under a write
// delegation is sent before a read of it, by the client's Commit of its
// handle, and at Close; it survives a server restart, whose reclaim gets
// the write delegation back (CLAIM_PREVIOUS of OPEN_DELEGATE_WRITE).
func TestFile4WriteDelegationFlush(t *testing.T) {
	f, c, fl := openWriteDeleg(t, "r")
	ctx := ctxT(t)
	if _, _, _, err := fl.WriteAt(ctx, []byte("abc"), 0, nfs4.Unstable); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, _, err := fl.ReadAt(ctx, buf, 0); err != nil || string(buf[:n]) != "abc" {
		t.Fatalf("a read after a kept write: %q %v", buf[:n], err)
	}
	if log, _ := fakeLog(f, "r"); strings.Join(log, " ") != "WRITE COMMIT READ" {
		t.Errorf("a read after a kept write: the server saw %v, want WRITE COMMIT READ", log)
	}
	fl.WriteAt(ctx, []byte("def"), 3, nfs4.Unstable)
	if _, err := c.Commit(ctx, fl.FH); err != nil {
		t.Fatal(err)
	}
	if _, data := fakeLog(f, "r"); data != "abcdef" {
		t.Errorf("after the client's COMMIT of the handle the server holds %q", data)
	}

	// Kept across a restart, and the delegation reclaimed with the open.
	fl.WriteAt(ctx, []byte("ghi"), 6, nfs4.Unstable)
	f.restart(0)
	if err := fl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	in := c.Info()
	log, data := fakeLog(f, "r")
	if data != "abcdefghi" || in.Reclaimed != 1 || in.DelegationsReclaimed != 1 {
		t.Errorf("after a restart and Close: the server holds %q (log %v); reclaimed %d, delegations %d",
			data, log, in.Reclaimed, in.DelegationsReclaimed)
	}
	if !slices.Contains(log, "DELEGRETURN") {
		t.Errorf("Close returned no delegation: %v", log)
	}
}

// TestFile4WriteDelegationVerifier: a COMMIT whose verifier is not the
// WRITEs' (the server restarted between them and may have lost them)
// makes the client send the kept writes again; a second time, it fails
// and keeps them.
func TestFile4WriteDelegationVerifier(t *testing.T) {
	f, _, fl := openWriteDeleg(t, "v")
	ctx := ctxT(t)
	fl.WriteAt(ctx, []byte("abc"), 0, nfs4.Unstable)
	f.mu.Lock()
	f.files.newVerifier = 1
	f.mu.Unlock()
	if err := fl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if log, data := fakeLog(f, "v"); strings.Join(log, " ") != "WRITE COMMIT WRITE COMMIT" || data != "abc" {
		t.Errorf("the server saw %v and holds %q; want WRITE COMMIT WRITE COMMIT and \"abc\"", log, data)
	}
	fl.WriteAt(ctx, []byte("def"), 3, nfs4.Unstable)
	f.mu.Lock()
	f.files.newVerifier = 2
	f.mu.Unlock()
	if err := fl.Flush(ctx); err == nil || !strings.Contains(err.Error(), "verifier changed") {
		t.Errorf("a verifier changing twice: %v", err)
	}
	if err := fl.Flush(ctx); err != nil {
		t.Errorf("the writes kept after the failure: %v", err)
	}
	if _, data := fakeLog(f, "v"); data != "abcdef" {
		t.Errorf("the server holds %q, want \"abcdef\"", data)
	}
}

// TestFile4DelegationRevoked: the server revokes the write delegation and
// says so in SEQUENCE's flags (SEQ4_STATUS_RECALLABLE_STATE_REVOKED); the
// client tests its stateids, frees the revoked one (FREE_STATEID), drops
// the delegation, and sends the writes it kept under the open.
func TestFile4DelegationRevoked(t *testing.T) {
	f, c, fl := openWriteDeleg(t, "k")
	ctx := ctxT(t)
	fl.WriteAt(ctx, []byte("kept"), 0, nfs4.Unstable)
	fl.mu.Lock()
	deleg := fl.deleg
	fl.mu.Unlock()
	f.mu.Lock()
	delete(f.files.delegs, deleg.Other)
	f.files.revoked = map[[12]byte]nfs4.Stat{deleg.Other: nfs4.ErrDelegRevoked}
	f.files.statusFlags = nfs4.SeqStatusRecallableStateRevoked
	f.mu.Unlock()
	if err := c.compound(ctx, nil, nil, callOpts{}); err != nil { // a SEQUENCE, which hears of it
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); fl.Delegated() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if fl.Delegated() || c.Info().Revoked != 1 {
		t.Fatalf("after the revocation: delegated %v, %d revoked", fl.Delegated(), c.Info().Revoked)
	}
	if err := fl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	log, data := fakeLog(f, "k")
	if strings.Join(log, " ") != "FREE_STATEID WRITE COMMIT" || data != "kept" {
		t.Errorf("the server saw %v and holds %q; want FREE_STATEID WRITE COMMIT and \"kept\"", log, data)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files.statusFlags != 0 {
		t.Error("a revoked stateid is left unfreed")
	}
}
