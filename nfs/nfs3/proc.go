package nfs3

import "strconv"

// The NFS program and the version this package speaks (RFC 1813 Section
// 3).
const (
	Program = 100003
	Version = 3
)

// Limits. RFC 1813 bounds only file handles; the others are this
// package's, chosen as Linux's, and bound what a decoder accepts.
const (
	// FHSize is NFS3_FHSIZE, the largest file handle (RFC 1813 Section
	// 2.4).
	FHSize = 64
	// MaxName is the longest filename3 decoded. Linux's NFS3_MAXNAMLEN
	// is 255; a server may refuse longer names with ErrNameTooLong
	// rather than have them fail to decode.
	MaxName = 1024
	// MaxPath is the longest nfspath3 (symbolic link contents): Linux's
	// NFS3_MAXPATHLEN, PATH_MAX.
	MaxPath = 4096
	// MaxData is the most READ or WRITE data decoded in one call, 4 MiB
	// (Linux's servers and clients use at most 1 MiB).
	MaxData = 4 << 20
	// MaxDirCount is the largest READDIR count or READDIRPLUS maxcount a
	// reply is sized for (see ReplySize).
	MaxDirCount = 1 << 20
)

// Proc is an NFSv3 procedure number (RFC 1813 Section 3.3).
type Proc uint32

// The procedures of RFC 1813 Section 3.3.
const (
	ProcNull        Proc = 0
	ProcGetattr     Proc = 1
	ProcSetattr     Proc = 2
	ProcLookup      Proc = 3
	ProcAccess      Proc = 4
	ProcReadlink    Proc = 5
	ProcRead        Proc = 6
	ProcWrite       Proc = 7
	ProcCreate      Proc = 8
	ProcMkdir       Proc = 9
	ProcSymlink     Proc = 10
	ProcMknod       Proc = 11
	ProcRemove      Proc = 12
	ProcRmdir       Proc = 13
	ProcRename      Proc = 14
	ProcLink        Proc = 15
	ProcReaddir     Proc = 16
	ProcReaddirplus Proc = 17
	ProcFsstat      Proc = 18
	ProcFsinfo      Proc = 19
	ProcPathconf    Proc = 20
	ProcCommit      Proc = 21

	// NumProcs is the number of NFSv3 procedures.
	NumProcs = 22
)

var procNames = [NumProcs]string{
	"NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE",
	"CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK",
	"READDIR", "READDIRPLUS", "FSSTAT", "FSINFO", "PATHCONF", "COMMIT",
}

// String returns the procedure's name in RFC 1813 (GETATTR, READDIRPLUS).
func (p Proc) String() string {
	if p < NumProcs {
		return procNames[p]
	}
	return "proc(" + strconv.FormatUint(uint64(p), 10) + ")"
}

// Idempotent reports whether running the procedure twice has the effect
// of running it once, so that a server need not keep its reply for a
// retransmission (RFC 1813 Section 4.1 "Server responsibilities"; knfsd's
// reply cache keeps only the others). Unknown procedures are not.
func (p Proc) Idempotent() bool {
	switch p {
	case ProcSetattr, ProcWrite, ProcCreate, ProcMkdir, ProcSymlink, ProcMknod,
		ProcRemove, ProcRmdir, ProcRename, ProcLink:
		return false
	}
	return p < NumProcs
}

// DDP-eligibility (RFC 8267 Section 4, "Upper-Layer Binding for NFS
// Versions 2 and 3"): the opaque file data of WRITE arguments and the
// pathname of SYMLINK arguments, the opaque file data of READ results and
// the pathname of READLINK results, and nothing else. The codec appends
// exactly those items with rpc.Body.AppendDDPOpaque and decodes them with
// rpc.BodyDecoder.DDPOpaque.

// DDPArg reports whether p's arguments carry a DDP-eligible item.
func (p Proc) DDPArg() bool { return p == ProcWrite || p == ProcSymlink }

// DDPResult reports whether p's results carry a DDP-eligible item.
func (p Proc) DDPResult() bool { return p == ProcRead || p == ProcReadlink }

// Fixed sizes of shared types, in bytes.
const (
	fattrLen      = 84                            // fattr3
	postOpAttrLen = 4 + fattrLen                  // post_op_attr, present
	wccLen        = 4 + 24 + postOpAttrLen        // wcc_data, both present
	postOpFHLen   = 4 + 4 + FHSize                // post_op_fh3, present, largest handle
	readdirHead   = 4 + postOpAttrLen + 8 + 4 + 4 // status, dir_attributes, cookieverf, no entry, eof
)

// ReplySize returns the largest encoded results of p, in bytes, not
// counting the DDP-eligible data of READ (which a requester places with a
// write chunk) and with count the READDIR count or READDIRPLUS maxcount
// (ignored otherwise; clamped to MaxDirCount). It is what an RPC-over-RDMA
// requester compares with its inline threshold to decide on a reply chunk
// (rpc.Request.MaxReply), which Linux offers for READDIR, READDIRPLUS and
// READLINK (RFC 8267 Section 4 lets it place the READLINK pathname with a
// write chunk instead). Unknown procedures return 0.
func (p Proc) ReplySize(count uint32) int {
	switch p {
	case ProcNull:
		return 0
	case ProcGetattr:
		return 4 + fattrLen
	case ProcSetattr, ProcRemove, ProcRmdir:
		return 4 + wccLen
	case ProcLookup:
		return 4 + 4 + FHSize + 2*postOpAttrLen
	case ProcAccess:
		return 4 + postOpAttrLen + 4
	case ProcReadlink:
		return 4 + postOpAttrLen + 4 + MaxPath
	case ProcRead:
		return 4 + postOpAttrLen + 4 + 4 + 4 // data's length word; the data is DDP
	case ProcWrite:
		return 4 + wccLen + 4 + 4 + 8
	case ProcCreate, ProcMkdir, ProcSymlink, ProcMknod:
		return 4 + postOpFHLen + postOpAttrLen + wccLen
	case ProcRename:
		return 4 + 2*wccLen
	case ProcLink:
		return 4 + postOpAttrLen + wccLen
	case ProcReaddir, ProcReaddirplus:
		// count bounds READDIR3resok/READDIRPLUS3resok with all their
		// XDR (RFC 1813 Sections 3.3.16, 3.3.17); a count too small for
		// one entry gets NFS3ERR_TOOSMALL, status and attributes.
		return max(readdirHead, 4+int(min(count, MaxDirCount)))
	case ProcFsstat:
		return 4 + postOpAttrLen + 6*8 + 4
	case ProcFsinfo:
		return 4 + postOpAttrLen + 7*4 + 8 + 8 + 4
	case ProcPathconf:
		return 4 + postOpAttrLen + 6*4
	case ProcCommit:
		return 4 + wccLen + 8
	}
	return 0
}
