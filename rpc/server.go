package rpc

// A Server answers calls on any number of transports. For each transport,
// Serve runs one loop that receives messages and hands each call to a
// worker goroutine, at most MaxInFlight at once; the loop stops receiving
// while the limit is reached. Workers are started as needed and wait for
// the next call when done (as many per transport as it has had calls in
// flight, at most MaxInFlight), so in steady state a call costs a
// hand-off, not a new goroutine whose stack grows again through the reply
// path. A transport that is a Pusher has no loop: it hands each call to a
// worker from its own receive path (see servePushed), which saves a
// goroutine hand-off per call; calls it delivers past MaxInFlight wait in
// a queue that finishing workers take from, never on goroutines of their
// own. Each call goroutine decodes the call header
// and answers in the order of RFC 5531 section 9: RPC_MISMATCH for an
// rpcvers other than 2; AUTH_ERROR when the credential or verifier is
// malformed or the authenticator refuses it; PROG_UNAVAIL, PROG_MISMATCH
// or PROC_UNAVAIL when no handler is registered; then the handler's
// results, GARBAGE_ARGS or SYSTEM_ERR. Messages that are not calls, or too
// short to answer, are dropped and counted.
//
// Shutdown stops the listeners, closes each transport as soon as it has no
// call in progress, and drops calls that arrive meanwhile (a client retries
// them on a new connection), so every call a handler started gets its
// reply. Close closes the transports before it cancels the handlers'
// context, and a call whose handler fails once that context is cancelled
// gets no reply at all: a client riding a failover sends it again on its
// next connection rather than seeing SYSTEM_ERR for a server that went
// away under it.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// DefaultMaxInFlight is the default number of calls a Server runs at once
// per transport.
const DefaultMaxInFlight = 128

// defaultReplyCacheBytes is ServerOptions.ReplyCacheBytes's default.
const defaultReplyCacheBytes = 4096

// remoteAddr returns the address of t's peer, if t says.
func remoteAddr(t Transport) net.Addr {
	if a, ok := t.(interface{ RemoteAddr() net.Addr }); ok {
		return a.RemoteAddr()
	}
	return nil
}

// Handler runs one procedure. It decodes its arguments from c (usually with
// c.Decoder()), and returns the results to send, or an error:
//   - ErrGarbageArgs, or any error after c.Decoder() failed: GARBAGE_ARGS;
//   - an AuthStat (e.g. AuthTooWeak): MSG_DENIED AUTH_ERROR with it;
//   - an *AcceptError: that accept_stat (and version range);
//   - any other error, or a panic: SYSTEM_ERR.
//
// If c.Decoder() holds an error when the handler returns, the server
// answers GARBAGE_ARGS whatever the handler returned.
//
// Handlers run concurrently. c and its memory are valid until the handler
// returns, and the results may alias them; the server does not keep the
// results after the reply is sent. ctx is cancelled when the transport
// fails or the server is closed; an error returned after that is not
// answered, so that a client which reconnects sends the call again. An
// error answered with SYSTEM_ERR, and a panic, are logged (see
// ServerOptions.Logger).
type Handler func(ctx context.Context, c *Call) (results Body, err error)

// Call is a call as a Handler sees it. Its memory (Header's bodies, Args,
// the items of Args) is valid until the handler returns: transports reuse
// it (Msg.Release), so a handler copies what it keeps.
type Call struct {
	Header CallHeader // Cred.Body and Verf.Body alias the received message
	Args   Body       // the arguments, with item offsets relative to Args.XDR
	// AuthSys holds the parsed AUTH_SYS credential when DefaultAuth
	// accepted one, nil otherwise.
	AuthSys *AuthSysParms
	// AuthInfo is for a custom ServerOptions.Auth to pass what it learnt
	// to handlers.
	AuthInfo any
	// AfterReply, if the handler sets it, is called with the handler's
	// results once the server no longer reads them: the reply has been
	// sent (the transport's Send has returned, so it too is done with the
	// memory) or will not be. A handler uses it to recycle a buffer its
	// results point into. It is called once, on the goroutine that ran the
	// handler, also when the handler failed or panicked (then with the
	// results it returned, or none).
	AfterReply func(results Body)

	args BodyDecoder
}

// Decoder returns a decoder positioned at the start of the arguments. The
// server inspects its error when the handler returns.
func (c *Call) Decoder() *BodyDecoder { return &c.args }

