package rpcrdma

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// The backward direction (RFC 8167): RPC calls from the
// responder to the requester on the connection the requester opened, as
// NFSv4.1 sends its callbacks.
//
// Each backward message is one RDMA_MSG with all three chunk lists empty and
// the RPC message inline right after the transport header (RFC 8167, "Sending
// a Backward-Direction Call" and "... Reply"), so a receiver tells a backward
// call from a forward reply by the RPC msg_type alone. Backward messages are
// never larger than the inline threshold: there are no chunks to carry more.
//
// Credits and receives are separate from the forward direction's (RFC 8167,
// "Backward Credits" and "Managing Receive Buffers"). The requester posts
// BackwardCredits receives beyond those for its forward replies and grants
// that many backward credits in every backward reply; a backward call that
// would take it past that is dropped, as the responder drops forward calls
// beyond its receives. The responder posts a receive for each backward call
// it may have outstanding, starts with one backward credit (like every
// requester, RFC 5666 section 3.3) and takes the grant of each backward
// reply. The rdma_credit of a backward message never changes forward credits,
// and forward messages never change backward ones. XIDs of the two directions
// are independent (RFC 8167, "XID Values").
//
// The backward direction is off unless Config.BackwardCredits is set on both
// sides: a requester without it drops backward calls, which it has no
// receives for. RFC 8167 ("In the Absence of Backward-Direction Support")
// leaves it to the upper layer to tell the responder when backward calls may
// be sent (NFSv4.1 does it with CREATE_SESSION), so the requester has always
// sent a forward call first. That matters on iWARP: an MPA responder sends
// nothing before the initiator's first FPDU (RFC 5044 section 7.1.2), so a
// backward call sent earlier waits, queued, for it.
//
// Each role owns its half: a requester the serving half (backServer,
// backchannel_serve.go), a responder the calling half (backCaller,
// backchannel_call.go). What both share, the queue to Recv, Close and the
// inline send, is here.

// Backchannel is the backward direction of a Conn, as an rpc.Transport. On
// a requester's Conn it is the serving side, for an rpc.Server: Recv
// returns the responder's backward calls and Send takes their replies. On a
// responder's Conn it is the calling side, for an rpc.Client: Send sends
// backward calls and Recv returns their replies. Get it with
// Conn.Backchannel.
//
// Backward calls are for after the requester has said it takes them (see
// Config.BackwardCredits); on iWARP one sent before the requester's first
// message waits for it. A backward call its caller gives up on keeps its
// backward credit until its reply arrives, since the requester still
// counts it. Backward messages carry no chunks: DDP-eligible items travel
// inline and ResultBufs are not used, and a message that does not fit the
// inline threshold fails its Send with an error naming the sizes.
//
// Close ends the backward direction only; the connection carries on, and
// its end ends the Backchannel too.
type Backchannel struct {
	c       *Conn
	credits uint32   // Config.BackwardCredits
	half    backHalf // the serving half on a requester, the calling half on a responder

	incoming  chan bcIn // backward calls (requester) or replies (responder)
	closed    chan struct{}
	closeOnce sync.Once
}

// backHalf is what one role's half of the backward direction does for
// the Backchannel both share.
type backHalf interface {
	// send is Send once the checks common to both halves have passed:
	// the reply to a backward call (serving), or a backward call
	// (calling).
	send(ctx context.Context, m *rpc.Msg) error
	// close fails what waits on this half, now and later, with err.
	close(err error)
}

// bcIn is what Recv returns: a message, or a *rpc.CallError failing one
// backward call. A reply (or its error) on a responder holds its call's
// backward credit, in credit, until Recv takes it, so replies waiting for
// Recv never outnumber the credits, nor the room in incoming.
type bcIn struct {
	m      *rpc.Msg
	err    error
	credit *creditWindow // the window to give the credit back to; nil if none is held
}

// newBackchannel returns the Backchannel of c whose role's half is half.
func newBackchannel(c *Conn, half backHalf) *Backchannel {
	n := c.cfg.BackwardCredits
	return &Backchannel{
		c:        c,
		credits:  n,
		half:     half,
		incoming: make(chan bcIn, n),
		closed:   make(chan struct{}),
	}
}

// Backchannel returns the backward direction of c (RFC 8167), or nil if
// Config.BackwardCredits was zero when c was created.
func (c *Conn) Backchannel() *Backchannel { return c.role.backchannel() }

// errBackClosed is what a closed Backchannel returns.
var errBackClosed = &rpc.ConnError{Err: fmt.Errorf("rpcrdma: backchannel closed: %w", net.ErrClosed)}

// Close ends the backward direction: Recv returns an error wrapping
// net.ErrClosed, and so do later Sends. Backward calls that arrive after
// it are dropped. The connection is not closed.
func (b *Backchannel) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		b.half.close(errBackClosed)
	})
	return nil
}

// Recv returns the next backward call (on a requester's Conn) or the reply
// to a backward call (on a responder's), or a *rpc.CallError failing a
// backward call whose reply broke the rules. It implements rpc.Transport.
func (b *Backchannel) Recv() (*rpc.Msg, error) {
	select {
	case in := <-b.incoming:
		return b.take(in)
	default:
	}
	select {
	case in := <-b.incoming:
		return b.take(in)
	case <-b.closed:
		return nil, errBackClosed
	case <-b.c.done:
		// What arrived before the end is delivered first.
		select {
		case in := <-b.incoming:
			return b.take(in)
		default:
			return nil, b.c.Err()
		}
	}
}

// take returns what Recv delivers, giving back the credit a reply held.
func (b *Backchannel) take(in bcIn) (*rpc.Msg, error) {
	if in.credit != nil {
		in.credit.release()
	}
	return in.m, in.err
}

// Send sends a backward call (on a responder's Conn), waiting for a
// backward credit, or the reply to a backward call (on a requester's). It
// implements rpc.Transport.
func (b *Backchannel) Send(ctx context.Context, m *rpc.Msg) error {
	select {
	case <-b.closed:
		return errBackClosed
	default:
	}
	if len(m.XDR) < 8 {
		return fmt.Errorf("rpcrdma: backward message of %d bytes has no RPC header", len(m.XDR))
	}
	return b.half.send(ctx, m)
}

// sendInline posts m inline behind h, which the peer must be able to
// receive.
func (b *Backchannel) sendInline(ctx context.Context, h *wire.Header, m *rpc.Msg, what string) error {
	c := b.c
	n := h.EncodedLen() + m.Len()
	if limit := c.negV[h.Vers].sendLimit; n > limit {
		return fmt.Errorf("rpcrdma: backward %s of %d bytes (transport header included) exceeds the %d-byte inline threshold; backward messages carry no chunks (RFC 8167)", what, n, limit)
	}
	payload := m.AppendFlat(make([]byte, 0, m.Len()))
	return c.sendMsg(ctx, h, [][]byte{payload}, 0, false)
}

// isBackward reports whether a received RDMA_MSG is a backward message in the
// form RFC 8167 requires of backward calls and replies: every chunk list
// empty.
func isBackward(h *wire.Header) bool {
	return h.Proc == wire.RDMA_MSG && len(h.Chunks.Reads) == 0 && len(h.Chunks.Writes) == 0 && !h.Chunks.Reply.Present
}
