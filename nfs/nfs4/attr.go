package nfs4

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// AttrID is an attribute number (RFC 8881 Section 5.8): a bit of the
// bitmap4 of a fattr4.
type AttrID uint32

// The attributes of RFC 8881 Sections 5.6 to 5.8 (REQUIRED, RECOMMENDED
// and NFSv4.1's), by number.
const (
	AttrSupportedAttrs    AttrID = 0
	AttrType              AttrID = 1
	AttrFHExpireType      AttrID = 2
	AttrChange            AttrID = 3
	AttrSize              AttrID = 4
	AttrLinkSupport       AttrID = 5
	AttrSymlinkSupport    AttrID = 6
	AttrNamedAttr         AttrID = 7
	AttrFSID              AttrID = 8
	AttrUniqueHandles     AttrID = 9
	AttrLeaseTime         AttrID = 10
	AttrRdattrError       AttrID = 11
	AttrACL               AttrID = 12
	AttrACLSupport        AttrID = 13
	AttrArchive           AttrID = 14
	AttrCanSetTime        AttrID = 15
	AttrCaseInsensitive   AttrID = 16
	AttrCasePreserving    AttrID = 17
	AttrChownRestricted   AttrID = 18
	AttrFileHandle        AttrID = 19
	AttrFileID            AttrID = 20
	AttrFilesAvail        AttrID = 21
	AttrFilesFree         AttrID = 22
	AttrFilesTotal        AttrID = 23
	AttrFSLocations       AttrID = 24
	AttrHidden            AttrID = 25
	AttrHomogeneous       AttrID = 26
	AttrMaxFileSize       AttrID = 27
	AttrMaxLink           AttrID = 28
	AttrMaxName           AttrID = 29
	AttrMaxRead           AttrID = 30
	AttrMaxWrite          AttrID = 31
	AttrMimeType          AttrID = 32
	AttrMode              AttrID = 33
	AttrNoTrunc           AttrID = 34
	AttrNumLinks          AttrID = 35
	AttrOwner             AttrID = 36
	AttrOwnerGroup        AttrID = 37
	AttrQuotaAvailHard    AttrID = 38
	AttrQuotaAvailSoft    AttrID = 39
	AttrQuotaUsed         AttrID = 40
	AttrRawDev            AttrID = 41
	AttrSpaceAvail        AttrID = 42
	AttrSpaceFree         AttrID = 43
	AttrSpaceTotal        AttrID = 44
	AttrSpaceUsed         AttrID = 45
	AttrSystem            AttrID = 46
	AttrTimeAccess        AttrID = 47
	AttrTimeAccessSet     AttrID = 48
	AttrTimeBackup        AttrID = 49
	AttrTimeCreate        AttrID = 50
	AttrTimeDelta         AttrID = 51
	AttrTimeMetadata      AttrID = 52
	AttrTimeModify        AttrID = 53
	AttrTimeModifySet     AttrID = 54
	AttrMountedOnFileID   AttrID = 55
	AttrDirNotifDelay     AttrID = 56
	AttrDirentNotifDelay  AttrID = 57
	AttrDACL              AttrID = 58
	AttrSACL              AttrID = 59
	AttrChangePolicy      AttrID = 60
	AttrFSStatus          AttrID = 61
	AttrFSLayoutTypes     AttrID = 62
	AttrLayoutHint        AttrID = 63
	AttrLayoutTypes       AttrID = 64
	AttrLayoutBlksize     AttrID = 65
	AttrLayoutAlignment   AttrID = 66
	AttrFSLocationsInfo   AttrID = 67
	AttrMDSThreshold      AttrID = 68
	AttrRetentionGet      AttrID = 69
	AttrRetentionSet      AttrID = 70
	AttrRetentevtGet      AttrID = 71
	AttrRetentevtSet      AttrID = 72
	AttrRetentionHold     AttrID = 73
	AttrModeSetMasked     AttrID = 74
	AttrSuppattrExclcreat AttrID = 75
	AttrFSCharsetCap      AttrID = 76
)