// DefaultAuth is the authenticator a Server uses unless ServerOptions.Auth
// says otherwise. It accepts AUTH_NONE and well-formed AUTH_SYS credentials
// (setting c.AuthSys) with an AUTH_NONE verifier, and answers the reply with
// an AUTH_NONE verifier. It refuses a malformed AUTH_SYS credential with
// AUTH_BADCRED, another verifier flavor with AUTH_BADVERF, and any other
// credential flavor with AUTH_REJECTEDCRED, as libtirpc does.
func DefaultAuth(ctx context.Context, c *Call) (OpaqueAuth, error) {
	switch c.Header.Cred.Flavor {
	case AuthNone:
		// RFC 5531 section 10.1 only recommends an empty body.
	case AuthSys:
		p, err := ParseAuthSys(c.Header.Cred)
		if err != nil {
			return OpaqueAuth{}, AuthBadCred
		}
		c.AuthSys = &p
	default:
		return OpaqueAuth{}, AuthRejectedCred
	}
	if c.Header.Verf.Flavor != AuthNone {
		return OpaqueAuth{}, AuthBadVerf
	}
	return OpaqueAuth{}, nil
}

// RequireAuthSys returns a Handler that refuses calls without an AUTH_SYS
// credential with AUTH_TOOWEAK and passes the others to h.
func RequireAuthSys(h Handler) Handler {
	return func(ctx context.Context, c *Call) (Body, error) {
		if c.Header.Cred.Flavor != AuthSys {
			return Body{}, AuthTooWeak
		}
		return h(ctx, c)
	}
}

// ServerOptions configures a Server. The zero value selects the defaults.
type ServerOptions struct {
	// Auth checks each call's credential and verifier before dispatch and
	// returns the verifier for the reply, or an error to deny the call: an
	// AuthStat selects the auth_stat, any other error AUTH_FAILED. It may
	// set c.AuthSys or c.AuthInfo. It runs concurrently. nil selects
	// DefaultAuth.
	Auth func(ctx context.Context, c *Call) (verf OpaqueAuth, err error)
	// MaxInFlight bounds the calls running at once per transport; 0
	// selects DefaultMaxInFlight. It also bounds the idle workers a
	// transport keeps for its next calls: as many as it has had calls in
	// flight at once, each with the stack its calls grew.
	MaxInFlight int
	// Stream configures the transports of connections ServeListener
	// accepts; nil selects the defaults.
	Stream *StreamOptions
	// Logger receives the server's events: handler errors answered with
	// SYSTEM_ERR at Warn level, handler panics with their stack at Error
	// level (as net/http logs a handler's panic), undeliverable and
	// withheld replies at Debug level. nil selects slog.Default() at the
	// time of each event; slog.New(slog.DiscardHandler) discards them.
	Logger *slog.Logger
	// ReplyCache, if positive, turns on the duplicate request cache
	// (replycache.go), keeping the replies of that many recent calls: a
	// call a client sends again, with its xid, after losing its
	// connection is answered with the first run's reply instead of
	// running twice, and one sent again while the first still runs waits
	// for it. Only the client's address (from a transport with a
	// RemoteAddr method returning a TCP, UDP or IP address) without its
	// port, the call's xid, program, version, procedure and credential,
	// and the first 256 bytes of its arguments tell calls apart, as in
	// knfsd's cache: clients behind one address with the same credential
	// could be answered with each other's replies if their xids met,
	// which xids drawn at random per client make unlikely but not
	// impossible. 0 turns the cache off.
	ReplyCache int
	// ReplyCacheBytes is the largest reply the cache keeps, XDR and data
	// items together; 0 selects 4096. A larger reply (a READ's data) is
	// not kept, and a copy of its call arriving later runs again.
	ReplyCacheBytes int
	// ReplyCacheFor, if not nil, limits the reply cache to the calls for
	// which it returns true, such as a program's non-idempotent
	// procedures (knfsd caches only those); nil caches every call.
	ReplyCacheFor func(prog, vers, proc uint32) bool
}

// ServerStats counts a Server's answers and the messages it dropped.
type ServerStats struct {
	Calls        uint64 // calls run by a handler (including the built-in NULL procedures)
	Dropped      uint64 // messages that were not calls or too malformed to answer, calls that came while the transport was closing, calls that failed once it was (no reply), and messages the transport failed alone (*CallError)
	RPCMismatch  uint64 // calls denied with RPC_MISMATCH
	AuthError    uint64 // calls denied with AUTH_ERROR
	ProgUnavail  uint64 // PROG_UNAVAIL answers
	ProgMismatch uint64 // PROG_MISMATCH answers
	ProcUnavail  uint64 // PROC_UNAVAIL answers
	GarbageArgs  uint64 // GARBAGE_ARGS answers
	SystemErr    uint64 // SYSTEM_ERR answers
	Panics       uint64 // handler panics (also counted in SystemErr)
	SendErrors   uint64 // replies the transport failed to send
	CacheReplays uint64 // calls answered from the reply cache, without running
	CacheWaits   uint64 // of those, calls that waited for their first copy to finish
	Inline       uint64 // calls run on the goroutine that received them (HandleShort; the short path)
}

