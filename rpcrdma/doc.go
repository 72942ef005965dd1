// Package rpcrdma is the RPC-over-RDMA transport: ONC RPC carried over any
// rdma.Provider, as RFC 8166 (Version One, which obsoletes RFC 5666), RFC
// 8167 (bidirectional operation), RFC 8797 (connection private data) and
// draft-cel-nfsv4-rpcrdma-version-two-00 (Version Two) define it. The
// transport headers are encoded and decoded by package rpcrdma/wire.
//
// A *Conn implements rpc.Transport, so rpc.Client and rpc.Server run over
// it unchanged:
//
//	l, _ := rpcrdma.Listen(ctx, provider, "127.0.0.1:20049", nil)
//	go rpcrdma.Serve(ctx, l, srv)               // srv is an *rpc.Server
//
//	conn, _ := rpcrdma.Dial(ctx, provider, "127.0.0.1:20049", nil)
//	cli := rpc.NewClient(conn)
//
// The upper layer decides what may move by RDMA through rpc.Body:
// arguments appended with Body.AppendDDPOpaque travel in read chunks (when
// at least Config.DDPThreshold bytes), rpc.Request.ResultBufs become write
// chunks, so results land in the caller's memory, and rpc.Request.MaxReply
// decides whether a reply chunk is offered. Everything else is chosen
// here: inline when the message fits the peer's receive buffer, a long
// call (RDMA_NOMSG with a position-zero read chunk) when it does not.
//
// Flow control follows RFC 8166 Section 3.3.1: a connection starts with
// one credit, the responder's GrantPolicy caps the requester's
// outstanding calls, and a requester waiting for a credit respects its
// context. The backward direction (RFC 8167) is on when both sides set
// Config.BackwardCredits; Conn.Backchannel is then an rpc.Transport for an
// rpc.Client on the responder and an rpc.Server on the requester, inline
// only, with credits, receives and XIDs of its own. DialClient gives a
// client that outlives its connection: calls in flight are sent again on
// a new connection, never on the one they were sent on, whose credits they
// held (RFC 8166 Section 3.3), and an rpc.Server with
// ServerOptions.ReplyCache runs them once.
//
// Errors: a *ConnError (matching net.ErrClosed) ends the connection and
// every call on it; a *RemoteError (the responder answered RDMA_ERROR),
// ErrCallTooLarge and ErrBadReply fail one call. Stats counts what each
// connection carried and every message it dropped or rejected, by Reason.
//
// # The short path
//
// A call made when no other is in flight is completed by its caller: it
// takes the turn to process the completion queue from the connection's
// loop (rdma.WaitInterrupter) until its reply is in, and with a provider
// that implements rdma.DirectIO it also does the provider's socket work,
// so a round trip runs on one goroutine per side. A responder handles a
// call that offers no write or reply chunk on its loop (rpc.InlineReplier,
// ReserveReply). One goroutine at a time has the turn, so completions are
// processed in the provider's order whoever processes them.
//
// # Bounds
//
// A responder is bounded whatever its peers do: Config.Bounds limits
// connections (in all and per host; at a limit a new one makes room by
// closing the oldest that has not sent its first message, else the least
// recently active without a call in flight, and is refused only when
// every connection is busy), idle and silent ones, the memory a
// call, a connection and a Listener may make it hold (reserved before any
// allocation or RDMA Read), how long RDMA Reads may stall, and, through
// Bounds.ArgLimit, the read chunks each procedure takes. Bounds.SharedReceives
// has a Listener's connections receive from one shared pool. Each limit
// that acts is counted by Reason and logged with the peer's address, a
// repeated one once per Bounds.LogInterval with its count.
//
// docs/rpcrdma-internals.md in the repository describes the short path
// and the bounds in full, compares the bounds with Linux's svcrdma, and
// says which file holds what.
package rpcrdma
