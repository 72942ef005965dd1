package nfs

// An NFSv4.1 client (RFC 8881) over package rpc, so over RPC-over-RDMA
// and TCP alike. Mount4 sets up a session: EXCHANGE_ID (SP4_NONE),
// CREATE_SESSION with fore-channel sizes the transport can carry,
// RECLAIM_COMPLETE (a server refuses new OPENs with NFS4ERR_GRACE until
// it has one, RFC 8881 Section 18.51.3), and then PUTROOTFH and GETATTR
// for the root and the server's limits. Every later COMPOUND starts with
// SEQUENCE on a slot of the session's table (slots.go), which gives the
// server's reply cache what it needs to run each request exactly once
// (RFC 8881 Section 2.10.6): a request whose connection drops is sent
// again by the rpc layer unchanged, on the same slot with the same
// sequence ID. A session the server lost (NFS4ERR_BADSESSION,
// NFS4ERR_DEADSESSION) is created again, and a client ID it lost
// (NFS4ERR_STALE_CLIENTID) is exchanged again and the client's open
// state reclaimed (client4_recover.go), before the request is retried.
// While no request runs, SEQUENCE alone renews the lease.
//
// Goroutines: the rpc.Clients' own, one that renews the lease, and one
// for a recovery while it runs; Close stops and waits for them.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// Config4 says how to reach an NFSv4.1 server.
type Config4 struct {
	// Dial connects to the NFS server (TCP or RDMA); each connection of
	// the session comes from it, and so does each reconnection.
	Dial Dialer
	// Conns is how many connections the session spreads its calls over
	// (what Linux calls nconnect): 1 (the default) to 16.
	Conns int
	// Cred is the AUTH_SYS identity of every call; nil selects the
	// process's uid and gid and the host name.
	Cred *rpc.AuthSysParms
	// OwnerID is co_ownerid, which names this client to the server (RFC
	// 8881 Section 2.4); empty selects one made of the host name, the
	// process ID and random bytes, new for each Mount4.
	OwnerID []byte
	// Slots is how many requests may be in flight in the session, asked
	// for as ca_maxrequests; the server may grant fewer. Default 64.
	Slots int
	// Reconnect configures each connection's reconnection; Dial is taken
	// from above.
	Reconnect rpc.ReconnectConfig
	// Logger receives what the client does about its session; nil:
	// nothing.
	Logger *slog.Logger
}

// MaxConns is the most connections a session spreads its calls over, as
// Linux's nconnect allows.
const MaxConns = 16

// Client4 is an NFSv4.1 client of one server. Its methods are safe for
// concurrent use.
type Client4 struct {
	cfg      Config4
	cred     rpc.OpaqueAuth
	conns    []*rpc.Client
	inFlight []atomic.Int32 // per connection, the calls in flight
	next     atomic.Uint32  // round-robin over conns

	// mu guards the session and client ID, which recovery replaces, and
	// the open files, which it reclaims.
	mu         sync.Mutex
	s          *session4
	pending    *session4 // a session a recovery is reclaiming with, not yet s
	clientID   uint64
	csSeq      uint32 // CREATE_SESSION's csa_sequence (RFC 8881 Section 18.36.4)
	verifier   nfs4.Verifier
	exchanged  nfs4.ExchangeIDRes // the last EXCHANGE_ID's results, server owner and scope copied
	opens      map[*File4]struct{}
	recovering chan struct{} // non-nil while a recovery runs; closed when it ends
	recovered  error         // how the last recovery ended
	recStats   recoveryStats
	recoveries sync.WaitGroup // the recovery goroutine, for Close

	root      nfs4.FileHandle
	rootAttr  nfs4.Attr
	lease     time.Duration
	lastCall  atomic.Int64 // unix ns of the last request sent, for renewal
	stop      chan struct{}
	renewDone chan struct{}
	closed    atomic.Bool

	cb        *callbacks
	backable  atomic.Bool // a connection can carry backward calls
	cacheHits atomic.Uint64
	rebinding atomic.Bool    // a BIND_CONN_TO_SESSION is under way
	rebinds   sync.WaitGroup // it, for Close
	rebound   atomic.Int32   // how many succeeded

	checkingRevoked atomic.Bool    // a check of revoked state is under way
	revokeChecks    sync.WaitGroup // it, for Close (client4_revoked.go)
}