type serverCounters struct {
	calls, dropped, rpcMismatch, authError, progUnavail, progMismatch,
	procUnavail, garbageArgs, systemErr, panics, sendErrors,
	cacheReplays, cacheWaits, inline atomic.Uint64
}

// progVers keys the handler table.
type progVers struct{ prog, vers uint32 }

// Server dispatches calls to handlers registered by program, version and
// procedure. Create it with NewServer, register handlers with Handle, then
// serve transports with Serve or TCP connections with ServeListener. Its
// methods are safe for concurrent use.
type Server struct {
	auth        func(context.Context, *Call) (OpaqueAuth, error)
	maxInFlight int
	stream      *StreamOptions
	log         *slog.Logger

	hmu   sync.Mutex                // serializes Handle and HandleShort
	procs atomic.Pointer[procTable] // what they have registered
	// inlineOK is set when nothing but a handler can make a call wait:
	// DefaultAuth and no reply cache (whose replays may wait for a first
	// copy). Only then are short handlers run inline.
	inlineOK bool

	mu        sync.Mutex
	closing   bool
	conns     map[*serverConn]struct{}
	listeners map[io.Closer]struct{} // net.Listeners and Acceptors being served
	idle      chan struct{}          // closed when closing and nothing is served any more

	work     sync.Pool   // *callWork
	cache    *replyCache // nil unless ServerOptions.ReplyCache
	cacheFor func(prog, vers, proc uint32) bool
	stats    serverCounters
}

// NewServer returns a Server with no handlers. o may be nil.
func NewServer(o *ServerOptions) *Server {
	var opts ServerOptions
	if o != nil {
		opts = *o
	}
	s := &Server{
		auth:        opts.Auth,
		maxInFlight: opts.MaxInFlight,
		stream:      opts.Stream,
		log:         opts.Logger,
		conns:       make(map[*serverConn]struct{}),
		listeners:   make(map[io.Closer]struct{}),
		idle:        make(chan struct{}),
	}
	if s.auth == nil {
		s.auth = DefaultAuth
		s.inlineOK = opts.ReplyCache <= 0
	}
	s.procs.Store(&procTable{
		procs:    map[procKey]procEntry{},
		ranges:   map[uint32][2]uint32{},
		versions: map[progVers]bool{},
	})
	if s.maxInFlight <= 0 {
		s.maxInFlight = DefaultMaxInFlight
	}
	s.work.New = func() any { return new(callWork) }
	if opts.ReplyCache > 0 {
		maxBytes := opts.ReplyCacheBytes
		if maxBytes <= 0 {
			maxBytes = defaultReplyCacheBytes
		}
		s.cache = newReplyCache(opts.ReplyCache, maxBytes)
		s.cacheFor = opts.ReplyCacheFor
	}
	return s
}

// Handle registers h for procedure proc of version vers of program prog,
// replacing any handler registered for it. Procedure 0 (NULL) of every
// registered version answers with empty results unless a handler is
// registered for it. Handle may be called while serving. It panics if h is
// nil.
func (s *Server) Handle(prog, vers, proc uint32, h Handler) {
	s.register(prog, vers, proc, h, false)
}

// register is Handle, and with short HandleShort.
func (s *Server) register(prog, vers, proc uint32, h Handler, short bool) {
	if h == nil {
		panic("rpc: nil handler")
	}
	s.hmu.Lock()
	defer s.hmu.Unlock()
	old := s.procs.Load()
	t := &procTable{
		procs:    maps.Clone(old.procs),
		ranges:   maps.Clone(old.ranges),
		versions: maps.Clone(old.versions),
	}
	t.procs[procKey{prog, vers, proc}] = procEntry{h: h, short: short}
	t.versions[progVers{prog, vers}] = true
	r, ok := t.ranges[prog]
	if !ok {
		r = [2]uint32{vers, vers}
	}
	t.ranges[prog] = [2]uint32{min(r[0], vers), max(r[1], vers)}
	s.procs.Store(t)
}

// procTable is what Handle and HandleShort have registered. Each
// registration copies it and replaces it whole, so that dispatching a call
// reads it with an atomic load and a map lookup, taking no lock:
// registrations are few, calls many.
type procTable struct {
	procs    map[procKey]procEntry
	ranges   map[uint32][2]uint32 // prog -> lowest and highest registered version
	versions map[progVers]bool    // versions with a handler
}

type procEntry struct {
	h     Handler
	short bool // registered with HandleShort
}

// procKey names one procedure.
type procKey struct{ prog, vers, proc uint32 }

