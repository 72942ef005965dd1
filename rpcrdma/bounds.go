package rpcrdma

// Bounds: what a responder's peers can make it hold. A Listener refuses
// connections beyond its limits before anything is allocated for them,
// closes connections that do not finish their handshake or fall idle, and
// draws the memory each call can make it hold (pulled arguments, results
// and replies) from budgets per call, per connection and per Listener,
// before any of that memory is allocated or any RDMA Read posted.
//
// A call's share is reserved when it is received: the bytes of its read
// chunks plus the bytes it offered for its reply (write chunks and reply
// chunk), which bound what its reply can make this side hold. A call whose
// share exceeds what it may hold is refused with ERR_CHUNK. Otherwise the
// share is taken from its connection's budget, then from the Listener's;
// a connection at its share waits (on a side goroutine) until its calls
// give some back, and the Listener's budget serves waiting connections in
// arrival order, so none is starved. The share is given back when the
// rpc.Server releases the call. Reserving the reply's share at receive
// time means a reply never waits for memory: handlers holding their
// calls' arguments cannot deadlock waiting for each other's.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// Defaults of Bounds. knfsd's counterparts are in the package
// documentation.
const (
	// DefaultMaxConns bounds the connections a Listener keeps open.
	DefaultMaxConns = 16384
	// DefaultMaxConnsPerAddr bounds the connections from one host.
	DefaultMaxConnsPerAddr = 1024
	// DefaultHandshakeTimeout bounds the time from a connection request
	// to its first message. It is long because the first message is the
	// requester's first call, which a program may make a while after it
	// dials; connections that send nothing are also bounded in number
	// (MaxConns, MaxConnsPerAddr), and the provider bounds its own
	// handshake (MPA on iWARP) much more tightly.
	DefaultHandshakeTimeout = time.Minute
	// DefaultIdleTimeout closes a connection without calls, as knfsd
	// closes connections idle for its 6-minute aging period.
	DefaultIdleTimeout = 6 * time.Minute
	// DefaultCallMemory bounds one call's pulled arguments and reply.
	DefaultCallMemory = 16 << 20
	// DefaultConnMemory bounds what one connection's calls hold at once.
	DefaultConnMemory = 64 << 20
	// DefaultServerMemory bounds what all of a Listener's calls hold at
	// once.
	DefaultServerMemory = 1 << 30
	// DefaultPullTimeout bounds how long a call's RDMA Reads may take.
	DefaultPullTimeout = 30 * time.Second
	// DefaultLogInterval is how often a repeated limit is logged.
	DefaultLogInterval = 10 * time.Second
)

