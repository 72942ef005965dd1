package nfs

// Delegations held by the NFSv4.1 client's files (RFC 8881 Section 10.2).
//
// Open asks for one where OpenOptions.Delegation says so and the session
// has a backchannel: OPEN4_SHARE_ACCESS_WANT_READ_DELEG for a file opened
// for reading, OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG for one opened for
// writing (RFC 8881 Section 18.16.3). The server may grant either, or
// none.
//
// Under a read delegation no other client may write the file, so a read
// of a range the file read before is served from memory (File4.ReadAt).
//
// Under a write delegation no other client may open the file at all, so
// the client may keep writes (RFC 8881 Section 10.4): an UNSTABLE WriteAt
// is copied and kept, up to maxKept bytes and within the delegation's
// space limit (nfs_space_limit4), and sent later as WRITE (UNSTABLE4) and
// COMMIT, in the order written, by Flush. Flush runs before a write that
// is not kept (so writes reach the server in order), before a read (so a
// read sees every write), at Close, at the client's Commit of the file's
// handle, and before the delegation goes back, whether the server
// recalled it (CB_RECALL) or the client returns it: the server learns of
// every write before anyone else may open the file. A COMMIT whose
// verifier differs from the WRITEs' (the server restarted between them)
// sends the writes again (RFC 8881 Section 18.32.3). While the client
// holds a write delegation the server asks it, not the file, for the
// file's size and change attribute (CB_GETATTR, RFC 8881 Section 20.1);
// the client answers with the size its writes gave the file and the
// change attribute at the grant plus one for each write since (Section
// 10.4.3).

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// maxDelegCache bounds what a file holding a delegation keeps of what it
// read, and maxKept what it keeps of what it wrote.
const (
	maxDelegCache = 64 << 20
	maxKept       = 16 << 20
)

// dirtyWrite is one write kept under a write delegation.
type dirtyWrite struct {
	off  uint64
	data []byte
}

// wantDeleg returns the OPEN want bits for o: the delegation o asks for
// where the session can have it recalled, none otherwise.
func (c *Client4) wantDeleg(o OpenOptions) uint32 {
	c.mu.Lock()
	back := c.s != nil && c.s.flags&nfs4.CreateSessionFlagConnBackChan != 0
	c.mu.Unlock()
	switch {
	case !o.Delegation || !back:
	case o.Access == nfs4.ShareAccessRead && !o.Create:
		return nfs4.ShareAccessWantReadDeleg
	case o.Access&nfs4.ShareAccessWrite != 0:
		return nfs4.ShareAccessWantWriteDeleg
	}
	return nfs4.ShareAccessWantNoDeleg
}

// delegate takes the delegation OPEN granted, if any; one granted with
// the recall flag set (the server has no path to recall it by, RFC 8881
// Section 18.16.3) is returned at once.
func (f *File4) delegate(d nfs4.OpenDelegation) {
	if d.Type != nfs4.DelegRead && d.Type != nfs4.DelegWrite {
		return
	}
	f.mu.Lock()
	f.deleg, f.delegType, f.delegated, f.cache, f.cached = d.StateID, d.Type, true, map[uint64]cachedRead{}, 0
	if d.Type == nfs4.DelegWrite {
		f.size, f.change, f.spaceLimit = f.Attr.Size, f.Attr.Change, spaceLimit(d.SpaceLimit)
	}
	f.mu.Unlock()
	f.c.cb.hold(d.StateID, f)
	if d.Recall {
		f.c.cb.returnLater(f)
	}
}

// spaceLimit returns the bytes nfs_space_limit4 allows the client to
// keep the file's size within without flushing (RFC 8881 Section 18.16).
func spaceLimit(l nfs4.SpaceLimit) uint64 {
	if l.LimitBy == nfs4.LimitSize {
		return l.FileSize
	}
	return uint64(l.NumBlocks) * uint64(l.BytesPerBlock)
}

// Delegated reports whether the file holds a delegation.
func (f *File4) Delegated() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delegated
}

// Delegation returns the type of the delegation the file holds:
// OPEN_DELEGATE_READ, OPEN_DELEGATE_WRITE, or OPEN_DELEGATE_NONE.
func (f *File4) Delegation() nfs4.DelegType {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.delegated {
		return nfs4.DelegNone
	}
	return f.delegType
}