// HandleShort registers h as Handle does, and declares that h returns
// promptly: it does not wait for other calls, for I/O, or for locks held
// for long. When such a call is the only one in flight on its transport,
// the Server may run it on the goroutine that received it and send the
// reply from there (the short path, see the package documentation),
// which spares the hand-off to a worker and back. Meanwhile nothing else
// is received on that transport, so a handler that does block holds up
// its connection. Calls answered without a handler (PROG_UNAVAIL, NULL
// of a registered version, errors) count as short. A later Handle for
// the procedure makes it an ordinary one again.
func (s *Server) HandleShort(prog, vers, proc uint32, h Handler) {
	s.register(prog, vers, proc, h, true)
}

// isShort reports whether the call in b may run inline: the Server
// allows it (inlineOK) and its procedure is short, or has no handler.
// It reads the call header's fixed fields where RFC 5531 Section 9 puts
// them, without decoding the rest; a message too short or not a call
// is short (it is dropped or denied without a handler).
func (s *Server) isShort(b []byte) bool {
	if !s.inlineOK {
		return false
	}
	if len(b) < 24 || MsgType(binary.BigEndian.Uint32(b[4:])) != MsgCall {
		return true
	}
	k := procKey{binary.BigEndian.Uint32(b[12:]), binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])}
	e, ok := s.procs.Load().procs[k]
	return !ok || e.short
}

// lookup finds the handler of a call, or the accept_stat (and version
// range) to answer when there is none.
func (s *Server) lookup(h *CallHeader) (Handler, AcceptStat, uint32, uint32) {
	t := s.procs.Load()
	if e, ok := t.procs[procKey{h.Prog, h.Vers, h.Proc}]; ok {
		return e.h, Success, 0, 0
	}
	r, ok := t.ranges[h.Prog]
	if !ok {
		return nil, ProgUnavail, 0, 0
	}
	if !t.versions[progVers{h.Prog, h.Vers}] {
		return nil, ProgMismatch, r[0], r[1]
	}
	if h.Proc == 0 {
		return nullProc, Success, 0, 0
	}
	return nil, ProcUnavail, 0, 0
}

func nullProc(context.Context, *Call) (Body, error) { return Body{}, nil }

// logger returns where the server's events go: ServerOptions.Logger, or
// the default logger as it is now.
func (s *Server) logger() *slog.Logger {
	if s.log != nil {
		return s.log
	}
	return slog.Default()
}

// serverConn is the state of one served transport.
type serverConn struct {
	t      Transport
	sem    chan struct{} // one slot per call in flight
	work   chan *Msg     // to idle workers; closed when the loop ends
	idle   atomic.Int32  // workers waiting on work, or about to
	ctx    context.Context
	cancel context.CancelFunc // cancels the handlers' ctx

	mu       sync.Mutex
	inFlight int
	closing  bool   // Shutdown began: close t once inFlight drops to 0
	queue    []*Msg // pushed calls waiting for a slot; non-empty only while sem is full
}

// begin accounts for a new call and reports whether it may run.
func (sc *serverConn) begin() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closing {
		return false
	}
	sc.inFlight++
	return true
}

// end accounts for a finished call.
func (sc *serverConn) end() {
	sc.mu.Lock()
	sc.inFlight--
	idle := sc.closing && sc.inFlight == 0
	sc.mu.Unlock()
	if idle {
		sc.t.Close()
	}
}

// next gives up the caller's MaxInFlight slot, unless a pushed call waits
// for one: it then returns that call, which takes over the slot. The slot
// is given up under sc.mu, where servePushed queues a call only while
// every slot is taken, so a queued call always has a worker that will
// take it.
func (sc *serverConn) next() *Msg {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.queue) > 0 {
		m := sc.queue[0]
		sc.queue[0] = nil
		sc.queue = sc.queue[1:]
		return m
	}
	<-sc.sem
	return nil
}

// closeWhenIdle makes sc close its transport once no call is in flight.
func (sc *serverConn) closeWhenIdle() {
	sc.mu.Lock()
	sc.closing = true
	idle := sc.inFlight == 0
	sc.mu.Unlock()
	if idle {
		sc.t.Close()
	}
}

// Serve answers the calls arriving on t until t fails or the server shuts
// down, then closes t, waits for the calls in progress to finish, and
// returns: ErrServerClosed after Shutdown or Close, t's Recv error
// otherwise (a *ConnError for the transports of this package). The Server
// owns t from the call on.
func (s *Server) Serve(t Transport) error {
	sc := s.addConn(t)
	if sc == nil {
		t.Close()
		return ErrServerClosed
	}
	return s.serveConn(sc)
}

// addConn registers a transport to serve, or returns nil when shutting down.
func (s *Server) addConn(t Transport) *serverConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil
	}
	sc := &serverConn{t: t, sem: make(chan struct{}, s.maxInFlight), work: make(chan *Msg)}
	sc.ctx, sc.cancel = context.WithCancel(context.Background())
	s.conns[sc] = struct{}{}
	return sc
}

