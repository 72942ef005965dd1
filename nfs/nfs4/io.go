package nfs4

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// DDP-eligibility (RFC 8267 Section 5.1, "DDP-Eligibility" for NFS
// version 4): in a COMPOUND, the opaque data of WRITE4args and the
// linkdata of CREATE4args' NF4LNK arm; in its reply, the opaque data of
// READ4resok and the link of READLINK4resok; and nothing else. The codec
// appends exactly those items with rpc.Body.AppendDDPOpaque and decodes
// them with rpc.BodyDecoder.DDPOpaque, so an RPC-over-RDMA transport can
// move each by direct data placement and TCP sends them inline. READDIR
// and GETATTR replies are not DDP-eligible: a requester expecting a large
// one offers a reply chunk, sized by the session's ca_maxresponsesize
// (RFC 8267 Section 5.2).

// DDPArg reports whether o's arguments may carry a DDP-eligible item
// (WRITE, and CREATE of a symbolic link).
func (o Op) DDPArg() bool { return o == OpWrite || o == OpCreate }

// DDPResult reports whether o's results may carry a DDP-eligible item
// (READ and READLINK, when they succeed).
func (o Op) DDPResult() bool { return o == OpRead || o == OpReadlink }

// IO describes the READ or WRITE of a COMPOUND, for a transport to place
// its data: a READ's Count is the most data the reply can bring (the size
// of the write chunk to offer), a WRITE's the length of its data.
type IO struct {
	Op    Op // OpRead or OpWrite
	Index int
	Count uint32
}

// IO returns the COMPOUND's READ or WRITE when it has exactly one of
// them, and no other operation with a DDP-eligible item (READLINK, a
// CREATE of a symbolic link); ok is false otherwise.
func (c *CompoundArgs) IO() (io IO, ok bool) {
	for i, op := range c.Ops {
		var this IO
		switch a := op.(type) {
		case *ReadArgs:
			this = IO{OpRead, i, a.Count}
		case *WriteArgs:
			this = IO{OpWrite, i, uint32(len(a.Data))}
		case *ReadlinkArgs:
			return IO{}, false
		case *CreateArgs:
			if a.Type == TypeLnk {
				return IO{}, false
			}
			continue
		default:
			continue
		}
		if ok {
			return IO{}, false
		}
		io, ok = this, true
	}
	return io, ok
}

// DDPResults returns the number of results of the COMPOUND that may carry
// a DDP-eligible item: its READs and READLINKs. An RPC-over-RDMA
// requester offers at most that many write chunks, in that order (RFC
// 8267 Section 5.1).
func (c *CompoundArgs) DDPResults() int {
	n := 0
	for _, op := range c.Ops {
		if op.Op().DDPResult() {
			n++
		}
	}
	return n
}

// ReadArgs is READ4args (RFC 8881 Section 18.22).
type ReadArgs struct {
	StateID StateID
	Offset  uint64
	Count   uint32
}

func (*ReadArgs) Op() Op { return OpRead }

// Append appends the encoded arguments to b.
func (a *ReadArgs) Append(b *rpc.Body) {
	b.XDR = a.StateID.append(b.XDR)
	b.XDR = xdr.AppendUint64(b.XDR, a.Offset)
	b.XDR = xdr.AppendUint32(b.XDR, a.Count)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *ReadArgs) Decode(d *rpc.BodyDecoder) error {
	a.StateID.decode(d)
	a.Offset = d.Uint64()
	a.Count = d.Uint32()
	return d.Err()
}

// ReadRes is READ4res (RFC 8881 Section 18.22). Data is DDP-eligible.
//
// Buf, which Append ignores, is where a caller wants the data decoded:
// if Buf is not nil, Decode puts the data there, where an RPC-over-RDMA
// transport already placed it (Buf was the call's result buffer) or by
// copying, and Data is then Buf[:n]; more data than len(Buf) fails with
// xdr.ErrTooLong. With Buf nil, Data aliases the decoder's memory and
// may be up to MaxData bytes.
type ReadRes struct {
	Status Stat
	EOF    bool   // if OK, and Data
	Data   []byte // held apart on Append: unchanged until the transport has sent it
	Buf    []byte
}