// session4 is one session: its ID, slot table and negotiated channels.
type session4 struct {
	id    nfs4.SessionID
	slots *slotTable
	fore  nfs4.ChannelAttrs
	back  nfs4.ChannelAttrs
	flags uint32
}

// Error4 is a failing NFSv4 status from one operation of a COMPOUND; the
// session is fine. errors.Is(err, nfs4.ErrNoEnt) matches it.
type Error4 struct {
	Op   nfs4.Op
	Stat nfs4.Stat
}

func (e *Error4) Error() string { return "nfs: " + e.Op.String() + ": " + e.Stat.Describe() }

// Unwrap returns the status.
func (e *Error4) Unwrap() error { return e.Stat }

// Mount4 connects cfg.Conns connections, sets up a session on them and
// looks up the server's root. The Client4 owns its connections; Close
// ends the session and closes them.
func Mount4(ctx context.Context, cfg Config4) (*Client4, error) {
	if cfg.Dial == nil {
		return nil, errors.New("nfs: Config4.Dial is nil")
	}
	if cfg.Conns == 0 {
		cfg.Conns = 1
	}
	if cfg.Conns < 1 || cfg.Conns > MaxConns {
		return nil, fmt.Errorf("nfs: Config4.Conns %d: want 1 to %d", cfg.Conns, MaxConns)
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 64
	}
	cred, err := authSys(cfg.Cred)
	if err != nil {
		return nil, err
	}
	if len(cfg.OwnerID) == 0 {
		host, _ := os.Hostname()
		var r [8]byte
		rand.Read(r[:])
		cfg.OwnerID = fmt.Appendf(nil, "go-rpcrdma/%s/%d/%x", host, os.Getpid(), r)
	}
	c := &Client4{cfg: cfg, cred: cred, stop: make(chan struct{}), renewDone: make(chan struct{}), opens: map[*File4]struct{}{}}
	c.cb = newCallbacks(c)
	rand.Read(c.verifier[:])
	dial := func(ctx context.Context) (rpc.Transport, error) {
		t, err := cfg.Dial(ctx)
		if err == nil && c.cb.serve(t) {
			c.backable.Store(true)
		}
		return t, err
	}
	for range cfg.Conns {
		rc := cfg.Reconnect
		rc.Dial = dial
		rcli, err := rpc.DialClient(ctx, rc)
		if err != nil {
			c.closeConns()
			return nil, fmt.Errorf("nfs: connecting to the NFS server: %w", err)
		}
		c.conns = append(c.conns, rcli)
	}
	c.inFlight = make([]atomic.Int32, len(c.conns))
	if err := c.establish(ctx); err != nil {
		c.closeConns()
		return nil, err
	}
	if err := c.lookupRoot(ctx); err != nil {
		close(c.renewDone) // no renewal started
		c.Close()
		return nil, err
	}
	go c.renew()
	return c, nil
}

func (c *Client4) closeConns() {
	c.cb.close()
	for _, rc := range c.conns {
		rc.Close()
	}
	close(c.renewDone)
}

// plain makes a COMPOUND without SEQUENCE, as EXCHANGE_ID and
// CREATE_SESSION are sent (RFC 8881 Section 2.10.6.1... they are not
// sequenced), on the first connection.
func (c *Client4) plain(ctx context.Context, arg nfs4.ArgOp, res nfs4.ResOp) error {
	return c.plainOn(ctx, 0, arg, res)
}

// plainOn is plain on connection i.
func (c *Client4) plainOn(ctx context.Context, i int, arg nfs4.ArgOp, res nfs4.ResOp) error {
	var b rpc.Body
	args := nfs4.CompoundArgs{MinorVersion: nfs4.MinorVersion, Ops: []nfs4.ArgOp{arg}}
	args.Append(&b)
	rep, err := c.conns[i].Call(ctx, &rpc.Request{Prog: nfs4.Program, Vers: nfs4.Version, Proc: nfs4.ProcCompound, Cred: c.cred, Args: b})
	if err != nil {
		return fmt.Errorf("nfs: %v: %w", arg.Op(), err)
	}
	r := nfs4.CompoundRes{Ops: []nfs4.ResOp{res}}
	d := rpc.NewBodyDecoder(rep.Results)
	if err := r.Decode(&d); err != nil {
		return fmt.Errorf("nfs: %v reply: %w", arg.Op(), err)
	}
	if len(r.Ops) != 1 || r.Ops[0] != res {
		if r.Status != nfs4.OK {
			return &Error4{Op: arg.Op(), Stat: r.Status}
		}
		return fmt.Errorf("nfs: %v reply holds %d results of other operations", arg.Op(), len(r.Ops))
	}
	if st := res.OpStatus(); st != nfs4.OK {
		return &Error4{Op: arg.Op(), Stat: st}
	}
	return nil
}

