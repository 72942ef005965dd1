package iwarp

// The MPA handshake (RFC 5044 section 7.1, RFC 6581), as a state machine per
// side.
//
// Initiator (Provider.Dial):
//
//	connect        TCP connect, bounded by Dial's context.
//	request sent   the MPA Request, written whole in one write so that it
//	               starts a TCP segment (tracers look for it there): the
//	               options' revision, C by the CRC policy, never M; with
//	               Rev 2 the S flag and the IRD/ORD word before the
//	               upper layer's private data. Nothing more is sent.
//	reply read     within HandshakeTimeout (and the context): a Reply with
//	               R is a rejection (*rdma.RejectError with its private
//	               data); a malformed Reply, one asking for markers, or one
//	               whose private data exceeds rdma.MaxPrivateData gets a
//	               Terminate (MPA, "invalid Request or Reply frame", sent
//	               without CRC as siw does) and the socket is closed; a
//	               responder ORD beyond MaxReadDepth gets "insufficient IRD
//	               resources". IRD/ORD are settled (RFC 6581 section 9.1),
//	               CRC is on iff either frame has C. FPDUs that follow the
//	               Reply at once (siw's responder does not fence) stay
//	               buffered for the reader.
//	setup, up      the Conn (conn.go); the first FPDU waits FirstSendDelay.
//
// Responder (Listener): one goroutine accepts TCP connections and one per
// connection reads its Request, so a slow peer delays nobody else. At most
// Options.MaxHandshakes are in progress (MaxHandshakesPerHost from one
// host); a TCP connection beyond makes room by closing the oldest handshake
// in progress (from its host, if that host is at its limit), so a flood of
// connections that never send their Request holds a bounded number of
// sockets and never shuts out a peer that sends its Request at once.
//
//	accepted       the Request must arrive within HandshakeTimeout.
//	request read   a bad key, a Reply key, a revision other than 1 or 2, a
//	               PD_Length above 512 or a short frame: the socket is closed
//	               without a Reply (RFC 5044 section 7.1.2). A Request asking
//	               for markers (which we never insert), with more private
//	               data than rdma.MaxPrivateData for the upper layer, or
//	               enhanced without room for the IRD/ORD word is answered
//	               with a Reply with R (siw's automatic reject) and closed.
//	queued         a ConnRequest waits for Listener.Accept; no timer runs
//	               while the upper layer decides, as in siw.
//	accepted       ConnRequest.Accept: IRD/ORD settled, Prepare, then the
//	               Reply, echoing the Request's revision and enhanced mode,
//	               C by the CRC policy; peer-to-peer requests get one RTR
//	               type (Write, else Read), as siw answers. The connection is
//	               up but fenced: it sends no FPDU before the initiator's
//	               first has arrived (RFC 5044 section 7.1.2).
//	rejected       ConnRequest.Reject: a Reply with R and the upper layer's
//	               private data, then close.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

// readFrame reads one MPA Request or Reply from br, PD_Length at most
// maxPD, and returns it with its private data copied.
func readFrame(br *rxBuf, maxPD int) (mpa.Frame, error) {
	hdr, err := br.Peek(mpa.FrameHeaderLen)
	if err != nil {
		return mpa.Frame{}, streamErr(hdr, err)
	}
	n, err := mpa.FrameLen(hdr, maxPD)
	if err != nil {
		return mpa.Frame{}, err
	}
	b, err := br.Peek(n)
	if err != nil {
		return mpa.Frame{}, streamErr(b, err)
	}
	f, _, err := mpa.ParseFrame(b, maxPD)
	if err != nil {
		return mpa.Frame{}, err
	}
	f.PrivateData = bytes.Clone(f.PrivateData)
	_, err = br.Discard(n)
	return f, err
}

