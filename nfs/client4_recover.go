package nfs

// State recovery of the NFSv4.1 client (RFC 8881 Section 8.4.2).
//
// A server that restarts forgets its client IDs, sessions and state. The
// client hears it as NFS4ERR_BADSESSION on its next SEQUENCE, and then
// NFS4ERR_STALE_CLIENTID when it asks for a new session under the old
// client ID, or as NFS4ERR_STALE_CLIENTID at once. The first request to
// meet one of them starts a recovery, on a goroutine of its own so that
// no caller's context cuts it short; every request waits for it (the
// gate: Client4.recovering) before it is sent, and the requests that met
// the error are sent again once it has ended.
//
// A recovery runs these steps; a session error in any of them (the server
// restarted again) starts them over, a few times at most:
//
//  1. CREATE_SESSION under the client ID the client has. If the server
//     still knows it, only the session was lost, and with the new
//     session the recovery is done: the client's state lives on.
//  2. Otherwise EXCHANGE_ID with the same co_ownerid and verifier (so
//     the server can tell this is the client whose state it recorded
//     before it restarted, RFC 8881 Section 8.4.2.1) and CREATE_SESSION.
//  3. During the server's grace period, every open file is reclaimed:
//     OPEN with CLAIM_PREVIOUS of its handle, its share access and deny
//     and its open owner, and with the type of the delegation it held, so
//     that the delegation is reclaimed too (RFC 8881 Sections 9.11 and
//     10.2.1, and 18.16.3 for CLAIM_PREVIOUS). The file takes the new
//     open stateid (and delegation stateid); a read delegation the server
//     gives back keeps the data read under it, since no other client
//     could change the file while the server was down or in grace.
//  4. RECLAIM_COMPLETE with rca_one_fs false (RFC 8881 Section 18.51):
//     the client has nothing more to reclaim, and the server may end its
//     grace period early.
//  5. The new session becomes the client's and the gate opens.
//
// A reclaim the server refuses (NFS4ERR_NO_GRACE: the grace period is
// over, or the client's lease expired without a restart; NFS4ERR_RECLAIM_BAD
// or NFS4ERR_RECLAIM_CONFLICT) loses that file's open, and its delegation
// if it held one; the file is opened again (CLAIM_FH) when next used.
// Until the grace period ends such an OPEN, like any new OPEN, meets
// NFS4ERR_GRACE, and Client4.compound waits and sends it again.
//
// A request that was in flight at the restart carries the file's old
// stateid; the server answers it NFS4ERR_STALE_STATEID or
// NFS4ERR_BAD_STATEID, and File4.withState sends it again with the
// reclaimed one. So a File4 opened before the restart goes on working
// after it.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// recoveryStats counts what recoveries did, for Info and tests.
type recoveryStats struct {
	recoveries    atomic.Int32 // recoveries that ended well
	reclaimed     atomic.Int32 // opens reclaimed with CLAIM_PREVIOUS
	reclaimFailed atomic.Int32 // reclaims the server refused
	delegations   atomic.Int32 // delegations reclaimed with their open
	reopened      atomic.Int32 // opens made again with CLAIM_FH
	graceWaits    atomic.Int32 // calls that met NFS4ERR_GRACE and waited
	revoked       atomic.Int32 // stateids found revoked (client4_revoked.go)
}

// recoveryTimeout bounds one recovery, all its attempts together; a
// server that does not answer for that long is not coming back soon.
const recoveryTimeout = 2 * time.Minute

// maxRecoveryAttempts bounds how often a recovery starts over after the
// server lost the session it was recovering with.
const maxRecoveryAttempts = 4

// establish exchanges a client ID, creates a session, reclaims the open
// files' state (none at Mount4), says reclaim is complete and makes the
// session the client's. Mount4 and recoveries call it, never two at once.
func (c *Client4) establish(ctx context.Context) error {
	if err := c.exchangeID(ctx); err != nil {
		return err
	}
	s, err := c.createSession(ctx)
	if err != nil {
		return err
	}
	c.newSession(s)
	if err := c.reclaimAll(ctx, s); err != nil {
		return err
	}
	var rc nfs4.ReclaimCompleteRes
	if err := c.compound(ctx, []nfs4.ArgOp{&nfs4.ReclaimCompleteArgs{}}, []nfs4.ResOp{&rc}, callOpts{session: s}); err != nil &&
		!errors.Is(err, nfs4.ErrCompleteAlready) {
		return err
	}
	c.install(s)
	return nil
}

// newSession readies the backchannel for s, which is not yet the
// client's: the server may call back on it while the client reclaims.
func (c *Client4) newSession(s *session4) {
	c.mu.Lock()
	c.pending = s
	c.mu.Unlock()
	c.cb.reset()
}

// install makes s the session every request uses.
func (c *Client4) install(s *session4) {
	c.mu.Lock()
	c.s, c.pending = s, nil
	c.mu.Unlock()
}

// recover replaces session s after a request on it met st (a session or
// client ID the server lost): it starts a recovery unless one runs or
// another already replaced s, and waits for it to end or ctx. It returns
// how the recovery ended.
func (c *Client4) recover(ctx context.Context, s *session4, st nfs4.Stat) error {
	c.mu.Lock()
	if c.s != s {
		c.mu.Unlock()
		return nil
	}
	done := c.recovering
	if done == nil {
		if c.closed.Load() {
			c.mu.Unlock()
			return errors.New("nfs: the client is closed")
		}
		done = make(chan struct{})
		c.recovering = done
		c.recoveries.Go(func() { c.recoverRun(st, done) })
	}
	c.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recovered
}

