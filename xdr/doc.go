// Package xdr implements the External Data Representation of RFC 4506: the
// byte encoding under ONC RPC (RFC 5531) and the RPC-over-RDMA transport
// headers (RFC 5666).
//
// Encoding is append-style (AppendUint32, AppendOpaque, ...), in the manner
// of strconv.AppendInt: callers own the buffer, size it once, and encode with
// no allocation. A length or count known only after its items is reserved
// with Reserve and filled in with PutUint32.
//
// Decoding goes through a Decoder, a zero-copy cursor with a sticky first
// error that carries the offset of the failing item (*DecodeError, whose kind
// is tested with errors.Is). Every variable-length item takes an explicit
// maximum, and every count is checked against the bytes remaining before the
// caller allocates for it, so a hostile peer cannot make a decoder allocate
// more than the message it sent.
//
// Padding. RFC 4506 sections 4.9 and 4.10 say the residual bytes that round
// opaque data and strings up to a multiple of four are zero. This package
// enforces that on decoding: a non-zero pad byte fails with ErrPad. Every
// known ONC RPC and RPC-over-RDMA implementation (Linux, libtirpc, ntirpc)
// writes zero padding, so the check costs no interoperability and turns
// framing errors (a length off by one or two) into errors at the item where
// they happen instead of garbage further on.
//
// Booleans and optional-data discriminants other than 0 and 1 fail with
// ErrBool for the same reason.
package xdr