// handshakeErr describes a failed read or write during the handshake:
// the context's error if it ended, a timeout, or the peer leaving.
func (p *Provider) handshakeErr(ctx context.Context, what string, err error) error {
	d, ok := ctx.Deadline()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, ctx.Err())
	case errors.Is(err, os.ErrDeadlineExceeded) && ok && !time.Now().Before(d):
		// The socket deadline was the context's, and fired first.
		return fmt.Errorf("%s: %w", what, context.DeadlineExceeded)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%s: no answer within %v: %w", what, p.opts.HandshakeTimeout, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: peer closed the connection during the MPA handshake: %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// sendHandshakeTerminate sends a Terminate with an MPA cause and no
// headers, without CRC (it is not on yet), as siw does when a Reply fails
// its checks. The caller closes nc.
func sendHandshakeTerminate(nc net.Conn, cause ddp.Cause) {
	nc.Write((&violation{cause: cause}).fpdu(false))
}

// initiate runs the initiator's side of the handshake on a connected nc
// and returns the Conn in setup. On failure nc is closed.
func (p *Provider) initiate(ctx context.Context, raw net.Conn, s settings, pd []byte) (c *Conn, err error) {
	mulpdu := p.mulpdu(raw)
	nc := raw
	if p.wrap != nil {
		nc = p.wrap(nc)
	}
	defer func() {
		if err != nil {
			nc.Close()
		}
	}()
	deadline := time.Now().Add(p.opts.HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := p.request(s, pd)
	b, err := req.Append(make([]byte, 0, req.EncodedLen()))
	if err != nil {
		return nil, fmt.Errorf("encode MPA Request: %w", err)
	}
	if _, err := nc.Write(b); err != nil {
		return nil, p.handshakeErr(ctx, "write MPA Request", err)
	}
	cr := &countReader{r: nc}
	br := newRxBuf(cr, readBufSize)
	rep, err := p.readReply(ctx, nc, br)
	if err != nil {
		return nil, err
	}
	s, rtr, err := settleReply(nc, s, &req, &rep)
	if err != nil {
		return nil, err
	}
	if !stop() {
		return nil, p.handshakeErr(ctx, "MPA handshake", ctx.Err())
	}
	nc.SetDeadline(time.Time{})
	return newConn(p, connParams{
		nc:        nc,
		raw:       raw,
		cr:        cr,
		br:        br,
		mulpdu:    mulpdu,
		s:         s,
		crc:       (req.Flags|rep.Flags)&mpa.FlagCRC != 0,
		rev:       int(rep.Rev),
		initiator: true,
		rtr:       rtr,
		peerPD:    rep.PrivateData,
	}), nil
}

// request returns the MPA Request the initiator sends: the configured
// revision, C if the CRC policy requires it, private data pd, and from
// revision 2 on the enhanced mode with the IRD/ORD of s, offering the
// zero-length RDMA Write as the RTR if peer-to-peer.
func (p *Provider) request(s settings, pd []byte) mpa.Frame {
	req := mpa.Frame{Kind: mpa.Request, Rev: uint8(p.opts.Revision), PrivateData: pd}
	if p.opts.CRC == CRCRequire {
		req.Flags |= mpa.FlagCRC
	}
	if req.Rev >= 2 {
		req.Flags |= mpa.FlagEnhanced
		req.IRDORD = mpa.IRDORD{IRD: uint16(s.ird), ORD: uint16(s.ord)}
		if p.opts.PeerToPeer {
			req.IRDORD.PeerToPeer = true
			req.IRDORD.RTR = mpa.RTRWrite
		}
	}
	return req
}

// readReply reads the answer to the MPA Request from br and returns it
// if it accepts the connection. A rejection fails with an
// rdma.RejectError; an answer that is no valid Reply is answered with a
// Terminate on nc first. The caller closes nc on failure.
func (p *Provider) readReply(ctx context.Context, nc net.Conn, br *rxBuf) (mpa.Frame, error) {
	if err := awaitKey(br); err != nil {
		if errors.Is(err, ErrNotMPA) {
			// As siw answers a Reply with a wrong key.
			sendHandshakeTerminate(nc, ddp.CauseMPAInvalidFrame)
			return mpa.Frame{}, err
		}
		return mpa.Frame{}, p.handshakeErr(ctx, "read MPA Reply", err)
	}
	rep, err := readFrame(br, mpa.MaxPrivateDataLen)
	var pe *mpa.ParseError
	switch {
	case errors.As(err, &pe):
		sendHandshakeTerminate(nc, ddp.CauseMPAInvalidFrame)
		return mpa.Frame{}, fmt.Errorf("invalid MPA Reply: %w", err)
	case err != nil:
		return mpa.Frame{}, p.handshakeErr(ctx, "read MPA Reply", err)
	}
	if rep.Flags&mpa.FlagReject != 0 && rep.Kind == mpa.Reply && rep.Rev >= 1 {
		return mpa.Frame{}, &rdma.RejectError{PrivateData: rep.PrivateData}
	}
	if why := checkReply(&rep); why != "" {
		sendHandshakeTerminate(nc, ddp.CauseMPAInvalidFrame)
		return mpa.Frame{}, fmt.Errorf("invalid MPA Reply (%v): %s", rep, why)
	}
	return rep, nil
}

// settleReply returns the settings s becomes under the accepting Reply
// rep to req, and whether the first FPDU is to be an RTR. If both are
// enhanced, IRD/ORD is negotiated and a peer-to-peer Reply must name the
// RTR type offered; if not, a Terminate goes out on nc and the caller
// closes it.
func settleReply(nc net.Conn, s settings, req, rep *mpa.Frame) (settings, bool, error) {
	if !req.Enhanced() || !rep.Enhanced() {
		return s, false, nil
	}
	s, err := negotiateInitiator(s, rep.IRDORD)
	if err != nil {
		sendHandshakeTerminate(nc, ddp.CauseMPAInsufficientIRD)
		return s, false, fmt.Errorf("MPA Reply (%v): %w", *rep, err)
	}
	if !req.IRDORD.PeerToPeer || !rep.IRDORD.PeerToPeer {
		return s, false, nil
	}
	// RFC 6581 section 9.2: the first FPDU is one RTR of a type both
	// sides flagged; we offered only the Write.
	if rep.IRDORD.RTR&mpa.RTRWrite == 0 {
		sendHandshakeTerminate(nc, ddp.CauseMPANoMatchingRTR)
		return s, false, fmt.Errorf("MPA Reply (%v): no RTR type in common (offered a zero-length RDMA Write)", *rep)
	}
	return s, true, nil
}

// ErrNotMPA is the error Dial returns, wrapped with what arrived, when the
// peer answers the MPA Request with bytes that cannot start an MPA Reply
// (RFC 5044 section 7.1.2): it is not an iWARP responder, an HTTP server
// say. A peer that answers nothing is only told by HandshakeTimeout.
var ErrNotMPA = errors.New("the peer does not speak MPA (not an RDMA server?)")

// awaitKey waits for the answer to the MPA Request byte by byte as far as
// its key, and fails with ErrNotMPA at the first byte that no MPA key has
// there, so that a peer speaking another protocol is told from its first
// bytes rather than after HandshakeTimeout. A Request key is let through
// for checkReply to name.
func awaitKey(br *rxBuf) error {
	for n := 1; n <= mpa.KeyLen; n++ {
		b, err := br.Peek(n)
		for i := range b {
			if b[i] != mpa.ReplyKey[i] && b[i] != mpa.RequestKey[i] {
				got, _ := br.Peek(min(br.Buffered(), 32))
				return fmt.Errorf("MPA Reply expected, the peer sent %q: %w", got, ErrNotMPA)
			}
		}
		if err != nil {
			return streamErr(b, err)
		}
	}
	return nil
}

// checkReply returns why a Reply that is not a rejection cannot be
// accepted, or "".
func checkReply(rep *mpa.Frame) string {
	switch {
	case rep.Kind != mpa.Reply:
		return "an MPA Request where a Reply was due"
	case rep.Rev < 1:
		return "revision 0 (pre-standard MPA) is not spoken here"
	case rep.Flags&mpa.FlagMarker != 0:
		return "the responder asks for markers, which this provider does not insert"
	case len(rep.PrivateData) > rdma.MaxPrivateData:
		return fmt.Sprintf("%d bytes of private data, more than %d", len(rep.PrivateData), rdma.MaxPrivateData)
	}
	return ""
}

// Listener is an iWARP listener on a TCP port; it implements
// rdma.Listener.
type Listener struct {
	p         *Provider
	ln        net.Listener
	reqs      chan *ConnRequest
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop and the handshakes

	mu       sync.Mutex
	isClosed bool
	pending  map[net.Conn]pendingHS // connections whose Request is being read
	perHost  map[string]int         // pending, by remote host
	accepted uint64                 // TCP connections accepted, numbering pendingHS.seq
	evicted  atomic.Uint64          // handshakes closed to make room (HandshakesEvicted)
}

// pendingHS is a handshake in progress: its remote host, and its place in
// the order of arrival.
type pendingHS struct {
	host string
	seq  uint64
}

var _ rdma.Listener = (*Listener)(nil)

// Addr returns the TCP address to dial.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Accept waits for the next connection request that has passed the MPA
// Request checks. The returned rdma.ConnRequest is a *ConnRequest.
func (l *Listener) Accept(ctx context.Context) (rdma.ConnRequest, error) {
	select {
	case <-l.closed:
		return nil, fmt.Errorf("iwarp: accept on %v: %w", l.Addr(), rdma.ErrClosed)
	default:
	}
	select {
	case req := <-l.reqs:
		return req, nil
	case <-l.closed:
		return nil, fmt.Errorf("iwarp: accept on %v: %w", l.Addr(), rdma.ErrClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("iwarp: accept on %v: %w", l.Addr(), ctx.Err())
	}
}

// Close stops listening, drops the handshakes in progress and refuses the
// requests not yet accepted (their initiators see the connection close).
// It returns once the listener's goroutines have exited.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.isClosed = true
		close(l.closed)
		for nc := range l.pending {
			nc.Close()
		}
		l.mu.Unlock()
		l.ln.Close()
		l.wg.Wait()
		for {
			select {
			case req := <-l.reqs:
				req.refuse()
			default:
				return
			}
		}
	})
	return nil
}

