package nfs4

import "strconv"

// Stat is nfsstat4 (RFC 8881 Section 15.1; RFC 5662), the status of a
// COMPOUND and of each of its operations.
type Stat uint32

// The statuses of RFC 8881 Section 15.1. NFS4ERR_RESOURCE (10018) is not
// valid in NFSv4.1 but has a name, and 10073 is unused.
const (
	OK                       Stat = 0
	ErrPerm                  Stat = 1
	ErrNoEnt                 Stat = 2
	ErrIO                    Stat = 5
	ErrNXIO                  Stat = 6
	ErrAccess                Stat = 13
	ErrExist                 Stat = 17
	ErrXDev                  Stat = 18
	ErrNotDir                Stat = 20
	ErrIsDir                 Stat = 21
	ErrInval                 Stat = 22
	ErrFBig                  Stat = 27
	ErrNoSpc                 Stat = 28
	ErrROFS                  Stat = 30
	ErrMLink                 Stat = 31
	ErrNameTooLong           Stat = 63
	ErrNotEmpty              Stat = 66
	ErrDQuot                 Stat = 69
	ErrStale                 Stat = 70
	ErrBadHandle             Stat = 10001
	ErrBadCookie             Stat = 10003
	ErrNotSupp               Stat = 10004
	ErrTooSmall              Stat = 10005
	ErrServerFault           Stat = 10006
	ErrBadType               Stat = 10007
	ErrDelay                 Stat = 10008
	ErrSame                  Stat = 10009
	ErrDenied                Stat = 10010
	ErrExpired               Stat = 10011
	ErrLocked                Stat = 10012
	ErrGrace                 Stat = 10013
	ErrFHExpired             Stat = 10014
	ErrShareDenied           Stat = 10015
	ErrWrongSec              Stat = 10016
	ErrClidInUse             Stat = 10017
	ErrResource              Stat = 10018
	ErrMoved                 Stat = 10019
	ErrNoFileHandle          Stat = 10020
	ErrMinorVersMismatch     Stat = 10021
	ErrStaleClientID         Stat = 10022
	ErrStaleStateID          Stat = 10023
	ErrOldStateID            Stat = 10024
	ErrBadStateID            Stat = 10025
	ErrBadSeqID              Stat = 10026
	ErrNotSame               Stat = 10027
	ErrLockRange             Stat = 10028
	ErrSymlink               Stat = 10029
	ErrRestoreFH             Stat = 10030
	ErrLeaseMoved            Stat = 10031
	ErrAttrNotSupp           Stat = 10032
	ErrNoGrace               Stat = 10033
	ErrReclaimBad            Stat = 10034
	ErrReclaimConflict       Stat = 10035
	ErrBadXDR                Stat = 10036
	ErrLocksHeld             Stat = 10037
	ErrOpenMode              Stat = 10038
	ErrBadOwner              Stat = 10039
	ErrBadChar               Stat = 10040
	ErrBadName               Stat = 10041
	ErrBadRange              Stat = 10042
	ErrLockNotSupp           Stat = 10043
	ErrOpIllegal             Stat = 10044
	ErrDeadlock              Stat = 10045
	ErrFileOpen              Stat = 10046
	ErrAdminRevoked          Stat = 10047
	ErrCBPathDown            Stat = 10048
	ErrBadIOMode             Stat = 10049
	ErrBadLayout             Stat = 10050
	ErrBadSessionDigest      Stat = 10051
	ErrBadSession            Stat = 10052
	ErrBadSlot               Stat = 10053
	ErrCompleteAlready       Stat = 10054
	ErrConnNotBoundToSession Stat = 10055
	ErrDelegAlreadyWanted    Stat = 10056
	ErrBackChanBusy          Stat = 10057
	ErrLayoutTryLater        Stat = 10058
	ErrLayoutUnavailable     Stat = 10059
	ErrNoMatchingLayout      Stat = 10060
	ErrRecallConflict        Stat = 10061
	ErrUnknownLayoutType     Stat = 10062
	ErrSeqMisordered         Stat = 10063
	ErrSequencePos           Stat = 10064
	ErrReqTooBig             Stat = 10065
	ErrRepTooBig             Stat = 10066
	ErrRepTooBigToCache      Stat = 10067
	ErrRetryUncachedRep      Stat = 10068
	ErrUnsafeCompound        Stat = 10069
	ErrTooManyOps            Stat = 10070
	ErrOpNotInSession        Stat = 10071
	ErrHashAlgUnsupp         Stat = 10072
	ErrClientIDBusy          Stat = 10074
	ErrPNFSIOHole            Stat = 10075
	ErrSeqFalseRetry         Stat = 10076
	ErrBadHighSlot           Stat = 10077
	ErrDeadSession           Stat = 10078
	ErrEncrAlgUnsupp         Stat = 10079
	ErrPNFSNoLayout          Stat = 10080
	ErrNotOnlyOp             Stat = 10081
	ErrWrongCred             Stat = 10082
	ErrWrongType             Stat = 10083
	ErrDirDelegUnavail       Stat = 10084
	ErrRejectDeleg           Stat = 10085
	ErrReturnConflict        Stat = 10086
	ErrDelegRevoked          Stat = 10087
)