var attrNames = [...]string{
	"supported_attrs", "type", "fh_expire_type", "change", "size", "link_support", "symlink_support",
	"named_attr", "fsid", "unique_handles", "lease_time", "rdattr_error", "acl", "aclsupport", "archive",
	"cansettime", "case_insensitive", "case_preserving", "chown_restricted", "filehandle", "fileid",
	"files_avail", "files_free", "files_total", "fs_locations", "hidden", "homogeneous", "maxfilesize",
	"maxlink", "maxname", "maxread", "maxwrite", "mimetype", "mode", "no_trunc", "numlinks", "owner",
	"owner_group", "quota_avail_hard", "quota_avail_soft", "quota_used", "rawdev", "space_avail",
	"space_free", "space_total", "space_used", "system", "time_access", "time_access_set", "time_backup",
	"time_create", "time_delta", "time_metadata", "time_modify", "time_modify_set", "mounted_on_fileid",
	"dir_notif_delay", "dirent_notif_delay", "dacl", "sacl", "change_policy", "fs_status",
	"fs_layout_types", "layout_hint", "layout_types", "layout_blksize", "layout_alignment",
	"fs_locations_info", "mdsthreshold", "retention_get", "retention_set", "retentevt_get",
	"retentevt_set", "retention_hold", "mode_set_masked", "suppattr_exclcreat", "fs_charset_cap",
}

// String returns the attribute's name in RFC 8881 (size, time_modify).
func (a AttrID) String() string {
	if int(a) < len(attrNames) {
		return attrNames[a]
	}
	return "attr(" + strconv.FormatUint(uint64(a), 10) + ")"
}

// attrWords is the number of bitmap words the known attributes need.
const attrWords = 3

type attrMask [attrWords]uint32

func maskOf(ids ...AttrID) attrMask {
	var m attrMask
	for _, n := range ids {
		m[n/32] |= 1 << (n % 32)
	}
	return m
}

func (m *attrMask) has(n AttrID) bool { return int(n/32) < attrWords && m[n/32]&(1<<(n%32)) != 0 }

// AttrKnown returns the attributes Attr encodes and decodes: every
// fixed-size REQUIRED and RECOMMENDED attribute of RFC 8881 Sections 5.6
// and 5.7, the owner strings and the file handle, and NFSv4.1's
// suppattr_exclcreat. Not among them: acl, fs_locations, mimetype, the
// settable-only time_access_set and time_modify_set (SetAttr has those),
// and NFSv4.1's other attributes.
func AttrKnown() Bitmap { return Bitmap{attrKnown[0], attrKnown[1], attrKnown[2]} }

var attrKnown = maskOf(
	AttrSupportedAttrs, AttrType, AttrFHExpireType, AttrChange, AttrSize, AttrLinkSupport,
	AttrSymlinkSupport, AttrNamedAttr, AttrFSID, AttrUniqueHandles, AttrLeaseTime, AttrRdattrError,
	AttrACLSupport, AttrArchive, AttrCanSetTime, AttrCaseInsensitive, AttrCasePreserving,
	AttrChownRestricted, AttrFileHandle, AttrFileID, AttrFilesAvail, AttrFilesFree, AttrFilesTotal,
	AttrHidden, AttrHomogeneous, AttrMaxFileSize, AttrMaxLink, AttrMaxName, AttrMaxRead, AttrMaxWrite,
	AttrMode, AttrNoTrunc, AttrNumLinks, AttrOwner, AttrOwnerGroup, AttrQuotaAvailHard,
	AttrQuotaAvailSoft, AttrQuotaUsed, AttrRawDev, AttrSpaceAvail, AttrSpaceFree, AttrSpaceTotal,
	AttrSpaceUsed, AttrSystem, AttrTimeAccess, AttrTimeBackup, AttrTimeCreate, AttrTimeDelta,
	AttrTimeMetadata, AttrTimeModify, AttrMountedOnFileID, AttrSuppattrExclcreat,
)