// ReturnDelegation returns the file's delegation (DELEGRETURN) after
// sending the writes it kept under it, and drops what it read under it;
// without one it does nothing. If the writes cannot be sent, the
// delegation is kept, so that the server does not let another client
// open the file before them, and the error returned.
func (f *File4) ReturnDelegation(ctx context.Context) error {
	f.mu.Lock()
	sid, typ, held := f.deleg, f.delegType, f.delegated
	f.delegated, f.delegType, f.cache, f.cached = false, nfs4.DelegNone, nil, 0
	f.mu.Unlock()
	if !held {
		return nil
	}
	// No write is kept from here on; those kept before go now.
	if err := f.Flush(ctx); err != nil {
		f.mu.Lock()
		f.delegated, f.delegType, f.cache = true, typ, map[uint64]cachedRead{}
		f.mu.Unlock()
		return err
	}
	if !f.c.cb.release(sid) {
		return nil
	}
	err := f.c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: f.FH}, &nfs4.DelegReturnArgs{StateID: sid}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &nfs4.DelegReturnRes{}}, callOpts{})
	if lostState(err) {
		return nil
	}
	return err
}

// keep keeps a write of p at off instead of sending it, and reports
// whether it did: only UNSTABLE writes under a write delegation, within
// maxKept and the delegation's space limit.
func (f *File4) keep(p []byte, off uint64, stable nfs4.StableHow) bool {
	end := off + uint64(len(p))
	f.mu.Lock()
	defer f.mu.Unlock()
	if stable != nfs4.Unstable || !f.delegated || f.delegType != nfs4.DelegWrite || f.dirtyLen+len(p) > maxKept || end > f.spaceLimit {
		return false
	}
	f.dirty = append(f.dirty, dirtyWrite{off: off, data: bytes.Clone(p)})
	f.dirtyLen += len(p)
	f.size = max(f.size, end)
	f.change++
	return true
}

// wrote notes a write sent to the server that ended at end, for the
// size and change attribute CB_GETATTR is answered with.
func (f *File4) wrote(end uint64) {
	f.mu.Lock()
	f.size = max(f.size, end)
	f.change++
	f.mu.Unlock()
}

// Flush sends the writes the file keeps under a write delegation (WRITE,
// UNSTABLE4, in the order they were made) and makes them stable (COMMIT);
// without any it does nothing, once a Flush under way has ended (a read
// or write that must come after the kept writes calls it). Writes kept
// while it runs may wait for the next Flush. On an error the writes not known to be stable stay kept.
func (f *File4) Flush(ctx context.Context) error {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	f.mu.Lock()
	ws := f.dirty
	f.mu.Unlock()
	if len(ws) == 0 {
		return nil
	}
	if err := f.sendKept(ctx, ws); err != nil {
		return fmt.Errorf("nfs: sending the writes kept under a write delegation: %w", err)
	}
	f.mu.Lock()
	// Only Flush takes writes away, under flushMu: ws is still the head.
	f.dirty = append([]dirtyWrite(nil), f.dirty[len(ws):]...)
	for _, w := range ws {
		f.dirtyLen -= len(w.data)
	}
	f.mu.Unlock()
	return nil
}

// sendKept sends ws and commits them, twice if the server's write
// verifier changed in between.
func (f *File4) sendKept(ctx context.Context, ws []dirtyWrite) error {
	for range 2 {
		var verf nfs4.Verifier
		first, same := true, true
		for _, w := range ws {
			for done := 0; done < len(w.data); {
				var n int
				var v nfs4.Verifier
				err := f.withState(ctx, func(sid nfs4.StateID) (err error) {
					n, _, v, err = f.c.Write(ctx, f.FH, sid, w.data[done:], w.off+uint64(done), nfs4.Unstable)
					return err
				})
				if err != nil {
					return err
				}
				if n == 0 {
					return errors.New("WRITE wrote nothing")
				}
				if first {
					verf, first = v, false
				} else if v != verf {
					same = false
				}
				done += n
			}
		}
		cv, err := f.c.commit(ctx, f.FH)
		if err != nil {
			return err
		}
		if same && cv == verf {
			return nil
		}
		// The server restarted after some WRITE and may have lost it
		// (RFC 8881 Section 18.32.3): all of them again.
	}
	return errors.New("the server's write verifier changed under the WRITEs twice")
}

// flushHandle flushes the open files of fh.
func (c *Client4) flushHandle(ctx context.Context, fh nfs4.FileHandle) error {
	c.mu.Lock()
	var fs []*File4
	for f := range c.opens {
		if bytes.Equal(f.FH, fh) {
			fs = append(fs, f)
		}
	}
	c.mu.Unlock()
	for _, f := range fs {
		if err := f.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// delegAttrs returns the file's size and change attribute as the client
// sees them, and whether it holds a write delegation (without one the
// server's own are the file's).
func (f *File4) delegAttrs() (size, change uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size, f.change, f.delegated && f.delegType == nfs4.DelegWrite
}
