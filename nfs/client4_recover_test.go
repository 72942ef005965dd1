package nfs

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// fakeFiles is fake4's file state: opens, data, and what a restart
// leaves for clients to reclaim during its grace period (RFC 8881
// Section 8.4.2). fake4.mu guards it.
type fakeFiles struct {
	boot     byte // server instance, the first byte of every stateid it makes
	n        uint32
	grace    bool      // after a restart, until RECLAIM_COMPLETE and graceEnd
	graceEnd time.Time // the grace period lasts at least until then
	data     map[string][]byte
	opens    map[[12]byte]string // open stateid's other: the open's key (owner and file)
	prev     map[string]bool     // the opens before the restart, by key
	refuse   map[string]bool     // files whose reclaim is refused (NFS4ERR_RECLAIM_BAD)
	// grantWrite grants a write delegation to an OPEN that wants one;
	// delegs holds those granted, by stateid.
	grantWrite bool
	delegs     map[[12]byte]string
	log        []string // WRITE, COMMIT, READ, DELEGRETURN, in order
	// newVerifier answers the next COMMITs with a verifier other than
	// the WRITEs'.
	newVerifier int
	// revoked holds the stateids revoked and not yet freed, with the
	// status TEST_STATEID gives them; statusFlags are SEQUENCE's
	// sr_status_flags.
	revoked     map[[12]byte]nfs4.Stat
	statusFlags uint32

	claims    map[nfs4.ClaimType]int // OPENs by claim
	noGrace   int                    // reclaims refused as outside the grace period
	graceSent int                    // NFS4ERR_GRACE answers
}

func openKey(owner []byte, fh nfs4.FileHandle) string { return string(owner) + "|" + string(fh) }

