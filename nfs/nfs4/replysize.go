package nfs4

import "github.com/go-rpcrdma/rpcrdma/xdr"

// Largest encodings of shared items, in bytes.
const (
	stateIDLen    = 4 + 12
	changeInfoLen = 4 + 8 + 8
	bitmapMaxLen  = 4 + 4*MaxBitmapWords
	fhMaxLen      = 4 + FHSize
	aceMaxLen     = 12 + 4 + OpaqueLimit
	implIDMaxLen  = 4 + 2*(4+OpaqueLimit) + 12 // nfs_impl_id4<1>, present
	channelLen    = 6*4 + 4 + 4                // channel_attrs4 with ca_rdma_ird
)

// attrMaxLen gives the largest encoding of each attribute Attr knows;
// the others count as MaxAttrLen.
func attrMaxLen(id AttrID) int {
	switch id {
	case AttrSupportedAttrs, AttrSuppattrExclcreat:
		return bitmapMaxLen
	case AttrFSID, AttrTimeAccess, AttrTimeBackup, AttrTimeCreate, AttrTimeDelta, AttrTimeMetadata, AttrTimeModify:
		return 16
	case AttrFileHandle:
		return fhMaxLen
	case AttrOwner, AttrOwnerGroup:
		return 4 + OpaqueLimit
	case AttrChange, AttrSize, AttrFileID, AttrFilesAvail, AttrFilesFree, AttrFilesTotal, AttrMaxFileSize,
		AttrMaxRead, AttrMaxWrite, AttrQuotaAvailHard, AttrQuotaAvailSoft, AttrQuotaUsed, AttrRawDev,
		AttrSpaceAvail, AttrSpaceFree, AttrSpaceTotal, AttrSpaceUsed, AttrMountedOnFileID:
		return 8
	}
	if attrKnown.has(id) {
		return 4
	}
	return MaxAttrLen
}

// fattrMaxLen returns the largest fattr4 a server can answer a request for
// the attributes of req with (it returns no others, RFC 8881 Section
// 18.7.3).
func fattrMaxLen(req Bitmap) int {
	n := 4 + 4*min(len(req), MaxBitmapWords) + 4
	for id := range AttrID(len(req) * 32) {
		if req.Has(id) {
			n += attrMaxLen(id)
		}
	}
	return min(n, bitmapMaxLen+4+MaxAttrLen)
}

// ReplySize returns the largest encoded COMPOUND4res the server can
// answer c with, in bytes, not counting the data of READ results (which
// a requester places with a write chunk) but counting READLINK's link
// text. It is what an RPC-over-RDMA requester compares with its inline
// threshold to decide on a reply chunk (RFC 8267 Section 5.2 leaves the
// estimate to the client; the session's ca_maxresponsesize bounds it
// too). Results end at the first failing operation, so none is larger
// than its successful form. A GETATTR or READDIR asking for attributes
// this codec does not decode counts each as MaxAttrLen.
func (c *CompoundArgs) ReplySize() int {
	n := 4 + xdr.OpaqueLen(len(c.Tag)) + 4
	for _, op := range c.Ops {
		n += 4 + resultMaxLen(op)
	}
	return n
}

// resultMaxLen returns the largest results of op, less READ data.
func resultMaxLen(op ArgOp) int {
	switch a := op.(type) {
	case *SequenceArgs:
		return 4 + 16 + 5*4
	case *GetFHArgs:
		return 4 + fhMaxLen
	case *GetattrArgs:
		return 4 + fattrMaxLen(a.AttrRequest)
	case *AccessArgs, *CommitArgs:
		return 4 + 8
	case *ReadArgs:
		return 4 + 4 + 4 // eof and the data's length word
	case *WriteArgs:
		return 4 + 4 + 4 + 8
	case *ReaddirArgs:
		// maxcount bounds READDIR4resok (RFC 8881 Section 18.23.3).
		return 4 + int(a.MaxCount)
	case *ReadlinkArgs:
		return 4 + 4 + MaxPath
	case *CreateArgs:
		return 4 + changeInfoLen + bitmapMaxLen
	case *RemoveArgs, *LinkArgs:
		return 4 + changeInfoLen
	case *RenameArgs:
		return 4 + 2*changeInfoLen
	case *SetattrArgs:
		return 4 + bitmapMaxLen
	case *OpenArgs:
		deleg := 4 + stateIDLen + 4 + 12 + aceMaxLen // a write delegation
		return 4 + stateIDLen + changeInfoLen + 4 + bitmapMaxLen + deleg
	case *CloseArgs:
		return 4 + stateIDLen
	case *TestStateIDArgs:
		return 4 + 4 + 4*len(a.StateIDs)
	case *SecinfoNoNameArgs:
		return 4 + 4 + MaxSecParms*(4+4+MaxOID+4+4)
	case *ExchangeIDArgs:
		return 4 + 8 + 4 + 4 + 4 + 8 + 2*(4+OpaqueLimit) + implIDMaxLen
	case *CreateSessionArgs:
		return 4 + 16 + 4 + 4 + 2*channelLen
	case *BindConnToSessionArgs:
		return 4 + 16 + 4 + 4
	}
	// The results that are their status alone.
	return 4
}