// exchangeID asks the server for a client ID (RFC 8881 Section 18.35).
func (c *Client4) exchangeID(ctx context.Context) error {
	args := nfs4.ExchangeIDArgs{Verifier: c.verifier, OwnerID: c.cfg.OwnerID, Flags: nfs4.ExchgIDFlagUseNonPNFS,
		ImplID: &nfs4.ImplID{Domain: "github.com", Name: "go-rpcrdma"}}
	var res nfs4.ExchangeIDRes
	if err := c.plain(ctx, &args, &res); err != nil {
		return err
	}
	res.ServerMajorID = append([]byte(nil), res.ServerMajorID...)
	res.ServerScope = append([]byte(nil), res.ServerScope...)
	c.mu.Lock()
	c.clientID, c.csSeq, c.exchanged = res.ClientID, res.SequenceID, res
	c.mu.Unlock()
	return nil
}

// foreChannel is what a session asks of its fore channel: requests and
// replies large enough for a WRITE or READ of maxIO bytes with their
// COMPOUND around them, and Slots requests at once.
func (c *Client4) foreChannel() nfs4.ChannelAttrs {
	const maxIO = 1 << 20
	return nfs4.ChannelAttrs{MaxRequestSize: maxIO + compoundOverhead, MaxResponseSize: maxIO + compoundOverhead,
		MaxResponseSizeCached: 8 << 10, MaxOperations: 16, MaxRequests: uint32(c.cfg.Slots)}
}

// compoundOverhead is what a session asks for beyond its largest READ
// or WRITE data, and ioOverhead what it keeps for the rest of a READ or
// WRITE COMPOUND: ca_maxrequestsize counts the RPC header with its
// credential (at most 400 bytes of AUTH_SYS) and every operation (RFC
// 8881 Section 18.36.3); SEQUENCE, PUTFH with a 128-byte handle and the
// READ or WRITE header take under 300 more. Linux's server grants 1 MiB
// plus 4 KiB at most.
const (
	compoundOverhead = 8 << 10
	ioOverhead       = 2 << 10
)

