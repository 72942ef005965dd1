package nfs

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// FS is a filesystem a Server exports. Files are named by inode numbers
// the FS assigns: stable for the life of the file (across server
// restarts, if handles are to survive them) and never zero. The Server
// turns them into file handles a client cannot forge (handle.go), checks
// permissions and the export's read-only flag before calling, and maps
// returned errors to NFS statuses: an nfs3.Stat is sent as is, and
// syscall.Errno values and the io/fs errors are translated as knfsd
// translates errnos (see StatOf).
//
// Names passed in are single path components, never ".", ".." (except to
// Lookup), empty, or containing '/' or NUL; the Server refuses those
// first. Methods are called concurrently, for any inode including ones
// the FS no longer has, which must fail with nfs3.ErrStale.
//
// LocalFS is the implementation over a local directory.
type FS interface {
	// Root returns the inode number of the export's root directory.
	Root() uint64
	// Getattr returns the attributes of ino.
	Getattr(ctx context.Context, ino uint64) (nfs3.Attr, error)
	// Setattr changes the attributes of ino as a says (the guard is the
	// Server's) and returns the new ones.
	Setattr(ctx context.Context, ino uint64, a *nfs3.SetAttr) (nfs3.Attr, error)
	// Lookup returns the inode of name in dir; ".." is dir's parent (the
	// root's parent is the root).
	Lookup(ctx context.Context, dir uint64, name string) (uint64, error)
	// Readlink returns the target of the symbolic link ino.
	Readlink(ctx context.Context, ino uint64) (string, error)
	// ReadAt reads into p from offset off of the regular file ino and
	// returns the bytes read and whether they reach the end of the file.
	// eof may be false where finding it out costs more (another stat):
	// the server also reports the end of the file when the bytes read
	// reach the size Getattr gave just before the read, the size its
	// reply carries.
	ReadAt(ctx context.Context, ino uint64, p []byte, off int64) (n int, eof bool, err error)
	// WriteAt writes p at offset off of the regular file ino and returns
	// how far it made the data stable (at least what stable asks).
	WriteAt(ctx context.Context, ino uint64, p []byte, off int64, stable nfs3.StableHow) (nfs3.StableHow, error)
	// Commit makes the data written to ino stable.
	Commit(ctx context.Context, ino uint64) error
	// Create makes a regular file name in dir with attributes a (mode,
	// and owner when the FS can set it) and returns its inode. With
	// exclusive, an existing name fails with nfs3.ErrExist; otherwise an
	// existing regular file is opened and, if a sets a size, truncated.
	Create(ctx context.Context, dir uint64, name string, a *nfs3.SetAttr, exclusive bool) (uint64, error)
	// Mkdir makes a directory.
	Mkdir(ctx context.Context, dir uint64, name string, a *nfs3.SetAttr) (uint64, error)
	// Symlink makes a symbolic link to target.
	Symlink(ctx context.Context, dir uint64, name, target string, a *nfs3.SetAttr) (uint64, error)
	// Link makes name in dir another name of ino.
	Link(ctx context.Context, ino, dir uint64, name string) error
	// Remove removes the non-directory name of dir; a directory fails with
	// nfs3.ErrIsDir.
	Remove(ctx context.Context, dir uint64, name string) error
	// Rmdir removes the empty directory name of dir.
	Rmdir(ctx context.Context, dir uint64, name string) error
	// Rename moves fromName of fromDir to toName of toDir, replacing what
	// was there as rename(2) does.
	Rename(ctx context.Context, fromDir uint64, fromName string, toDir uint64, toName string) error
	// ReadDir lists dir from position cookie (0: the start) in a stable
	// order, calling emit for each entry with the cookie that resumes
	// after it, until emit returns false; it reports whether it reached
	// the end.
	ReadDir(ctx context.Context, dir uint64, cookie uint64, emit func(name string, ino, next uint64) bool) (eof bool, err error)
	// Statfs returns the filesystem's space and file counts.
	Statfs(ctx context.Context) (FSStat, error)
}

// FSStat is what FSSTAT reports (RFC 1813 Section 3.3.18).
type FSStat struct {
	TotalBytes, FreeBytes, AvailBytes uint64
	TotalFiles, FreeFiles, AvailFiles uint64
}

// Cred is the identity a call runs as, after squashing (Export.RootSquash).
// An FS finds it with CredFrom in the calls that create files (Create,
// Mkdir, Symlink) and in Setattr, and uses it to own what it creates; the
// Server has checked permissions for every call already.
type Cred struct {
	UID, GID uint32
	GIDs     []uint32
}

type credKey struct{}

// CredFrom returns the identity of the call ctx belongs to, if a Server
// set one.
func CredFrom(ctx context.Context) (Cred, bool) {
	c, ok := ctx.Value(credKey{}).(*Cred)
	if !ok {
		return Cred{}, false
	}
	return *c, true
}
