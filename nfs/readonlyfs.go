package nfs

import (
	"context"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// ReadOnlyFS is an embeddable base for a small FS: embedded in a type
// that implements Root, Getattr, Lookup, ReadAt and ReadDir, it supplies
// the rest of FS, so that the type is an FS that answers every change
// with NFS3ERR_ROFS (RFC 1813 Section 2.6), as an export marked
// Export.ReadOnly does. Readlink answers NFS3ERR_NOTSUPP, for an FS
// without symbolic links (the Server calls it only for a file whose
// Getattr says NF3LNK); Commit succeeds, there being nothing to make
// stable; Statfs reports no space and no files. A type overrides any of
// them by defining the method itself.
//
// Mark the export ReadOnly as well: the Server then refuses changes
// before calling the FS, and ACCESS tells clients they may not make
// them.
type ReadOnlyFS struct{}

// Setattr answers nfs3.ErrROFS.
func (ReadOnlyFS) Setattr(context.Context, uint64, *nfs3.SetAttr) (nfs3.Attr, error) {
	return nfs3.Attr{}, nfs3.ErrROFS
}

// Readlink answers nfs3.ErrNotSupp.
func (ReadOnlyFS) Readlink(context.Context, uint64) (string, error) { return "", nfs3.ErrNotSupp }

// WriteAt answers nfs3.ErrROFS.
func (ReadOnlyFS) WriteAt(context.Context, uint64, []byte, int64, nfs3.StableHow) (nfs3.StableHow, error) {
	return 0, nfs3.ErrROFS
}

// Commit succeeds: nothing was written.
func (ReadOnlyFS) Commit(context.Context, uint64) error { return nil }

// Create answers nfs3.ErrROFS.
func (ReadOnlyFS) Create(context.Context, uint64, string, *nfs3.SetAttr, bool) (uint64, error) {
	return 0, nfs3.ErrROFS
}

// Mkdir answers nfs3.ErrROFS.
func (ReadOnlyFS) Mkdir(context.Context, uint64, string, *nfs3.SetAttr) (uint64, error) {
	return 0, nfs3.ErrROFS
}

// Symlink answers nfs3.ErrROFS.
func (ReadOnlyFS) Symlink(context.Context, uint64, string, string, *nfs3.SetAttr) (uint64, error) {
	return 0, nfs3.ErrROFS
}

// Link answers nfs3.ErrROFS.
func (ReadOnlyFS) Link(context.Context, uint64, uint64, string) error { return nfs3.ErrROFS }

// Remove answers nfs3.ErrROFS.
func (ReadOnlyFS) Remove(context.Context, uint64, string) error { return nfs3.ErrROFS }

// Rmdir answers nfs3.ErrROFS.
func (ReadOnlyFS) Rmdir(context.Context, uint64, string) error { return nfs3.ErrROFS }

// Rename answers nfs3.ErrROFS.
func (ReadOnlyFS) Rename(context.Context, uint64, string, uint64, string) error {
	return nfs3.ErrROFS
}

// Statfs reports no space and no files.
func (ReadOnlyFS) Statfs(context.Context) (FSStat, error) { return FSStat{}, nil }