// Attr is fattr4 (RFC 8881 Section 3.3) as GETATTR and READDIR return
// it: Mask says which attributes are present, the fields hold their
// values (RFC 8881 Section 5.8 gives each one's meaning), and fields of
// absent attributes are zero.
//
// On the wire the attributes follow in increasing number in an opaque
// attrlist4, with no per-attribute length, so a decoder must know every
// attribute before the last it decodes. Decode fails (UnknownAttrError) on
// an attribute not in AttrKnown() when a known one follows it; unknown
// attributes after every known one are skipped, since the attrlist4's
// length bounds them, and their bits cleared from Mask. Append encodes
// only the attributes of Mask in AttrKnown(), with a bitmap of just those.
type Attr struct {
	Mask Bitmap

	SupportedAttrs    Bitmap
	Type              FType
	FHExpireType      uint32
	Change            uint64
	Size              uint64
	LinkSupport       bool
	SymlinkSupport    bool
	NamedAttr         bool
	FSID              FSID
	UniqueHandles     bool
	LeaseTime         uint32 // seconds
	RdattrError       Stat
	ACLSupport        uint32
	Archive           bool
	CanSetTime        bool
	CaseInsensitive   bool
	CasePreserving    bool
	ChownRestricted   bool
	FileHandle        FileHandle
	FileID            uint64
	FilesAvail        uint64
	FilesFree         uint64
	FilesTotal        uint64
	Hidden            bool
	Homogeneous       bool
	MaxFileSize       uint64
	MaxLink           uint32
	MaxName           uint32
	MaxRead           uint64
	MaxWrite          uint64
	Mode              uint32
	NoTrunc           bool
	NumLinks          uint32
	Owner             string
	OwnerGroup        string
	QuotaAvailHard    uint64
	QuotaAvailSoft    uint64
	QuotaUsed         uint64
	RawDev            SpecData
	SpaceAvail        uint64
	SpaceFree         uint64
	SpaceTotal        uint64
	SpaceUsed         uint64
	System            bool
	TimeAccess        Time
	TimeBackup        Time
	TimeCreate        Time
	TimeDelta         Time
	TimeMetadata      Time
	TimeModify        Time
	MountedOnFileID   uint64
	SuppattrExclcreat Bitmap
}

// Has reports whether attribute n is present.
func (a *Attr) Has(n AttrID) bool { return a.Mask.Has(n) }

// UnknownAttrError: a fattr4 holds an attribute this codec does not know
// before one it does, so the attributes after it cannot be found.
type UnknownAttrError struct {
	ID AttrID
}

func (e *UnknownAttrError) Error() string {
	return "nfs4: fattr4 has attribute " + strconv.FormatUint(uint64(e.ID), 10) + " (" + e.ID.String() +
		"), which this codec cannot decode, before attributes it can"
}

// Append appends the encoded fattr4 to b and returns the extended slice.
func (a *Attr) Append(b []byte) []byte {
	return appendFattr(b, a.Mask, &attrKnown, func(b []byte, id AttrID) []byte { return a.appendOne(b, id) })
}

// Decode decodes a fattr4 and returns d's sticky error. FileHandle
// aliases the decoder's buffer; the bitmaps reuse a's.
func (a *Attr) Decode(d *rpc.BodyDecoder) error {
	mask, sup, excl := a.Mask, a.SupportedAttrs[:0], a.SuppattrExclcreat[:0]
	*a = Attr{SupportedAttrs: sup, SuppattrExclcreat: excl}
	a.Mask = decodeFattr(d, mask, &attrKnown, a.decodeOne)
	if len(a.SupportedAttrs) == 0 {
		a.SupportedAttrs = nil
	}
	if len(a.SuppattrExclcreat) == 0 {
		a.SuppattrExclcreat = nil
	}
	return d.Err()
}