// fileOp runs the file operations the restart tests need: OPEN (CLAIM_NULL,
// CLAIM_FH, CLAIM_PREVIOUS), READ, WRITE, COMMIT, CLOSE. Callers hold f.mu.
func (f *fake4) fileOp(op nfs4.ArgOp, fh *nfs4.FileHandle) nfs4.ResOp {
	fs := &f.files
	if fs.data == nil {
		fs.boot, fs.data, fs.opens, fs.claims = 1, map[string][]byte{}, map[[12]byte]string{}, map[nfs4.ClaimType]int{}
		fs.delegs = map[[12]byte]string{}
	}
	if fs.grace && f.reclaimed && time.Now().After(fs.graceEnd) {
		fs.grace = false
	}
	check := func(sid nfs4.StateID) nfs4.Stat {
		switch {
		case sid.Other[0] != fs.boot:
			return nfs4.ErrStaleStateID
		case fs.opens[sid.Other] == "":
			return nfs4.ErrBadStateID
		}
		return nfs4.OK
	}
	switch a := op.(type) {
	case *nfs4.OpenArgs:
		fs.claims[a.Claim]++
		switch a.Claim {
		case nfs4.ClaimNull:
			*fh = nfs4.FileHandle("file-" + a.Name)
			if _, ok := fs.data[string(*fh)]; !ok && !a.Create {
				return &nfs4.OpenRes{Status: nfs4.ErrNoEnt}
			}
		case nfs4.ClaimFH:
		case nfs4.ClaimPrevious:
			switch {
			case !fs.grace || f.reclaimed:
				fs.noGrace++
				return &nfs4.OpenRes{Status: nfs4.ErrNoGrace}
			case !fs.prev[openKey(a.Owner.Owner, *fh)] || fs.refuse[string(*fh)]:
				return &nfs4.OpenRes{Status: nfs4.ErrReclaimBad}
			}
		default:
			return &nfs4.OpenRes{Status: nfs4.ErrNotSupp}
		}
		if a.Claim != nfs4.ClaimPrevious && fs.grace {
			fs.graceSent++
			return &nfs4.OpenRes{Status: nfs4.ErrGrace}
		}
		if _, ok := fs.data[string(*fh)]; !ok {
			fs.data[string(*fh)] = nil
		}
		fs.n++
		sid := nfs4.StateID{Seqid: 1, Other: [12]byte{fs.boot, byte(fs.n >> 8), byte(fs.n)}}
		fs.opens[sid.Other] = openKey(a.Owner.Owner, *fh)
		res := &nfs4.OpenRes{StateID: sid}
		if fs.grantWrite && (a.ShareAccess&nfs4.ShareAccessWantDelegMask == nfs4.ShareAccessWantWriteDeleg ||
			a.Claim == nfs4.ClaimPrevious && a.DelegType == nfs4.DelegWrite) {
			fs.n++
			d := nfs4.StateID{Seqid: 1, Other: [12]byte{fs.boot, byte(fs.n >> 8), byte(fs.n), 'd'}}
			fs.delegs[d.Other] = string(*fh)
			res.Delegation = nfs4.OpenDelegation{Type: nfs4.DelegWrite, StateID: d,
				SpaceLimit: nfs4.SpaceLimit{LimitBy: nfs4.LimitSize, FileSize: 1 << 20}}
		}
		return res
	case *nfs4.ReadArgs:
		if st := check(a.StateID); st != nfs4.OK {
			return &nfs4.ReadRes{Status: st}
		}
		fs.log = append(fs.log, "READ")
		d := fs.data[string(*fh)]
		off := min(a.Offset, uint64(len(d)))
		end := min(off+uint64(a.Count), uint64(len(d)))
		return &nfs4.ReadRes{Data: d[off:end], EOF: end == uint64(len(d))}
	case *nfs4.WriteArgs:
		if st := check(a.StateID); st != nfs4.OK {
			return &nfs4.WriteRes{Status: st}
		}
		fs.log = append(fs.log, "WRITE")
		d := fs.data[string(*fh)]
		if end := int(a.Offset) + len(a.Data); end > len(d) {
			d = append(d, make([]byte, end-len(d))...)
		}
		copy(d[a.Offset:], a.Data)
		fs.data[string(*fh)] = d
		return &nfs4.WriteRes{Count: uint32(len(a.Data)), Committed: a.Stable, Verifier: nfs4.Verifier{fs.boot}}
	case *nfs4.CommitArgs:
		fs.log = append(fs.log, "COMMIT")
		if fs.newVerifier > 0 { // as if it restarted after the WRITEs
			fs.newVerifier--
			return &nfs4.CommitRes{Verifier: nfs4.Verifier{fs.boot, 'x'}}
		}
		return &nfs4.CommitRes{Verifier: nfs4.Verifier{fs.boot}}
	case *nfs4.TestStateIDArgs:
		r := &nfs4.TestStateIDRes{}
		for _, sid := range a.StateIDs {
			code, ok := fs.revoked[sid.Other]
			switch {
			case ok:
			case fs.opens[sid.Other] != "" || fs.delegs[sid.Other] != "":
				code = nfs4.OK
			default:
				code = nfs4.ErrBadStateID
			}
			r.Codes = append(r.Codes, code)
		}
		return r
	case *nfs4.FreeStateIDArgs:
		if _, ok := fs.revoked[a.StateID.Other]; !ok {
			return &nfs4.FreeStateIDRes{Status: nfs4.ErrBadStateID}
		}
		delete(fs.revoked, a.StateID.Other)
		if len(fs.revoked) == 0 {
			fs.statusFlags = 0
		}
		fs.log = append(fs.log, "FREE_STATEID")
		return &nfs4.FreeStateIDRes{}
	case *nfs4.DelegReturnArgs:
		if a.StateID.Other[0] != fs.boot {
			return &nfs4.DelegReturnRes{Status: nfs4.ErrStaleStateID}
		}
		if fs.delegs[a.StateID.Other] == "" {
			return &nfs4.DelegReturnRes{Status: nfs4.ErrBadStateID}
		}
		delete(fs.delegs, a.StateID.Other)
		fs.log = append(fs.log, "DELEGRETURN")
		return &nfs4.DelegReturnRes{}
	case *nfs4.CloseArgs:
		if st := check(a.StateID); st != nfs4.OK {
			return &nfs4.CloseRes{Status: st}
		}
		delete(fs.opens, a.StateID.Other)
		return &nfs4.CloseRes{StateID: a.StateID}
	}
	return &nfs4.IllegalRes{Status: nfs4.ErrNotSupp}
}

