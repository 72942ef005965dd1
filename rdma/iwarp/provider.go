package iwarp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/srq"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

// Provider limits. A ConnConfig value of zero picks the default; a larger
// value than the maximum is lowered to it. The read depths are Linux siw's
// (SIW_MAX_IRD_QP, SIW_MAX_ORD_QP), so that what we advertise never exceeds
// what a siw peer accepts.
const (
	DefaultQueueDepth = 128
	MaxQueueDepth     = 16384
	DefaultReadDepth  = 16 // IRD and ORD
	MaxReadDepth      = 128
	MaxSGE            = 32
	MaxMessageSize    = 1 << 30
)

// Option defaults.
const (
	// DefaultRevision is the MPA revision Dial speaks: RFC 6581's enhanced
	// MPA, which is what Linux siw sends and what the Linux NFS server
	// requires (it rejects Rev 1).
	DefaultRevision = 2

	// DefaultHandshakeTimeout bounds each side of the MPA exchange: how
	// long Dial waits for the Reply (Linux siw waits 10 s) and how long a
	// listener waits for the Request after the TCP accept.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxHandshakes and DefaultMaxHandshakesPerHost bound a
	// listener's MPA handshakes in progress, in all and from one host.
	DefaultMaxHandshakes        = 1024
	DefaultMaxHandshakesPerHost = 128

	// SiwFirstSendDelay is the Options.FirstSendDelay to use toward a
	// Linux soft-iWARP (siw) responder, such as the Linux NFS server over
	// siw. Linux 6.1 siw as responder writes its MPA Reply before it hooks
	// the socket to the queue pair (docs/linux-interop.md section 1); an
	// FPDU that lands in that window stays unread until the next TCP
	// segment arrives, so the first call of a connection can hang (about
	// one connection in two to knfsd in the lab without the delay). The window is
	// the time siw takes to move its QP to RTS, well under a millisecond
	// on real hardware and a few milliseconds under emulation, so 50 ms
	// covers it many times over. It is not the default: the MPA exchange
	// cannot tell siw apart (its Reply copies the Request's flags and
	// revision and negotiates IRD/ORD by RFC 6581 section 9.1 as this
	// provider does), and no other responder needs it.
	SiwFirstSendDelay = 50 * time.Millisecond

	// DefaultMSS is the TCP maximum segment size assumed when the socket
	// cannot tell (not Linux, or a wrapped net.Conn): Ethernet's 1500-byte
	// MTU minus IPv4 and TCP headers.
	DefaultMSS = 1460
)

// listenBacklog bounds the requests that have completed the MPA Request
// but wait for Listener.Accept; more are rejected.
const listenBacklog = 64

// CRCPolicy says when this side sets the C flag (RFC 5044 section 7.1) in
// the MPA Request or Reply it sends. Whatever the policy, CRC32c is used in
// both directions exactly when either frame has C set (RFC 5044 section
// 7.1): RFC 5044 lets a side stop asking for CRC but not refuse a peer who
// asks.
type CRCPolicy uint8

const (
	// CRCFollow is what Linux siw does: an initiator does not ask (C=0),
	// a responder copies the Request's C into its Reply. CRC is on iff
	// the initiator asked.
	CRCFollow CRCPolicy = iota
	// CRCRequire always asks (C=1 in Request and Reply), RFC 5044's
	// recommended default: CRC is always on.
	CRCRequire
	// CRCRefuse never asks (C=0 in Request and Reply): CRC is on only if
	// the peer asks, since RFC 5044 does not allow refusing it.
	CRCRefuse
)

// String returns "follow", "require" or "refuse".
func (p CRCPolicy) String() string {
	switch p {
	case CRCFollow:
		return "follow"
	case CRCRequire:
		return "require"
	case CRCRefuse:
		return "refuse"
	}
	return fmt.Sprintf("CRCPolicy(%d)", uint8(p))
}