// serveConn serves sc's transport through the one delivery contract,
// Pusher (a transport that does not push is adapted): its receive path
// calls deliver, which must not block, so a call goes straight to an idle
// worker (or a new one), and one that finds MaxInFlight calls running
// joins a queue that finishing workers take from, costing no goroutine.
// Such a transport bounds what it delivers (RPC-over-RDMA by its credits),
// and so the queue. A stream's reader (pushWaits) is instead made to wait
// for a slot, which holds the peer back through the stream's flow
// control, as a loop calling Recv would. It returns the error that ended
// the transport once deliver has had it, having cancelled the handlers'
// context so that workers drop what is still queued; the Pusher contract
// says nothing is delivered after that error, so the workers' channel can
// then be closed.
func (s *Server) serveConn(sc *serverConn) error {
	var wg sync.WaitGroup
	p := asPusher(sc.t)
	ended := make(chan error, 1)
	ir, _ := p.(InlineReplier)
	_, waits := p.(pushWaits)
	p.Push(func(m *Msg, err error) bool {
		if err != nil {
			if _, ok := errors.AsType[*CallError](err); ok {
				// The transport dropped one message; it carries on.
				s.stats.dropped.Add(1)
				return true
			}
			ended <- err
			return false
		}
		if ir != nil && s.inlinePushed(sc, ir, m, &wg) {
			return true
		}
		if waits {
			s.waitSlot(sc, m, &wg)
			return true
		}
		sc.mu.Lock()
		if len(sc.queue) == 0 {
			select {
			case sc.sem <- struct{}{}:
				sc.mu.Unlock()
				s.dispatch(sc, m, &wg)
				return true
			default:
			}
		}
		// Every slot is taken: the worker that finishes first takes
		// the call (serverConn.next).
		sc.queue = append(sc.queue, m)
		sc.mu.Unlock()
		return true
	})
	err := <-ended
	sc.cancel()
	return s.endConn(sc, &wg, err)
}

// waitSlot dispatches m once a MaxInFlight slot is free, waiting for one
// on a stream's reader; it drops m if the server closes meanwhile.
func (s *Server) waitSlot(sc *serverConn, m *Msg, wg *sync.WaitGroup) {
	select {
	case sc.sem <- struct{}{}:
		s.dispatch(sc, m, wg)
	case <-sc.ctx.Done(): // Close, while MaxInFlight calls run
		s.stats.dropped.Add(1)
		release(m)
	}
}

// inlinePushed is inline for a pushed call, on the transport's goroutine
// that delivers it: it runs m there if m's handler is short, no other call
// is in flight or queued on sc, a MaxInFlight slot is free, and the
// transport could reserve what sending the reply needs (ir.ReserveReply),
// so that the reply's Send does not wait for that goroutine. It reports
// whether it ran m.
func (s *Server) inlinePushed(sc *serverConn, ir InlineReplier, m *Msg, wg *sync.WaitGroup) bool {
	if !s.isShort(m.XDR) {
		return false
	}
	sc.mu.Lock()
	ok := !sc.closing && sc.inFlight == 0 && len(sc.queue) == 0
	if ok {
		select {
		case sc.sem <- struct{}{}:
			sc.inFlight++
		default:
			ok = false
		}
	}
	sc.mu.Unlock()
	if !ok {
		return false
	}
	if !ir.ReserveReply(m) {
		sc.mu.Lock()
		sc.inFlight--
		sc.mu.Unlock()
		<-sc.sem
		return false
	}
	s.stats.inline.Add(1)
	s.handle(sc.ctx, sc.t, m)
	sc.mu.Lock()
	sc.inFlight--
	idle := sc.closing && sc.inFlight == 0
	sc.mu.Unlock()
	<-sc.sem
	if idle {
		// Not on this goroutine: closing a transport may wait for it.
		// endConn waits for this one with the workers.
		wg.Go(func() { sc.t.Close() })
	}
	return true
}

// dispatch hands m, which holds a MaxInFlight slot, to an idle worker or a
// new one, unless the transport is shutting down.
func (s *Server) dispatch(sc *serverConn, m *Msg, wg *sync.WaitGroup) {
	if !sc.begin() {
		// Closing for good: the queued calls go the same way.
		for m != nil {
			s.stats.dropped.Add(1)
			release(m)
			m = sc.next()
		}
		return
	}
	select {
	case sc.work <- m:
	default:
		wg.Go(func() { s.worker(sc, m) })
	}
}

// endConn finishes serving sc once its transport has ended with err: it
// cancels the handlers' context, lets the workers finish and closes the
// transport.
func (s *Server) endConn(sc *serverConn, wg *sync.WaitGroup, err error) error {
	sc.cancel()
	close(sc.work)
	wg.Wait()
	sc.t.Close()
	sc.mu.Lock()
	queued := sc.queue // empty: workers take the queue before they exit
	sc.queue = nil
	sc.mu.Unlock()
	for _, m := range queued {
		s.stats.dropped.Add(1)
		release(m)
	}

	s.mu.Lock()
	delete(s.conns, sc)
	closing := s.closing
	s.checkIdle()
	s.mu.Unlock()
	if closing {
		return ErrServerClosed
	}
	return err
}