// createSession creates a session for the client ID (RFC 8881 Section
// 18.36), asking for the backchannel on the connection it is sent on
// when that connection can carry backward calls (RFC 8167).
// use_conn_in_rdma_mode and CREATE_SESSION4_FLAG_CONN_RDMA stay off:
// Linux's NFS/RDMA starts in RDMA mode and grants neither.
func (c *Client4) createSession(ctx context.Context) (*session4, error) {
	c.mu.Lock()
	args := nfs4.CreateSessionArgs{ClientID: c.clientID, Sequence: c.csSeq, Fore: c.foreChannel(),
		// Backward messages travel inline (RFC 8167 Section 4.1):
		// within the 4 KiB threshold, and backSlots at once.
		Back:      nfs4.ChannelAttrs{MaxRequestSize: 4096, MaxResponseSize: 4096, MaxOperations: 2, MaxRequests: backSlots},
		CBProgram: nfs4.CBProgram, SecParms: []nfs4.CallbackSec{{Flavor: rpc.AuthNone}}}
	if c.backable.Load() {
		args.Flags |= nfs4.CreateSessionFlagConnBackChan
	}
	c.mu.Unlock()
	var res nfs4.CreateSessionRes
	err := c.plain(ctx, &args, &res)
	if e, ok := errors.AsType[*Error4](err); err == nil || ok && e.Stat != nfs4.ErrStaleClientID && e.Stat != nfs4.ErrDelay && e.Stat != nfs4.ErrSeqMisordered {
		// The server took the sequence ID: every reply but these three
		// (and no reply) moves it on (RFC 8881 Section 18.36.4).
		c.mu.Lock()
		c.csSeq++
		c.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	n := min(res.Fore.MaxRequests, maxSlots)
	if n == 0 {
		return nil, fmt.Errorf("nfs: CREATE_SESSION granted 0 slots")
	}
	c.logf("nfs: session created", "slots", n, "max_request", res.Fore.MaxRequestSize, "max_response", res.Fore.MaxResponseSize)
	return &session4{id: res.SessionID, slots: newSlotTable(n), fore: res.Fore, back: res.Back, flags: res.Flags}, nil
}

func (c *Client4) logf(msg string, args ...any) {
	if c.cfg.Logger != nil {
		c.cfg.Logger.Info(msg, args...)
	}
}

// callOpts say how a COMPOUND's data travels (RFC 8267 Section 4): where
// READ data lands, and how large the reply may be.
type callOpts struct {
	resultBufs [][]byte
	maxReply   int // 0: inline
	// session, set by a recovery for its own calls, is the session to
	// use, not yet the client's: such calls pass the recovery's gate and
	// return a session error rather than start another recovery.
	session *session4
}

// maxRetries bounds the retries of one request after session errors and
// NFS4ERR_DELAY.
const maxRetries = 8

// compound makes a COMPOUND of SEQUENCE and ops and decodes the results
// into res, which must hold one value per op (of its type); it returns
// the first failing operation's status as an *Error4. A call whose reply
// was lost is resent by the rpc layer on the same slot and sequence ID.
// While a recovery runs, the call waits for it first. An operation the
// server refuses with NFS4ERR_GRACE (a new OPEN while the server lets
// clients reclaim their state after a restart, RFC 8881 Section 8.4.2)
// did not run: the call is made again after a wait, until ctx ends.
func (c *Client4) compound(ctx context.Context, ops []nfs4.ArgOp, res []nfs4.ResOp, o callOpts) error {
	var lastErr error
	wait := graceWait
	for attempt := 0; attempt < maxRetries; attempt++ {
		if o.session == nil {
			if err := c.waitRecovery(ctx); err != nil {
				return err
			}
		}
		retry, err := c.compoundOnce(ctx, ops, res, o)
		pause := time.Duration(attempt+1) * 20 * time.Millisecond
		if e, ok := errors.AsType[*Error4](err); ok && e.Op != nfs4.OpSequence && e.Stat == nfs4.ErrGrace {
			retry, pause, wait = true, wait, min(2*wait, maxGraceWait)
			attempt-- // as long as the grace period lasts, which ctx bounds
			c.recStats.graceWaits.Add(1)
		}
		if !retry {
			return err
		}
		lastErr = err
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
	}
	return lastErr
}

// graceWait and maxGraceWait bound the waits of a call the server
// refuses with NFS4ERR_GRACE: the first, and the longest after doubling.
// Linux's client waits from 100 ms up to 15 s (nfs4_delay); a grace
// period is a lease or two, so a wait of over a second gains nothing.
const (
	graceWait    = 100 * time.Millisecond
	maxGraceWait = 2 * time.Second
)

// compoundOnce makes one attempt and reports whether to retry.
func (c *Client4) compoundOnce(ctx context.Context, ops []nfs4.ArgOp, res []nfs4.ResOp, o callOpts) (bool, error) {
	s := o.session
	if s == nil {
		c.mu.Lock()
		s = c.s
		c.mu.Unlock()
	}
	sl, err := s.slots.acquire(ctx)
	if err != nil {
		return false, err
	}
	for {
		seq := nfs4.SequenceArgs{SessionID: s.id, SequenceID: sl.seq, SlotID: sl.id, HighestSlotID: sl.highest, CacheThis: cacheThis(ops)}
		var seqRes nfs4.SequenceRes
		err := c.send(ctx, &seq, &seqRes, ops, res, o)
		var st nfs4.Stat
		if e, ok := errors.AsType[*Error4](err); ok && e.Op == nfs4.OpSequence {
			st = e.Stat
		} else if err != nil && !ok {
			// No reply: the request may or may not have run.
			s.slots.release(sl, slotInterrupted, 0, 0, false)
			return false, err
		}
		switch st {
		case nfs4.OK:
			if seqRes.SessionID != s.id || seqRes.SlotID != sl.id || seqRes.SequenceID != sl.seq {
				// Not this request's reply: the session is out of step, and
				// nothing in it can be trusted (RFC 8881 Section 18.46.3).
				s.slots.release(sl, slotInterrupted, 0, 0, false)
				return false, fmt.Errorf("nfs: SEQUENCE of slot %d sequence %d answered for slot %d sequence %d of another session or request",
					sl.id, sl.seq, seqRes.SlotID, seqRes.SequenceID)
			}
			s.slots.release(sl, slotDone, seqRes.HighestSlotID, seqRes.TargetHighestSlotID, true)
			if seqRes.StatusFlags&(nfs4.SeqStatusCBPathDown|nfs4.SeqStatusCBPathDownSession) != 0 {
				c.rebindLater(s)
			}
			if seqRes.StatusFlags&revokedFlags != 0 {
				c.checkRevokedLater()
			}
			// A retry whose first reply the server did not keep (the
			// request asked for no caching, being idempotent): run it
			// anew on a fresh sequence ID (RFC 8881 Section 2.10.6.1.3).
			return errors.Is(err, nfs4.ErrRetryUncachedRep) && !cacheThis(ops), err
		case nfs4.ErrSeqMisordered:
			if again, ok := s.slots.misordered(sl); ok {
				sl = again
				continue
			}
			s.slots.release(sl, slotNotSeen, 0, 0, false)
			return false, err
		case nfs4.ErrDelay:
			s.slots.release(sl, slotNotSeen, 0, 0, false)
			return true, err
		case nfs4.ErrRetryUncachedRep:
			// The server saw this sequence ID but kept no reply: the
			// slot moves on, and an idempotent request runs anew.
			s.slots.release(sl, slotDone, 0, 0, false)
			return !cacheThis(ops), err
		case nfs4.ErrBadSession, nfs4.ErrDeadSession, nfs4.ErrStaleClientID, nfs4.ErrBadSlot:
			s.slots.release(sl, slotNotSeen, 0, 0, false)
			if o.session != nil {
				return false, err // the recovery's own call: it starts over
			}
			if rerr := c.recover(ctx, s, st); rerr != nil {
				return false, rerr
			}
			return true, err
		default:
			s.slots.release(sl, slotNotSeen, 0, 0, false)
			return false, err
		}
	}
}

// cacheThis reports whether a COMPOUND of ops must have its reply kept
// by the server's reply cache (sa_cachethis): it changes something, so a
// retry must be answered from the cache, never run again (RFC 8881
// Section 2.10.6.1.3). Reading operations may run twice; a retry of one
// whose reply was not kept is sent again as a new request.
func cacheThis(ops []nfs4.ArgOp) bool {
	for _, o := range ops {
		switch o.Op() {
		case nfs4.OpCreate, nfs4.OpRemove, nfs4.OpRename, nfs4.OpLink, nfs4.OpOpen, nfs4.OpClose, nfs4.OpSetattr,
			nfs4.OpWrite, nfs4.OpDelegReturn, nfs4.OpReclaimComplete, nfs4.OpFreeStateID:
			return true
		}
	}
	return false
}

// compoundArgsCap is the XDR buffer send starts with: the COMPOUND's
// header, SEQUENCE (RFC 8881 Section 18.46) and a PUTFH of the largest
// file handle (NFS4_FHSIZE, 128 bytes) take 184 bytes, a READ 32 more
// and a WRITE 36 (its data travels apart, as a DDP item).
const compoundArgsCap = 256

// send makes the call and decodes its results; an error is an *Error4
// for a failing operation (SEQUENCE's included), or an rpc or decoding
// error.
func (c *Client4) send(ctx context.Context, seq *nfs4.SequenceArgs, seqRes *nfs4.SequenceRes, ops []nfs4.ArgOp, res []nfs4.ResOp, o callOpts) error {
	// The operations, SEQUENCE first, in an array on the stack that holds
	// the usual COMPOUND (SEQUENCE, PUTFH and one more), and the call's
	// XDR in one buffer large enough for such a COMPOUND's arguments, so
	// that a READ or a WRITE does not grow it several times while it is
	// encoded.
	var argArr [4]nfs4.ArgOp
	all := append(append(argArr[:0], seq), ops...)
	b := rpc.Body{XDR: make([]byte, 0, compoundArgsCap)}
	args := nfs4.CompoundArgs{MinorVersion: nfs4.MinorVersion, Ops: all}
	args.Append(&b)
	i := c.conn()
	c.lastCall.Store(time.Now().UnixNano())
	c.inFlight[i].Add(1)
	rep, err := c.conns[i].Call(ctx, &rpc.Request{Prog: nfs4.Program, Vers: nfs4.Version, Proc: nfs4.ProcCompound, Cred: c.cred, Args: b,
		ResultBufs: o.resultBufs, MaxReply: o.maxReply})
	c.inFlight[i].Add(-1)
	if err != nil {
		return fmt.Errorf("nfs: COMPOUND %v: %w", opNames(ops), err)
	}
	given := make([]nfs4.ResOp, 0, len(res)+1)
	given = append(append(given, seqRes), res...)
	r := nfs4.CompoundRes{Ops: given}
	d := rpc.NewBodyDecoder(rep.Results)
	if err := r.Decode(&d); err != nil {
		return fmt.Errorf("nfs: COMPOUND %v reply: %w", opNames(ops), err)
	}
	return checkResults(all, r)
}

// conn returns the index of the connection for the next call:
// round-robin, skipping a connection whose calls in flight are above the
// average, as Linux spreads calls over nconnect transports
// (xprt_iter_next_entry_roundrobin).
func (c *Client4) conn() int {
	n := uint32(len(c.conns))
	if n == 1 {
		return 0
	}
	start := c.next.Add(1)
	var total int32
	for i := range c.inFlight {
		total += c.inFlight[i].Load()
	}
	for k := range n {
		i := (start + k) % n
		if c.inFlight[i].Load()*int32(n) <= total {
			return int(i)
		}
	}
	return int(start % n)
}

// rebindLater binds the backchannel of session s to a connection again
// (BIND_CONN_TO_SESSION, RFC 8881 Section 18.34) after the server said
// its callback path is down, as it is when the connection the backchannel
// was on was lost: the backchannel is bound explicitly, never by the
// first SEQUENCE on a new connection. One bind runs at a time, on a
// goroutine of its own; Close waits for it.
func (c *Client4) rebindLater(s *session4) {
	if !c.backable.Load() || s.flags&nfs4.CreateSessionFlagConnBackChan == 0 || c.closed.Load() || !c.rebinding.CompareAndSwap(false, true) {
		return
	}
	c.rebinds.Go(func() {
		defer c.rebinding.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.bindBack(ctx, s, int(c.next.Load())%len(c.conns)); err != nil {
			if c.cfg.Logger != nil {
				c.cfg.Logger.Warn("nfs: binding the backchannel again", "err", err)
			}
			return
		}
		c.rebound.Add(1)
	})
}

// bindBack binds session s's backchannel to connection i, with RDMA mode
// off both ways: Linux's client refuses a server that answers it on
// (RFC 8881 Section 18.34.3 leaves the mode to the peers). It asks for
// CDFC4_FORE_OR_BOTH, as Linux's client does: the connection is already
// bound to the fore channel by the SEQUENCEs sent on it, and a server
// refuses CDFC4_BACK_OR_BOTH on such a connection with NFS4ERR_INVAL
// (RFC 8881 Section 18.34.3, last paragraph).
func (c *Client4) bindBack(ctx context.Context, s *session4, i int) error {
	var res nfs4.BindConnToSessionRes
	if err := c.plainOn(ctx, i, &nfs4.BindConnToSessionArgs{SessionID: s.id, Dir: nfs4.CDFC4ForeOrBoth}, &res); err != nil {
		return err
	}
	if res.UseRDMA {
		return errors.New("nfs: BIND_CONN_TO_SESSION: the server turned RDMA mode on, which was not asked for")
	}
	if res.Dir != nfs4.CDFC4Back && res.Dir != nfs4.CDFC4ForeOrBoth {
		return fmt.Errorf("nfs: BIND_CONN_TO_SESSION bound the connection for %v only", res.Dir)
	}
	return nil
}

// renew sends SEQUENCE alone whenever the session has been idle for a
// third of the lease, so the server keeps the client's state (RFC 8881
// Section 8.3).
func (c *Client4) renew() {
	defer close(c.renewDone)
	every := max(c.lease/3, time.Second)
	t := time.NewTicker(every / 4)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, c.lastCall.Load())) < every {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		err := c.compound(ctx, nil, nil, callOpts{})
		cancel()
		if err != nil && c.cfg.Logger != nil {
			c.cfg.Logger.Warn("nfs: renewing the lease", "err", err)
		}
	}
}