// appendOne appends attribute id's value. It is one switch, a case per
// attribute of RFC 8881 Section 5.6 and 5.7 in number order, so that the
// encoder and decodeOne can be read side by side; split, the order that
// fattr4 depends on would be spread over several places.
func (a *Attr) appendOne(b []byte, id AttrID) []byte {
	switch id {
	case AttrSupportedAttrs:
		return a.SupportedAttrs.append(b)
	case AttrType:
		return xdr.AppendUint32(b, uint32(a.Type))
	case AttrFHExpireType:
		return xdr.AppendUint32(b, a.FHExpireType)
	case AttrChange:
		return xdr.AppendUint64(b, a.Change)
	case AttrSize:
		return xdr.AppendUint64(b, a.Size)
	case AttrLinkSupport:
		return xdr.AppendBool(b, a.LinkSupport)
	case AttrSymlinkSupport:
		return xdr.AppendBool(b, a.SymlinkSupport)
	case AttrNamedAttr:
		return xdr.AppendBool(b, a.NamedAttr)
	case AttrFSID:
		return xdr.AppendUint64(xdr.AppendUint64(b, a.FSID.Major), a.FSID.Minor)
	case AttrUniqueHandles:
		return xdr.AppendBool(b, a.UniqueHandles)
	case AttrLeaseTime:
		return xdr.AppendUint32(b, a.LeaseTime)
	case AttrRdattrError:
		return xdr.AppendUint32(b, uint32(a.RdattrError))
	case AttrACLSupport:
		return xdr.AppendUint32(b, a.ACLSupport)
	case AttrArchive:
		return xdr.AppendBool(b, a.Archive)
	case AttrCanSetTime:
		return xdr.AppendBool(b, a.CanSetTime)
	case AttrCaseInsensitive:
		return xdr.AppendBool(b, a.CaseInsensitive)
	case AttrCasePreserving:
		return xdr.AppendBool(b, a.CasePreserving)
	case AttrChownRestricted:
		return xdr.AppendBool(b, a.ChownRestricted)
	case AttrFileHandle:
		return appendFH(b, a.FileHandle)
	case AttrFileID:
		return xdr.AppendUint64(b, a.FileID)
	case AttrFilesAvail:
		return xdr.AppendUint64(b, a.FilesAvail)
	case AttrFilesFree:
		return xdr.AppendUint64(b, a.FilesFree)
	case AttrFilesTotal:
		return xdr.AppendUint64(b, a.FilesTotal)
	case AttrHidden:
		return xdr.AppendBool(b, a.Hidden)
	case AttrHomogeneous:
		return xdr.AppendBool(b, a.Homogeneous)
	case AttrMaxFileSize:
		return xdr.AppendUint64(b, a.MaxFileSize)
	case AttrMaxLink:
		return xdr.AppendUint32(b, a.MaxLink)
	case AttrMaxName:
		return xdr.AppendUint32(b, a.MaxName)
	case AttrMaxRead:
		return xdr.AppendUint64(b, a.MaxRead)
	case AttrMaxWrite:
		return xdr.AppendUint64(b, a.MaxWrite)
	case AttrMode:
		return xdr.AppendUint32(b, a.Mode)
	case AttrNoTrunc:
		return xdr.AppendBool(b, a.NoTrunc)
	case AttrNumLinks:
		return xdr.AppendUint32(b, a.NumLinks)
	case AttrOwner:
		return appendString(b, a.Owner)
	case AttrOwnerGroup:
		return appendString(b, a.OwnerGroup)
	case AttrQuotaAvailHard:
		return xdr.AppendUint64(b, a.QuotaAvailHard)
	case AttrQuotaAvailSoft:
		return xdr.AppendUint64(b, a.QuotaAvailSoft)
	case AttrQuotaUsed:
		return xdr.AppendUint64(b, a.QuotaUsed)
	case AttrRawDev:
		return xdr.AppendUint32(xdr.AppendUint32(b, a.RawDev.Major), a.RawDev.Minor)
	case AttrSpaceAvail:
		return xdr.AppendUint64(b, a.SpaceAvail)
	case AttrSpaceFree:
		return xdr.AppendUint64(b, a.SpaceFree)
	case AttrSpaceTotal:
		return xdr.AppendUint64(b, a.SpaceTotal)
	case AttrSpaceUsed:
		return xdr.AppendUint64(b, a.SpaceUsed)
	case AttrSystem:
		return xdr.AppendBool(b, a.System)
	case AttrTimeAccess:
		return a.TimeAccess.append(b)
	case AttrTimeBackup:
		return a.TimeBackup.append(b)
	case AttrTimeCreate:
		return a.TimeCreate.append(b)
	case AttrTimeDelta:
		return a.TimeDelta.append(b)
	case AttrTimeMetadata:
		return a.TimeMetadata.append(b)
	case AttrTimeModify:
		return a.TimeModify.append(b)
	case AttrMountedOnFileID:
		return xdr.AppendUint64(b, a.MountedOnFileID)
	case AttrSuppattrExclcreat:
		return a.SuppattrExclcreat.append(b)
	}
	return b
}