// worker answers m, then the calls the loop hands it, until there are
// enough idle workers or the loop has ended. A transport keeps as many
// idle workers as it has had calls in flight at once, at most MaxInFlight:
// with a lower bound, more calls in flight than idle workers made some
// exit after each call and new ones start, each growing its stack again
// through the reply path (with 64 NULL calls in flight, stack copying was
// 7% of the CPU time and the calls took 5-9% longer).
func (s *Server) worker(sc *serverConn, m *Msg) {
	for {
		s.handle(sc.ctx, sc.t, m)
		sc.end()
		if m = s.takeQueued(sc); m != nil {
			continue
		}
		if sc.idle.Add(1) > int32(s.maxInFlight) {
			sc.idle.Add(-1)
			return
		}
		next, ok := <-sc.work
		sc.idle.Add(-1)
		if !ok {
			return
		}
		m = next
	}
}

// takeQueued gives up a finished call's slot, or returns the queued
// call that takes it over, dropping those that came too late to run.
func (s *Server) takeQueued(sc *serverConn) *Msg {
	for {
		m := sc.next()
		if m == nil || (sc.ctx.Err() == nil && sc.begin()) {
			return m
		}
		// The transport has ended, or the server is closing: nothing
		// could carry the reply.
		s.stats.dropped.Add(1)
		release(m)
	}
}

// checkIdle closes s.idle when shutting down and nothing is served any
// more. s.mu must be held.
func (s *Server) checkIdle() {
	if s.closing && len(s.conns) == 0 && len(s.listeners) == 0 {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}

// ServeListener accepts connections on l and serves each over a
// StreamTransport (record marking) until l fails or the server shuts down.
// It returns ErrServerClosed after Shutdown or Close (which close l), and
// the Accept error otherwise, leaving l open; connections already accepted
// go on being served.
func (s *Server) ServeListener(l net.Listener) error {
	return s.ServeAcceptor(streamAcceptor{l, s.stream})
}

// Shutdown shuts the server down gracefully: it closes the listeners, lets
// the calls in progress finish and send their replies, closes each
// transport as soon as it has none, and waits until every Serve and
// ServeListener has returned. Calls that arrive meanwhile are dropped. If
// ctx ends first, it closes every transport at once (their handlers' ctx is
// cancelled; Serve still waits for them) and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	for _, sc := range s.beginClose() {
		sc.closeWhenIdle()
	}
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close closes the listeners and every transport at once, then cancels the
// ctx of the calls in progress, without waiting for them. They send no
// reply: their transports are closed, and a call whose handler fails once
// its ctx is cancelled is not answered (no SYSTEM_ERR), so a client that
// reconnects sends it again. Later Serve and ServeListener calls return
// ErrServerClosed.
func (s *Server) Close() error {
	for _, sc := range s.beginClose() {
		// The transport first: a handler woken by the cancellation
		// finds nothing to send its reply on.
		sc.t.Close()
		sc.cancel()
	}
	return nil
}

// beginClose marks the server closing, closes the listeners and returns
// the transports being served.
func (s *Server) beginClose() []*serverConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for l := range s.listeners {
		l.Close()
	}
	s.checkIdle()
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	return conns
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() ServerStats {
	c := &s.stats
	return ServerStats{
		Calls:        c.calls.Load(),
		Dropped:      c.dropped.Load(),
		RPCMismatch:  c.rpcMismatch.Load(),
		AuthError:    c.authError.Load(),
		ProgUnavail:  c.progUnavail.Load(),
		ProgMismatch: c.progMismatch.Load(),
		ProcUnavail:  c.procUnavail.Load(),
		GarbageArgs:  c.garbageArgs.Load(),
		SystemErr:    c.systemErr.Load(),
		Panics:       c.panics.Load(),
		SendErrors:   c.sendErrors.Load(),
		CacheReplays: c.cacheReplays.Load(),
		CacheWaits:   c.cacheWaits.Load(),
		Inline:       c.inline.Load(),
	}
}

// callWork is the per-call memory, recycled through Server.work so that a
// call allocates little beyond what its handler does.
type callWork struct {
	call  Call
	reply ReplyHeader
	buf   []byte
	items []DDPItem
	msg   Msg
	cache *cacheEntry // the reply cache's entry for the call, until answered
	res   Body        // the handler's results, for Call.AfterReply
}

// maxPooledBuf bounds the reply buffers kept for reuse, so that one large
// reply does not pin its memory.
const maxPooledBuf = 64 << 10

