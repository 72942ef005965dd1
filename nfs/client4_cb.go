package nfs

// The NFSv4.1 client's backchannel (RFC 8881 Section 2.10.3.1, Section
// 20): over RPC-over-RDMA the server's callbacks come on the client's own
// connection (RFC 8167), so the session asks for it in CREATE_SESSION
// (CREATE_SESSION4_FLAG_CONN_BACK_CHAN) when its first connection can
// carry backward calls (rpcrdma.Config.BackwardCredits), and an rpc.Server
// answers CB_NULL and CB_COMPOUND on each such connection's Backchannel.
//
// CB_SEQUENCE keeps one reply cache entry per backchannel slot, so a
// callback the server sends again is answered, not run again. CB_GETATTR
// is answered from a file holding a write delegation. CB_RECALL
// and CB_RECALL_ANY are answered at once; the delegations they name are
// returned (DELEGRETURN) on the fore channel from a goroutine of their
// own, since the reply to the callback must not wait for a fore-channel
// call. A file holding a read delegation serves its reads from what it
// has read (File4.ReadAt); a recall drops that cache first.

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// backSlots is how many callbacks the client takes at once: the
// backchannel's ca_maxrequests. It must stay within the backward credits
// of the connection (RFC 8167 Section 6).
const backSlots = 2

// callbacks is a session's backchannel: the server answering callbacks,
// the delegations it may recall, and the returns in progress.
type callbacks struct {
	c   *Client4
	srv *rpc.Server

	mu     sync.Mutex
	cache  [backSlots]cbSlot
	delegs map[[12]byte]*File4 // by the delegation stateid's "other"
	recall sync.WaitGroup      // DELEGRETURNs and Serve loops in progress
	closed bool

	// Recalls counts the CB_RECALLs served, for tests and stats.
	recalls int
}

type cbSlot struct {
	seq   uint32
	reply []byte
}

func newCallbacks(c *Client4) *callbacks {
	cb := &callbacks{c: c, srv: rpc.NewServer(nil), delegs: map[[12]byte]*File4{}}
	cb.srv.Handle(nfs4.CBProgram, nfs4.CBVersion, nfs4.ProcNull, func(context.Context, *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })
	cb.srv.Handle(nfs4.CBProgram, nfs4.CBVersion, nfs4.ProcCompound, cb.compound)
	return cb
}

// serve answers the callbacks that come on t, if it is an RPC-over-RDMA
// connection with a backward direction; it reports whether it is.
func (cb *callbacks) serve(t rpc.Transport) bool {
	conn, ok := t.(*rpcrdma.Conn)
	if !ok || conn.Backchannel() == nil {
		return false
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.closed {
		return false
	}
	cb.recall.Go(func() { cb.srv.Serve(conn.Backchannel()) })
	return true
}

// close stops serving and waits for returns in progress.
func (cb *callbacks) close() {
	cb.mu.Lock()
	cb.closed = true
	cb.mu.Unlock()
	cb.srv.Close()
	cb.recall.Wait()
}

// reset forgets the callbacks of the last session: a new one starts its
// slots' sequence IDs afresh.
func (cb *callbacks) reset() {
	cb.mu.Lock()
	cb.cache = [backSlots]cbSlot{}
	cb.mu.Unlock()
}

// hold records that f holds the delegation sid.
func (cb *callbacks) hold(sid nfs4.StateID, f *File4) {
	cb.mu.Lock()
	cb.delegs[sid.Other] = f
	cb.mu.Unlock()
}

// release forgets the delegation sid and reports whether it was held.
func (cb *callbacks) release(sid nfs4.StateID) bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	_, ok := cb.delegs[sid.Other]
	delete(cb.delegs, sid.Other)
	return ok
}

// compound answers a CB_COMPOUND (RFC 8881 Section 20.2).
func (cb *callbacks) compound(_ context.Context, call *rpc.Call) (rpc.Body, error) {
	var args nfs4.CBCompoundArgs
	d := rpc.NewBodyDecoder(call.Args)
	derr := args.Decode(&d)
	var unknown *nfs4.UnknownOpError
	if derr != nil && !errors.As(derr, &unknown) {
		return rpc.Body{}, rpc.ErrGarbageArgs
	}
	res := nfs4.CBCompoundRes{Tag: args.Tag}
	if args.MinorVersion != nfs4.MinorVersion {
		res.Status = nfs4.ErrMinorVersMismatch
		return cbBody(&res), nil
	}
	var seq *nfs4.CBSequenceArgs
	for i, op := range args.Ops {
		var r nfs4.CBResOp
		if _, first := op.(*nfs4.CBSequenceArgs); i == 0 && !first {
			// Every CB_COMPOUND of 4.1 starts with CB_SEQUENCE (RFC
			// 8881 Section 20.9.3); nothing else runs without one.
			res.Ops = append(res.Ops, cbFailed(op.CBOp(), nfs4.ErrOpNotInSession))
			res.Status = nfs4.ErrOpNotInSession
			break
		}
		switch a := op.(type) {
		case *nfs4.CBSequenceArgs:
			if i != 0 {
				r = &nfs4.CBSequenceRes{Status: nfs4.ErrSequencePos}
				break
			}
			sr, cached := cb.sequence(a)
			if cached != nil {
				return rpc.Body{XDR: cached}, nil
			}
			if r = sr; sr.Status == nfs4.OK {
				seq = a // its slot, checked, keeps the reply
			}
		case *nfs4.CBRecallArgs:
			r = &nfs4.CBRecallRes{Status: cb.recallOne(a.StateID)}
		case *nfs4.CBRecallAnyArgs:
			cb.recallAll()
			r = &nfs4.CBRecallAnyRes{}
		case *nfs4.CBGetattrArgs:
			r = cb.getattr(a)
		default:
			r = &nfs4.CBIllegalRes{Status: nfs4.ErrNotSupp}
		}
		res.Ops = append(res.Ops, r)
		if res.Status = r.OpStatus(); res.Status != nfs4.OK {
			break
		}
	}
	if unknown != nil && res.Status == nfs4.OK {
		res.Ops = append(res.Ops, &nfs4.CBIllegalRes{Status: nfs4.ErrOpIllegal})
		res.Status = nfs4.ErrOpIllegal
	}
	b := cbBody(&res)
	if seq != nil {
		cb.mu.Lock()
		cb.cache[seq.SlotID] = cbSlot{seq: seq.SequenceID, reply: append([]byte(nil), b.XDR...)}
		cb.mu.Unlock()
	}
	return b, nil
}

