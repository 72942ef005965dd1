package nfs4

import (
	"strconv"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The NFS program and the version this package speaks (RFC 8881 Section
// 16), and the callback program's version (RFC 8881 Section 19). The
// callback program number is the client's choice, sent as
// CreateSessionArgs.CBProgram; CBProgram is the one RFC 5662's XDR names
// and Linux uses.
const (
	Program      = 100003
	Version      = 4
	MinorVersion = 1

	CBProgram = 0x40000000
	CBVersion = 1

	// ProcNull and ProcCompound are the procedures of both programs:
	// NFSPROC4_NULL and NFSPROC4_COMPOUND, CB_NULL and CB_COMPOUND.
	ProcNull     = 0
	ProcCompound = 1
)

// Limits. RFC 8881 fixes FHSize, the verifier and session ID sizes and
// OpaqueLimit; the others are this package's, and bound what a decoder
// accepts.
const (
	// FHSize is NFS4_FHSIZE, the largest file handle (RFC 8881 Section
	// 3.2).
	FHSize = 128
	// OpaqueLimit is NFS4_OPAQUE_LIMIT, the bound RFC 5662 puts on
	// client and server owners and the server scope; this package also
	// applies it to implementation IDs and owner strings.
	OpaqueLimit = 1024
	// MaxTag is the longest COMPOUND tag decoded (RFC 8881 Section
	// 16.2.3 leaves it unbounded; Linux's server accepts 128 bytes).
	MaxTag = OpaqueLimit
	// MaxOps is the most operations decoded in one COMPOUND or
	// CB_COMPOUND. RFC 8881 bounds them only by the session's
	// ca_maxoperations (Section 18.36); Linux's server offers 50.
	MaxOps = 64
	// MaxName is the longest component4 (a file name) decoded. Servers
	// refuse longer names with ErrNameTooLong rather than have them fail
	// to decode.
	MaxName = 1024
	// MaxPath is the longest linktext4 (symbolic link contents), PATH_MAX.
	MaxPath = 4096
	// MaxData is the most READ or WRITE data decoded in one operation,
	// 4 MiB (Linux's servers and clients use at most 1 MiB).
	MaxData = 4 << 20
	// MaxBitmapWords is the longest bitmap4 decoded: 256 attribute bits,
	// where RFC 8881 defines 76.
	MaxBitmapWords = 8
	// MaxAttrLen is the longest attrlist4 decoded.
	MaxAttrLen = 1 << 20
	// MaxStateIDs is the most stateids in a TEST_STATEID.
	MaxStateIDs = 1024
	// MaxSecParms is the most callback_sec_parms4 in CREATE_SESSION and
	// the most secinfo4 in a SECINFO_NO_NAME reply.
	MaxSecParms = 16
	// MaxOID is the longest sec_oid4 decoded.
	MaxOID = 128
	// MaxReferringCalls is the most referring_call_list4 entries in a
	// CB_SEQUENCE, and the most referring_call4 in each.
	MaxReferringCalls = 64
)

// errEnum rejects an enumeration value outside its type's members.
type errEnum string

func (e errEnum) Error() string { return "nfs4: " + string(e) + " out of range" }

// errUnsupported rejects a union arm this codec does not decode.
type errUnsupported string

func (e errUnsupported) Error() string { return "nfs4: " + string(e) + " not supported by this codec" }

// FileHandle is nfs_fh4 (RFC 8881 Sections 3.2 and 4): at most FHSize opaque
// bytes. Decoded handles alias the decoder's buffer; an empty one is nil.
type FileHandle []byte

func appendFH(b []byte, fh FileHandle) []byte { return xdr.AppendOpaque(b, fh) }

func decodeFH(d *rpc.BodyDecoder) FileHandle { return FileHandle(opaque(d, FHSize)) }

// Verifier is verifier4 (RFC 8881 Section 3.2): eight opaque bytes.
type Verifier [8]byte

func (v *Verifier) decode(d *rpc.BodyDecoder) { copy(v[:], d.FixedOpaque(8)) }

// SessionID is sessionid4 (RFC 8881 Sections 3.2 and 2.10): sixteen opaque
// bytes the server chooses.
type SessionID [16]byte

func (s *SessionID) decode(d *rpc.BodyDecoder) { copy(s[:], d.FixedOpaque(16)) }

// StateID is stateid4 (RFC 8881 Section 8.2): a sequence number and
// twelve bytes the server chooses.
type StateID struct {
	Seqid uint32
	Other [12]byte
}

// The special stateids of RFC 8881 Section 8.2.3.
var (
	// AnonymousStateID is all zeros: I/O without open or lock state.
	AnonymousStateID = StateID{}
	// BypassStateID is all ones: READ that bypasses share reservations.
	BypassStateID = StateID{Seqid: 0xffffffff, Other: [12]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	// CurrentStateID stands for the stateid the COMPOUND's previous
	// operation returned.
	CurrentStateID = StateID{Seqid: 1}
)

func (s *StateID) append(b []byte) []byte {
	return append(xdr.AppendUint32(b, s.Seqid), s.Other[:]...)
}

func (s *StateID) decode(d *rpc.BodyDecoder) {
	s.Seqid = d.Uint32()
	copy(s.Other[:], d.FixedOpaque(12))
}

// String returns the stateid as seqid:other in hex.
func (s StateID) String() string {
	const hexd = "0123456789abcdef"
	b := strconv.AppendUint(nil, uint64(s.Seqid), 10)
	b = append(b, ':')
	for _, c := range s.Other {
		b = append(b, hexd[c>>4], hexd[c&15])
	}
	return string(b)
}

// Time is nfstime4 (RFC 8881 Section 3.3): seconds since 1970, signed,
// and nanoseconds. Decoding does not check that Nseconds is below 10^9;
// RFC 8881 leaves rejecting that to the server (ErrInval).
type Time struct {
	Seconds  int64
	Nseconds uint32
}

// TimeOf returns t as an nfstime4.
func TimeOf(t time.Time) Time { return Time{Seconds: t.Unix(), Nseconds: uint32(t.Nanosecond())} }

// Time returns t as a time.Time in the local zone.
func (t Time) Time() time.Time { return time.Unix(t.Seconds, int64(t.Nseconds)) }

func (t Time) append(b []byte) []byte {
	return xdr.AppendUint32(xdr.AppendInt64(b, t.Seconds), t.Nseconds)
}

func (t *Time) decode(d *rpc.BodyDecoder) {
	t.Seconds = d.Int64()
	t.Nseconds = d.Uint32()
}

// FSID is fsid4 (RFC 8881 Section 3.3).
type FSID struct {
	Major, Minor uint64
}

// SpecData is specdata4 (RFC 8881 Section 3.3): a device's major and
// minor numbers.
type SpecData struct {
	Major, Minor uint32
}

// ChangeInfo is change_info4 (RFC 8881 Section 3.3): a directory's
// change attribute before and after an operation, and whether the two
// were taken atomically with it.
type ChangeInfo struct {
	Atomic        bool
	Before, After uint64
}

func (c *ChangeInfo) append(b []byte) []byte {
	b = xdr.AppendBool(b, c.Atomic)
	return xdr.AppendUint64(xdr.AppendUint64(b, c.Before), c.After)
}

func (c *ChangeInfo) decode(d *rpc.BodyDecoder) {
	c.Atomic = d.Bool()
	c.Before = d.Uint64()
	c.After = d.Uint64()
}

// FType is nfs_ftype4 (RFC 5662), the type of a file: the value of
// attribute type (RFC 8881 Section 5.8.1).
type FType uint32

// The members of nfs_ftype4.
const (
	TypeReg       FType = 1 // NF4REG
	TypeDir       FType = 2 // NF4DIR
	TypeBlk       FType = 3 // NF4BLK
	TypeChr       FType = 4 // NF4CHR
	TypeLnk       FType = 5 // NF4LNK
	TypeSock      FType = 6 // NF4SOCK
	TypeFIFO      FType = 7 // NF4FIFO
	TypeAttrDir   FType = 8 // NF4ATTRDIR
	TypeNamedAttr FType = 9 // NF4NAMEDATTR
)

// String returns the type's name in RFC 8881 (NF4REG).
func (t FType) String() string {
	if t >= TypeReg && t <= TypeNamedAttr {
		return [...]string{"NF4REG", "NF4DIR", "NF4BLK", "NF4CHR", "NF4LNK", "NF4SOCK", "NF4FIFO",
			"NF4ATTRDIR", "NF4NAMEDATTR"}[t-1]
	}
	return "nfs_ftype4(" + strconv.FormatUint(uint64(t), 10) + ")"
}

func decodeFType(d *rpc.BodyDecoder) FType {
	t := FType(d.Uint32())
	if d.Err() == nil && (t < TypeReg || t > TypeNamedAttr) {
		d.Fail(errEnum("nfs_ftype4"))
	}
	return t
}

// decodeEnum decodes an enumeration and fails unless it is at most max.
func decodeEnum(d *rpc.BodyDecoder, max uint32, name string) uint32 {
	v := d.Uint32()
	if d.Err() == nil && v > max {
		d.Fail(errEnum(name))
	}
	return v
}

// Bitmap is bitmap4 (RFC 8881 Section 3.2): bit n of word n/32 stands
// for attribute (or operation, or notification) number n.
type Bitmap []uint32

// BitmapOf returns the bitmap with the given bits set.
func BitmapOf(bits ...AttrID) Bitmap {
	var b Bitmap
	for _, n := range bits {
		b = b.With(n)
	}
	return b
}

// Has reports whether bit n is set.
func (b Bitmap) Has(n AttrID) bool {
	return int(n/32) < len(b) && b[n/32]&(1<<(n%32)) != 0
}

// With returns b with bit n set, growing it as needed; it may modify b's
// array.
func (b Bitmap) With(n AttrID) Bitmap {
	for int(n/32) >= len(b) {
		b = append(b, 0)
	}
	b[n/32] |= 1 << (n % 32)
	return b
}

func (b Bitmap) append(dst []byte) []byte {
	dst = xdr.AppendUint32(dst, uint32(len(b)))
	for _, w := range b {
		dst = xdr.AppendUint32(dst, w)
	}
	return dst
}

// decodeBitmap decodes a bitmap4 of at most MaxBitmapWords into b[:0].
func decodeBitmap(d *rpc.BodyDecoder, b Bitmap) Bitmap {
	n := d.Count(MaxBitmapWords, 4)
	b = b[:0]
	for range n {
		b = append(b, d.Uint32())
	}
	if n == 0 {
		return nil
	}
	return b
}

// appendString appends a utf8string. Like RFC 8881 Section 1.6 for
// the server, this codec does not check UTF-8 on either side.
func appendString(b []byte, s string) []byte { return xdr.AppendString(b, s) }

// opaque decodes variable-length opaque data of at most max bytes,
// aliasing d's memory; empty data is nil.
func opaque(d *rpc.BodyDecoder, max int) []byte {
	if p := d.Opaque(max); len(p) > 0 {
		return p
	}
	return nil
}