// handle answers one message. It defers nothing: with answer's many
// returns, deferred calls would not be open-coded, and a call's path
// would pay the runtime's defer records. A panic past answer is a bug
// that ends the process (a handler's is recovered in run), so nothing
// below needs to run during one.
func (s *Server) handle(ctx context.Context, t Transport, m *Msg) {
	w := s.work.Get().(*callWork)
	s.answer(ctx, t, m, w)
	if f := w.call.AfterReply; f != nil {
		f(w.res)
	}
	if w.cache != nil { // no reply was sent
		s.cache.abandon(w.cache)
	}
	s.putWork(w)
	if m.Release != nil {
		m.Release()
	}
}

// answer decodes the call m and answers it, for handle.
func (s *Server) answer(ctx context.Context, t Transport, m *Msg, w *callWork) {
	c := &w.call
	h := &c.Header
	rh := &w.reply
	d := xdr.NewDecoder(m.XDR)

	if !h.decodeFixed(&d) {
		if errors.Is(d.Err(), ErrRPCVersion) {
			s.stats.rpcMismatch.Add(1)
			*rh = ReplyHeader{XID: h.XID, Stat: MsgDenied, RejectStat: RPCMismatch, Low: RPCVersion, High: RPCVersion}
			s.send(ctx, t, w, Body{})
			return
		}
		s.stats.dropped.Add(1)
		return
	}
	if h.Cred.Decode(&d) != nil {
		s.deny(ctx, t, w, AuthBadCred)
		return
	}
	if h.Verf.Decode(&d) != nil {
		s.deny(ctx, t, w, AuthBadVerf)
		return
	}
	args, err := m.tail(d.Offset())
	if err != nil {
		s.accept(ctx, t, w, OpaqueAuth{}, GarbageArgs, Body{})
		return
	}
	c.Args = args
	c.args.Reset(args)

	verf, err := s.auth(ctx, c)
	if err != nil {
		stat, ok := errors.AsType[AuthStat](err)
		if !ok || stat == AuthOK {
			stat = AuthFailed
		}
		s.deny(ctx, t, w, stat)
		return
	}

	hd, stat, low, high := s.lookup(h)
	if hd == nil {
		rh.Low, rh.High = low, high
		s.accept(ctx, t, w, verf, stat, Body{})
		return
	}
	if s.cache != nil && (s.cacheFor == nil || s.cacheFor(h.Prog, h.Vers, h.Proc)) {
		e, first := s.cache.begin(s.cache.key(c, remoteAddr(t)))
		if !first {
			if s.replay(ctx, t, e) {
				return
			}
			// The first copy produced nothing to replay: run this one.
		} else {
			w.cache = e
		}
	}
	s.stats.calls.Add(1)
	res, err := s.run(ctx, hd, c)
	w.res = res // for AfterReply
	if c.args.Err() != nil && !errors.Is(err, errPanic) {
		err = ErrGarbageArgs
	}
	if err == nil {
		if err = res.Validate(); err == nil {
			s.accept(ctx, t, w, verf, Success, res)
			return
		}
	}
	if errors.Is(err, ErrGarbageArgs) {
		s.accept(ctx, t, w, verf, GarbageArgs, Body{})
		return
	}
	if stat, ok := errors.AsType[AuthStat](err); ok && stat != AuthOK {
		s.deny(ctx, t, w, stat)
		return
	}
	if ae, ok := errors.AsType[*AcceptError](err); ok && ae.Stat != Success {
		rh.Low, rh.High = ae.Low, ae.High
		s.accept(ctx, t, w, verf, ae.Stat, Body{})
		return
	}
	if !errors.Is(err, errPanic) && ctx.Err() == nil {
		s.logger().LogAttrs(ctx, slog.LevelWarn, "rpc: handler failed, answering SYSTEM_ERR", slog.Any("call", h), slog.Any("err", err))
	}
	s.accept(ctx, t, w, verf, SystemErr, Body{})
}

// errPanic marks a handler that panicked.
var errPanic = errors.New("rpc: handler panicked")

// run calls the handler, turning a panic into errPanic.
func (s *Server) run(ctx context.Context, hd Handler, c *Call) (res Body, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.stats.panics.Add(1)
			s.logger().LogAttrs(ctx, slog.LevelError, "rpc: handler panicked",
				slog.Any("call", &c.Header), slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			res, err = Body{}, errPanic
		}
	}()
	return hd(ctx, c)
}

// deny answers MSG_DENIED AUTH_ERROR.
func (s *Server) deny(ctx context.Context, t Transport, w *callWork, stat AuthStat) {
	if s.withhold(ctx, w) {
		return
	}
	s.stats.authError.Add(1)
	w.reply = ReplyHeader{XID: w.call.Header.XID, Stat: MsgDenied, RejectStat: AuthError, AuthStat: stat}
	s.send(ctx, t, w, Body{})
}