// waitRecovery waits until no recovery runs, or ctx ends.
func (c *Client4) waitRecovery(ctx context.Context) error {
	c.mu.Lock()
	done := c.recovering
	c.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recoverRun is the recovery's goroutine: it runs the steps until they
// succeed, fail otherwise than by a lost session, or run out of attempts
// or time (or Close), then opens the gate.
func (c *Client4) recoverRun(st nfs4.Stat, done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), recoveryTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c.logf("nfs: recovering the session", "status", st.String())
	met := st
	var err error
	for attempt := range maxRecoveryAttempts {
		if err = c.recoverOnce(ctx, st); err == nil || ctx.Err() != nil {
			break
		}
		if e, ok := errors.AsType[*Error4](err); ok && e.Op == nfs4.OpSequence {
			st = nfs4.ErrStaleClientID // the server restarted again: from EXCHANGE_ID
		}
		select {
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if err != nil {
		err = fmt.Errorf("nfs: recovering the session after %v: %w", met.Describe(), err)
		if c.cfg.Logger != nil {
			c.cfg.Logger.Warn("nfs: recovery failed", "err", err)
		}
	} else {
		c.recStats.recoveries.Add(1)
		c.logf("nfs: recovered", "reclaimed", c.recStats.reclaimed.Load(), "refused", c.recStats.reclaimFailed.Load())
	}
	c.mu.Lock()
	c.recovered, c.recovering = err, nil
	c.mu.Unlock()
	close(done)
}

// recoverOnce makes one attempt: a new session under the client ID if
// the server still knows it, else a new client ID with the state
// reclaimed.
func (c *Client4) recoverOnce(ctx context.Context, st nfs4.Stat) error {
	if st != nfs4.ErrStaleClientID {
		s, err := c.createSession(ctx)
		if err == nil {
			c.newSession(s)
			c.install(s)
			return nil
		}
		if !errors.Is(err, nfs4.ErrStaleClientID) {
			return err
		}
	}
	c.logf("nfs: the server lost the client ID; reclaiming the open state")
	return c.establish(ctx)
}

// reclaimAll reclaims every open file's state on session s, in the
// server's grace period; it fails only when s or its client ID is lost
// or no reply came, and then the recovery starts over.
func (c *Client4) reclaimAll(ctx context.Context, s *session4) error {
	c.mu.Lock()
	files := slices.Collect(maps.Keys(c.opens))
	id := c.clientID
	c.mu.Unlock()
	for _, f := range files {
		if err := f.reclaim(ctx, s, id); err != nil {
			return err
		}
	}
	return nil
}

// track and untrack add an open file to those a recovery reclaims, and
// take it away.
func (c *Client4) track(f *File4) {
	c.mu.Lock()
	c.opens[f] = struct{}{}
	c.mu.Unlock()
}

func (c *Client4) untrack(f *File4) {
	c.mu.Lock()
	delete(c.opens, f)
	c.mu.Unlock()
}

// reclaim opens f again on session s of client ID id with CLAIM_PREVIOUS
// (RFC 8881 Section 18.16.3), asking back the delegation it held. A
// reclaim the server refuses marks the file lost (see the top of this
// file) and is no error; a failed SEQUENCE or a lost reply is.
func (f *File4) reclaim(ctx context.Context, s *session4, id uint64) error {
	f.mu.Lock()
	held := nfs4.DelegNone
	if f.delegated {
		held = f.delegType
	}
	oldDeleg, access, deny := f.deleg, f.access, f.deny
	f.mu.Unlock()
	if held != nfs4.DelegNone {
		f.c.cb.release(oldDeleg)
	}
	args := &nfs4.OpenArgs{ShareAccess: access, ShareDeny: deny, Owner: nfs4.StateOwner{ClientID: id, Owner: f.owner},
		Claim: nfs4.ClaimPrevious, DelegType: held}
	var or nfs4.OpenRes
	err := f.c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: f.FH}, args}, []nfs4.ResOp{&nfs4.PutFHRes{}, &or}, callOpts{session: s})
	if e, ok := errors.AsType[*Error4](err); err != nil && (!ok || e.Op == nfs4.OpSequence) {
		return err
	}
	if err != nil {
		f.mu.Lock()
		f.lost, f.delegated, f.delegType, f.cache, f.cached = true, false, nfs4.DelegNone, nil, 0
		f.mu.Unlock()
		f.c.recStats.reclaimFailed.Add(1)
		if f.c.cfg.Logger != nil {
			f.c.cfg.Logger.Warn("nfs: the server refused to reclaim an open; the file is opened again when next used", "err", err)
		}
		return nil
	}
	f.c.recStats.reclaimed.Add(1)
	d := or.Delegation
	f.mu.Lock()
	f.sid, f.lost = or.StateID, false
	kept := held != nfs4.DelegNone && d.Type == held
	if kept {
		f.deleg = d.StateID
	} else {
		f.delegated, f.delegType, f.cache, f.cached = false, nfs4.DelegNone, nil, 0
	}
	f.mu.Unlock()
	switch {
	case kept:
		f.c.recStats.delegations.Add(1)
		f.c.cb.hold(d.StateID, f)
		if d.Recall {
			// Granted only to be returned at once: the server has no
			// path to recall it by (RFC 8881 Section 18.16.3).
			f.c.cb.returnLater(f)
		}
	case d.Type == nfs4.DelegRead || d.Type == nfs4.DelegWrite:
		f.delegate(d)
	}
	return nil
}