func (*ReadRes) Op() Op           { return OpRead }
func (r *ReadRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *ReadRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = xdr.AppendBool(b.XDR, r.EOF)
		b.AppendDDPOpaque(r.Data)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *ReadRes) Decode(d *rpc.BodyDecoder) error {
	*r = ReadRes{Status: Stat(d.Uint32()), Buf: r.Buf}
	if r.Status != OK {
		return d.Err()
	}
	r.EOF = d.Bool()
	if r.Buf != nil {
		n := d.DDPOpaqueInto(r.Buf)
		r.Data = r.Buf[:n]
	} else {
		r.Data = d.DDPOpaque(MaxData)
	}
	return d.Err()
}

// StableHow is stable_how4 (RFC 8881 Section 18.32): how far a WRITE's
// data must reach stable storage before the reply.
type StableHow uint32

// The members of stable_how4.
const (
	Unstable StableHow = 0 // UNSTABLE4
	DataSync StableHow = 1 // DATA_SYNC4
	FileSync StableHow = 2 // FILE_SYNC4
)

// String returns the member's name in RFC 8881.
func (s StableHow) String() string {
	if s <= FileSync {
		return [...]string{"UNSTABLE4", "DATA_SYNC4", "FILE_SYNC4"}[s]
	}
	return "stable_how4(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// WriteArgs is WRITE4args (RFC 8881 Section 18.32). Data is
// DDP-eligible: Append holds it apart, not copied, and it must stay
// unchanged until the call returns; decoded, it aliases the decoder's
// memory (a receive or read-chunk buffer).
type WriteArgs struct {
	StateID StateID
	Offset  uint64
	Stable  StableHow
	Data    []byte
}

func (*WriteArgs) Op() Op { return OpWrite }

// Append appends the encoded arguments to b.
func (a *WriteArgs) Append(b *rpc.Body) {
	b.XDR = a.StateID.append(b.XDR)
	b.XDR = xdr.AppendUint64(b.XDR, a.Offset)
	b.XDR = xdr.AppendUint32(b.XDR, uint32(a.Stable))
	b.AppendDDPOpaque(a.Data)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *WriteArgs) Decode(d *rpc.BodyDecoder) error {
	a.StateID.decode(d)
	a.Offset = d.Uint64()
	a.Stable = StableHow(decodeEnum(d, uint32(FileSync), "stable_how4"))
	a.Data = d.DDPOpaque(MaxData)
	return d.Err()
}

// WriteRes is WRITE4res (RFC 8881 Section 18.32).
type WriteRes struct {
	Status    Stat
	Count     uint32 // if OK, and the two below
	Committed StableHow
	Verifier  Verifier
}

func (*WriteRes) Op() Op           { return OpWrite }
func (r *WriteRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *WriteRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = xdr.AppendUint32(b.XDR, r.Count)
		b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Committed))
		b.XDR = append(b.XDR, r.Verifier[:]...)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *WriteRes) Decode(d *rpc.BodyDecoder) error {
	*r = WriteRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.Count = d.Uint32()
		r.Committed = StableHow(decodeEnum(d, uint32(FileSync), "stable_how4"))
		r.Verifier.decode(d)
	}
	return d.Err()
}

// CommitArgs is COMMIT4args (RFC 8881 Section 18.3).
type CommitArgs struct {
	Offset uint64
	Count  uint32
}

func (*CommitArgs) Op() Op { return OpCommit }

// Append appends the encoded arguments to b.
func (a *CommitArgs) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(xdr.AppendUint64(b.XDR, a.Offset), a.Count)
}

// Decode decodes the arguments and returns d's sticky error.
func (a *CommitArgs) Decode(d *rpc.BodyDecoder) error {
	a.Offset = d.Uint64()
	a.Count = d.Uint32()
	return d.Err()
}

// CommitRes is COMMIT4res (RFC 8881 Section 18.3).
type CommitRes struct {
	Status   Stat
	Verifier Verifier // if OK
}

func (*CommitRes) Op() Op           { return OpCommit }
func (r *CommitRes) OpStatus() Stat { return r.Status }

// Append appends the encoded results to b.
func (r *CommitRes) Append(b *rpc.Body) {
	appendStat(b, r.Status)
	if r.Status == OK {
		b.XDR = append(b.XDR, r.Verifier[:]...)
	}
}

// Decode decodes the results and returns d's sticky error.
func (r *CommitRes) Decode(d *rpc.BodyDecoder) error {
	*r = CommitRes{Status: Stat(d.Uint32())}
	if r.Status == OK {
		r.Verifier.decode(d)
	}
	return d.Err()
}
