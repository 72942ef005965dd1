package main

import (
	"os"
	"time"

	"github.com/go-git/go-billy/v5"
)

// changeOSFS adds billy.Change (SETATTR's mode, owner and times) to an
// osfs, as go-nfs's example/osnfs does; without it go-nfs refuses SETATTR
// and the attributes of CREATE.
type changeOSFS struct{ billy.Filesystem }

func (fs changeOSFS) path(name string) string { return fs.Join(fs.Root(), name) }

func (fs changeOSFS) Chmod(name string, mode os.FileMode) error {
	return os.Chmod(fs.path(name), mode)
}

func (fs changeOSFS) Lchown(name string, uid, gid int) error {
	return os.Lchown(fs.path(name), uid, gid)
}

func (fs changeOSFS) Chown(name string, uid, gid int) error {
	return os.Chown(fs.path(name), uid, gid)
}

func (fs changeOSFS) Chtimes(name string, atime, mtime time.Time) error {
	return os.Chtimes(fs.path(name), atime, mtime)
}
