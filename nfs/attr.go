package nfs

import (
	"io/fs"
	"syscall"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// AttrOf returns the fattr3 (RFC 1813 Section 2.6) that describes fi, for
// an FS's Getattr. When fi comes from stat(2) (os.Stat, os.Lstat,
// fs.ReadDir over os.DirFS: its Sys is a *syscall.Stat_t), everything
// comes from there as LocalFS reports it, FileID being the inode number.
// Otherwise (an fstest.MapFS, an embed.FS, a FileInfo of your own) the
// type and permission bits (setuid, setgid and sticky included) come from
// fi.Mode, the size from fi.Size, all three times from fi.ModTime
// (nfs3.TimeOf), and the rest is what a plain file has: one link (two for
// a directory), owner and group 0, the size as the space used; FileID and
// FSID are zero, for the caller to set to the inode number its FS
// assigned and to its filesystem's number.
func AttrOf(fi fs.FileInfo) nfs3.Attr {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return attrOfStat(st, 0)
	}
	m := fi.Mode()
	a := nfs3.Attr{
		Type:  typeOf(m),
		Mode:  uint32(m.Perm()),
		Nlink: 1,
		Size:  uint64(max(fi.Size(), 0)),
		Mtime: nfs3.TimeOf(fi.ModTime()),
	}
	if m&fs.ModeSetuid != 0 {
		a.Mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		a.Mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		a.Mode |= 0o1000
	}
	if a.Type == nfs3.TypeDir {
		a.Nlink = 2
	}
	a.Used = a.Size
	a.Atime, a.Ctime = a.Mtime, a.Mtime
	return a
}

// typeOf returns the ftype3 of an io/fs mode's type bits.
func typeOf(m fs.FileMode) nfs3.FType {
	switch {
	case m.IsDir():
		return nfs3.TypeDir
	case m&fs.ModeSymlink != 0:
		return nfs3.TypeLnk
	case m&fs.ModeNamedPipe != 0:
		return nfs3.TypeFIFO
	case m&fs.ModeSocket != 0:
		return nfs3.TypeSock
	case m&fs.ModeCharDevice != 0:
		return nfs3.TypeChr
	case m&fs.ModeDevice != 0:
		return nfs3.TypeBlk
	default:
		return nfs3.TypeReg
	}
}