// acceptLoop accepts TCP connections and starts a handshake for each.
func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or similar: back off, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.p.log.Debug("iwarp: accept failed", "addr", l.Addr(), "err", err, "retry", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.closed:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		l.mu.Lock()
		if l.isClosed {
			l.mu.Unlock()
			nc.Close()
			return
		}
		host := remoteHost(nc)
		victim := l.makeRoomLocked(host)
		l.accepted++
		l.pending[nc] = pendingHS{host: host, seq: l.accepted}
		l.perHost[host]++
		l.wg.Add(1)
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			l.p.stats.hsEvicted.Add(1)
			l.p.log.Debug("iwarp: too many handshakes in progress; the oldest closed", "remote", victim.RemoteAddr(), "for", nc.RemoteAddr())
			victim.Close() // its handshake goroutine sees the error and ends
		}
		go l.handshake(nc)
	}
}

// makeRoomLocked makes room for a handshake from host when
// MaxHandshakesPerHost from host, or MaxHandshakes in all, are in
// progress: it takes the oldest handshake from host, or the oldest of all,
// out of l.pending and returns its connection for the caller to close
// (nil if there was room). l.mu is held. Scanning l.pending costs up to
// MaxHandshakes steps, taken only at a limit.
func (l *Listener) makeRoomLocked(host string) net.Conn {
	o := &l.p.opts
	fromHost := o.MaxHandshakesPerHost >= 0 && l.perHost[host] >= o.MaxHandshakesPerHost
	if !fromHost && (o.MaxHandshakes < 0 || len(l.pending) < o.MaxHandshakes) {
		return nil
	}
	var victim net.Conn
	var oldest pendingHS
	for nc, hs := range l.pending {
		if (!fromHost || hs.host == host) && (victim == nil || hs.seq < oldest.seq) {
			victim, oldest = nc, hs
		}
	}
	if victim != nil {
		l.unpendLocked(victim)
	}
	return victim
}