// lookupRoot finds the root's handle and the server's limits.
func (c *Client4) lookupRoot(ctx context.Context) error {
	var gfh nfs4.GetFHRes
	var ga nfs4.GetattrRes
	mask := nfs4.BitmapOf(nfs4.AttrSupportedAttrs, nfs4.AttrType, nfs4.AttrFileID, nfs4.AttrLeaseTime, nfs4.AttrMaxRead, nfs4.AttrMaxWrite, nfs4.AttrMaxFileSize)
	err := c.compound(ctx, []nfs4.ArgOp{&nfs4.PutRootFHArgs{}, &nfs4.GetFHArgs{}, &nfs4.GetattrArgs{AttrRequest: mask}},
		[]nfs4.ResOp{&nfs4.PutRootFHRes{}, &gfh, &ga}, callOpts{})
	if err != nil {
		return err
	}
	c.root = append(nfs4.FileHandle(nil), gfh.FH...)
	c.rootAttr = ga.Attr
	c.lease = time.Duration(max(ga.Attr.LeaseTime, 1)) * time.Second
	return nil
}

// Info4 is what a session negotiated, for a probe.
type Info4 struct {
	ClientID                 uint64
	SessionID                nfs4.SessionID
	Slots                    int    // the table's size (ca_maxrequests granted)
	TargetHighestSlot        uint32 // highest slot ID in use now
	Fore, Back               nfs4.ChannelAttrs
	Backchannel              bool // CREATE_SESSION4_FLAG_CONN_BACK_CHAN granted
	Lease                    time.Duration
	ServerOwner, ServerScope string
	ServerMinorID            uint64
	Implementation           string // the server's nfs_impl_id4, if it sent one
	Conns                    int
	MaxRead, MaxWrite        int
	// Recalls counts the delegations the server recalled (CB_RECALL),
	// and CacheHits the reads served from what a file held under a
	// delegation.
	Recalls, CacheHits int
	// Recoveries counts the sessions or client IDs the server lost and
	// the client made again; Reclaimed the opens it reclaimed with
	// CLAIM_PREVIOUS (RFC 8881 Section 8.4.2), with DelegationsReclaimed
	// the delegations among them, and ReclaimRefused those the server
	// refused; Reopened the opens made again with CLAIM_FH after their
	// state was lost; GraceWaits the calls that met NFS4ERR_GRACE and
	// were sent again; Revoked the stateids the server revoked and the
	// client freed.
	Recoveries, Reclaimed, DelegationsReclaimed, ReclaimRefused, Reopened, GraceWaits, Revoked int
}

