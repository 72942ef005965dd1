package rpc

// Each call goroutine decodes the call header and answers in the order of
// RFC 5531 section 9: RPC_MISMATCH for an rpcvers other than 2;
// AUTH_ERROR when the credential or verifier is malformed or the
// authenticator refuses it; PROG_UNAVAIL, PROG_MISMATCH or PROC_UNAVAIL
// when no handler is registered; then the handler's results, GARBAGE_ARGS
// or SYSTEM_ERR. Messages that are not calls, or too short to answer, are
// dropped and counted.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

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
	if !s.decodeCall(ctx, t, m, w) {
		return
	}
	c := &w.call
	verf, err := s.auth(ctx, c)
	if err != nil {
		stat, ok := errors.AsType[AuthStat](err)
		if !ok || stat == AuthOK {
			stat = AuthFailed
		}
		s.deny(ctx, t, w, stat)
		return
	}
	hd, stat, low, high := s.lookup(&c.Header)
	if hd == nil {
		w.reply.Low, w.reply.High = low, high
		s.accept(ctx, t, w, verf, stat, Body{})
		return
	}
	if s.cache != nil && s.replayed(ctx, t, w) {
		return
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
	s.answerErr(ctx, t, w, verf, err)
}

// decodeCall decodes the header of the call m into w.call and points its
// arguments past it. It reports false when it has answered m instead
// (RPC_MISMATCH, AUTH_BADCRED, AUTH_BADVERF, GARBAGE_ARGS) or dropped it
// (not a call).
func (s *Server) decodeCall(ctx context.Context, t Transport, m *Msg, w *callWork) bool {
	c := &w.call
	h := &c.Header
	d := xdr.NewDecoder(m.XDR)
	if !h.decodeFixed(&d) {
		if errors.Is(d.Err(), ErrRPCVersion) {
			s.stats.rpcMismatch.Add(1)
			w.reply = ReplyHeader{XID: h.XID, Stat: MsgDenied, RejectStat: RPCMismatch, Low: RPCVersion, High: RPCVersion}
			s.send(ctx, t, w, Body{})
			return false
		}
		s.stats.dropped.Add(1)
		return false
	}
	if h.Cred.Decode(&d) != nil {
		s.deny(ctx, t, w, AuthBadCred)
		return false
	}
	if h.Verf.Decode(&d) != nil {
		s.deny(ctx, t, w, AuthBadVerf)
		return false
	}
	args, err := m.tail(d.Offset())
	if err != nil {
		s.accept(ctx, t, w, OpaqueAuth{}, GarbageArgs, Body{})
		return false
	}
	c.Args = args
	c.args.Reset(args)
	return true
}

// replayed looks the call in w up in the reply cache, if it is a call the
// cache keeps (ServerOptions.ReplyCacheFor). It reports true when it has
// answered the call as a copy of one seen before (replay); otherwise the
// call is to run, and if it is the first copy w.cache holds its entry.
// s.cache must not be nil.
func (s *Server) replayed(ctx context.Context, t Transport, w *callWork) bool {
	h := &w.call.Header
	if s.cacheFor != nil && !s.cacheFor(h.Prog, h.Vers, h.Proc) {
		return false
	}
	e, first := s.cache.begin(s.cache.key(&w.call, remoteAddr(t)))
	if first {
		w.cache = e
		return false
	}
	// False when the first copy produced nothing to replay: this one runs.
	return s.replay(ctx, t, e)
}

// answerErr answers a call whose handler returned err, or whose results
// failed to validate, as Handler documents: GARBAGE_ARGS, AUTH_ERROR with
// an AuthStat, an *AcceptError's accept_stat, or SYSTEM_ERR (logged
// unless a panic, already logged, or the transport closing caused it).
func (s *Server) answerErr(ctx context.Context, t Transport, w *callWork, verf OpaqueAuth, err error) {
	if errors.Is(err, ErrGarbageArgs) {
		s.accept(ctx, t, w, verf, GarbageArgs, Body{})
		return
	}
	if stat, ok := errors.AsType[AuthStat](err); ok && stat != AuthOK {
		s.deny(ctx, t, w, stat)
		return
	}
	if ae, ok := errors.AsType[*AcceptError](err); ok && ae.Stat != Success {
		w.reply.Low, w.reply.High = ae.Low, ae.High
		s.accept(ctx, t, w, verf, ae.Stat, Body{})
		return
	}
	if !errors.Is(err, errPanic) && ctx.Err() == nil {
		s.logger().LogAttrs(ctx, slog.LevelWarn, "rpc: handler failed, answering SYSTEM_ERR", slog.Any("call", &w.call.Header), slog.Any("err", err))
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

// remoteAddr returns the address of t's peer, if t says.
func remoteAddr(t Transport) net.Addr {
	if a, ok := t.(interface{ RemoteAddr() net.Addr }); ok {
		return a.RemoteAddr()
	}
	return nil
}