// Bounds limit what peers can make a responder hold. The zero value gives
// every documented default; a negative count or duration means no limit.
// A requester ignores them.
type Bounds struct {
	// MaxConns is the most connections a Listener keeps open. Each open
	// connection registers its receive and send buffers: without
	// SharedReceives, (Grant.Max + 2 + BackwardCredits) receives of
	// InlineRecv bytes and as many send buffers of InlineSend bytes,
	// 2 × 130 × 4 KiB with the defaults; with SharedReceives, two send
	// buffers of InlineSend bytes and no receive. Registered memory is
	// allocated when the connection is set up and becomes resident as
	// messages touch it. Each also holds the provider's state (over
	// iWARP a socket, a read buffer and work request rings; see package
	// iwarp), and three goroutines and their stacks: its loop, the
	// provider's reader and writer (and rpc.Server's, when served). A
	// request beyond it closes a connection to make room, before anything is
	// allocated for it: the oldest connection that has not sent its first
	// message (EvictHandshake), else the least recently active one with no
	// call in flight (EvictIdle). A connection with a call in flight is
	// never closed; when every one has, the request is rejected
	// (LimitMaxConns). Default DefaultMaxConns.
	MaxConns int
	// MaxConnsPerAddr is the most connections open from one remote host
	// (the address without its port); a request beyond it makes room
	// among that host's connections as at MaxConns, or is rejected
	// (LimitMaxConnsPerAddr). Default DefaultMaxConnsPerAddr.
	MaxConnsPerAddr int

	// HandshakeTimeout bounds the time from a connection request until
	// the first message arrives on the connection: the RFC 8797
	// exchange (the provider's own handshake, MPA on iWARP, is bounded
	// by the provider) and the requester's first Send, which on iWARP
	// completes the MPA exchange (RFC 5044 section 7.1.2).
	// LimitHandshakeTimeout. Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection on which no call has arrived and
	// none is being served for between IdleTimeout and twice that;
	// LimitIdle. A requester that is still there reconnects, as Linux's
	// does. Default DefaultIdleTimeout.
	IdleTimeout time.Duration

	// CallMemory is the most bytes one call may make this side hold: its
	// read chunks plus what it offered for its reply. A call asking more
	// is refused with ERR_CHUNK before anything is allocated
	// (RejectTooLarge). Default DefaultCallMemory.
	CallMemory int64
	// ConnMemory is the most bytes one connection's calls hold at once;
	// a call that would go beyond waits for the connection's earlier
	// calls. Default DefaultConnMemory.
	ConnMemory int64
	// ServerMemory is the most bytes all of a Listener's calls hold at
	// once; calls wait in arrival order. Default DefaultServerMemory.
	ServerMemory int64

	// PullTimeout bounds how long a call's RDMA Reads may take; a peer
	// that withholds its Read Responses loses the connection
	// (LimitPullTimeout), which releases what the call held. Default
	// DefaultPullTimeout.
	PullTimeout time.Duration

	// SharedReceives, if positive, makes the Listener's connections
	// receive from one pool of that many receives (a shared receive
	// queue, which the provider must offer: rdma.SharedRecvProvider)
	// instead of receives of their own, and grant credits from it: one
	// at first, more while a connection's calls keep its grant busy, up
	// to Grant.Max (pool.go). A request is refused when the pool has no
	// receive left to promise (LimitReceives). Zero, the default, gives
	// each connection Grant.Max receives of its own.
	//
	// The pool registers SharedReceives × InlineRecv bytes once, for the
	// Listener; a connection then registers 2 × InlineSend bytes of send
	// buffers, whatever its grant, instead of
	// (Grant.Max + 2 + BackwardCredits) × (InlineRecv + InlineSend). Each
	// connection is promised one receive while it is open, and the pool
	// keeps depth/16 (at least 2, at most 64) receives for messages
	// outside the credit count, so it also bounds the connections open
	// at once to SharedReceives less that spare. The provider may lower
	// the depth (ListenerStats.SharedReceives says what is in force).
	SharedReceives int

	// LogInterval is how often a repeated limit is logged: the first
	// time a limit acts on a remote host it is logged at once, then once
	// per LogInterval with the count, per Reason and host, and at most a
	// few lines a second in all. Negative logs every one. Default
	// DefaultLogInterval.
	LogInterval time.Duration

	// ArgLimit, if set, tells how many bytes of read chunks (DDP-eligible
	// arguments, RFC 8166 section 3.4.5) a procedure accepts: a call
	// whose data chunks add up to more is refused with ERR_CHUNK
	// (RejectTooLarge) before they are pulled. It sees the call's
	// program, version and procedure; negative means no chunks at all,
	// zero only the budgets. It is called on the connection's receive
	// path and must not block.
	ArgLimit func(prog, vers, proc uint32) int64
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0 // no limit
	}
	return v
}