// unpendLocked takes nc out of the handshakes in progress, if it is still
// there; l.mu is held.
func (l *Listener) unpendLocked(nc net.Conn) {
	hs, ok := l.pending[nc]
	if !ok {
		return
	}
	delete(l.pending, nc)
	if l.perHost[hs.host]--; l.perHost[hs.host] <= 0 {
		delete(l.perHost, hs.host)
	}
}

// HandshakesEvicted returns how many handshakes in progress the listener
// has closed to make room for a newer one (Options.MaxHandshakes,
// MaxHandshakesPerHost).
func (l *Listener) HandshakesEvicted() uint64 { return l.evicted.Load() }

// remoteHost returns the host of nc's remote address.
func remoteHost(nc net.Conn) string {
	s := nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

// handshake reads the Request on nc and queues the request for Accept.
func (l *Listener) handshake(nc net.Conn) {
	defer l.wg.Done()
	req, err := l.respond(nc)
	l.mu.Lock()
	l.unpendLocked(nc) // unless evicted
	queued := false
	if err == nil && !l.isClosed {
		select {
		case l.reqs <- req:
			queued = true
		default:
		}
	}
	closed := l.isClosed
	l.mu.Unlock()
	switch {
	case queued:
	case err != nil:
		l.p.stats.handshakeFailures.Add(1)
		l.p.log.Debug("iwarp: MPA request refused", "remote", nc.RemoteAddr(), "err", err)
		nc.Close()
	case closed:
		req.refuse()
	default:
		req.autoReject(fmt.Sprintf("backlog of %d requests is full", listenBacklog))
		nc.Close()
	}
}

// respond reads and checks the MPA Request on a freshly accepted nc. It
// returns the request, or an error after it has answered the peer with a
// Reject where one is due; the caller counts the failure and closes nc.
func (l *Listener) respond(raw net.Conn) (*ConnRequest, error) {
	p := l.p
	mulpdu := p.mulpdu(raw)
	nc := raw
	if p.wrap != nil {
		nc = p.wrap(raw)
	}
	nc.SetDeadline(time.Now().Add(p.opts.HandshakeTimeout))
	cr := &countReader{r: nc}
	br := newRxBuf(cr, readBufSize)
	r := &ConnRequest{l: l, nc: nc, raw: raw, cr: cr, br: br, mulpdu: mulpdu}
	hdr, err := br.Peek(mpa.FrameHeaderLen)
	if err != nil {
		return nil, p.handshakeErr(context.Background(), "read MPA Request", streamErr(hdr, err))
	}
	// The flags and revision, for a Reject to a frame that fails below.
	r.req = mpa.Frame{Kind: mpa.Request, Flags: mpa.Flags(hdr[16]), Rev: hdr[17]}
	f, err := readFrame(br, mpa.MaxPrivateDataLen)
	switch {
	case errors.Is(err, mpa.ErrIRDORD):
		// Well formed, but enhanced without room for the IRD/ORD word:
		// siw rejects rather than drops it.
		r.autoReject("enhanced MPA Request without an IRD/ORD word")
		return nil, fmt.Errorf("MPA Request: %w", err)
	case err != nil:
		return nil, p.handshakeErr(context.Background(), "read MPA Request", err)
	}
	r.req = f
	switch {
	case f.Kind != mpa.Request:
		return nil, fmt.Errorf("an MPA Reply where a Request was due (%v)", f)
	case f.Rev < 1:
		return nil, fmt.Errorf("MPA Request (%v): revision 0 (pre-standard MPA) is not spoken here", f)
	case f.Flags&mpa.FlagMarker != 0:
		r.autoReject("markers requested")
		return nil, fmt.Errorf("MPA Request (%v): markers requested, which this provider does not insert", f)
	case len(f.PrivateData) > rdma.MaxPrivateData:
		r.autoReject("private data too long")
		return nil, fmt.Errorf("MPA Request (%v): %d bytes of private data, more than %d", f, len(f.PrivateData), rdma.MaxPrivateData)
	}
	nc.SetDeadline(time.Time{})
	return r, nil
}

type reqState uint8

const (
	reqPending   reqState = iota
	reqAccepting          // Accept is running the responder's Prepare
	reqAnswered
)

func (s reqState) String() string {
	switch s {
	case reqPending:
		return "request pending"
	case reqAccepting:
		return "request being accepted"
	}
	return "request already answered"
}

// ConnRequest is an initiator's MPA Request, as Listener.Accept returns
// it; it implements rdma.ConnRequest.
type ConnRequest struct {
	l      *Listener
	nc     net.Conn
	raw    net.Conn
	cr     *countReader
	br     *rxBuf
	mulpdu int
	req    mpa.Frame

	mu    sync.Mutex
	state reqState
}

var _ rdma.ConnRequest = (*ConnRequest)(nil)

// PrivateData returns the initiator's private data, without the MPA v2
// IRD/ORD word.
func (r *ConnRequest) PrivateData() []byte { return r.req.PrivateData }

// Request returns the MPA Request as received (flags, revision, IRD/ORD
// word). Its PrivateData must not be modified.
func (r *ConnRequest) Request() mpa.Frame { return r.req }

// RemoteAddr returns the initiator's TCP address.
func (r *ConnRequest) RemoteAddr() net.Addr { return r.nc.RemoteAddr() }

// LocalAddr returns the TCP address the request arrived on.
func (r *ConnRequest) LocalAddr() net.Addr { return r.nc.LocalAddr() }

// take moves the request from pending to state and returns the state it
// found.
func (r *ConnRequest) take(to reqState) reqState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state
	if st == reqPending {
		r.state = to
	}
	return st
}

