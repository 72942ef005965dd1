// Package iwarp is an rdma.Provider in pure Go that speaks iWARP over TCP,
// byte-compatible with Linux soft-iWARP (siw): MPA (RFC 5044) with the
// enhanced connection setup of RFC 6581, DDP (RFC 5041) and RDMAP (RFC
// 5040). The wire codecs are packages mpa and ddp; this package adds the
// connection: handshake, memory registration, the send and receive paths,
// the receiver checks and Terminates.
//
// # Negotiation
//
// Dial sends an MPA Request of Options.Revision: by default Rev 2 with the
// enhanced flag and the IRD/ORD word (what siw sends and the Linux NFS
// server requires), or Rev 1. A listener answers Rev 1 and Rev 2 in kind.
// IRD and ORD are settled as RFC 6581 section 9.1 and rdma.ConnConfig say;
// with Rev 1 there is no IRD/ORD exchange and each side keeps its own.
// The upper layer's private data follows the IRD/ORD word; with it the MPA
// private data stays within the 256 bytes siw accepts.
//
// CRC32c is used in both directions exactly when either startup frame has the
// C flag (RFC 5044 section 7.1; docs/linux-interop.md section 1); Options.CRC
// only says when this side sets it (CRCFollow, the default, does as siw: an
// initiator does not ask, a responder echoes the initiator). Markers are
// refused: this side never asks for them, a Request asking for them is
// answered with a Reply with the Reject flag, and Dial fails on a Reply
// asking for them. Peer-to-peer mode (RFC 6581 RTR messages) is accepted from
// initiators and answered as siw does; Dial asks for it only with
// Options.PeerToPeer, offering a zero-length RDMA Write as the RTR.
//
// # Data path
//
// Each connection runs one reader and one writer goroutine, and lends
// both roles to the goroutine that waits for its completions between
// BeginDirect and EndDirect (rdma.DirectIO, direct.go): a request and its
// response then run on one goroutine per side. The writer
// batches FPDUs with vectored writes, taking payload straight from
// registered memory; the reader places tagged and untagged payload straight
// from the socket into registered memory or posted receives. FPDUs are at
// most the MULPDU of the path MSS (TCP_MAXSEG on Linux). Sends and RDMA
// Writes complete when handed to TCP (RFC 5040 section 5.5), so a peer may
// see its Write complete before we have placed it; MR.Invalidate and
// MR.Release therefore first let the reader place every FPDU that has
// already reached this host. The receiver checks everything in the order
// siw does, and the first violation ends that connection, and only it,
// with an RDMAP Terminate (RFC layout; siw's reversed layout is decoded
// too). The responder sends nothing until it has received the initiator's
// first FPDU (MPA fencing, RFC 5044 section 7.1.2); an upper layer whose
// responder speaks first needs Options.PeerToPeer on the initiator, whose
// zero-length RDMA Write RTR then lifts the fence at once.
//
// # What a connection holds
//
// Besides what its upper layer registers, an established connection
// holds a TCP socket, its reader and writer goroutines and their stacks,
// a read buffer of 8 KiB that FPDU headers and small payloads go
// through, its work request rings (send queue, receive queue and the
// completion queue for both, ConnConfig's depths, and IRD and ORD
// entries for RDMA Reads) and, on Linux once it has read a payload
// that did not fit the read buffer, a 4 KiB stash for what follows a
// payload on the stream. The buffers a batch of FPDUs is built in (header
// and trailer slots for 64 FPDUs, a 4 KiB buffer a small batch is copied
// into, and the list of its pieces) are the provider's, lent to a
// connection while it writes: an idle connection holds none.
//
// # Interoperability
//
// Linux 6.1 siw as responder may leave an FPDU that arrives right after its
// Reply unread, so an initiator that connects to siw (the Linux NFS server
// over soft-iWARP, say) must hold its first FPDU: set Options.FirstSendDelay
// to SiwFirstSendDelay. Nothing in the MPA exchange tells siw apart, and no
// other responder needs the delay, so by default there is none. As
// initiator siw aborts if anything follows the Reply before it has parsed
// it, which the fence prevents.
package iwarp