func (b *Bounds) maxConns() int        { return orDefault(b.MaxConns, DefaultMaxConns) }
func (b *Bounds) maxConnsPerAddr() int { return orDefault(b.MaxConnsPerAddr, DefaultMaxConnsPerAddr) }
func (b *Bounds) handshakeTimeout() time.Duration {
	return orDefault(b.HandshakeTimeout, DefaultHandshakeTimeout)
}
func (b *Bounds) idleTimeout() time.Duration { return orDefault(b.IdleTimeout, DefaultIdleTimeout) }
func (b *Bounds) pullTimeout() time.Duration { return orDefault(b.PullTimeout, DefaultPullTimeout) }
func (b *Bounds) logInterval() time.Duration { return orDefault(b.LogInterval, DefaultLogInterval) }
func (b *Bounds) callMemory() int64          { return orDefault(b.CallMemory, DefaultCallMemory) }
func (b *Bounds) connMemory() int64          { return orDefault(b.ConnMemory, DefaultConnMemory) }
func (b *Bounds) serverMemory() int64        { return orDefault(b.ServerMemory, DefaultServerMemory) }
func (b *Bounds) memoryLimit() (n int64, ok bool) {
	n, ok = int64(1<<62), false
	for _, v := range [...]int64{b.callMemory(), b.connMemory(), b.serverMemory()} {
		if v > 0 {
			n, ok = min(n, v), true
		}
	}
	return n, ok
}

// ErrLimit is what a connection closed by a limit of Bounds ended with,
// wrapped in its *ConnError with the Reason.
var ErrLimit = errors.New("rpcrdma: closed by a limit")

// LimitError is why a connection was closed by a limit of Bounds; it
// matches ErrLimit.
type LimitError struct {
	Reason Reason
	Remote net.Addr
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("rpcrdma: connection from %v closed: %s", e.Remote, e.Reason)
}

func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// budget is a count of bytes that callers take and give back, up to a
// limit; a limit of 0 means none. A take that does not fit waits, and
// waiters are served in arrival order: a small take does not overtake a
// large one that came first, so none starves. Its methods are safe for
// concurrent use.
type budget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	waiters []*budgetWaiter // first come, first served
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are taken for the waiter
}

func newBudget(limit int64) *budget { return &budget{limit: limit} }

// fits reports whether n more bytes fit now; b.mu is held.
func (b *budget) fits(n int64) bool { return b.limit == 0 || b.used+n <= b.limit }

// tryTake takes n bytes if they fit now and nobody waits before it.
func (b *budget) tryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || !b.fits(n) {
		return false
	}
	b.used += n
	return true
}

// take takes n bytes, waiting in line until they fit or ctx is done. n
// must not exceed the limit: the caller refuses such requests first.
func (b *budget) take(ctx context.Context, n int64) error {
	if b.tryTake(n) {
		return nil
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fits(n) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // served meanwhile: give it back
		b.used -= n
		b.serveLocked()
	default:
		for i, x := range b.waiters {
			if x == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		b.serveLocked() // the next in line may fit now
	}
	return ctx.Err()
}

// give gives back n bytes taken before and serves the waiters that fit.
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("rpcrdma: budget given back more than taken")
	}
	b.serveLocked()
}

