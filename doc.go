// Package rpcrdma is the root of go-rpcrdma, a Go implementation of
// RPC-over-RDMA. It holds no code: import the package for what you do.
//
//   - Call or serve an ONC RPC program over RDMA: package
//     github.com/go-rpcrdma/rpcrdma/rpcrdma (Dial, Listen, Serve,
//     DialClient), with an RDMA provider such as
//     github.com/go-rpcrdma/rpcrdma/rdma/iwarp (iwarp.New, the software
//     iWARP over TCP) and the Client and Server of
//     github.com/go-rpcrdma/rpcrdma/rpc.
//   - The same program over TCP: github.com/go-rpcrdma/rpcrdma/rpc alone
//     (rpc.DialTCP, Server.ServeListener).
//   - Encode and decode arguments and results:
//     github.com/go-rpcrdma/rpcrdma/xdr.
//   - Use RDMA directly, or write a provider:
//     github.com/go-rpcrdma/rpcrdma/rdma and its rdmatest suite.
//   - Probe, benchmark or trace a server from the shell: the command,
//     go install github.com/go-rpcrdma/rpcrdma/cmd/rpcrdma@latest.
//
// RPC-over-RDMA is the transport that carries ONC RPC, and NFS above it,
// over RDMA networks.
//
// The stack, bottom up (each package imports only those below it):
//
//	xdr/            RFC 4506 External Data Representation: append-style
//	                encoders and a zero-copy, bounded, sticky-error decoder.
//	rpc/            RFC 5531 ONC RPC: call and reply headers, AUTH_NONE and
//	                AUTH_SYS, a transport-neutral client and server, record
//	                marking over TCP, and the Body type through which an
//	                upper layer marks data items eligible for direct data
//	                placement without knowing about RDMA.
//	rpcrdma/wire/   the RPC-over-RDMA transport headers: Version One
//	                (RFC 5666), Version Two (draft-cel-nfsv4-rpcrdma-version-two-00),
//	                RFC 8797 connection private data, and the Connection
//	                Configuration Protocol (program 100417).
//	rpcrdma/        the RPC-over-RDMA transport: Dial and Listen over any
//	                provider; a *Conn is an rpc.Transport (requester or
//	                responder) with credits, chunks, long messages, version
//	                negotiation and CONF_RDMA.
//	rdma/           the RDMA provider model: connections with private data,
//	                memory registration, Send, RDMA Write and Read.
//	rdma/loopback/  an in-process provider, strict like hardware.
//	rdma/rdmatest/  the conformance suite every provider passes.
//	rdma/iwarp/     the IETF iWARP suite in pure Go over TCP: MPA (RFC 5044,
//	                RFC 6581), DDP (RFC 5041), RDMAP (RFC 5040); it talks
//	                to Linux soft-iWARP.
//	cmd/rpcrdma/    the command: serve, ping, bench, trace.
//
// Specifications: RFC 5666 and RFC 8166 (RPC-over-RDMA Version One), RFC 8167
// (bidirectional operation), RFC 8797 (RDMA-CM private data),
// draft-cel-nfsv4-rpcrdma-version-two-00 (Version Two),
// draft-ietf-nfsv4-rpcrdma-01 (the draft RFC 5666 grew from), RFC 5531 (ONC
// RPC), RFC 4506 (XDR), and RFCs 5040, 5041, 5044 and 6581 (iWARP).
package rpcrdma
