package nfs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
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

// checkResults checks a COMPOUND's results against its operations (RFC
// 8881 Section 16.2.3): one per operation run, in order, each of its
// operation, ending at the first that failed; it returns that failure as
// an *Error4.
func checkResults(args []nfs4.ArgOp, r nfs4.CompoundRes) error {
	if len(r.Ops) > len(args) {
		return fmt.Errorf("nfs: COMPOUND reply holds %d results for %d operations", len(r.Ops), len(args))
	}
	for i, res := range r.Ops {
		if res.Op() != args[i].Op() {
			return fmt.Errorf("nfs: COMPOUND reply holds a %v result for operation %d, a %v", res.Op(), i, args[i].Op())
		}
		if st := res.OpStatus(); st != nfs4.OK {
			if i != len(r.Ops)-1 {
				return fmt.Errorf("nfs: COMPOUND reply goes on after %v failed", res.Op())
			}
			return &Error4{Op: res.Op(), Stat: st}
		}
	}
	if len(r.Ops) < len(args) {
		if r.Status == nfs4.OK {
			return fmt.Errorf("nfs: COMPOUND reply holds %d results for %d operations and no error", len(r.Ops), len(args))
		}
		// A server that fails a COMPOUND before running an operation
		// (NFS4ERR_MINOR_VERS_MISMATCH, say) returns no results.
		op := args[len(r.Ops)].Op()
		return &Error4{Op: op, Stat: r.Status}
	}
	return nil
}

// opNames lists ops for errors.
func opNames(ops []nfs4.ArgOp) string {
	s := ""
	for i, o := range ops {
		if i > 0 {
			s += "+"
		}
		s += o.Op().String()
	}
	return s
}
