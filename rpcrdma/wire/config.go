package wire

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The Connection Configuration Protocol (RFC 5666 section 6, XDR in
// draft-ietf-nfsv4-rpcrdma-01 section 6.2) is an ordinary ONC RPC program
// that a client may call on a new connection to exchange inline sizes and
// RDMA Read depths:
//
//	program CONFIG_RDMA_PROG {
//	    version VERS1 {
//	        config_rdma_reply CONF_RDMA(config_rdma_req) = 1;
//	    } = 1;
//	} = 100417;
//
// Draft-ietf-nfsv4-rpcrdma-01 leaves the program number unassigned
// ("nnnnnn"); RFC 5666 section 12 records IANA's assignment, 100417
// (rpc.rdmaconfig). Its use is optional (RFC 5666 section 6.1), and RFC 8797
// private data (PrivateData) now carries the inline sizes instead.
const (
	ConfigProgram = 100417 // CONFIG_RDMA_PROG
	ConfigVersion = 1      // VERS1
	ProcConfRDMA  = 1      // CONF_RDMA
)

const configLen = 12

// ConfigReq is config_rdma_req, the argument of CONF_RDMA
// (draft-ietf-nfsv4-rpcrdma-01 section 6.2).
type ConfigReq struct {
	// MaxCallSendSize (maxcall_sendsize) is the largest inline RPC call the
	// client will send.
	MaxCallSendSize uint32
	// MaxReplySendSize (maxreply_sendsize) is the largest inline RPC reply
	// the client will accept.
	MaxReplySendSize uint32
	// MaxRDMARead (maxrdmaread) is the number of RDMA Reads the client
	// lets the server have outstanding against it (its IRD).
	MaxRDMARead uint32
}

// ConfigReply is config_rdma_reply, the result of CONF_RDMA
// (draft-ietf-nfsv4-rpcrdma-01 section 6.2). Its second member is the
// server's alignment, not a reply size: the server does not echo
// maxreply_sendsize.
type ConfigReply struct {
	// MaxCallSendSize (maxcall_sendsize) is the largest inline call the
	// server accepts; the client must not send a larger one.
	MaxCallSendSize uint32
	// Align (align) is the alignment the server recommends for opaque
	// data, for the client's padding (RDMA_MSGP).
	Align uint32
	// MaxRDMARead (maxrdmaread) is the number of RDMA Reads the server
	// lets the client have outstanding against it; zero forbids them.
	MaxRDMARead uint32
}

// EncodedLen returns 12.
func (ConfigReq) EncodedLen() int { return configLen }

// Append appends the three words of r to b.
func (r ConfigReq) Append(b []byte) []byte {
	return appendWords(b, r.MaxCallSendSize, r.MaxReplySendSize, r.MaxRDMARead)
}

// Decode decodes r from the start of b and returns the bytes consumed, 12;
// bytes after them are the caller's concern.
func (r *ConfigReq) Decode(b []byte) (int, error) {
	return decodeWords(b, "config_rdma_req", &r.MaxCallSendSize, &r.MaxReplySendSize, &r.MaxRDMARead)
}

// String returns r as "maxcall=1024 maxreply=1024 maxrdmaread=16".
func (r ConfigReq) String() string {
	return "maxcall=" + utoa(r.MaxCallSendSize) + " maxreply=" + utoa(r.MaxReplySendSize) + " maxrdmaread=" + utoa(r.MaxRDMARead)
}

// LogValue implements slog.LogValuer.
func (r ConfigReq) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Uint64("maxcall", uint64(r.MaxCallSendSize)),
		slog.Uint64("maxreply", uint64(r.MaxReplySendSize)),
		slog.Uint64("maxrdmaread", uint64(r.MaxRDMARead)))
}

// EncodedLen returns 12.
func (ConfigReply) EncodedLen() int { return configLen }

// Append appends the three words of r to b.
func (r ConfigReply) Append(b []byte) []byte {
	return appendWords(b, r.MaxCallSendSize, r.Align, r.MaxRDMARead)
}

// Decode decodes r from the start of b and returns the bytes consumed, 12;
// bytes after them are the caller's concern.
func (r *ConfigReply) Decode(b []byte) (int, error) {
	return decodeWords(b, "config_rdma_reply", &r.MaxCallSendSize, &r.Align, &r.MaxRDMARead)
}

// String returns r as "maxcall=4096 align=4096 maxrdmaread=16".
func (r ConfigReply) String() string {
	return "maxcall=" + utoa(r.MaxCallSendSize) + " align=" + utoa(r.Align) + " maxrdmaread=" + utoa(r.MaxRDMARead)
}

// LogValue implements slog.LogValuer.
func (r ConfigReply) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Uint64("maxcall", uint64(r.MaxCallSendSize)),
		slog.Uint64("align", uint64(r.Align)),
		slog.Uint64("maxrdmaread", uint64(r.MaxRDMARead)))
}

func appendWords(b []byte, a, c, e uint32) []byte {
	return xdr.AppendUint32(xdr.AppendUint32(xdr.AppendUint32(b, a), c), e)
}

// decodeWords decodes three words. If b is shorter than 12 bytes it leaves
// the targets unchanged and fails with an error wrapping the
// *xdr.DecodeError (kind xdr.ErrShort).
func decodeWords(b []byte, name string, a, c, e *uint32) (int, error) {
	var d xdr.Decoder
	d.Reset(b)
	if !d.Need(configLen) {
		return 0, fmt.Errorf("rpcrdma: malformed %s: %w", name, d.Err())
	}
	*a, *c, *e = d.Uint32(), d.Uint32(), d.Uint32()
	return configLen, nil
}

func utoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
