package nfs3

import (
	"math"
	"strconv"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// FType is ftype3 (RFC 1813 Section 2.6), the type of a file.
type FType uint32

// The file types of RFC 1813 Section 2.6.
const (
	TypeReg  FType = 1 // NF3REG
	TypeDir  FType = 2 // NF3DIR
	TypeBlk  FType = 3 // NF3BLK
	TypeChr  FType = 4 // NF3CHR
	TypeLnk  FType = 5 // NF3LNK
	TypeSock FType = 6 // NF3SOCK
	TypeFIFO FType = 7 // NF3FIFO
)

// String returns the type's name in RFC 1813 (NF3REG).
func (t FType) String() string {
	if t >= TypeReg && t <= TypeFIFO {
		return [...]string{"NF3REG", "NF3DIR", "NF3BLK", "NF3CHR", "NF3LNK", "NF3SOCK", "NF3FIFO"}[t-1]
	}
	return "ftype3(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// errEnum rejects an enumeration value outside its type's members.
type errEnum string

func (e errEnum) Error() string { return "nfs3: " + string(e) + " out of range" }

// decodeFType decodes an ftype3 and rejects values outside NF3REG..NF3FIFO.
func decodeFType(d *rpc.BodyDecoder) FType {
	t := FType(d.Uint32())
	if d.Err() == nil && (t < TypeReg || t > TypeFIFO) {
		d.Fail(errEnum("ftype3"))
	}
	return t
}

// FileHandle is nfs_fh3 (RFC 1813 Section 2.5): at most FHSize opaque
// bytes. Decoded handles alias the decoder's buffer.
type FileHandle []byte

func appendFH(b []byte, fh FileHandle) []byte { return xdr.AppendOpaque(b, fh) }

func decodeFH(d *rpc.BodyDecoder) FileHandle { return FileHandle(d.Opaque(FHSize)) }

// Time is nfstime3 (RFC 1813 Section 2.6).
type Time struct {
	Seconds, Nseconds uint32
}

// TimeOf returns t as an nfstime3 (RFC 1813 Section 2.6): seconds since
// 1970-01-01T00:00:00Z in 32 unsigned bits, and nanoseconds. nfstime3 holds
// no time before 1970 or after 2106-02-07T06:28:15.999999999Z: those (the
// zero time.Time among them) give the first or the last time it holds,
// rather than the low 32 bits of the seconds, which would turn 1969 into
// 2106.
func TimeOf(t time.Time) Time {
	switch s := t.Unix(); {
	case s < 0:
		return Time{}
	case s > math.MaxUint32:
		return Time{Seconds: math.MaxUint32, Nseconds: 999999999}
	default:
		return Time{Seconds: uint32(s), Nseconds: uint32(t.Nanosecond())}
	}
}

// Time returns t as a time.Time in the local zone.
func (t Time) Time() time.Time { return time.Unix(int64(t.Seconds), int64(t.Nseconds)) }

func (t Time) append(b []byte) []byte {
	return xdr.AppendUint32(xdr.AppendUint32(b, t.Seconds), t.Nseconds)
}

func (t *Time) decode(d *rpc.BodyDecoder) {
	t.Seconds = d.Uint32()
	t.Nseconds = d.Uint32()
}

// SpecData is specdata3 (RFC 1813 Section 2.6): a device's major and minor
// numbers.
type SpecData struct {
	Major, Minor uint32
}

// Attr is fattr3 (RFC 1813 Section 2.6), a file's attributes.
type Attr struct {
	Type                FType
	Mode, Nlink         uint32
	UID, GID            uint32
	Size, Used          uint64
	Rdev                SpecData
	FSID, FileID        uint64
	Atime, Mtime, Ctime Time
}

// Append appends the encoded fattr3 to b and returns the extended slice.
func (a *Attr) Append(b []byte) []byte {
	b = xdr.AppendUint32(b, uint32(a.Type))
	b = xdr.AppendUint32(b, a.Mode)
	b = xdr.AppendUint32(b, a.Nlink)
	b = xdr.AppendUint32(b, a.UID)
	b = xdr.AppendUint32(b, a.GID)
	b = xdr.AppendUint64(b, a.Size)
	b = xdr.AppendUint64(b, a.Used)
	b = xdr.AppendUint32(b, a.Rdev.Major)
	b = xdr.AppendUint32(b, a.Rdev.Minor)
	b = xdr.AppendUint64(b, a.FSID)
	b = xdr.AppendUint64(b, a.FileID)
	b = a.Atime.append(b)
	b = a.Mtime.append(b)
	return a.Ctime.append(b)
}

// Decode decodes an fattr3 and returns d's sticky error.
func (a *Attr) Decode(d *rpc.BodyDecoder) error {
	if !d.Need(fattrLen) {
		return d.Err()
	}
	a.Type = decodeFType(d)
	a.Mode = d.Uint32()
	a.Nlink = d.Uint32()
	a.UID = d.Uint32()
	a.GID = d.Uint32()
	a.Size = d.Uint64()
	a.Used = d.Uint64()
	a.Rdev.Major = d.Uint32()
	a.Rdev.Minor = d.Uint32()
	a.FSID = d.Uint64()
	a.FileID = d.Uint64()
	a.Atime.decode(d)
	a.Mtime.decode(d)
	a.Ctime.decode(d)
	return d.Err()
}

// PostOpAttr is post_op_attr (RFC 1813 Section 2.6): attributes a server
// may leave out.
type PostOpAttr struct {
	Present bool
	Attr    Attr
}

// Append appends the encoded post_op_attr to b.
func (p *PostOpAttr) Append(b []byte) []byte {
	b = xdr.AppendBool(b, p.Present)
	if p.Present {
		b = p.Attr.Append(b)
	}
	return b
}

// Decode decodes a post_op_attr and returns d's sticky error.
func (p *PostOpAttr) Decode(d *rpc.BodyDecoder) error {
	p.Present = d.Optional()
	if p.Present {
		p.Attr.Decode(d)
	} else {
		p.Attr = Attr{}
	}
	return d.Err()
}

// WccAttr is wcc_attr (RFC 1813 Section 2.6): the attributes weak cache
// consistency compares before an operation.
type WccAttr struct {
	Size         uint64
	Mtime, Ctime Time
}

// WccData is wcc_data (RFC 1813 Section 2.6): a file's attributes before
// and after an operation, each optional.
type WccData struct {
	BeforePresent bool
	Before        WccAttr
	After         PostOpAttr
}

// Append appends the encoded wcc_data to b.
func (w *WccData) Append(b []byte) []byte {
	b = xdr.AppendBool(b, w.BeforePresent)
	if w.BeforePresent {
		b = xdr.AppendUint64(b, w.Before.Size)
		b = w.Before.Mtime.append(b)
		b = w.Before.Ctime.append(b)
	}
	return w.After.Append(b)
}

// Decode decodes a wcc_data and returns d's sticky error.
func (w *WccData) Decode(d *rpc.BodyDecoder) error {
	w.BeforePresent = d.Optional()
	w.Before = WccAttr{}
	if w.BeforePresent {
		w.Before.Size = d.Uint64()
		w.Before.Mtime.decode(d)
		w.Before.Ctime.decode(d)
	}
	return w.After.Decode(d)
}

// PostOpFH is post_op_fh3 (RFC 1813 Section 2.6): a file handle a server
// may leave out.
type PostOpFH struct {
	Present bool
	FH      FileHandle
}

func (p *PostOpFH) append(b []byte) []byte {
	b = xdr.AppendBool(b, p.Present)
	if p.Present {
		b = appendFH(b, p.FH)
	}
	return b
}

func (p *PostOpFH) decode(d *rpc.BodyDecoder) {
	p.Present = d.Optional()
	p.FH = nil
	if p.Present {
		p.FH = decodeFH(d)
	}
}

// TimeHow is time_how (RFC 1813 Section 2.6): how SETATTR sets a time.
type TimeHow uint32

// The members of time_how.
const (
	DontChange      TimeHow = 0 // DONT_CHANGE
	SetToServerTime TimeHow = 1 // SET_TO_SERVER_TIME
	SetToClientTime TimeHow = 2 // SET_TO_CLIENT_TIME
)

// String returns the member's name in RFC 1813.
func (h TimeHow) String() string {
	if h <= SetToClientTime {
		return [...]string{"DONT_CHANGE", "SET_TO_SERVER_TIME", "SET_TO_CLIENT_TIME"}[h]
	}
	return "time_how(" + strconv.FormatUint(uint64(h), 10) + ")"
}

// SetAttr is sattr3 (RFC 1813 Section 2.6): the attributes a client sets,
// each with a flag saying whether to set it.
type SetAttr struct {
	SetMode, SetUID, SetGID, SetSize bool
	Mode, UID, GID                   uint32
	Size                             uint64
	SetAtime, SetMtime               TimeHow
	Atime, Mtime                     Time // used with SetToClientTime
}

// Append appends the encoded sattr3 to b.
func (s *SetAttr) Append(b []byte) []byte {
	b = appendOptUint32(b, s.SetMode, s.Mode)
	b = appendOptUint32(b, s.SetUID, s.UID)
	b = appendOptUint32(b, s.SetGID, s.GID)
	b = xdr.AppendBool(b, s.SetSize)
	if s.SetSize {
		b = xdr.AppendUint64(b, s.Size)
	}
	b = xdr.AppendUint32(b, uint32(s.SetAtime))
	if s.SetAtime == SetToClientTime {
		b = s.Atime.append(b)
	}
	b = xdr.AppendUint32(b, uint32(s.SetMtime))
	if s.SetMtime == SetToClientTime {
		b = s.Mtime.append(b)
	}
	return b
}

func appendOptUint32(b []byte, set bool, v uint32) []byte {
	b = xdr.AppendBool(b, set)
	if set {
		b = xdr.AppendUint32(b, v)
	}
	return b
}

func decodeOptUint32(d *rpc.BodyDecoder) (bool, uint32) {
	if d.Optional() {
		return true, d.Uint32()
	}
	return false, 0
}

// Decode decodes a sattr3 and returns d's sticky error. A time_how other
// than its three members fails.
func (s *SetAttr) Decode(d *rpc.BodyDecoder) error {
	*s = SetAttr{}
	s.SetMode, s.Mode = decodeOptUint32(d)
	s.SetUID, s.UID = decodeOptUint32(d)
	s.SetGID, s.GID = decodeOptUint32(d)
	if s.SetSize = d.Optional(); s.SetSize {
		s.Size = d.Uint64()
	}
	s.SetAtime = decodeTimeHow(d, &s.Atime)
	s.SetMtime = decodeTimeHow(d, &s.Mtime)
	return d.Err()
}

func decodeTimeHow(d *rpc.BodyDecoder, t *Time) TimeHow {
	h := TimeHow(d.Uint32())
	switch {
	case d.Err() != nil:
	case h == SetToClientTime:
		t.decode(d)
	case h > SetToClientTime:
		d.Fail(errEnum("time_how"))
	}
	return h
}

// DirOpArgs is diropargs3 (RFC 1813 Section 2.6): a name in a directory.
type DirOpArgs struct {
	Dir  FileHandle
	Name string
}

func (a *DirOpArgs) append(b []byte) []byte {
	return xdr.AppendString(appendFH(b, a.Dir), a.Name)
}

func (a *DirOpArgs) decode(d *rpc.BodyDecoder) {
	a.Dir = decodeFH(d)
	a.Name = d.Str(MaxName)
}

// Verf is an 8-byte verifier: cookieverf3, createverf3 or writeverf3 (RFC
// 1813 Section 2.5).
type Verf [8]byte

func (v *Verf) decode(d *rpc.BodyDecoder) {
	copy(v[:], d.FixedOpaque(8))
}