// decodeOne decodes attribute id's value into a: appendOne's mirror, one
// case per attribute, for the same reason.
func (a *Attr) decodeOne(d *rpc.BodyDecoder, id AttrID) {
	switch id {
	case AttrSupportedAttrs:
		a.SupportedAttrs = decodeBitmap(d, a.SupportedAttrs)
	case AttrType:
		a.Type = decodeFType(d)
	case AttrFHExpireType:
		a.FHExpireType = d.Uint32()
	case AttrChange:
		a.Change = d.Uint64()
	case AttrSize:
		a.Size = d.Uint64()
	case AttrLinkSupport:
		a.LinkSupport = d.Bool()
	case AttrSymlinkSupport:
		a.SymlinkSupport = d.Bool()
	case AttrNamedAttr:
		a.NamedAttr = d.Bool()
	case AttrFSID:
		a.FSID.Major = d.Uint64()
		a.FSID.Minor = d.Uint64()
	case AttrUniqueHandles:
		a.UniqueHandles = d.Bool()
	case AttrLeaseTime:
		a.LeaseTime = d.Uint32()
	case AttrRdattrError:
		a.RdattrError = Stat(d.Uint32())
	case AttrACLSupport:
		a.ACLSupport = d.Uint32()
	case AttrArchive:
		a.Archive = d.Bool()
	case AttrCanSetTime:
		a.CanSetTime = d.Bool()
	case AttrCaseInsensitive:
		a.CaseInsensitive = d.Bool()
	case AttrCasePreserving:
		a.CasePreserving = d.Bool()
	case AttrChownRestricted:
		a.ChownRestricted = d.Bool()
	case AttrFileHandle:
		a.FileHandle = decodeFH(d)
	case AttrFileID:
		a.FileID = d.Uint64()
	case AttrFilesAvail:
		a.FilesAvail = d.Uint64()
	case AttrFilesFree:
		a.FilesFree = d.Uint64()
	case AttrFilesTotal:
		a.FilesTotal = d.Uint64()
	case AttrHidden:
		a.Hidden = d.Bool()
	case AttrHomogeneous:
		a.Homogeneous = d.Bool()
	case AttrMaxFileSize:
		a.MaxFileSize = d.Uint64()
	case AttrMaxLink:
		a.MaxLink = d.Uint32()
	case AttrMaxName:
		a.MaxName = d.Uint32()
	case AttrMaxRead:
		a.MaxRead = d.Uint64()
	case AttrMaxWrite:
		a.MaxWrite = d.Uint64()
	case AttrMode:
		a.Mode = d.Uint32()
	case AttrNoTrunc:
		a.NoTrunc = d.Bool()
	case AttrNumLinks:
		a.NumLinks = d.Uint32()
	case AttrOwner:
		a.Owner = d.Str(OpaqueLimit)
	case AttrOwnerGroup:
		a.OwnerGroup = d.Str(OpaqueLimit)
	case AttrQuotaAvailHard:
		a.QuotaAvailHard = d.Uint64()
	case AttrQuotaAvailSoft:
		a.QuotaAvailSoft = d.Uint64()
	case AttrQuotaUsed:
		a.QuotaUsed = d.Uint64()
	case AttrRawDev:
		a.RawDev.Major = d.Uint32()
		a.RawDev.Minor = d.Uint32()
	case AttrSpaceAvail:
		a.SpaceAvail = d.Uint64()
	case AttrSpaceFree:
		a.SpaceFree = d.Uint64()
	case AttrSpaceTotal:
		a.SpaceTotal = d.Uint64()
	case AttrSpaceUsed:
		a.SpaceUsed = d.Uint64()
	case AttrSystem:
		a.System = d.Bool()
	case AttrTimeAccess:
		a.TimeAccess.decode(d)
	case AttrTimeBackup:
		a.TimeBackup.decode(d)
	case AttrTimeCreate:
		a.TimeCreate.decode(d)
	case AttrTimeDelta:
		a.TimeDelta.decode(d)
	case AttrTimeMetadata:
		a.TimeMetadata.decode(d)
	case AttrTimeModify:
		a.TimeModify.decode(d)
	case AttrMountedOnFileID:
		a.MountedOnFileID = d.Uint64()
	case AttrSuppattrExclcreat:
		a.SuppattrExclcreat = decodeBitmap(d, a.SuppattrExclcreat)
	}
}

