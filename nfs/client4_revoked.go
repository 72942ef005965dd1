package nfs

// Revoked state (RFC 8881 Section 8.2.4 and, for the flags, Section
// 18.46.3). A server that revoked some of the client's state says so in
// the sr_status_flags of every SEQUENCE reply until the client has freed
// it: SEQ4_STATUS_RECALLABLE_STATE_REVOKED (a delegation not returned in
// time), SEQ4_STATUS_EXPIRED_ALL_STATE_REVOKED or _SOME_STATE_REVOKED (the
// lease expired), SEQ4_STATUS_ADMIN_STATE_REVOKED. The client then tests
// the stateids it holds (TEST_STATEID, Section 18.48), frees each the
// server says is revoked or expired (FREE_STATEID, Section 18.38), and
// drops that state: a revoked delegation is forgotten (writes kept under
// it are sent under the open), a revoked open is opened again when next
// used. One check runs at a time, on a goroutine of its own; Close waits
// for it.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// revokedFlags are the sr_status_flags that say state was revoked.
const revokedFlags = nfs4.SeqStatusExpiredAllStateRevoked | nfs4.SeqStatusExpiredSomeStateRevoked |
	nfs4.SeqStatusAdminStateRevoked | nfs4.SeqStatusRecallableStateRevoked

// maxTested is the most stateids one TEST_STATEID carries.
const maxTested = 64

// checkRevokedLater starts a check of the client's stateids, unless one
// runs or the client is closed.
func (c *Client4) checkRevokedLater() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() || !c.checkingRevoked.CompareAndSwap(false, true) {
		return
	}
	c.revokeChecks.Go(func() {
		defer c.checkingRevoked.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.checkRevoked(ctx); err != nil && c.cfg.Logger != nil {
			c.cfg.Logger.Warn("nfs: freeing revoked state", "err", err)
		}
	})
}

// heldState is one stateid a file holds: its open's or its delegation's.
type heldState struct {
	f     *File4
	sid   nfs4.StateID
	deleg bool
}

// checkRevoked tests every stateid the open files hold and frees and
// drops those the server revoked.
func (c *Client4) checkRevoked(ctx context.Context) error {
	c.mu.Lock()
	files := slices.Collect(maps.Keys(c.opens))
	c.mu.Unlock()
	var held []heldState
	for _, f := range files {
		f.mu.Lock()
		if !f.lost {
			held = append(held, heldState{f: f, sid: f.sid})
		}
		if f.delegated {
			held = append(held, heldState{f: f, sid: f.deleg, deleg: true})
		}
		f.mu.Unlock()
	}
	for len(held) > 0 {
		batch := held[:min(len(held), maxTested)]
		held = held[len(batch):]
		args := nfs4.TestStateIDArgs{StateIDs: make([]nfs4.StateID, len(batch))}
		for i, h := range batch {
			args.StateIDs[i] = h.sid
		}
		var r nfs4.TestStateIDRes
		if err := c.compound(ctx, []nfs4.ArgOp{&args}, []nfs4.ResOp{&r}, callOpts{}); err != nil {
			return err
		}
		if len(r.Codes) != len(batch) {
			return fmt.Errorf("nfs: TEST_STATEID of %d stateids answered %d statuses", len(batch), len(r.Codes))
		}
		for i, code := range r.Codes {
			if code == nfs4.OK {
				continue
			}
			h := batch[i]
			if code == nfs4.ErrDelegRevoked || code == nfs4.ErrAdminRevoked || code == nfs4.ErrExpired {
				// The server keeps a revoked stateid until it is freed.
				if err := c.compound(ctx, []nfs4.ArgOp{&nfs4.FreeStateIDArgs{StateID: h.sid}}, []nfs4.ResOp{&nfs4.FreeStateIDRes{}}, callOpts{}); err != nil {
					return err
				}
			}
			h.f.dropState(h.sid, h.deleg)
			c.recStats.revoked.Add(1)
			c.logf("nfs: state revoked", "delegation", h.deleg, "status", code.String())
		}
	}
	return nil
}

// dropState forgets the file's delegation sid (deleg) or marks its open
// sid lost, if they are still the file's.
func (f *File4) dropState(sid nfs4.StateID, deleg bool) {
	f.mu.Lock()
	dropped := deleg && f.delegated && f.deleg == sid
	if dropped {
		f.delegated, f.delegType, f.cache, f.cached = false, nfs4.DelegNone, nil, 0
	}
	if !deleg && f.sid == sid {
		f.lost = true
	}
	f.mu.Unlock()
	if dropped {
		f.c.cb.release(sid)
	}
}