// accept answers MSG_ACCEPTED with stat; w.reply.Low and High must hold the
// version range for PROG_MISMATCH.
func (s *Server) accept(ctx context.Context, t Transport, w *callWork, verf OpaqueAuth, stat AcceptStat, res Body) {
	if stat != Success && s.withhold(ctx, w) {
		return
	}
	switch stat {
	case ProgUnavail:
		s.stats.progUnavail.Add(1)
	case ProgMismatch:
		s.stats.progMismatch.Add(1)
	case ProcUnavail:
		s.stats.procUnavail.Add(1)
	case GarbageArgs:
		s.stats.garbageArgs.Add(1)
	case SystemErr:
		s.stats.systemErr.Add(1)
	}
	rh := &w.reply
	low, high := rh.Low, rh.High
	*rh = ReplyHeader{XID: w.call.Header.XID, Stat: MsgAccepted, Verf: verf, AcceptStat: stat}
	if stat == ProgMismatch {
		rh.Low, rh.High = low, high
	}
	s.send(ctx, t, w, res)
}

// withhold reports whether an answer other than success must not be sent
// because ctx is cancelled: the transport failed, or the server is closing
// (Close cancels after closing the transports, Shutdown only when its own
// ctx ends). That is likely why the call failed, and the client, if it
// reconnects, sends the call again (RFC 5531 section 8 leaves
// retransmission to it) and must have it run then, not get SYSTEM_ERR
// for a server that went away. The call is counted dropped and its
// reply-cache entry abandoned.
func (s *Server) withhold(ctx context.Context, w *callWork) bool {
	if ctx.Err() == nil {
		return false
	}
	if e := w.cache; e != nil {
		w.cache = nil
		s.cache.abandon(e)
	}
	s.stats.dropped.Add(1)
	s.logger().LogAttrs(ctx, slog.LevelDebug, "rpc: failed call not answered: the transport is closing", slog.Any("call", &w.call.Header))
	return true
}

// send encodes w.reply followed by res into w's buffers and sends it,
// giving it to the reply cache first if the call has an entry there.
func (s *Server) send(ctx context.Context, t Transport, w *callWork, res Body) {
	hlen := w.reply.EncodedLen()
	buf := slices.Grow(w.buf[:0], hlen+len(res.XDR))
	buf = w.reply.Append(buf)
	buf = append(buf, res.XDR...)
	items := w.items[:0]
	for _, it := range res.Items {
		items = append(items, DDPItem{Offset: it.Offset + hlen, Data: it.Data})
	}
	w.buf, w.items = buf, items
	w.msg = Msg{Body: Body{XDR: buf, Items: items}}
	if e := w.cache; e != nil {
		w.cache = nil
		s.cache.finish(e, &w.msg) // not a failure withheld: see withhold
	}
	s.sendMsg(ctx, t, &w.msg, &w.reply)
}

// replay answers a copy of a call the reply cache has seen with e's
// reply, once e is done. It reports false, having sent nothing, if e left
// nothing to replay; a copy whose transport ends while it waits is
// dropped, and reported true.
func (s *Server) replay(ctx context.Context, t Transport, e *cacheEntry) bool {
	waited := false
	select {
	case <-e.done:
	default:
		waited = true
		select {
		case <-e.done:
		case <-ctx.Done():
			s.stats.dropped.Add(1)
			return true
		}
	}
	if e.reply.XDR == nil {
		return false
	}
	s.stats.cacheReplays.Add(1)
	if waited {
		s.stats.cacheWaits.Add(1)
	}
	m := Msg{Body: e.reply.Body}
	s.sendMsg(ctx, t, &m, nil)
	return true
}

// sendMsg sends the reply m, whose header is rh (nil: decoded from m for
// the log, should the Send fail), counting and logging a failure.
func (s *Server) sendMsg(ctx context.Context, t Transport, m *Msg, rh *ReplyHeader) {
	if err := t.Send(ctx, m); err != nil {
		s.stats.sendErrors.Add(1)
		if rh == nil {
			rh = new(ReplyHeader)
			d := xdr.NewDecoder(m.XDR)
			rh.Decode(&d) // a reply this Server encoded
		}
		s.logger().LogAttrs(ctx, slog.LevelDebug, "rpc: reply not sent", slog.Any("reply", rh), slog.Any("err", err))
	}
}

// putWork recycles w, dropping references to the call's and handler's
// memory and buffers too large to keep.
func (s *Server) putWork(w *callWork) {
	clear(w.items[:cap(w.items)])
	if cap(w.buf) > maxPooledBuf {
		w.buf = nil
	}
	if cap(w.items) > 64 {
		w.items = nil
	}
	*w = callWork{buf: w.buf[:0], items: w.items[:0]}
	s.work.Put(w)
}