func (r *ConnRequest) setAnswered() {
	r.mu.Lock()
	r.state = reqAnswered
	r.mu.Unlock()
}

// reply returns the MPA Reply to the request: the Request's revision and
// enhanced mode, C by the CRC policy, R if reject, the IRD/ORD word w and
// private data pd. A peer-to-peer Request gets one RTR type: RDMA Write if
// offered, else RDMA Read if offered, else RDMA Write, as siw chooses.
func (r *ConnRequest) reply(reject bool, w mpa.IRDORD, pd []byte) mpa.Frame {
	f := mpa.Frame{Kind: mpa.Reply, Rev: r.req.Rev, PrivateData: pd}
	switch r.l.p.opts.CRC {
	case CRCFollow:
		f.Flags |= r.req.Flags & mpa.FlagCRC
	case CRCRequire:
		f.Flags |= mpa.FlagCRC
	}
	if reject {
		f.Flags |= mpa.FlagReject
	}
	if r.req.Enhanced() {
		f.Flags |= mpa.FlagEnhanced
		f.IRDORD = w
		if r.req.IRDORD.PeerToPeer {
			f.IRDORD.PeerToPeer = true
			f.IRDORD.RTR = mpa.RTRWrite
			if offered := r.req.IRDORD.RTR & (mpa.RTRWrite | mpa.RTRRead); offered != 0 {
				f.IRDORD.RTR = offered.Pick()
			}
		}
	}
	return f
}