func (b *budget) serveLocked() {
	for len(b.waiters) > 0 && b.fits(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

// inUse returns the bytes taken and not given back.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// limit counts and logs a limit acting on the peer at remote; the log
// says a repeated one once per Bounds.LogInterval (limitlog.go).
func (l *Listener) limit(r Reason, remote net.Addr) {
	l.reasons[r].Add(1)
	l.limitLog.event(r, remote)
}

// ListenerStats are a Listener's figures at one moment.
type ListenerStats struct {
	Conns      int   // connections open
	Memory     int64 // bytes its connections' calls hold (Bounds.ServerMemory's budget)
	Registered int64 // bytes registered now by its open connections: rings, pulled chunks, replies
	// SharedReceives is the receives in the shared receive pool
	// (Bounds.SharedReceives, which the provider may have lowered), 0
	// without one.
	SharedReceives int
	// Limits counts, by Reason, the limits of Bounds that acted on the
	// Listener's requests and connections; only the IsLimit reasons and
	// RejectTooLarge are counted here. EvictHandshake includes the
	// handshakes the provider closed before they reached the Listener
	// (iwarp's MPA handshakes).
	Limits [NumReasons]uint64
}

// handshakeEvicter is an rdma.Listener that closes handshakes in progress
// to make room for newer ones (iwarp.Listener): they count as
// EvictHandshake.
type handshakeEvicter interface {
	HandshakesEvicted() uint64
}

// Stats returns the Listener's figures. It may be called at any time
// from any goroutine.
func (l *Listener) Stats() ListenerStats {
	var s ListenerStats
	l.mu.Lock()
	s.Conns = l.conns
	l.mu.Unlock()
	s.Memory = l.mem.inUse()
	s.Registered = l.registered.Load()
	if l.pool != nil {
		s.SharedReceives = l.pool.depth
	}
	for r := range l.reasons {
		s.Limits[r] = l.reasons[r].Load()
	}
	if e, ok := l.l.(handshakeEvicter); ok {
		s.Limits[EvictHandshake] += e.HandshakesEvicted()
	}
	return s
}

// ringBytes returns the bytes of c's receive and send rings.
func (c *Conn) ringBytes() int64 {
	var n int64
	for _, mr := range [...]rdma.MR{c.recvMR, c.sendMR} {
		if mr != nil {
			n += int64(len(mr.Bytes()))
		}
	}
	return n
}

// closeFor closes c, a responder, for the limit r.
func (c *Conn) closeFor(r Reason) {
	c.stats.reasons[r].Add(1)
	remote := c.rc.RemoteAddr()
	c.ln.limit(r, remote)
	c.fail(&ConnError{Op: "limit", Err: &LimitError{Reason: r, Remote: remote}})
}

// connBounds is what a responder keeps to apply its Listener's Bounds to
// its connection: the connection's memory budget, the messages received
// (counted by onMessage, read by the idle check), the idle check's timer
// and what it saw last (its own), and what fail runs once (dial.go).
type connBounds struct {
	mem         *budget
	received    atomic.Uint64
	idleMu      sync.Mutex
	idle        *time.Timer // guarded by idleMu
	idleSeen    uint64      // messages received at the last check
	idleChecked bool        // a check has run: the next ends an idle period
	watchStart  time.Time   // when watch started
	onEnd       func()      // before the rdma.Conn is closed
	onClosed    func()      // after
}

// watch starts the handshake and idle checks of a responder.
func (r *responder) watch() {
	c := r.c
	r.idleMu.Lock()
	defer r.idleMu.Unlock()
	r.watchStart = time.Now()
	if d := r.nextCheck(0); d > 0 && c.Err() == nil {
		r.idle = c.afterFunc(d, r.checkIdle)
	}
}

// nextCheck returns when the next check is due, given the messages
// received so far; 0 for none.
func (r *responder) nextCheck(received uint64) time.Duration {
	b := &r.c.cfg.Bounds
	next := b.idleTimeout()
	if hs := b.handshakeTimeout(); received == 0 && hs > 0 {
		left := max(hs-time.Since(r.watchStart), time.Millisecond)
		if next == 0 || left < next {
			next = left
		}
	}
	return next
}

// stopWatch stops the checks; fail calls it.
func (r *responder) stopWatch() {
	r.idleMu.Lock()
	defer r.idleMu.Unlock()
	r.c.stopTimer(r.idle)
}

// checkIdle runs on the idle timer. A connection that has received
// nothing within HandshakeTimeout of its request failed its handshake;
// one that has received nothing since the last check, an IdleTimeout ago,
// and has no call in progress is idle.
func (r *responder) checkIdle() {
	c := r.c
	b := &c.cfg.Bounds
	n := r.received.Load()
	switch {
	case c.Err() != nil:
		return
	case n == 0 && b.handshakeTimeout() > 0 && time.Since(r.watchStart) >= b.handshakeTimeout():
		c.closeFor(LimitHandshakeTimeout)
		return
	case b.idleTimeout() > 0 && r.idleChecked && n == r.idleSeen && r.mem.inUse() == 0 && r.outstanding() == 0:
		c.closeFor(LimitIdle)
		return
	}
	// An idle period runs from this check to the next.
	r.idleChecked, r.idleSeen = true, n
	r.idleMu.Lock()
	defer r.idleMu.Unlock()
	if d := r.nextCheck(n); d > 0 && c.Err() == nil {
		c.resetTimer(r.idle, d)
	}
}

// callNeed returns the bytes a call may make this side hold: its read
// chunks, and its write chunks and reply chunk, which bound its reply.
// Sums saturate rather than wrap.
func callNeed(h *wire.Header) uint64 {
	var n uint64
	add := func(k uint64) { n = min(n+k, 1<<62) }
	for _, rs := range h.Chunks.Reads {
		add(uint64(rs.Length))
	}
	for _, wc := range h.Chunks.Writes {
		for _, seg := range wc {
			add(uint64(seg.Length))
		}
	}
	for _, seg := range h.Chunks.Reply.Chunk {
		add(uint64(seg.Length))
	}
	return n
}

// reserve takes what the call im (header h) may make this side hold from
// the connection's budget, then the Listener's, and records it in
// im.held. It returns why the call is refused if that is more than one
// call may hold. With wait, it waits for the budgets (the caller is a
// side goroutine, never the loop); a wait that ends with the connection leaves im.held
// at -1. Without wait, it leaves im.held at -1 when the budgets have no
// room now. A call whose reservation is held already is left as it is.
func (r *responder) reserve(im *inMsg, h *wire.Header, wait bool) (why string) {
	c := r.c
	if c.ln == nil || im.held > 0 {
		return ""
	}
	need := callNeed(h)
	if need == 0 {
		return ""
	}
	if lim, ok := c.cfg.Bounds.memoryLimit(); ok && need > uint64(lim) {
		return fmt.Sprintf("its chunks add up to %d bytes, more than the %d one call may hold", need, lim)
	}
	n := int64(need)
	if !wait {
		if !r.mem.tryTake(n) {
			im.held = -1
			return ""
		}
		if !c.ln.mem.tryTake(n) {
			r.mem.give(n)
			im.held = -1
			return ""
		}
		im.held = n
		return ""
	}
	if err := r.mem.take(c.ctx, n); err != nil {
		im.held = -1
		return ""
	}
	if err := c.ln.mem.take(c.ctx, n); err != nil {
		r.mem.give(n)
		im.held = -1
		return ""
	}
	im.held = n
	return ""
}

// unreserve gives back what reserve took for im.
func (r *responder) unreserve(im *inMsg) {
	if im.held > 0 {
		r.mem.give(im.held)
		r.c.ln.mem.give(im.held)
	}
	im.held = 0
}

// argLimit applies Bounds.ArgLimit to a call whose RPC message (its
// inline part, or its pulled position-zero chunk) is xdr and whose data
// chunks are chunks: it returns why the call is refused, or "".
func (r *responder) argLimit(xdr []byte, chunks []wire.ReadChunk) string {
	f := r.c.cfg.Bounds.ArgLimit
	if f == nil || len(chunks) == 0 || len(xdr) < 24 {
		return ""
	}
	// RFC 5531 Section 9: xid, msg_type, rpcvers, prog, vers, proc.
	prog, vers, proc := binary.BigEndian.Uint32(xdr[12:]), binary.BigEndian.Uint32(xdr[16:]), binary.BigEndian.Uint32(xdr[20:])
	var n uint64
	for _, ch := range chunks {
		n += ch.Length()
	}
	switch lim := f(prog, vers, proc); {
	case lim < 0:
		return fmt.Sprintf("procedure %d of program %d version %d takes no read chunks", proc, prog, vers)
	case lim > 0 && n > uint64(lim):
		return fmt.Sprintf("its data chunks hold %d bytes, more than the %d procedure %d of program %d version %d takes", n, lim, proc, prog, vers)
	}
	return ""
}