// Info returns what the session negotiated.
func (c *Client4) Info() Info4 {
	c.mu.Lock()
	s, x := c.s, c.exchanged
	id := c.clientID
	c.mu.Unlock()
	n, hi := s.slots.size()
	in := Info4{ClientID: id, SessionID: s.id, Slots: n, TargetHighestSlot: hi, Fore: s.fore, Back: s.back,
		Backchannel: s.flags&nfs4.CreateSessionFlagConnBackChan != 0, Lease: c.lease,
		ServerOwner: string(x.ServerMajorID), ServerScope: string(x.ServerScope), ServerMinorID: x.ServerMinorID,
		Conns: len(c.conns), MaxRead: c.MaxRead(), MaxWrite: c.MaxWrite(), CacheHits: int(c.cacheHits.Load()),
		Recoveries: int(c.recStats.recoveries.Load()), Reclaimed: int(c.recStats.reclaimed.Load()),
		DelegationsReclaimed: int(c.recStats.delegations.Load()), ReclaimRefused: int(c.recStats.reclaimFailed.Load()),
		Reopened: int(c.recStats.reopened.Load()), GraceWaits: int(c.recStats.graceWaits.Load()),
		Revoked: int(c.recStats.revoked.Load())}
	c.cb.mu.Lock()
	in.Recalls = c.cb.recalls
	c.cb.mu.Unlock()
	if x.ImplID != nil {
		in.Implementation = x.ImplID.Domain + " " + x.ImplID.Name
	}
	return in
}

