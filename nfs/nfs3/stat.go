package nfs3

import "strconv"

// Stat is nfsstat3 (RFC 1813 Section 2.6), the status of every procedure's
// results.
type Stat uint32

// The statuses of RFC 1813 Section 2.6.
const (
	OK             Stat = 0
	ErrPerm        Stat = 1
	ErrNoEnt       Stat = 2
	ErrIO          Stat = 5
	ErrNXIO        Stat = 6
	ErrAcces       Stat = 13
	ErrExist       Stat = 17
	ErrXDev        Stat = 18
	ErrNoDev       Stat = 19
	ErrNotDir      Stat = 20
	ErrIsDir       Stat = 21
	ErrInval       Stat = 22
	ErrFBig        Stat = 27
	ErrNoSpc       Stat = 28
	ErrROFS        Stat = 30
	ErrMLink       Stat = 31
	ErrNameTooLong Stat = 63
	ErrNotEmpty    Stat = 66
	ErrDQuot       Stat = 69
	ErrStale       Stat = 70
	ErrRemote      Stat = 71
	ErrBadHandle   Stat = 10001
	ErrNotSync     Stat = 10002
	ErrBadCookie   Stat = 10003
	ErrNotSupp     Stat = 10004
	ErrTooSmall    Stat = 10005
	ErrServerFault Stat = 10006
	ErrBadType     Stat = 10007
	ErrJukebox     Stat = 10008
)

var statNames = map[Stat]string{
	OK: "NFS3_OK", ErrPerm: "NFS3ERR_PERM", ErrNoEnt: "NFS3ERR_NOENT", ErrIO: "NFS3ERR_IO",
	ErrNXIO: "NFS3ERR_NXIO", ErrAcces: "NFS3ERR_ACCES", ErrExist: "NFS3ERR_EXIST",
	ErrXDev: "NFS3ERR_XDEV", ErrNoDev: "NFS3ERR_NODEV", ErrNotDir: "NFS3ERR_NOTDIR",
	ErrIsDir: "NFS3ERR_ISDIR", ErrInval: "NFS3ERR_INVAL", ErrFBig: "NFS3ERR_FBIG",
	ErrNoSpc: "NFS3ERR_NOSPC", ErrROFS: "NFS3ERR_ROFS", ErrMLink: "NFS3ERR_MLINK",
	ErrNameTooLong: "NFS3ERR_NAMETOOLONG", ErrNotEmpty: "NFS3ERR_NOTEMPTY",
	ErrDQuot: "NFS3ERR_DQUOT", ErrStale: "NFS3ERR_STALE", ErrRemote: "NFS3ERR_REMOTE",
	ErrBadHandle: "NFS3ERR_BADHANDLE", ErrNotSync: "NFS3ERR_NOT_SYNC",
	ErrBadCookie: "NFS3ERR_BAD_COOKIE", ErrNotSupp: "NFS3ERR_NOTSUPP",
	ErrTooSmall: "NFS3ERR_TOOSMALL", ErrServerFault: "NFS3ERR_SERVERFAULT",
	ErrBadType: "NFS3ERR_BADTYPE", ErrJukebox: "NFS3ERR_JUKEBOX",
}

// String returns the status's name in RFC 1813 (NFS3_OK, NFS3ERR_NOENT),
// or its number if it has none.
func (s Stat) String() string {
	if n, ok := statNames[s]; ok {
		return n
	}
	return "nfsstat3(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// statWords say in words what each status means, after the descriptions
// in RFC 1813 Section 2.6.
var statWords = map[Stat]string{
	OK: "success", ErrPerm: "not owner", ErrNoEnt: "no such file or directory", ErrIO: "I/O error",
	ErrNXIO: "no such device or address", ErrAcces: "permission denied", ErrExist: "file exists",
	ErrXDev: "cross-device link", ErrNoDev: "no such device", ErrNotDir: "not a directory",
	ErrIsDir: "is a directory", ErrInval: "invalid argument", ErrFBig: "file too large",
	ErrNoSpc: "no space left on device", ErrROFS: "read-only file system", ErrMLink: "too many links",
	ErrNameTooLong: "file name too long", ErrNotEmpty: "directory not empty",
	ErrDQuot: "disk quota exceeded", ErrStale: "stale file handle", ErrRemote: "too many levels of remote in path",
	ErrBadHandle: "illegal file handle", ErrNotSync: "update synchronization mismatch",
	ErrBadCookie: "READDIR cookie is stale", ErrNotSupp: "operation not supported",
	ErrTooSmall: "buffer or request too small", ErrServerFault: "server fault",
	ErrBadType: "type not supported by the server", ErrJukebox: "server busy, try again later",
}

// Describe returns the status in words with its name in parentheses, as
// a person reads it: "read-only file system (NFS3ERR_ROFS)".
func (s Stat) Describe() string {
	if w, ok := statWords[s]; ok {
		return w + " (" + s.String() + ")"
	}
	return s.String()
}

// Error makes a failing status an error: a server's answer to one call,
// which leaves the connection usable. errors.Is(err, nfs3.ErrNoEnt) works
// on the errors the client in package nfs returns.
func (s Stat) Error() string { return "nfs3: " + s.Describe() }
