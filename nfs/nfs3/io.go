package nfs3

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// ReadArgs is READ3args (RFC 1813 Section 3.3.6).
type ReadArgs struct {
	FH     FileHandle
	Offset uint64
	Count  uint32
}

// Append appends the encoded arguments to b.
func (a *ReadArgs) Append(b *rpc.Body) {
	b.XDR = appendFH(b.XDR, a.FH)
	b.XDR = xdr.AppendUint64(b.XDR, a.Offset)
	b.XDR = xdr.AppendUint32(b.XDR, a.Count)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *ReadArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	a.Offset = d.Uint64()
	a.Count = d.Uint32()
	return d.Err()
}

// ReadRes is READ3res (RFC 1813 Section 3.3.6). Data is DDP-eligible (RFC
// 8267 Section 4).
type ReadRes struct {
	Status Stat
	Attr   PostOpAttr
	Count  uint32 // if OK, and the three below
	EOF    bool
	Data   []byte
}

// Append appends the encoded results to b; Data is held apart as a
// DDP-eligible item, not copied, and must stay unchanged until the
// transport has sent it.
func (r *ReadRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Attr.Append(b.XDR)
	if r.Status == OK {
		b.XDR = xdr.AppendUint32(b.XDR, r.Count)
		b.XDR = xdr.AppendBool(b.XDR, r.EOF)
		b.AppendDDPOpaque(r.Data)
	}
}

// Decode decodes the results and returns d's sticky error. Data aliases
// the decoder's memory; DecodeInto puts it in the caller's buffer.
func (r *ReadRes) Decode(d *rpc.BodyDecoder) error {
	r.decodeHead(d)
	if r.Status == OK {
		r.Data = d.DDPOpaque(MaxData)
	}
	return d.Err()
}

// DecodeInto decodes the results like Decode, but with the data in buf:
// where an RPC-over-RDMA transport already placed it (buf was the call's
// rpc.Request.ResultBufs entry), or copied there. Data is then buf[:n].
// More data than len(buf) fails with xdr.ErrTooLong.
func (r *ReadRes) DecodeInto(d *rpc.BodyDecoder, buf []byte) error {
	r.decodeHead(d)
	if r.Status == OK {
		n := d.DDPOpaqueInto(buf)
		r.Data = buf[:n]
	}
	return d.Err()
}

func (r *ReadRes) decodeHead(d *rpc.BodyDecoder) {
	r.Status = Stat(d.Uint32())
	r.Attr.Decode(d)
	r.Count, r.EOF, r.Data = 0, false, nil
	if r.Status == OK {
		r.Count = d.Uint32()
		r.EOF = d.Bool()
	}
}

// StableHow is stable_how (RFC 1813 Section 3.3.7): how far a WRITE's data
// must reach stable storage before the reply.
type StableHow uint32

// The members of stable_how.
const (
	Unstable StableHow = 0 // UNSTABLE
	DataSync StableHow = 1 // DATA_SYNC
	FileSync StableHow = 2 // FILE_SYNC
)

// String returns the member's name in RFC 1813.
func (s StableHow) String() string {
	if s <= FileSync {
		return [...]string{"UNSTABLE", "DATA_SYNC", "FILE_SYNC"}[s]
	}
	return "stable_how(" + strconv.FormatUint(uint64(s), 10) + ")"
}

func decodeStable(d *rpc.BodyDecoder) StableHow {
	s := StableHow(d.Uint32())
	if d.Err() == nil && s > FileSync {
		d.Fail(errEnum("stable_how"))
	}
	return s
}

// WriteArgs is WRITE3args (RFC 1813 Section 3.3.7). Data is DDP-eligible
// (RFC 8267 Section 4).
type WriteArgs struct {
	FH     FileHandle
	Offset uint64
	Count  uint32
	Stable StableHow
	Data   []byte
}

// Append appends the encoded arguments to b; Data is held apart as a
// DDP-eligible item, not copied, and must stay unchanged until the call
// returns.
func (a *WriteArgs) Append(b *rpc.Body) {
	b.XDR = appendFH(b.XDR, a.FH)
	b.XDR = xdr.AppendUint64(b.XDR, a.Offset)
	b.XDR = xdr.AppendUint32(b.XDR, a.Count)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(a.Stable))
	b.AppendDDPOpaque(a.Data)
}

// Decode decodes the arguments and returns d's sticky error. Data aliases
// the decoder's memory (a transport's receive or read-chunk buffer). Count
// is not checked against len(Data): RFC 1813 leaves that to the server.
func (a *WriteArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	a.Offset = d.Uint64()
	a.Count = d.Uint32()
	a.Stable = decodeStable(d)
	a.Data = d.DDPOpaque(MaxData)
	return d.Err()
}

// WriteRes is WRITE3res (RFC 1813 Section 3.3.7).
type WriteRes struct {
	Status    Stat
	Wcc       WccData
	Count     uint32 // if OK, and the two below
	Committed StableHow
	Verf      Verf
}

// Append appends the encoded results to b.
func (r *WriteRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Wcc.Append(b.XDR)
	if r.Status == OK {
		b.XDR = xdr.AppendUint32(b.XDR, r.Count)
		b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Committed))
		b.XDR = append(b.XDR, r.Verf[:]...)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *WriteRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.Wcc.Decode(d)
	r.Count, r.Committed, r.Verf = 0, 0, Verf{}
	if r.Status == OK {
		r.Count = d.Uint32()
		r.Committed = decodeStable(d)
		r.Verf.decode(d)
	}
	return d.Err()
}

// CommitArgs is COMMIT3args (RFC 1813 Section 3.3.21).
type CommitArgs struct {
	FH     FileHandle
	Offset uint64
	Count  uint32
}

// Append appends the encoded arguments to b.
func (a *CommitArgs) Append(b *rpc.Body) {
	b.XDR = appendFH(b.XDR, a.FH)
	b.XDR = xdr.AppendUint64(b.XDR, a.Offset)
	b.XDR = xdr.AppendUint32(b.XDR, a.Count)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *CommitArgs) Decode(d *rpc.BodyDecoder) error {
	a.FH = decodeFH(d)
	a.Offset = d.Uint64()
	a.Count = d.Uint32()
	return d.Err()
}

// CommitRes is COMMIT3res (RFC 1813 Section 3.3.21).
type CommitRes struct {
	Status Stat
	Wcc    WccData
	Verf   Verf // if OK
}

// Append appends the encoded results to b.
func (r *CommitRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	b.XDR = r.Wcc.Append(b.XDR)
	if r.Status == OK {
		b.XDR = append(b.XDR, r.Verf[:]...)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *CommitRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.Wcc.Decode(d)
	r.Verf = Verf{}
	if r.Status == OK {
		r.Verf.decode(d)
	}
	return d.Err()
}