// appendFattr appends a fattr4: the bitmap of the attributes of mask in
// known, and an attrlist4 of their values, in increasing number, as one
// encodes them.
func appendFattr(b []byte, mask Bitmap, known *attrMask, one func([]byte, AttrID) []byte) []byte {
	var m attrMask
	n := 0
	for i := range min(len(mask), attrWords) {
		if m[i] = mask[i] & known[i]; m[i] != 0 {
			n = i + 1
		}
	}
	b = Bitmap(m[:n]).append(b)
	b, off := xdr.Reserve(b)
	for id := range AttrID(n * 32) {
		if m.has(id) {
			b = one(b, id)
		}
	}
	xdr.PutUint32(b, off, uint32(len(b)-off-4))
	return b
}

// decodeFattr decodes a fattr4's bitmap into mask[:0], and its
// attrlist4's attributes with one, and returns the bitmap less the
// unknown attributes it skipped (see Attr).
func decodeFattr(d *rpc.BodyDecoder, mask Bitmap, known *attrMask, one func(*rpc.BodyDecoder, AttrID)) Bitmap {
	mask = decodeBitmap(d, mask)
	list := d.Opaque(MaxAttrLen)
	if d.Err() != nil {
		return mask
	}
	ld := rpc.NewBodyDecoder(rpc.Body{XDR: list})
	for id := range AttrID(len(mask) * 32) {
		if !mask.Has(id) {
			continue
		}
		if !known.has(id) {
			for later := id + 1; later < attrWords*32; later++ {
				if mask.Has(later) && known.has(later) {
					d.Fail(&UnknownAttrError{ID: id})
					return mask
				}
			}
			for i := range mask {
				switch lo := AttrID(i * 32); {
				case lo >= id:
					mask[i] = 0
				case lo+32 > id:
					mask[i] &= 1<<(id-lo) - 1
				}
			}
			if err := ld.Err(); err != nil {
				d.Fail(&attrListError{err})
			}
			return mask
		}
		one(&ld, id)
	}
	if err := ld.Done(); err != nil {
		d.Fail(&attrListError{err})
	}
	return mask
}

// attrListError: an attrlist4 failed to decode; Err, an
// *xdr.DecodeError, has the offset in the attrlist4.
type attrListError struct{ err error }

func (e *attrListError) Error() string { return "nfs4: attrlist4: " + e.err.Error() }
func (e *attrListError) Unwrap() error { return e.err }

// TimeHow is time_how4 (RFC 8881 Section 3.3): how SETATTR sets a time.
type TimeHow uint32

// The members of time_how4.
const (
	SetToServerTime TimeHow = 0 // SET_TO_SERVER_TIME4
	SetToClientTime TimeHow = 1 // SET_TO_CLIENT_TIME4
)

// String returns the member's name in RFC 8881.
func (h TimeHow) String() string {
	if h <= SetToClientTime {
		return [...]string{"SET_TO_SERVER_TIME4", "SET_TO_CLIENT_TIME4"}[h]
	}
	return "time_how4(" + strconv.FormatUint(uint64(h), 10) + ")"
}

// SetAttrKnown returns the attributes SetAttr encodes and decodes.
func SetAttrKnown() Bitmap { return Bitmap{setKnown[0], setKnown[1], setKnown[2]} }

var setKnown = maskOf(AttrSize, AttrMode, AttrOwner, AttrOwnerGroup, AttrTimeAccessSet, AttrTimeModifySet)