// statInfo holds each status's name in RFC 8881 and, after the
// descriptions of its Section 15.1, what it means in words.
var statInfo = map[Stat][2]string{
	OK:                       {"NFS4_OK", "success"},
	ErrPerm:                  {"NFS4ERR_PERM", "not owner or privileged user"},
	ErrNoEnt:                 {"NFS4ERR_NOENT", "no such file or directory"},
	ErrIO:                    {"NFS4ERR_IO", "I/O error"},
	ErrNXIO:                  {"NFS4ERR_NXIO", "no such device or address"},
	ErrAccess:                {"NFS4ERR_ACCESS", "permission denied"},
	ErrExist:                 {"NFS4ERR_EXIST", "file exists"},
	ErrXDev:                  {"NFS4ERR_XDEV", "cross-file-system operation"},
	ErrNotDir:                {"NFS4ERR_NOTDIR", "not a directory"},
	ErrIsDir:                 {"NFS4ERR_ISDIR", "is a directory"},
	ErrInval:                 {"NFS4ERR_INVAL", "invalid argument"},
	ErrFBig:                  {"NFS4ERR_FBIG", "file too large"},
	ErrNoSpc:                 {"NFS4ERR_NOSPC", "no space left on device"},
	ErrROFS:                  {"NFS4ERR_ROFS", "read-only file system"},
	ErrMLink:                 {"NFS4ERR_MLINK", "too many hard links"},
	ErrNameTooLong:           {"NFS4ERR_NAMETOOLONG", "file name too long"},
	ErrNotEmpty:              {"NFS4ERR_NOTEMPTY", "directory not empty"},
	ErrDQuot:                 {"NFS4ERR_DQUOT", "disk quota exceeded"},
	ErrStale:                 {"NFS4ERR_STALE", "stale file handle"},
	ErrBadHandle:             {"NFS4ERR_BADHANDLE", "illegal file handle"},
	ErrBadCookie:             {"NFS4ERR_BAD_COOKIE", "READDIR cookie is stale"},
	ErrNotSupp:               {"NFS4ERR_NOTSUPP", "operation not supported"},
	ErrTooSmall:              {"NFS4ERR_TOOSMALL", "reply limit too small"},
	ErrServerFault:           {"NFS4ERR_SERVERFAULT", "server fault"},
	ErrBadType:               {"NFS4ERR_BADTYPE", "object type not supported"},
	ErrDelay:                 {"NFS4ERR_DELAY", "server busy, try again later"},
	ErrSame:                  {"NFS4ERR_SAME", "attributes are the same (NVERIFY)"},
	ErrDenied:                {"NFS4ERR_DENIED", "lock unavailable"},
	ErrExpired:               {"NFS4ERR_EXPIRED", "lease expired"},
	ErrLocked:                {"NFS4ERR_LOCKED", "I/O failed because of a lock"},
	ErrGrace:                 {"NFS4ERR_GRACE", "server in grace period"},
	ErrFHExpired:             {"NFS4ERR_FHEXPIRED", "volatile file handle expired"},
	ErrShareDenied:           {"NFS4ERR_SHARE_DENIED", "share reservation denied"},
	ErrWrongSec:              {"NFS4ERR_WRONGSEC", "wrong security flavor"},
	ErrClidInUse:             {"NFS4ERR_CLID_INUSE", "client ID in use by another principal"},
	ErrResource:              {"NFS4ERR_RESOURCE", "server resources exhausted (NFSv4.0 only)"},
	ErrMoved:                 {"NFS4ERR_MOVED", "file system moved"},
	ErrNoFileHandle:          {"NFS4ERR_NOFILEHANDLE", "no current file handle"},
	ErrMinorVersMismatch:     {"NFS4ERR_MINOR_VERS_MISMATCH", "minor version not supported"},
	ErrStaleClientID:         {"NFS4ERR_STALE_CLIENTID", "client ID unknown to the server"},
	ErrStaleStateID:          {"NFS4ERR_STALE_STATEID", "stateid from an earlier server instance"},
	ErrOldStateID:            {"NFS4ERR_OLD_STATEID", "stateid superseded"},
	ErrBadStateID:            {"NFS4ERR_BAD_STATEID", "invalid stateid"},
	ErrBadSeqID:              {"NFS4ERR_BAD_SEQID", "sequence ID out of order"},
	ErrNotSame:               {"NFS4ERR_NOT_SAME", "attributes differ (VERIFY)"},
	ErrLockRange:             {"NFS4ERR_LOCK_RANGE", "lock range not supported"},
	ErrSymlink:               {"NFS4ERR_SYMLINK", "object is a symbolic link"},
	ErrRestoreFH:             {"NFS4ERR_RESTOREFH", "no saved file handle"},
	ErrLeaseMoved:            {"NFS4ERR_LEASE_MOVED", "some file system moved"},
	ErrAttrNotSupp:           {"NFS4ERR_ATTRNOTSUPP", "attribute not supported"},
	ErrNoGrace:               {"NFS4ERR_NO_GRACE", "reclaim outside the grace period"},
	ErrReclaimBad:            {"NFS4ERR_RECLAIM_BAD", "reclaim does not match server state"},
	ErrReclaimConflict:       {"NFS4ERR_RECLAIM_CONFLICT", "reclaim conflicts with other state"},
	ErrBadXDR:                {"NFS4ERR_BADXDR", "arguments failed to decode"},
	ErrLocksHeld:             {"NFS4ERR_LOCKS_HELD", "locks still held"},
	ErrOpenMode:              {"NFS4ERR_OPENMODE", "open mode forbids the operation"},
	ErrBadOwner:              {"NFS4ERR_BADOWNER", "owner or group not recognized"},
	ErrBadChar:               {"NFS4ERR_BADCHAR", "character not supported in a name"},
	ErrBadName:               {"NFS4ERR_BADNAME", "name not supported"},
	ErrBadRange:              {"NFS4ERR_BAD_RANGE", "lock range not valid"},
	ErrLockNotSupp:           {"NFS4ERR_LOCK_NOTSUPP", "atomic lock upgrade or downgrade not supported"},
	ErrOpIllegal:             {"NFS4ERR_OP_ILLEGAL", "undefined operation"},
	ErrDeadlock:              {"NFS4ERR_DEADLOCK", "lock deadlock"},
	ErrFileOpen:              {"NFS4ERR_FILE_OPEN", "file is open"},
	ErrAdminRevoked:          {"NFS4ERR_ADMIN_REVOKED", "state revoked by the administrator"},
	ErrCBPathDown:            {"NFS4ERR_CB_PATH_DOWN", "callback path down"},
	ErrBadIOMode:             {"NFS4ERR_BADIOMODE", "bad layout I/O mode"},
	ErrBadLayout:             {"NFS4ERR_BADLAYOUT", "bad layout"},
	ErrBadSessionDigest:      {"NFS4ERR_BAD_SESSION_DIGEST", "bad session digest"},
	ErrBadSession:            {"NFS4ERR_BADSESSION", "session unknown to the server"},
	ErrBadSlot:               {"NFS4ERR_BADSLOT", "slot ID out of range"},
	ErrCompleteAlready:       {"NFS4ERR_COMPLETE_ALREADY", "reclaim already complete"},
	ErrConnNotBoundToSession: {"NFS4ERR_CONN_NOT_BOUND_TO_SESSION", "connection not bound to the session"},
	ErrDelegAlreadyWanted:    {"NFS4ERR_DELEG_ALREADY_WANTED", "delegation already wanted"},
	ErrBackChanBusy:          {"NFS4ERR_BACK_CHAN_BUSY", "backchannel requests outstanding"},
	ErrLayoutTryLater:        {"NFS4ERR_LAYOUTTRYLATER", "layout unavailable for now"},
	ErrLayoutUnavailable:     {"NFS4ERR_LAYOUTUNAVAILABLE", "layout unavailable"},
	ErrNoMatchingLayout:      {"NFS4ERR_NOMATCHING_LAYOUT", "no matching layout"},
	ErrRecallConflict:        {"NFS4ERR_RECALLCONFLICT", "layout recall conflict"},
	ErrUnknownLayoutType:     {"NFS4ERR_UNKNOWN_LAYOUTTYPE", "layout type unknown"},
	ErrSeqMisordered:         {"NFS4ERR_SEQ_MISORDERED", "slot sequence ID out of order"},
	ErrSequencePos:           {"NFS4ERR_SEQUENCE_POS", "SEQUENCE not the first operation"},
	ErrReqTooBig:             {"NFS4ERR_REQ_TOO_BIG", "request too big for the session"},
	ErrRepTooBig:             {"NFS4ERR_REP_TOO_BIG", "reply too big for the session"},
	ErrRepTooBigToCache:      {"NFS4ERR_REP_TOO_BIG_TO_CACHE", "reply too big to cache"},
	ErrRetryUncachedRep:      {"NFS4ERR_RETRY_UNCACHED_REP", "retry of an uncached reply"},
	ErrUnsafeCompound:        {"NFS4ERR_UNSAFE_COMPOUND", "retry or recovery too hard for this COMPOUND"},
	ErrTooManyOps:            {"NFS4ERR_TOO_MANY_OPS", "too many operations in the COMPOUND"},
	ErrOpNotInSession:        {"NFS4ERR_OP_NOT_IN_SESSION", "operation needs a SEQUENCE first"},
	ErrHashAlgUnsupp:         {"NFS4ERR_HASH_ALG_UNSUPP", "hash algorithm not supported"},
	ErrClientIDBusy:          {"NFS4ERR_CLIENTID_BUSY", "client ID still has state"},
	ErrPNFSIOHole:            {"NFS4ERR_PNFS_IO_HOLE", "I/O to a hole of a sparse file"},
	ErrSeqFalseRetry:         {"NFS4ERR_SEQ_FALSE_RETRY", "retry differs from the original request"},
	ErrBadHighSlot:           {"NFS4ERR_BAD_HIGH_SLOT", "highest slot ID out of range"},
	ErrDeadSession:           {"NFS4ERR_DEADSESSION", "session being destroyed"},
	ErrEncrAlgUnsupp:         {"NFS4ERR_ENCR_ALG_UNSUPP", "encryption algorithm not supported"},
	ErrPNFSNoLayout:          {"NFS4ERR_PNFS_NO_LAYOUT", "I/O without a layout"},
	ErrNotOnlyOp:             {"NFS4ERR_NOT_ONLY_OP", "operation must be alone in its COMPOUND"},
	ErrWrongCred:             {"NFS4ERR_WRONG_CRED", "wrong credential for the operation"},
	ErrWrongType:             {"NFS4ERR_WRONG_TYPE", "wrong type of object"},
	ErrDirDelegUnavail:       {"NFS4ERR_DIRDELEG_UNAVAIL", "directory delegation unavailable"},
	ErrRejectDeleg:           {"NFS4ERR_REJECT_DELEG", "callback rejected the delegation"},
	ErrReturnConflict:        {"NFS4ERR_RETURNCONFLICT", "layout return conflict"},
	ErrDelegRevoked:          {"NFS4ERR_DELEG_REVOKED", "delegation or layout revoked"},
}

// String returns the status's name in RFC 8881 (NFS4_OK,
// NFS4ERR_BADSESSION), or its number if it has none.
func (s Stat) String() string {
	if n, ok := statInfo[s]; ok {
		return n[0]
	}
	return "nfsstat4(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// Describe returns the status in words with its name in parentheses, as
// a person reads it: "session unknown to the server (NFS4ERR_BADSESSION)".
func (s Stat) Describe() string {
	if n, ok := statInfo[s]; ok {
		return n[1] + " (" + n[0] + ")"
	}
	return s.String()
}

// Error makes a failing status an error: a server's answer to one
// operation, which leaves the session and the connection usable unless
// the status says otherwise (ErrBadSession, ErrDeadSession). errors.Is(err,
// nfs4.ErrDelay) works on a Stat returned or wrapped as an error.
func (s Stat) Error() string { return "nfs4: " + s.Describe() }
