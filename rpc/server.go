package rpc

// A Server holds the handlers registered by program, version and procedure
// and the transports it serves; this file has the type, its options, the
// registration and the lifecycle. The per-transport serving is in
// server_serve.go, answering a call in server_answer.go.
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
	"io"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
)

// DefaultMaxInFlight is the default number of calls a Server runs at once
// per transport.
const DefaultMaxInFlight = 128

// defaultReplyCacheBytes is ServerOptions.ReplyCacheBytes's default.
const defaultReplyCacheBytes = 4096

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
	// ConnState, if not nil, is called for each connection ServeListener
	// accepts (see ConnState), once per state, as net/http's
	// Server.ConnState is. StateNew comes with a nil err, once Accept has
	// returned c, on the goroutine running ServeListener, before anything
	// is read from c: no other connection is accepted meanwhile.
	// StateClosed comes after c is closed and every call on it has
	// finished, on the goroutine that served c (ServeListener's own for a
	// connection accepted while the server shuts down), before Shutdown
	// counts c done, so Shutdown returns after it. Its err says what
	// ended c: ErrServerClosed if the server was shutting down by then,
	// otherwise the transport's *ConnError (wrapping io.EOF when the
	// peer closed c, ErrHTTP or ErrRecordTooLarge when it sent what no
	// RPC peer sends). It is called for different connections
	// concurrently; it must not block, nor call Shutdown, which waits
	// for it. The Server owns c: the hook may read its addresses, not
	// read from, write to or close it. Transports given to Serve or
	// ServeAcceptor report nothing.
	ConnState func(c net.Conn, state ConnState, err error)
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
	connState   func(net.Conn, ConnState, error)

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
		connState:   opts.ConnState,
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