// Options configure a Provider. The zero value asks for the defaults.
type Options struct {
	// Revision is the MPA revision Dial sends: 2 (RFC 6581 enhanced, with
	// the IRD/ORD word; the default) or 1 (RFC 5044, no IRD/ORD exchange:
	// each side keeps its configured IRD and ORD). A listener answers
	// whichever of 1 and 2 the initiator speaks.
	Revision int

	// CRC is when this side asks for CRC32c; see CRCPolicy.
	CRC CRCPolicy

	// HandshakeTimeout bounds the MPA exchange on each side; zero means
	// DefaultHandshakeTimeout. Dial's context can only shorten it. It
	// also bounds how long MR.Invalidate waits for a peer that stalls in
	// the middle of an FPDU being placed into that region.
	HandshakeTimeout time.Duration

	// MaxHandshakes bounds the MPA handshakes a listener has in progress
	// (TCP connections whose Request has not yet been read), each of
	// which holds a socket and a goroutine for up to HandshakeTimeout;
	// MaxHandshakesPerHost bounds those from one remote host. A TCP
	// connection beyond either closes the oldest handshake in progress
	// (from its host, when that host is at MaxHandshakesPerHost) and takes
	// its place (Stats.HandshakesEvicted), so a flood of connections that
	// never send their Request holds a bounded number of sockets and
	// goroutines, each for less than HandshakeTimeout, and a peer that
	// sends its Request at once still gets through. Each costs a
	// socket, a goroutine and a read buffer (about 8 KiB). Zero means
	// DefaultMaxHandshakes and DefaultMaxHandshakesPerHost; negative, no
	// limit.
	MaxHandshakes        int
	MaxHandshakesPerHost int

	// FirstSendDelay is how long an initiator holds its first FPDU after
	// the MPA Reply, which a Linux siw responder needs (see
	// SiwFirstSendDelay); zero or negative, the default, means none. With
	// a delay, the trailer of that first write goes one more
	// FirstSendDelay later in a TCP segment of its own, which wakes a siw
	// responder that missed the first segment. Work posted meanwhile is
	// queued, not refused.
	FirstSendDelay time.Duration

	// PeerToPeer makes Dial ask for RFC 6581 peer-to-peer mode, offering a
	// zero-length RDMA Write as the ready-to-receive (RTR) message. When
	// the responder agrees, that Write is the initiator's first FPDU and
	// lifts the responder's fence (RFC 5044 section 7.1.2: a responder
	// sends nothing before the initiator's first FPDU), so upper layers
	// whose responder speaks first work. Off by default, as in Linux siw:
	// RPC-over-RDMA requesters always send first, and an unsolicited
	// zero-length Write would be refused by a siw peer that did not agree
	// to peer-to-peer mode.
	PeerToPeer bool

	// LocalAddr, if set, is the address Dial binds its sockets to, as
	// net.Dialer.LocalAddr (a *net.TCPAddr; port 0 for any); nil lets
	// the system choose. A host with several addresses picks the one its
	// connections come from.
	LocalAddr net.Addr

	// MSS, if positive, replaces the TCP maximum segment size read from
	// the socket (TCP_MAXSEG on Linux) when sizing FPDUs.
	MSS int

	// Logger receives connection events (handshake failures, Terminates)
	// at debug level; nil discards them.
	Logger *slog.Logger
}

// Stats count events of a Provider since New. Every rejection of peer
// input bumps one of them.
type Stats struct {
	Dials             uint64 // connections established by Dial
	Accepts           uint64 // connections established by ConnRequest.Accept
	HandshakeFailures uint64 // MPA exchanges that failed (bad frame, timeout, refused option, evicted)
	AutoRejects       uint64 // Requests answered with a Reject by the provider (markers, private data)
	HandshakesEvicted uint64 // handshakes in progress closed to make room for a newer one: MaxHandshakes or MaxHandshakesPerHost
	TerminatesSent    uint64 // Terminates sent on established connections: violations detected here
	TerminatesRecv    uint64 // Terminates received on established connections
}

type stats struct {
	dials, accepts, handshakeFailures, autoRejects, termSent, termRecv, hsEvicted atomic.Uint64
}

