// Package rpcrdma is the RPC-over-RDMA transport: ONC RPC carried over any
// rdma.Provider, as RFC 8166 (Version One, which
// obsoletes RFC 5666), RFC 8167 (bidirectional operation), RFC 8797
// (connection private data) and draft-cel-nfsv4-rpcrdma-version-two-00
// (Version Two) define it.
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
// The upper layer decides what moves by RDMA through rpc.Body: arguments
// appended with Body.AppendDDPOpaque are DDP-eligible and travel in read
// chunks (when at least Config.DDPThreshold bytes); a call's
// rpc.Request.ResultBufs become write chunks, so results land directly in
// the caller's memory; rpc.Request.MaxReply decides whether a reply chunk is
// offered. Everything else is chosen here: inline when the message fits
// the peer's receive buffer, a long call (RDMA_NOMSG with a position-zero
// read chunk) when it does not, a reply chunk for replies too long to send
// inline.
//
// Flow control follows RFC 8166 section 3.3.1 (RFC 5666 section 3.3): every
// connection starts with one credit, the responder's grant (GrantPolicy,
// default 128) caps the requester's outstanding calls, and a requester
// waiting for a credit respects its context.
//
// The backward direction (RFC 8167) is on when both sides set
// Config.BackwardCredits: the responder then calls the requester on the
// same connection through Conn.Backchannel, an rpc.Transport for an
// rpc.Client on the responder and for an rpc.Server on the requester, with
// credits, receives and XIDs of its own. Backward messages are inline only.
//
// A client that outlives its connection comes from DialClient
// (rpc.DialClient over this transport): when the connection fails it dials
// another, and the calls in flight are sent again there, never on the
// connection they were sent on, since credits belong to one connection
// (RFC 8166 section 4.3). An rpc.Server with ServerOptions.ReplyCache
// answers such resent calls without running them twice.
//
// Errors: a *ConnError (matching net.ErrClosed) ends the connection and
// every call on it; a *RemoteError (the responder answered RDMA_ERROR),
// ErrCallTooLarge and ErrBadReply fail one call and the connection carries
// on. Stats counts what each connection carried, and every message it
// dropped or rejected by Reason.
//
// # The short path
//
// A call made one at a time would, done the general way, cross goroutines
// at the requester twice more than a TCP round trip does: the provider's
// goroutine queues the reply's completion and wakes the loop, which owns
// the completion queue; the loop decodes the reply and wakes the caller.
// So a requester lets the caller of the one call in flight process the
// completion queue itself (short.go), as rpc.StreamTransport lets a
// caller read its own reply over TCP (package rpc, "The short path"):
//
//   - The rpc.Client sends each call with SendDeliver (rpc.DirectPusher).
//     With no other call outstanding, the caller takes the turn (the right
//     to wait on the completion queue and process what it returns) and
//     processes completions, every one in the provider's order, replies
//     to other calls, send completions and backward calls included, until
//     its reply has been delivered to its own done channel; then it gives
//     the turn up. One goroutine at a time has the turn, so completions
//     are processed exactly as the loop alone would.
//   - The turn is the loop's, a caller's, or free. A caller takes it from
//     the loop by interrupting the loop's Wait (rdma.WaitInterrupter, an
//     optional provider capability; without it there is no short path),
//     and the loop gives it between batches. After its reply, a caller
//     leaves the turn free, waking nobody, when nothing can arrive but the
//     answer to a later call: no call outstanding, no send-queue work, no
//     backward direction, no RDMA_OPTIONAL handlers. The next caller then
//     takes it without waking anybody; any other post to the send queue,
//     the connection's end and Close give it back to the loop. Otherwise
//     the caller gives it back to the loop at once.
//   - With more than one call in flight a caller finds the turn taken or
//     the count above one and waits as before, while the caller with the
//     turn delivers the replies that arrive until its own. A caller whose
//     context ends gives the turn back; the loop drops the late reply. A
//     connection that ends while a caller has the turn makes that caller's
//     Wait return; it gives the turn back, and the loop ends the
//     connection, failing every call, as it always does.
//
// Client.Stats' ShortPath counts the calls whose reply their caller
// delivered itself. What it saves depends on the provider. Over the verbs
// provider the caller sleeps on the device's completion channel itself,
// so nothing runs between the device and the caller: in the lab guest
// (Soft-RoCE, lab/bench-verbs.sh) a NULL round trip's median fell to
// 0.68x in event mode and 0.85x polling.
//
// The software iWARP reads and writes its socket on goroutines of its
// own, and a round trip through them would still cross goroutines four
// times a side. It implements rdma.DirectIO, and whoever has the turn
// (the loop, or a caller on the short path) waits with WaitDirect inside
// a direct section (short.go: beginDirect, waitTurn): it writes what it
// posted and reads the socket itself until its completions are in, so a
// NULL runs on one goroutine per side, as a raw TCP ping-pong does (two
// goroutine runs per call in an execution trace, against eight without).
// Two exceptions keep bulk data on the provider's own goroutines, where
// two cores move it faster: a caller goes direct only for a call the
// responder pulls nothing of (directCall), and after a message whose
// read chunks are to be pulled the turn's goroutine waits once with its
// section closed, so the provider's reader takes the Read Responses
// (pullSoon). Back to back the gain is small (NULL p50 0.96x); after the
// program has done something else for a while, when the connection's
// goroutines would otherwise all have to be woken, a NULL takes 0.33-0.61x
// the time (docs/performance.md, "Direct I/O").
//
// The responder has a short path of its own (rpc.InlineReplier): a call
// that offers no write or reply chunk, arriving when no other runs, is
// handled on the loop, which sends the reply from there, having reserved
// the send slot and the send-queue entry it needs (ReserveReply).
//
// # Bounds
//
// A responder is bounded whatever its peers do (Config.Bounds, bounds.go).
// Its Listener refuses requests beyond Bounds.MaxConns (default 16384)
// and Bounds.MaxConnsPerAddr from one host (1024) before anything is
// allocated for them, and closes a connection that sends nothing within
// Bounds.HandshakeTimeout (1 min) of its request or no call for
// Bounds.IdleTimeout (6 minutes). Every call reserves, before any
// allocation or RDMA Read, the bytes it can make the responder hold: its
// read chunks plus the write and reply chunks it offers for its reply. A
// call asking more than Bounds.CallMemory (16 MiB) is answered ERR_CHUNK;
// Bounds.ArgLimit lets the upper layer refuse, per procedure, read
// chunks larger than it takes. Reservations come from the connection's
// Bounds.ConnMemory (64 MiB) and the Listener's Bounds.ServerMemory
// (1 GiB); a connection at its share waits for its own calls, and
// connections wait for the Listener's budget in arrival order. A call
// whose RDMA Reads take longer than Bounds.PullTimeout (30 s) ends its
// connection, which releases what it held. Each limit that acts is
// logged with the peer's address and counted by Reason, in the
// connection's Stats and in Listener.Stats.
//
// With Bounds.SharedReceives (off by default), a Listener's connections
// receive from one pool, a shared receive queue of the provider, instead
// of Grant.Max receives each: a connection is promised one credit when
// accepted and more (up to 32) while its calls keep its grant busy and
// its requester asks for more, never more than the pool holds, and is
// lowered again, to one credit for a connection making a call now and
// then, as its calls come fewer at once (RFC 8166 Section 3.3.1); a
// request the pool cannot promise a credit to is refused. An idle connection
// then registers two send buffers and no receive: with 1 KiB inline
// messages, 10,000 connections to one responder register 29 MiB in all.
//
// Linux's server (svcrdma) bounds differently: each connection posts a
// fixed 64 receives of 4 KiB (svcrdma_max_requests, raised to 128 in
// late 2025, and svcrdma_max_req_size) plus 2 for backward calls, with no
// receive queue shared between connections; a call's payload is bounded
// by the NFS server's maximum (RPCSVC_MAXPAYLOAD, 1 MiB), with no budget
// per connection or per server beyond the number of nfsd threads; the
// RPC layer caps connections at (threads + 3) * 20 unless sv_maxconn is
// set, closing the oldest beyond, and closes connections unused for one
// to two 6-minute aging periods. Our 16 MiB per call, 64 MiB per
// connection and 1 GiB per server leave room for a requester pipelining
// 1 MiB calls while bounding what a hostile one can pin.
//
// # Where things are
//
//   - conn.go: Conn, the state both roles share and who owns it, the
//     role interface each role implements, the lock order, setup
//     of the buffer rings, Close, and the side goroutines and timers
//     (goSide, afterFunc) that are the only work a connection runs off
//     its loop, all of which Close stops or waits for.
//   - conn_recv.go: the loop that owns the completion queue (but while a
//     caller on the short path has it); Recv and Push, which go to the
//     role.
//   - short.go: the requester's short path, the turn between the loop and
//     a caller.
//   - conn_send.go: Send, and the posting every send goes through.
//   - plan.go: how a call or a reply travels (which chunks), decided on
//     plain data before any memory is registered.
//   - requester.go: a call's registration and post, matching replies,
//     version fallback, CancelCall; requester_recv.go: how replies reach
//     the rpc layer (Recv, Push).
//   - responder.go: checking received calls and their chunks;
//     responder_recv.go: how calls reach the rpc layer (Recv, Push, the
//     pump); responder_send.go: replies, their registration and post, and
//     RDMA_ERROR answers.
//   - pull.go: RDMA Reads of read chunks, for both roles.
//   - backchannel.go: the backward direction (RFC 8167), the Backchannel
//     both roles share; backchannel_serve.go: a requester's serving half;
//     backchannel_call.go: a responder's calling half.
//   - credits.go: every decision about credits: the requester's credit
//     window, the receives each role posts for its credits, the
//     responder's GrantPolicy and its grant, fixed or, with a shared
//     pool, raised and lowered.
//   - config.go: Config, its defaults and checks, and what the RFC 8797
//     private data settle.
//   - dial.go: Dial, Listen, Listener and Serve; reconnect.go: DialClient.
//   - bounds.go: Bounds, the limits a Listener applies to connections, and
//     the memory budgets calls reserve from; pool.go: the shared receive
//     pool and the receives it promises for the credits granted.
//   - config_proto.go: the Connection Configuration Protocol (CONF_RDMA).
//   - stats.go: counters and drop and rejection Reasons; errors.go: the
//     error types; bufpool.go: pooled buffers for pulled chunks.
//
// The transport headers themselves are encoded and decoded by package
// rpcrdma/wire.
package rpcrdma
