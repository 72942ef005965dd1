package nfs

import (
	"slices"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// access returns which of the ACCESS bits want (RFC 1813 Section 3.3.4)
// cr has on a file with attributes a, by its mode bits as the kernel's
// generic_permission decides: root may do anything but execute a file no
// one may execute; others get the owner's, the group's or the others'
// bits. A read-only export grants no modify, extend or delete.
func access(a *nfs3.Attr, cr *Cred, want uint32, readOnly bool) uint32 {
	var rwx uint32
	switch {
	case cr.UID == 0:
		rwx = 7
		if a.Type != nfs3.TypeDir && a.Mode&0o111 == 0 {
			rwx = 6
		}
	case cr.UID == a.UID:
		rwx = a.Mode >> 6 & 7
	case cr.GID == a.GID || slices.Contains(cr.GIDs, a.GID):
		rwx = a.Mode >> 3 & 7
	default:
		rwx = a.Mode & 7
	}
	var got uint32
	if rwx&4 != 0 {
		got |= nfs3.AccessRead
	}
	if rwx&2 != 0 && !readOnly {
		got |= nfs3.AccessModify | nfs3.AccessExtend
		if a.Type == nfs3.TypeDir {
			got |= nfs3.AccessDelete
		}
	}
	if rwx&1 != 0 {
		if a.Type == nfs3.TypeDir {
			got |= nfs3.AccessLookup
		} else {
			got |= nfs3.AccessExecute
		}
	}
	return got & want
}

// may checks that cr may do want to a file with attributes a, and
// returns NFS3ERR_ACCES if not. With ownerOverride, the owner may read and
// write whatever the mode (knfsd's NFSD_MAY_OWNER_OVERRIDE: a file opened
// and then made read-only stays writable to its opener, who over NFS
// holds no open file).
func may(a *nfs3.Attr, cr *Cred, want uint32, ownerOverride bool) nfs3.Stat {
	if ownerOverride && cr.UID == a.UID {
		return nfs3.OK
	}
	if access(a, cr, want, false) != want {
		return nfs3.ErrAcces
	}
	return nfs3.OK
}