// Provider is an rdma.Provider speaking iWARP over TCP: MPA (RFC 5044, RFC
// 6581), DDP (RFC 5041) and RDMAP (RFC 5040), byte-compatible with Linux
// soft-iWARP. It owns a device-wide STag table shared by its connections,
// so an STag of another connection is recognised and refused as "not
// associated" (as siw does), never reached. Create it with New; its methods
// are safe for concurrent use.
type Provider struct {
	opts  Options
	log   *slog.Logger
	stags *memreg.Table
	stats stats
	// txBufs holds the batch buffers of connections between batches
	// (*txBufs, conn_send.go).
	txBufs sync.Pool

	// wrap, if set, wraps every connection's net.Conn after the socket
	// options are read; tests use it to record the byte streams.
	wrap func(net.Conn) net.Conn
}

var _ rdma.Provider = (*Provider)(nil)

// New returns a Provider with opts. It fails for an unknown revision or
// CRC policy and for negative sizes or timeouts.
func New(opts Options) (*Provider, error) {
	switch {
	case opts.Revision == 0:
		opts.Revision = DefaultRevision
	case opts.Revision != 1 && opts.Revision != 2:
		return nil, fmt.Errorf("iwarp: new provider: MPA revision %d, want 1 or 2: %w", opts.Revision, rdma.ErrInvalid)
	}
	if opts.CRC > CRCRefuse {
		return nil, fmt.Errorf("iwarp: new provider: %v: %w", opts.CRC, rdma.ErrInvalid)
	}
	if opts.HandshakeTimeout < 0 || opts.MSS < 0 {
		return nil, fmt.Errorf("iwarp: new provider: negative handshake timeout or MSS: %w", rdma.ErrInvalid)
	}
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.MaxHandshakes == 0 {
		opts.MaxHandshakes = DefaultMaxHandshakes
	}
	if opts.MaxHandshakesPerHost == 0 {
		opts.MaxHandshakesPerHost = DefaultMaxHandshakesPerHost
	}
	opts.FirstSendDelay = max(opts.FirstSendDelay, 0)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{opts: opts, log: log, stags: newSTagTable()}, nil
}

// Options returns the options in force, defaults filled in (a
// FirstSendDelay of none reads as 0).
func (p *Provider) Options() Options { return p.opts }

// Stats returns the provider's counters.
func (p *Provider) Stats() Stats {
	return Stats{
		Dials:             p.stats.dials.Load(),
		Accepts:           p.stats.accepts.Load(),
		HandshakeFailures: p.stats.handshakeFailures.Load(),
		AutoRejects:       p.stats.autoRejects.Load(),
		HandshakesEvicted: p.stats.hsEvicted.Load(),
		TerminatesSent:    p.stats.termSent.Load(),
		TerminatesRecv:    p.stats.termRecv.Load(),
	}
}

// Registered returns how many memory regions are registered on the
// provider's connections: the leak check for registered memory.
func (p *Provider) Registered() int {
	return p.stags.Live()
}

// Dial connects to the listener at addr ("host:port") as the initiator:
// TCP connect, MPA Request with cfg.PrivateData, MPA Reply. The returned
// rdma.Conn is a *Conn. See rdma.Provider.
func (p *Provider) Dial(ctx context.Context, addr string, cfg rdma.ConnConfig) (rdma.Conn, error) {
	if err := rdma.CheckPrivateData("dial", cfg.PrivateData); err != nil {
		return nil, err
	}
	s, err := p.newSettings(cfg)
	if err != nil {
		return nil, fmt.Errorf("iwarp: dial %s: %w", addr, err)
	}
	d := net.Dialer{LocalAddr: p.opts.LocalAddr}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("iwarp: %w", err) // a *net.OpError names the address
	}
	c, err := p.initiate(ctx, nc, s, cfg.PrivateData)
	if err != nil {
		p.stats.handshakeFailures.Add(1)
		p.log.Debug("iwarp: dial failed", "addr", addr, "err", err)
		var re *rdma.RejectError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("iwarp: dial %s: %w", addr, err)
	}
	if cfg.Prepare != nil {
		if err := cfg.Prepare(c); err != nil {
			c.Close()
			return nil, fmt.Errorf("iwarp: dial %s: prepare: %w", addr, err)
		}
	}
	c.start()
	p.stats.dials.Add(1)
	return c, nil
}