// cbFailed returns the result of op failing with st, of op's own type.
func cbFailed(op nfs4.CBOp, st nfs4.Stat) nfs4.CBResOp {
	switch op {
	case nfs4.OpCBRecall:
		return &nfs4.CBRecallRes{Status: st}
	case nfs4.OpCBRecallAny:
		return &nfs4.CBRecallAnyRes{Status: st}
	case nfs4.OpCBGetattr:
		return &nfs4.CBGetattrRes{Status: st}
	}
	return &nfs4.CBIllegalRes{Status: st}
}

func cbBody(r *nfs4.CBCompoundRes) rpc.Body {
	var b rpc.Body
	r.Append(&b)
	return b
}

// sequence checks a CB_SEQUENCE against the session and the slot's last
// sequence ID (RFC 8881 Section 20.9.3): the next one runs, the same one
// is a retry answered from the cache (returned), others fail.
func (cb *callbacks) sequence(a *nfs4.CBSequenceArgs) (*nfs4.CBSequenceRes, []byte) {
	cb.c.mu.Lock()
	known := cb.c.s != nil && a.SessionID == cb.c.s.id || cb.c.pending != nil && a.SessionID == cb.c.pending.id
	cb.c.mu.Unlock()
	switch {
	case !known:
		return &nfs4.CBSequenceRes{Status: nfs4.ErrBadSession}, nil
	case a.SlotID >= backSlots:
		return &nfs4.CBSequenceRes{Status: nfs4.ErrBadSlot}, nil
	}
	cb.mu.Lock()
	s := cb.cache[a.SlotID]
	cb.mu.Unlock()
	switch a.SequenceID {
	case s.seq + 1:
	case s.seq:
		if s.reply != nil {
			return nil, s.reply
		}
		return &nfs4.CBSequenceRes{Status: nfs4.ErrRetryUncachedRep}, nil
	default:
		return &nfs4.CBSequenceRes{Status: nfs4.ErrSeqMisordered}, nil
	}
	return &nfs4.CBSequenceRes{SessionID: a.SessionID, SequenceID: a.SequenceID, SlotID: a.SlotID,
		HighestSlotID: backSlots - 1, TargetHighestSlotID: backSlots - 1}, nil
}

// getattr answers CB_GETATTR (RFC 8881 Section 20.1) for the file
// holding a write delegation of a.FH: its size and change attribute as
// the client sees them (client4_deleg.go), those of the two asked for.
// Without such a file it fails with NFS4ERR_BADHANDLE (Section 20.1.3).
func (cb *callbacks) getattr(a *nfs4.CBGetattrArgs) *nfs4.CBGetattrRes {
	cb.mu.Lock()
	var files []*File4
	for _, f := range cb.delegs {
		if bytes.Equal(f.FH, a.FH) {
			files = append(files, f)
		}
	}
	cb.mu.Unlock()
	for _, f := range files {
		size, change, ok := f.delegAttrs()
		if !ok {
			continue
		}
		var at nfs4.Attr
		if a.AttrRequest.Has(nfs4.AttrChange) {
			at.Mask, at.Change = at.Mask.With(nfs4.AttrChange), change
		}
		if a.AttrRequest.Has(nfs4.AttrSize) {
			at.Mask, at.Size = at.Mask.With(nfs4.AttrSize), size
		}
		return &nfs4.CBGetattrRes{Attr: at}
	}
	return &nfs4.CBGetattrRes{Status: nfs4.ErrBadHandle}
}

// recallOne starts returning the delegation sid: NFS4ERR_BAD_STATEID if
// the client does not hold it (RFC 8881 Section 20.2.3).
func (cb *callbacks) recallOne(sid nfs4.StateID) nfs4.Stat {
	cb.mu.Lock()
	f, ok := cb.delegs[sid.Other]
	if ok {
		cb.recalls++
	}
	cb.mu.Unlock()
	if !ok {
		return nfs4.ErrBadStateID
	}
	cb.returnLater(f)
	return nfs4.OK
}

// recallAll starts returning every delegation (CB_RECALL_ANY asks for
// some; with read delegations only, returning all is simplest and keeps
// nothing the server wants back).
func (cb *callbacks) recallAll() {
	cb.mu.Lock()
	var fs []*File4
	for _, f := range cb.delegs {
		fs = append(fs, f)
	}
	cb.mu.Unlock()
	for _, f := range fs {
		cb.returnLater(f)
	}
}

// returnLater returns f's delegation from a goroutine of its own.
func (cb *callbacks) returnLater(f *File4) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.closed {
		return
	}
	cb.recall.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := f.ReturnDelegation(ctx); err != nil && cb.c.cfg.Logger != nil {
			cb.c.cfg.Logger.Warn("nfs: returning a recalled delegation", "err", err)
		}
	})
}