// restart makes f forget its client IDs, sessions and opens, as a server
// does when it restarts, and start a grace period of at least grace in
// which the opens it had may be reclaimed. The files' data stays.
func (f *fake4) restart(grace time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := &f.files
	f.clientID += 1000
	f.session = nfs4.SessionID{}
	f.cache = map[uint32]fakeSlot{}
	f.reclaimed = false
	fs.prev = map[string]bool{}
	for _, k := range fs.opens {
		fs.prev[k] = true
	}
	fs.opens, fs.delegs = map[[12]byte]string{}, map[[12]byte]string{}
	fs.boot++
	fs.grace, fs.graceEnd = true, time.Now().Add(grace)
}

// TestCompound4ServerRestart: the fake server restarts while files are
// open and calls are in flight. The client makes a new client ID and
// session, reclaims each open with CLAIM_PREVIOUS before RECLAIM_COMPLETE
// (a reclaim after it would meet NFS4ERR_NO_GRACE), and the files opened
// before the restart are read and written after it through the same
// File4s. An open whose reclaim the server refuses is opened again with
// CLAIM_FH once the grace period is over; a new OPEN during the grace
// period meets NFS4ERR_GRACE, waits and goes through.
func TestCompound4ServerRestart(t *testing.T) {
	f := newFake4(4)
	addr, _ := startFake4(t, f)
	c := mountFake(t, addr, 2)
	ctx := ctxT(t)
	open := func(name string, o OpenOptions) *File4 {
		t.Helper()
		fl, err := c.Open(ctx, fakeRoot, name, o)
		if err != nil {
			t.Fatalf("OPEN %s: %v", name, err)
		}
		return fl
	}
	a := open("a", OpenOptions{Access: nfs4.ShareAccessBoth, Create: true})
	if _, _, _, err := a.WriteAt(ctx, []byte("hello"), 0, nfs4.FileSync); err != nil {
		t.Fatal(err)
	}
	b := open("b", OpenOptions{Access: nfs4.ShareAccessWrite, Create: true})
	refused := open("refused", OpenOptions{Access: nfs4.ShareAccessBoth, Create: true})

	f.mu.Lock()
	f.files.refuse = map[string]bool{"file-refused": true}
	f.mu.Unlock()
	f.restart(300 * time.Millisecond)

	// Writes in flight across the recovery, on both connections.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 16 {
		wg.Go(func() {
			_, _, _, err := b.WriteAt(ctx, []byte{byte('A' + i)}, uint64(i), nfs4.FileSync)
			errs <- err
		})
	}
	wg.Go(func() {
		_, _, _, err := a.WriteAt(ctx, []byte(" world"), 5, nfs4.FileSync)
		errs <- err
	})
	wg.Go(func() {
		// A new OPEN: NFS4ERR_GRACE until the grace period ends.
		g, err := c.Open(ctx, fakeRoot, "new", OpenOptions{Access: nfs4.ShareAccessWrite, Create: true})
		if err == nil {
			err = g.Close(ctx)
		}
		errs <- err
	})
	wg.Go(func() {
		_, _, _, err := refused.WriteAt(ctx, []byte("again"), 0, nfs4.FileSync)
		errs <- err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got := make([]byte, 64)
	n, _, err := a.ReadAt(ctx, got, 0)
	if err != nil || string(got[:n]) != "hello world" {
		t.Errorf("READ after the restart: %q %v", got[:n], err)
	}
	for _, fl := range []*File4{a, b, refused} {
		if err := fl.Close(ctx); err != nil {
			t.Errorf("CLOSE after the restart: %v", err)
		}
	}
	in := c.Info()
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := &f.files
	if !bytes.Equal(fs.data["file-b"], []byte("ABCDEFGHIJKLMNOP")) {
		t.Errorf("b holds %q after writes across the restart", fs.data["file-b"])
	}
	if in.Recoveries != 1 || in.Reclaimed != 2 || in.ReclaimRefused != 1 || in.Reopened != 1 || in.GraceWaits < 1 {
		t.Errorf("recoveries %d, reclaimed %d, refused %d, reopened %d, grace waits %d; want 1, 2, 1, 1, some",
			in.Recoveries, in.Reclaimed, in.ReclaimRefused, in.Reopened, in.GraceWaits)
	}
	if fs.claims[nfs4.ClaimPrevious] != 3 || fs.noGrace != 0 || !f.reclaimed || fs.graceSent < 1 {
		t.Errorf("server saw %d CLAIM_PREVIOUS (%d after RECLAIM_COMPLETE), RECLAIM_COMPLETE %v, %d NFS4ERR_GRACE",
			fs.claims[nfs4.ClaimPrevious], fs.noGrace, f.reclaimed, fs.graceSent)
	}
	if len(fs.opens) != 0 {
		t.Errorf("%d opens left after every file was closed", len(fs.opens))
	}
	if f.exchanges != 2 {
		t.Errorf("%d EXCHANGE_IDs, want 2", f.exchanges)
	}
}

// TestCompound4SessionLostInReclaim: the server loses the new session
// while the client reclaims with it; the recovery starts over and the
// file still works.
func TestCompound4SessionLostInReclaim(t *testing.T) {
	f := newFake4(4)
	addr, _ := startFake4(t, f)
	c := mountFake(t, addr, 1)
	ctx := ctxT(t)
	fl, err := c.Open(ctx, fakeRoot, "x", OpenOptions{Access: nfs4.ShareAccessBoth, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	f.restart(0)
	f.mu.Lock()
	// The first SEQUENCE after the restart (the WRITE's, on the old
	// session) and the second (the reclaim's, on the new one).
	f.badNext = 2
	f.mu.Unlock()
	for i := range 3 {
		if _, _, _, err := fl.WriteAt(ctx, []byte(fmt.Sprint(i)), uint64(i), nfs4.FileSync); err != nil {
			t.Fatalf("WRITE %d after the session was lost twice: %v", i, err)
		}
	}
	if err := fl.Close(ctx); err != nil {
		t.Error(err)
	}
	in := c.Info()
	f.mu.Lock()
	defer f.mu.Unlock()
	if string(f.files.data["file-x"]) != "012" || in.Recoveries != 1 || in.Reclaimed != 1 || f.files.noGrace != 0 {
		t.Errorf("data %q, recoveries %d, reclaimed %d, reclaims outside grace %d", f.files.data["file-x"], in.Recoveries, in.Reclaimed, f.files.noGrace)
	}
}

// TestCompound4ClientIDLost: the server forgets the client ID without a
// restart (its lease expired), so it is in no grace period: the reclaim
// is refused with NFS4ERR_NO_GRACE and the file is opened again by its
// handle (CLAIM_FH) at its next use, which goes through.
func TestCompound4ClientIDLost(t *testing.T) {
	f := newFake4(4)
	addr, _ := startFake4(t, f)
	c := mountFake(t, addr, 1)
	ctx := ctxT(t)
	fl, err := c.Open(ctx, fakeRoot, "l", OpenOptions{Access: nfs4.ShareAccessBoth, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.staleNext = 1
	f.files.opens = map[[12]byte]string{} // the client's state goes with its ID
	f.mu.Unlock()
	if _, _, _, err := fl.WriteAt(ctx, []byte("x"), 0, nfs4.FileSync); err != nil {
		t.Fatal(err)
	}
	in := c.Info()
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.Recoveries != 1 || in.Reclaimed != 0 || in.ReclaimRefused != 1 || in.Reopened != 1 || f.files.noGrace != 1 ||
		f.files.claims[nfs4.ClaimFH] != 1 || string(f.files.data["file-l"]) != "x" {
		t.Errorf("recoveries %d, reclaimed %d, refused %d (NO_GRACE %d), reopened %d (CLAIM_FH %d), data %q",
			in.Recoveries, in.Reclaimed, in.ReclaimRefused, f.files.noGrace, in.Reopened, f.files.claims[nfs4.ClaimFH], f.files.data["file-l"])
	}
}