// Listen starts a TCP listener at addr ("host:port"; port 0 picks one).
// The returned rdma.Listener is a *Listener.
func (p *Provider) Listen(ctx context.Context, addr string) (rdma.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("iwarp: listen %s: %w", addr, err)
	}
	l := &Listener{
		p:       p,
		ln:      ln,
		reqs:    make(chan *ConnRequest, listenBacklog),
		closed:  make(chan struct{}),
		pending: make(map[net.Conn]pendingHS),
		perHost: make(map[string]int),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// mulpdu returns the largest ULPDU this side sends on nc: RFC 5044 section
// 7.1 applied to the path MSS.
func (p *Provider) mulpdu(nc net.Conn) int {
	mss := p.opts.MSS
	if mss == 0 {
		var ok bool
		if mss, ok = tcpMSS(nc); !ok {
			mss = DefaultMSS
		}
	}
	return mpa.MULPDU(mss, false)
}

// settings are one side's queue sizes, read depths and shared receive
// queue.
type settings struct {
	sq, rq, ird, ord int
	srq              *srq.Queue
}

func (p *Provider) newSettings(cfg rdma.ConnConfig) (settings, error) {
	d, q, err := srq.Depths(cfg,
		rdma.Depths{SendQueue: DefaultQueueDepth, RecvQueue: DefaultQueueDepth, IRD: DefaultReadDepth, ORD: DefaultReadDepth},
		rdma.Depths{SendQueue: MaxQueueDepth, RecvQueue: MaxQueueDepth, IRD: MaxReadDepth, ORD: MaxReadDepth}, p)
	return settings{sq: d.SendQueue, rq: d.RecvQueue, ird: d.IRD, ord: d.ORD, srq: q}, err
}

// Shared receive queue limits. A SharedRecvConfig.Depth of zero picks the
// default; a larger one than the maximum is lowered to it.
const (
	DefaultSharedRecvDepth = 1024
	MaxSharedRecvDepth     = 1 << 20
)

var _ rdma.SharedRecvProvider = (*Provider)(nil)

// NewSharedRecvQueue returns a shared receive queue for the provider's
// connections.
func (p *Provider) NewSharedRecvQueue(cfg rdma.SharedRecvConfig) (rdma.SharedRecvQueue, error) {
	d, err := srq.Depth(cfg, DefaultSharedRecvDepth, MaxSharedRecvDepth)
	if err != nil {
		return nil, fmt.Errorf("iwarp: %w", err)
	}
	return srq.New(srq.Config{Name: "iwarp", Provider: p, STags: p.stags, MaxSGE: MaxSGE, Depth: d}), nil
}

// negotiateResponder applies RFC 6581 section 9.1 at the responder to the
// initiator's IRD/ORD word: its IRD rises to the initiator's ORD (up to
// MaxReadDepth), its ORD falls to the initiator's IRD. The all-ones value
// mpa.MaxIRDORD means "no automatic negotiation": the responder keeps its
// own value and answers all-ones in that field. It returns the settings in
// force and the word for the Reply.
func negotiateResponder(s settings, init mpa.IRDORD) (settings, mpa.IRDORD) {
	var w mpa.IRDORD
	if init.ORD == mpa.MaxIRDORD {
		w.IRD = mpa.MaxIRDORD
	} else {
		s.ird = min(max(s.ird, int(init.ORD)), MaxReadDepth)
		w.IRD = uint16(s.ird)
	}
	if init.IRD == mpa.MaxIRDORD {
		w.ORD = mpa.MaxIRDORD
	} else {
		s.ord = min(s.ord, int(init.IRD))
		w.ORD = uint16(s.ord)
	}
	return s, w
}

// negotiateInitiator applies RFC 6581 section 9.1 at the initiator to the
// responder's word: its ORD falls to the responder's IRD and its IRD rises
// to the responder's ORD. It fails (MPA "insufficient IRD resources") when
// the responder's ORD exceeds MaxReadDepth.
func negotiateInitiator(s settings, resp mpa.IRDORD) (settings, error) {
	if resp.IRD != mpa.MaxIRDORD {
		s.ord = min(s.ord, int(resp.IRD))
	}
	if resp.ORD != mpa.MaxIRDORD {
		if int(resp.ORD) > MaxReadDepth {
			return s, fmt.Errorf("responder ORD %d exceeds the largest IRD %d", resp.ORD, MaxReadDepth)
		}
		s.ird = max(s.ird, int(resp.ORD))
	}
	return s, nil
}
