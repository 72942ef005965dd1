package nfs

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// StatOf returns the NFS status for an error an FS returned: the
// nfs3.Stat it wraps, else the status of its syscall.Errno as knfsd maps
// errnos (nfserrno), else that of an io/fs error, else NFS3ERR_IO. nil is
// NFS3_OK.
func StatOf(err error) nfs3.Stat {
	if err == nil {
		return nfs3.OK
	}
	if st, ok := errors.AsType[nfs3.Stat](err); ok {
		return st
	}
	if e, ok := errors.AsType[syscall.Errno](err); ok {
		switch e {
		case syscall.EPERM:
			return nfs3.ErrPerm
		case syscall.ENOENT:
			return nfs3.ErrNoEnt
		case syscall.ENXIO:
			return nfs3.ErrNXIO
		case syscall.EACCES:
			return nfs3.ErrAcces
		case syscall.EEXIST:
			return nfs3.ErrExist
		case syscall.EXDEV:
			return nfs3.ErrXDev
		case syscall.ENODEV:
			return nfs3.ErrNoDev
		case syscall.ENOTDIR:
			return nfs3.ErrNotDir
		case syscall.EISDIR:
			return nfs3.ErrIsDir
		case syscall.EINVAL:
			return nfs3.ErrInval
		case syscall.EFBIG:
			return nfs3.ErrFBig
		case syscall.ENOSPC:
			return nfs3.ErrNoSpc
		case syscall.EROFS:
			return nfs3.ErrROFS
		case syscall.EMLINK:
			return nfs3.ErrMLink
		case syscall.ENAMETOOLONG:
			return nfs3.ErrNameTooLong
		case syscall.ENOTEMPTY:
			return nfs3.ErrNotEmpty
		case syscall.EDQUOT:
			return nfs3.ErrDQuot
		case syscall.ESTALE:
			return nfs3.ErrStale
		case syscall.ELOOP, syscall.EOPNOTSUPP:
			return nfs3.ErrNotSupp
		}
		return nfs3.ErrIO
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nfs3.ErrNoEnt
	case errors.Is(err, fs.ErrExist):
		return nfs3.ErrExist
	case errors.Is(err, fs.ErrPermission):
		return nfs3.ErrAcces
	case errors.Is(err, fs.ErrInvalid):
		return nfs3.ErrInval
	}
	// os.Root refuses a path that leaves it with an unexported error.
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return nfs3.ErrAcces
		}
	}
	return nfs3.ErrIO
}