// writeReply writes f, bounded by the handshake timeout.
func (r *ConnRequest) writeReply(f mpa.Frame) error {
	b, err := f.Append(make([]byte, 0, f.EncodedLen()))
	if err != nil {
		return fmt.Errorf("encode MPA Reply: %w", err)
	}
	r.nc.SetWriteDeadline(time.Now().Add(r.l.p.opts.HandshakeTimeout))
	defer r.nc.SetWriteDeadline(time.Time{})
	if _, err := r.nc.Write(b); err != nil {
		return fmt.Errorf("write MPA Reply: %w", err)
	}
	return nil
}

// autoReject answers with a Reply with R and no private data (a zero
// IRD/ORD word if enhanced), as siw does for what it refuses by itself.
// The caller closes the connection.
func (r *ConnRequest) autoReject(why string) {
	r.l.p.stats.autoRejects.Add(1)
	r.l.p.log.Debug("iwarp: MPA request rejected", "remote", r.nc.RemoteAddr(), "why", why)
	r.writeReply(r.reply(true, mpa.IRDORD{}, nil))
}

// refuse closes a request that will never be answered (its listener
// closed): the initiator's Dial fails when it reads the end of stream.
func (r *ConnRequest) refuse() {
	if r.take(reqAnswered) == reqPending {
		r.nc.Close()
	}
}