// SetAttr is the fattr4 a client sends to set attributes: SETATTR's
// obj_attributes, CREATE's createattrs, OPEN's createattrs and cva_attrs
// (RFC 8881 Sections 18.30, 18.4, 18.16). Each Set flag puts its
// attribute in the bitmap; the times are settime4 (RFC 8881 Section
// 3.3), with Atime and Mtime used for SetToClientTime. Decode follows
// Attr's rule for attributes it does not know, with SetAttrKnown().
type SetAttr struct {
	SetSize, SetMode, SetOwner, SetOwnerGroup bool
	Size                                      uint64
	Mode                                      uint32
	Owner, OwnerGroup                         string
	SetAtime, SetMtime                        bool
	AtimeHow, MtimeHow                        TimeHow
	Atime, Mtime                              Time
}

// Mask returns the bitmap of the attributes s sets.
func (s *SetAttr) Mask() Bitmap {
	var b Bitmap
	for _, x := range [...]struct {
		set bool
		id  AttrID
	}{{s.SetSize, AttrSize}, {s.SetMode, AttrMode}, {s.SetOwner, AttrOwner},
		{s.SetOwnerGroup, AttrOwnerGroup}, {s.SetAtime, AttrTimeAccessSet}, {s.SetMtime, AttrTimeModifySet}} {
		if x.set {
			b = b.With(x.id)
		}
	}
	return b
}

// Append appends the encoded fattr4 to b and returns the extended slice.
func (s *SetAttr) Append(b []byte) []byte {
	var m [attrWords]uint32
	if s.SetSize {
		m[0] |= 1 << AttrSize
	}
	if s.SetMode {
		m[1] |= 1 << (AttrMode - 32)
	}
	if s.SetOwner {
		m[1] |= 1 << (AttrOwner - 32)
	}
	if s.SetOwnerGroup {
		m[1] |= 1 << (AttrOwnerGroup - 32)
	}
	if s.SetAtime {
		m[1] |= 1 << (AttrTimeAccessSet - 32)
	}
	if s.SetMtime {
		m[1] |= 1 << (AttrTimeModifySet - 32)
	}
	return appendFattr(b, m[:], &setKnown, s.appendOne)
}

func (s *SetAttr) appendOne(b []byte, id AttrID) []byte {
	switch id {
	case AttrSize:
		return xdr.AppendUint64(b, s.Size)
	case AttrMode:
		return xdr.AppendUint32(b, s.Mode)
	case AttrOwner:
		return appendString(b, s.Owner)
	case AttrOwnerGroup:
		return appendString(b, s.OwnerGroup)
	case AttrTimeAccessSet:
		return appendSetTime(b, s.AtimeHow, s.Atime)
	case AttrTimeModifySet:
		return appendSetTime(b, s.MtimeHow, s.Mtime)
	}
	return b
}

func appendSetTime(b []byte, how TimeHow, t Time) []byte {
	b = xdr.AppendUint32(b, uint32(how))
	if how == SetToClientTime {
		b = t.append(b)
	}
	return b
}

// Decode decodes the fattr4 and returns d's sticky error. A time_how4
// other than its two members fails.
func (s *SetAttr) Decode(d *rpc.BodyDecoder) error {
	*s = SetAttr{}
	decodeFattr(d, nil, &setKnown, func(d *rpc.BodyDecoder, id AttrID) {
		switch id {
		case AttrSize:
			s.SetSize, s.Size = true, d.Uint64()
		case AttrMode:
			s.SetMode, s.Mode = true, d.Uint32()
		case AttrOwner:
			s.SetOwner, s.Owner = true, d.Str(OpaqueLimit)
		case AttrOwnerGroup:
			s.SetOwnerGroup, s.OwnerGroup = true, d.Str(OpaqueLimit)
		case AttrTimeAccessSet:
			s.SetAtime = true
			s.AtimeHow = decodeSetTime(d, &s.Atime)
		case AttrTimeModifySet:
			s.SetMtime = true
			s.MtimeHow = decodeSetTime(d, &s.Mtime)
		}
	})
	return d.Err()
}

func decodeSetTime(d *rpc.BodyDecoder, t *Time) TimeHow {
	h := TimeHow(decodeEnum(d, uint32(SetToClientTime), "time_how4"))
	if h == SetToClientTime {
		t.decode(d)
	}
	return h
}
