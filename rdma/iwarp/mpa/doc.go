// Package mpa implements the wire format of MPA, Marker PDU Aligned framing
// (RFC 5044), with the enhanced connection setup of RFC 6581: the MPA Request
// and Reply frames exchanged once at connection startup, the IRD/ORD word at
// the start of enhanced private data, the RTR messages of peer-to-peer mode,
// and the framing of every later ULPDU into an FPDU (length, pad, CRC32c),
// with or without markers.
//
// The package is a codec: it does no I/O, starts no goroutines and keeps no
// global mutable state. Encoders append to a caller-owned buffer
// (strconv.AppendInt style). Parsers do not copy: returned slices alias the
// input buffer and stay valid as long as the caller keeps that buffer
// unchanged. Parsers return *ParseError values that name the wire field and
// its offset; errors.Is matches the kinds (ErrShort, ErrCRC, ...). Every
// parse error other than ErrShort is fatal for the connection (RFC 5044
// section 8): MPA delivers nothing more from that half connection.
//
// Byte order: every header field is big-endian; the CRC field alone is
// written least significant byte first, which is what Linux siw and
// Wireshark do (see Checksum).
//
// Markers. Linux siw never inserts or accepts markers, and our provider
// refuses them at negotiation (it never sets M, and rejects a peer that
// sets M). Markers are implemented here (type Markers) so that captures from
// other implementations that negotiated them can be parsed and so that the
// refusal is a choice rather than an inability.
//
// Private data limits: RFC 5044 allows up to MaxPrivateDataLen (512) bytes;
// Linux siw closes the connection above SiwMaxPrivateDataLen (256). Parsers
// take the limit as an argument.
//
// Values of the types in this package are safe for concurrent reads; the
// stateful Markers type is owned by whoever owns its direction of the
// connection.
package mpa
