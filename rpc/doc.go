// Package rpc implements ONC RPC version 2 (RFC 5531): message encoding,
// a Client and a Server, and record marking for byte streams. It knows
// nothing of RDMA: transports plug in below it through the Transport
// interface, and the RPC-over-RDMA transport (RFC 8166) is one of them.
//
// Tour:
//   - msg.go, auth.go: CallHeader, ReplyHeader, OpaqueAuth, AuthSysParms and
//     the protocol enums, each with Append/EncodedLen/Decode over package
//     xdr and a String/LogValue form.
//   - body.go: Body, an XDR stream with DDP-eligible data items held apart
//     from it, so that a transport able to move bulk data directly (RDMA)
//     can do so while others flatten it; BodyDecoder reads either form.
//   - transport.go: Transport and Msg, and CallCanceler for transports that
//     hold per-call resources.
//   - recmark.go: record marking (RFC 5531 section 11), RecordReader,
//     RecordWriter and StreamTransport for TCP.
//   - client.go: Client, with xid allocation, a pending-call table and one
//     receiving goroutine.
//   - reconnect.go: DialClient, a Client that replaces a failed transport
//     and sends the calls in flight again on the new one.
//   - server.go: Server, with handlers registered by program, version and
//     procedure, pluggable authentication, bounded concurrency and graceful
//     shutdown.
//   - replycache.go: the Server's duplicate request cache, which answers a
//     call sent again after a reconnection with its first run's reply.
//   - errors.go: the error types and their reach (one call, or the
//     connection).
//
// Memory. Wire decoders alias the buffer they decode; Bodies alias their
// builders' memory; a Msg from Transport.Recv belongs to its receiver. Each
// function says how long what it returns stays valid.
package rpc