// Reject refuses the request: a Reply with R and privateData, then close.
func (r *ConnRequest) Reject(privateData []byte) error {
	if err := rdma.CheckPrivateData("reject", privateData); err != nil {
		return err
	}
	if st := r.take(reqAnswered); st != reqPending {
		return fmt.Errorf("iwarp: reject request from %v: %s", r.RemoteAddr(), st)
	}
	defer r.nc.Close()
	if err := r.writeReply(r.reply(true, mpa.IRDORD{}, privateData)); err != nil {
		return fmt.Errorf("iwarp: reject request from %v: %w", r.RemoteAddr(), err)
	}
	return nil
}

// initiatorGone reports whether the initiator has closed its end, which it
// does when its Dial gives up. A Request is the last thing a well-behaved
// initiator sends before the Reply, so anything readable now is either the
// end of the stream or, from a misbehaving peer, data kept for the reader.
func (r *ConnRequest) initiatorGone() bool {
	if r.br.Buffered() > 0 {
		return false
	}
	if closed, ok := peerClosed(r.raw); ok {
		return closed
	}
	r.nc.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := r.br.Peek(1)
	r.nc.SetReadDeadline(time.Time{})
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// Accept settles IRD/ORD, creates the connection, runs cfg.Prepare and
// sends the Reply. The returned rdma.Conn is a *Conn.
func (r *ConnRequest) Accept(ctx context.Context, cfg rdma.ConnConfig) (rdma.Conn, error) {
	if err := rdma.CheckPrivateData("accept", cfg.PrivateData); err != nil {
		return nil, err
	}
	s, err := r.l.p.newSettings(cfg)
	if err != nil {
		return nil, fmt.Errorf("iwarp: accept request from %v: %w", r.RemoteAddr(), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("iwarp: accept request from %v: %w", r.RemoteAddr(), err)
	}
	if st := r.take(reqAccepting); st != reqPending {
		return nil, fmt.Errorf("iwarp: accept request from %v: %s", r.RemoteAddr(), st)
	}
	defer r.setAnswered()
	p := r.l.p
	var w mpa.IRDORD
	if r.req.Enhanced() {
		s, w = negotiateResponder(s, r.req.IRDORD)
	}
	rep := r.reply(false, w, cfg.PrivateData)
	c := newConn(p, connParams{
		nc:     r.nc,
		raw:    r.raw,
		cr:     r.cr,
		br:     r.br,
		mulpdu: r.mulpdu,
		s:      s,
		crc:    (r.req.Flags|rep.Flags)&mpa.FlagCRC != 0,
		rev:    int(r.req.Rev),
		peerPD: r.req.PrivateData,
	})
	if cfg.Prepare != nil {
		if err := cfg.Prepare(c); err != nil {
			r.writeReply(r.reply(true, w, nil))
			c.Close()
			return nil, fmt.Errorf("iwarp: accept request from %v: prepare: %w", r.RemoteAddr(), err)
		}
	}
	if r.initiatorGone() {
		c.Close()
		return nil, fmt.Errorf("iwarp: accept request from %v: the initiator has gone", r.RemoteAddr())
	}
	if err := r.writeReply(rep); err != nil {
		c.Close()
		return nil, fmt.Errorf("iwarp: accept request from %v: %w", r.RemoteAddr(), err)
	}
	c.start()
	p.stats.accepts.Add(1)
	return c, nil
}
