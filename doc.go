// Package rpcrdma is the root of go-rpcrdma, a Go implementation of
// RPC-over-RDMA, the transport that carries ONC RPC, and NFS above it,
// over RDMA networks. It holds no code: import the package for what you
// do.
//
//   - Call or serve an ONC RPC program over RDMA: package
//     github.com/go-rpcrdma/rpcrdma/rpcrdma (Dial, Listen, Serve,
//     DialClient), with an RDMA provider such as
//     github.com/go-rpcrdma/rpcrdma/rdma/iwarp (iwarp.New, the software
//     iWARP over TCP) or github.com/go-rpcrdma/rpcrdma/rdma/verbs (RDMA
//     hardware through rdma-core; build with -tags verbs), and the Client
//     and Server of github.com/go-rpcrdma/rpcrdma/rpc.
//   - The same program over TCP: github.com/go-rpcrdma/rpcrdma/rpc alone
//     (rpc.DialTCP, Server.ServeListener).
//   - Serve files over NFSv3, or read and write them as an NFSv3 or
//     NFSv4.1 client, over RDMA or TCP: github.com/go-rpcrdma/rpcrdma/nfs
//     (NewServer, NewLocalFS, Mount, Mount4).
//   - Encode and decode arguments and results:
//     github.com/go-rpcrdma/rpcrdma/xdr.
//   - Use RDMA directly, or write a provider:
//     github.com/go-rpcrdma/rpcrdma/rdma and its rdmatest suite.
//   - Probe, benchmark or trace a server, or serve a directory over NFS,
//     from the shell: the command,
//     go install github.com/go-rpcrdma/rpcrdma/cmd/rpcrdma@latest.
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
//	rdma/           the RDMA provider model: connections with private data,
//	                memory registration, Send, RDMA Write and Read.
//	rdma/loopback/  an in-process provider, strict like hardware.
//	rdma/rdmatest/  the conformance suite every provider passes.
//	rdma/iwarp/     the IETF iWARP suite in pure Go over TCP: MPA (RFC 5044,
//	                RFC 6581), DDP (RFC 5041), RDMAP (RFC 5040); it talks
//	                to Linux soft-iWARP.
//	rdma/verbs/     a provider over rdma-core (libibverbs, librdmacm) for
//	                RoCE, InfiniBand and iWARP adapters (cgo, -tags verbs).
//	rpcrdma/wire/   the RPC-over-RDMA transport headers: Version One
//	                (RFC 8166), Version Two (draft-cel-nfsv4-rpcrdma-version-two-00),
//	                RFC 8797 connection private data, and the Connection
//	                Configuration Protocol (program 100417).
//	rpcrdma/        the RPC-over-RDMA transport: Dial and Listen over any
//	                provider; a *Conn is an rpc.Transport (requester or
//	                responder) with credits, chunks, long messages, version
//	                negotiation, the backward direction and CONF_RDMA.
//	nfs/mount/      the MOUNT version 3 codec (RFC 1813, Appendix I).
//	nfs/nfs3/       the NFS version 3 codec (RFC 1813): all 22 procedures.
//	nfs/nfs4/       the NFS version 4.1 codec (RFC 8881, RFC 5662):
//	                COMPOUND and CB_COMPOUND with the operations a client
//	                needs for a session and its files.
//	nfs/            an NFSv3 client and server and an NFSv4.1 client over
//	                package rpc, with RFC 8267's direct data placement.
//	cmd/rpcrdma/    the command: serve, ping, bench, trace, and nfs (probe,
//	                ls, cat, cp, bench, serve).
//
// Specifications: RFC 8166 (RPC-over-RDMA Version One, obsoleting RFC
// 5666), RFC 8167 (bidirectional operation), RFC 8797 (RDMA-CM private
// data), draft-cel-nfsv4-rpcrdma-version-two-00 (Version Two), RFC 8267
// (NFS upper-layer binding), RFC 1813 (NFSv3 and MOUNT), RFC 8881 and RFC
// 5662 (NFSv4.1), RFC 5531 (ONC RPC), RFC 4506 (XDR), and RFCs 5040,
// 5041, 5044 and 6581 (iWARP).
package rpcrdma
