// Package rpc implements ONC RPC version 2 (RFC 5531): a Client and a
// Server that run unchanged over TCP and over RPC-over-RDMA, the messages
// they exchange, and record marking for byte streams. It knows nothing of
// RDMA: transports plug in below it through the Transport interface, and
// package rpcrdma provides the RPC-over-RDMA one (RFC 8166).
//
// # Calling a program
//
// A Client sends calls on one Transport: DialTCP connects one over TCP,
// rpcrdma.Dial over RDMA, and NewClient wraps it. Client.Call sends a
// Request (program, version, procedure, credential, arguments) and returns
// its Reply, or an error; Client.Null calls procedure 0. Calls may be made
// from many goroutines at once; each has its own xid. A Client that
// should outlive its connection comes from DialClient, which dials again
// with backoff when the transport fails and sends the calls in flight
// again, with their xids (ReconnectConfig).
//
// # Serving a program
//
// A Server holds Handlers registered by program, version and procedure
// (Server.Handle). A Handler decodes its arguments from Call.Decoder and
// returns results or an error; the error chooses the answer (GARBAGE_ARGS,
// AUTH_ERROR, an AcceptError's status, or SYSTEM_ERR). Server.ServeListener
// serves TCP connections, Server.Serve any Transport (rpcrdma.Serve serves
// an RDMA listener). ServerOptions sets the authenticator (DefaultAuth
// accepts AUTH_NONE and AUTH_SYS), how many calls run at once per
// connection (MaxInFlight), a duplicate request cache for calls sent again
// after a reconnection (ReplyCache), the logger, which receives handler
// errors and panics (slog.Default unless set), and a hook told of each TCP
// connection ServeListener opens and closes, with the error that ended it
// (ConnState, as net/http's Server.ConnState). Shutdown finishes the calls
// in progress; Close does not wait, and a client that reconnects sends
// those calls again.
//
// # Arguments and results
//
// A Body is an XDR stream (package xdr) with DDP-eligible data items held
// apart from it: an upper layer marks bulk data (an NFS WRITE's payload) as
// eligible for direct data placement, and a transport that can move it by
// RDMA does so while others flatten it into the stream. BodyDecoder reads
// either form. Request.ResultBufs names caller memory for results to be
// placed in directly, and Request.MaxReply how large a reply may be.
//
// # Messages
//
// CallHeader and ReplyHeader are the RFC 5531 headers, with OpaqueAuth and
// AuthSysParms for credentials and typed enums (AcceptStat, AuthStat, ...)
// whose String is the RFC's name. Each has Append, EncodedLen and Decode
// over package xdr and a compact String and LogValue.
//
// # Transports
//
// A Transport sends and receives whole messages (Msg). StreamTransport is
// record marking (RFC 5531 section 11) over a net.Conn, built on
// RecordReader and RecordWriter. The Client and the Server receive through
// one contract, Pusher: the transport hands what it receives to a function
// on its own goroutine. StreamTransport and the RPC-over-RDMA transport
// push; a Transport that only has Recv is adapted by a goroutine that
// calls it. A Pusher may also be a DirectPusher, whose delivery a caller
// may run itself (the short path), or an InlineReplier, on whose
// delivering goroutine a Server may answer a short call; any transport
// may be a CallCanceler, which holds per-call resources until the reply.
//
// # The short path
//
// A call made one at a time on an idle connection would, done the general
// way, cross goroutines four times: the server's receiving goroutine hands
// it to a worker, which sends the reply; the client's reader receives the
// reply and wakes the caller. Each hand-off is a wake-up, often of a
// thread on another CPU, and on a small machine those cost more than the
// RPC's own work. So, when nothing else is in flight, neither side hands
// off:
//
//   - Client: the Client sends every call on a DirectPusher with
//     SendDeliver, which, when no other goroutine is delivering, sends
//     the call and then delivers, on the caller's goroutine and in the
//     transport's order, whatever arrives (replies to other calls too)
//     until the caller's own reply has arrived, its context ends or the
//     transport ends. On a StreamTransport the caller reads the stream
//     itself: the transport's reader goroutine reads only while a reply
//     is expected and no caller is reading (a second call in flight
//     finds the turn taken, and the holder keeps reading for it), and
//     stays parked while no call is in flight, so a connection the peer
//     closed meanwhile is noticed by the next call, which a DialClient
//     Client sends again on a new connection. A caller whose context
//     ends while it reads is interrupted by a read deadline; the
//     transport keeps what it had read of a record, for whoever reads
//     next. The RPC-over-RDMA requester runs its completion handling on
//     the caller's goroutine in the same way (package rpcrdma). A reply
//     delivered before its caller waits for it is left in the call
//     itself; only a caller that waits is sent its outcome on a channel.
//     ClientStats.ShortPath counts these calls.
//   - Server: a call to a procedure registered with HandleShort (its
//     handler returns promptly), arriving when no other call runs on its
//     connection, on an InlineReplier that could reserve what sending
//     the reply needs and has no next call read behind it (ReserveReply),
//     runs on the transport's goroutine that delivered it, which sends
//     the reply and then receives again. StreamTransport is an
//     InlineReplier; RPC-over-RDMA is one for a call that offers no
//     write or reply chunk. Calls to other procedures, calls that find
//     one running or others queued behind them (workers then run them
//     side by side), and every call on a Server with a custom
//     authenticator or a reply cache (either may wait) go to a worker.
//     ServerStats.Inline counts the calls run inline.
//
// With many calls in flight both sides fall back to the general path, so
// concurrency is what it was.
//
// # Errors
//
// Each error says whether one call or the whole connection failed: an
// *AcceptError, *RejectError or *BadReplyError fails one call and the
// Client goes on; a *ConnError (matching net.ErrClosed) ends the transport
// and every call on it. ErrServerClosed is what Serve returns after
// Shutdown or Close.
//
// # Files
//
//   - transport.go: Msg, Transport, the delivery contract (Pusher, with
//     DirectPusher and InlineReplier), CallCanceler, and the adapter for
//     a Transport that only has Recv.
//   - recmark.go, stream_push.go: record marking and StreamTransport,
//     and how it pushes: the receive turn its reader goroutine and
//     SendDeliver callers share.
//   - client.go: Client, Request and Reply, matching replies to calls by
//     xid, and the client half of the short path.
//   - reconnect.go: DialClient and ReconnectConfig, the Client whose
//     transport is replaced when it fails.
//   - server.go: Server, Handler and Call, DefaultAuth, ServeListener, the
//     per-connection delivery, its workers and the server half of the
//     short path.
//   - acceptor.go: Acceptor and ServeAcceptor, serving the transports
//     another kind of listener accepts.
//   - connstate.go: ConnState, the states ServerOptions.ConnState reports.
//   - replycache.go: the duplicate request cache (ServerOptions.ReplyCache).
//   - msg.go: CallHeader, ReplyHeader and the RFC 5531 enums; auth.go:
//     AuthFlavor, OpaqueAuth and AuthSysParms.
//   - body.go: Body and BodyDecoder, XDR with DDP-eligible items apart.
//   - recmark.go: record marking (RFC 5531 section 11): RecordReader,
//     RecordWriter and StreamTransport.
//   - errors.go: the call and connection errors.
//
// # Memory
//
// Decoders alias the buffer they decode; a Body aliases its builder's
// memory; a Msg from Transport.Recv belongs to its receiver; a Handler's
// Call is valid until the handler returns. Each function says how long
// what it returns stays valid.
package rpc