// MaxRead and MaxWrite are the largest READ and WRITE one COMPOUND
// carries: the server's maxread and maxwrite attributes, within what the
// session's fore channel allows and MaxData.
func (c *Client4) MaxRead() int {
	c.mu.Lock()
	resp := int(c.s.fore.MaxResponseSize)
	c.mu.Unlock()
	return ioLimit(c.rootAttr.MaxRead, resp)
}

// MaxWrite: see MaxRead.
func (c *Client4) MaxWrite() int {
	c.mu.Lock()
	req := int(c.s.fore.MaxRequestSize)
	c.mu.Unlock()
	return ioLimit(c.rootAttr.MaxWrite, req)
}

// ioLimit is the largest READ or WRITE: the attribute, within the
// channel's size less room for the COMPOUND, at least 4 KiB and at most
// 1 MiB.
func ioLimit(attr uint64, channel int) int {
	n := min(int64(1<<20), int64(channel)-ioOverhead)
	if attr > 0 {
		n = min(n, int64(min(attr, 1<<30)))
	}
	return int(max(n, 4096))
}

// Root returns the handle of the server's root.
func (c *Client4) Root() nfs4.FileHandle { return c.root }

// Close ends the session and the client ID (DESTROY_SESSION,
// DESTROY_CLIENTID, errors ignored: the server forgets them at the end
// of the lease anyway) and closes the connections; calls in flight fail.
func (c *Client4) Close() error {
	// Under mu, so that a recover starting its goroutine sees it.
	c.mu.Lock()
	was := c.closed.Swap(true)
	c.mu.Unlock()
	if was {
		return nil
	}
	close(c.stop)
	<-c.renewDone
	c.rebinds.Wait()
	c.recoveries.Wait()
	c.revokeChecks.Wait()
	c.cb.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.mu.Lock()
	s, id := c.s, c.clientID
	c.mu.Unlock()
	if s != nil {
		c.plain(ctx, &nfs4.DestroySessionArgs{SessionID: s.id}, &nfs4.DestroySessionRes{})
		c.plain(ctx, &nfs4.DestroyClientIDArgs{ClientID: id}, &nfs4.DestroyClientIDRes{})
	}
	var err error
	for _, rc := range c.conns {
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// String names the client for logs: its client ID.
func (c *Client4) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "nfs4 client " + strconv.FormatUint(c.clientID, 16)
}

// MinorVersionOffered asks the server on rc whether it speaks NFSv4 minor
// version minor: a COMPOUND of PUTROOTFH alone, which a server without it
// answers NFS4ERR_MINOR_VERS_MISMATCH (RFC 8881 Section 16.2.3), one with
// it OK (4.0) or NFS4ERR_OP_NOT_IN_SESSION (4.1 and later, which want
// SEQUENCE first). Other answers are errors.
func MinorVersionOffered(ctx context.Context, rc *rpc.Client, minor uint32, cred rpc.OpaqueAuth) (bool, error) {
	var b rpc.Body
	args := nfs4.CompoundArgs{MinorVersion: minor, Ops: []nfs4.ArgOp{&nfs4.PutRootFHArgs{}}}
	args.Append(&b)
	rep, err := rc.Call(ctx, &rpc.Request{Prog: nfs4.Program, Vers: nfs4.Version, Proc: nfs4.ProcCompound, Cred: cred, Args: b})
	if err != nil {
		return false, fmt.Errorf("nfs: COMPOUND of minor version %d: %w", minor, err)
	}
	var r nfs4.CompoundRes
	d := rpc.NewBodyDecoder(rep.Results)
	if err := r.Decode(&d); err != nil {
		return false, fmt.Errorf("nfs: COMPOUND of minor version %d reply: %w", minor, err)
	}
	switch r.Status {
	case nfs4.OK, nfs4.ErrOpNotInSession:
		return true, nil
	case nfs4.ErrMinorVersMismatch:
		return false, nil
	}
	return false, &Error4{Op: nfs4.OpPutRootFH, Stat: r.Status}
}
