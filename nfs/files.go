package nfs

// One view of a server's files for both versions: what copying, listing
// and benchmarking need, so that Upload, DownloadFile, the tree copies
// and the command's ls, cat, cp and bench run over NFSv3 (Client) and
// NFSv4.1 (Client4) alike. V3Files and V41Files adapt the clients.

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// Handle is a file handle of either version.
type Handle []byte

// FileInfo is what both versions say of a file.
type FileInfo struct {
	Type  fs.FileMode // fs.ModeDir, fs.ModeSymlink, ..., 0 for a regular file
	Perm  uint32      // permission bits, with setuid, setgid and sticky
	Nlink uint32
	// Owner and Group are the numeric IDs (NFSv3) or the owner strings
	// (NFSv4: "user@domain", or digits).
	Owner, Group string
	Size, Used   uint64
	FileID       uint64
	Atime, Mtime time.Time
}

// IsDir, IsLink and IsRegular say what the file is.
func (fi FileInfo) IsDir() bool { return fi.Type == fs.ModeDir }

// IsLink: see IsDir.
func (fi FileInfo) IsLink() bool { return fi.Type == fs.ModeSymlink }

// IsRegular: see IsDir.
func (fi FileInfo) IsRegular() bool { return fi.Type == 0 }

// TypeName says in words what kind of file a file mode's type bits make
// it, as ftype3 names them (RFC 1813 Section 2.6): "regular file",
// "directory", "symbolic link", "block device", "character device",
// "socket" or "named pipe".
func TypeName(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "regular file"
	case t&fs.ModeDir != 0:
		return "directory"
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	}
	return "file of type " + m.Type().String()
}

// DirEntry is one name of a directory listing.
type DirEntry struct {
	Name   string
	Handle Handle
	Info   FileInfo
}

// Files is a server's files as either version serves them. Its methods
// are safe for concurrent use.
type Files interface {
	// Version is "3" or "4.1".
	Version() string
	Root() Handle
	// MaxRead and MaxWrite bound one File.ReadAt and File.WriteAt.
	MaxRead() int
	MaxWrite() int
	Stat(ctx context.Context, h Handle) (FileInfo, error)
	Lookup(ctx context.Context, dir Handle, name string) (Handle, FileInfo, error)
	// LookupPath looks up a slash-separated path from Root.
	LookupPath(ctx context.Context, p string) (Handle, FileInfo, error)
	List(ctx context.Context, dir Handle) ([]DirEntry, error)
	ReadLink(ctx context.Context, h Handle) (string, error)
	Mkdir(ctx context.Context, dir Handle, name string, perm uint32) (Handle, error)
	Symlink(ctx context.Context, dir Handle, name, target string) error
	// Remove removes a file, a link or an empty directory.
	Remove(ctx context.Context, dir Handle, name string) error
	Rename(ctx context.Context, fromDir Handle, from string, toDir Handle, to string) error
	// SetPerm sets the permission bits and, unless zero, the times.
	SetPerm(ctx context.Context, h Handle, perm uint32, atime, mtime time.Time) error
	// Space returns the largest file the server allows and the bytes
	// free for this user in dir's file system.
	Space(ctx context.Context, dir Handle) (maxFileSize, avail uint64, err error)
	// Create makes name in dir, which must not exist (GUARDED), with
	// perm, and opens it for writing.
	Create(ctx context.Context, dir Handle, name string, perm uint32) (File, error)
	// Open opens the file h for reading, or reading and writing.
	Open(ctx context.Context, h Handle, write bool) (File, error)
}

// File is an open file: under NFSv4.1 an OPEN with its stateid, under
// NFSv3 a handle.
type File interface {
	Handle() Handle
	// ReadAt makes one READ of at most MaxRead bytes into p at off.
	ReadAt(ctx context.Context, p []byte, off uint64) (n int, eof bool, err error)
	// WriteAt makes one UNSTABLE WRITE of at most MaxWrite bytes from p
	// at off, and returns the write verifier.
	WriteAt(ctx context.Context, p []byte, off uint64) (n int, verf [8]byte, err error)
	// Commit makes the file's writes stable and returns the verifier.
	Commit(ctx context.Context) ([8]byte, error)
	Close(ctx context.Context) error
}

// V3Files returns c as Files.
func V3Files(c *Client) Files { return v3Files{c} }

type v3Files struct{ c *Client }

func infoOf3(a nfs3.Attr) FileInfo {
	t := map[nfs3.FType]fs.FileMode{nfs3.TypeDir: fs.ModeDir, nfs3.TypeLnk: fs.ModeSymlink, nfs3.TypeBlk: fs.ModeDevice,
		nfs3.TypeChr: fs.ModeDevice | fs.ModeCharDevice, nfs3.TypeSock: fs.ModeSocket, nfs3.TypeFIFO: fs.ModeNamedPipe}[a.Type]
	return FileInfo{Type: t, Perm: a.Mode & 0o7777, Nlink: a.Nlink, Owner: strconv.FormatUint(uint64(a.UID), 10),
		Group: strconv.FormatUint(uint64(a.GID), 10), Size: a.Size, Used: a.Used, FileID: a.FileID,
		Atime: a.Atime.Time(), Mtime: a.Mtime.Time()}
}

func (v v3Files) Version() string { return "3" }
func (v v3Files) Root() Handle    { return Handle(v.c.Root()) }
func (v v3Files) MaxRead() int    { return v.c.MaxRead() }
func (v v3Files) MaxWrite() int   { return v.c.MaxWrite() }

func (v v3Files) Stat(ctx context.Context, h Handle) (FileInfo, error) {
	a, err := v.c.Getattr(ctx, nfs3.FileHandle(h))
	return infoOf3(a), err
}

func (v v3Files) Lookup(ctx context.Context, dir Handle, name string) (Handle, FileInfo, error) {
	fh, a, err := v.c.Lookup(ctx, nfs3.FileHandle(dir), name)
	return Handle(fh), infoOf3(a), err
}

func (v v3Files) LookupPath(ctx context.Context, p string) (Handle, FileInfo, error) {
	fh, a, err := v.c.LookupPath(ctx, p)
	return Handle(fh), infoOf3(a), err
}

func (v v3Files) List(ctx context.Context, dir Handle) ([]DirEntry, error) {
	ents, err := v.c.ReadDirPlus(ctx, nfs3.FileHandle(dir))
	out := make([]DirEntry, 0, len(ents))
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		de := DirEntry{Name: e.Name}
		if e.FH.Present && e.Attr.Present {
			de.Handle, de.Info = Handle(e.FH.FH), infoOf3(e.Attr.Attr)
		} else {
			fh, a, lerr := v.c.Lookup(ctx, nfs3.FileHandle(dir), e.Name)
			if lerr != nil {
				return out, lerr
			}
			de.Handle, de.Info = Handle(fh), infoOf3(a)
		}
		out = append(out, de)
	}
	return out, err
}

func (v v3Files) ReadLink(ctx context.Context, h Handle) (string, error) {
	return v.c.Readlink(ctx, nfs3.FileHandle(h))
}

func (v v3Files) Mkdir(ctx context.Context, dir Handle, name string, perm uint32) (Handle, error) {
	fh, err := v.c.Mkdir(ctx, nfs3.FileHandle(dir), name, nfs3.SetAttr{SetMode: true, Mode: perm})
	return Handle(fh), err
}

func (v v3Files) Symlink(ctx context.Context, dir Handle, name, target string) error {
	_, err := v.c.Symlink(ctx, nfs3.FileHandle(dir), name, target, nfs3.SetAttr{})
	return err
}

func (v v3Files) Remove(ctx context.Context, dir Handle, name string) error {
	err := v.c.Remove(ctx, nfs3.FileHandle(dir), name)
	if errors.Is(err, nfs3.ErrIsDir) {
		err = v.c.Rmdir(ctx, nfs3.FileHandle(dir), name)
	}
	return err
}

func (v v3Files) Rename(ctx context.Context, fromDir Handle, from string, toDir Handle, to string) error {
	return v.c.Rename(ctx, nfs3.FileHandle(fromDir), from, nfs3.FileHandle(toDir), to)
}

func (v v3Files) SetPerm(ctx context.Context, h Handle, perm uint32, atime, mtime time.Time) error {
	set := nfs3.SetAttr{SetMode: true, Mode: perm}
	if !atime.IsZero() {
		set.SetAtime, set.Atime = nfs3.SetToClientTime, nfs3.TimeOf(atime)
	}
	if !mtime.IsZero() {
		set.SetMtime, set.Mtime = nfs3.SetToClientTime, nfs3.TimeOf(mtime)
	}
	_, err := v.c.Setattr(ctx, nfs3.FileHandle(h), set, nil)
	return err
}

func (v v3Files) Space(ctx context.Context, dir Handle) (uint64, uint64, error) {
	st, err := v.c.FSStat(ctx, nfs3.FileHandle(dir))
	return v.c.info.MaxFileSize, st.ABytes, err
}

func (v v3Files) Create(ctx context.Context, dir Handle, name string, perm uint32) (File, error) {
	fh, err := v.c.Create(ctx, nfs3.FileHandle(dir), name, nfs3.Guarded, nfs3.SetAttr{SetMode: true, Mode: perm, SetSize: true})
	return v3File{v.c, fh}, err
}

func (v v3Files) Open(ctx context.Context, h Handle, write bool) (File, error) {
	return v3File{v.c, nfs3.FileHandle(h)}, nil
}

type v3File struct {
	c  *Client
	fh nfs3.FileHandle
}

func (f v3File) Handle() Handle { return Handle(f.fh) }

func (f v3File) ReadAt(ctx context.Context, p []byte, off uint64) (int, bool, error) {
	return f.c.Read(ctx, f.fh, p, off)
}

func (f v3File) WriteAt(ctx context.Context, p []byte, off uint64) (int, [8]byte, error) {
	n, _, verf, err := f.c.Write(ctx, f.fh, p, off, nfs3.Unstable)
	return n, verf, err
}

func (f v3File) Commit(ctx context.Context) ([8]byte, error) { return f.c.Commit(ctx, f.fh) }
func (f v3File) Close(context.Context) error                 { return nil }

// V41Files returns c as Files.
func V41Files(c *Client4) Files { return v41Files{c} }

type v41Files struct{ c *Client4 }

func infoOf4(a nfs4.Attr) FileInfo {
	t := map[nfs4.FType]fs.FileMode{nfs4.TypeDir: fs.ModeDir, nfs4.TypeLnk: fs.ModeSymlink, nfs4.TypeBlk: fs.ModeDevice,
		nfs4.TypeChr: fs.ModeDevice | fs.ModeCharDevice, nfs4.TypeSock: fs.ModeSocket, nfs4.TypeFIFO: fs.ModeNamedPipe,
		nfs4.TypeAttrDir: fs.ModeDir, nfs4.TypeNamedAttr: fs.ModeIrregular}[a.Type]
	return FileInfo{Type: t, Perm: a.Mode & 0o7777, Nlink: a.NumLinks, Owner: a.Owner, Group: a.OwnerGroup, Size: a.Size,
		Used: a.SpaceUsed, FileID: a.FileID, Atime: a.TimeAccess.Time(), Mtime: a.TimeModify.Time()}
}

func (v v41Files) Version() string { return "4.1" }
func (v v41Files) Root() Handle    { return Handle(v.c.Root()) }
func (v v41Files) MaxRead() int    { return v.c.MaxRead() }
func (v v41Files) MaxWrite() int   { return v.c.MaxWrite() }

func (v v41Files) Stat(ctx context.Context, h Handle) (FileInfo, error) {
	a, err := v.c.Getattr(ctx, nfs4.FileHandle(h))
	return infoOf4(a), err
}

func (v v41Files) Lookup(ctx context.Context, dir Handle, name string) (Handle, FileInfo, error) {
	fh, a, err := v.c.Lookup(ctx, nfs4.FileHandle(dir), name)
	return Handle(fh), infoOf4(a), err
}

func (v v41Files) LookupPath(ctx context.Context, p string) (Handle, FileInfo, error) {
	fh, a, err := v.c.LookupPath(ctx, p)
	return Handle(fh), infoOf4(a), err
}

func (v v41Files) List(ctx context.Context, dir Handle) ([]DirEntry, error) {
	ents, err := v.c.ReadDir(ctx, nfs4.FileHandle(dir))
	out := make([]DirEntry, 0, len(ents))
	for _, e := range ents {
		de := DirEntry{Name: e.Name, Handle: Handle(e.Attr.FileHandle), Info: infoOf4(e.Attr)}
		if de.Handle == nil || !e.Attr.Has(nfs4.AttrType) {
			fh, a, lerr := v.c.Lookup(ctx, nfs4.FileHandle(dir), e.Name)
			if lerr != nil {
				return out, lerr
			}
			de.Handle, de.Info = Handle(fh), infoOf4(a)
		}
		out = append(out, de)
	}
	return out, err
}

func (v v41Files) ReadLink(ctx context.Context, h Handle) (string, error) {
	return v.c.Readlink(ctx, nfs4.FileHandle(h))
}

func (v v41Files) Mkdir(ctx context.Context, dir Handle, name string, perm uint32) (Handle, error) {
	fh, err := v.c.Mkdir(ctx, nfs4.FileHandle(dir), name, nfs4.SetAttr{SetMode: true, Mode: perm})
	return Handle(fh), err
}

func (v v41Files) Symlink(ctx context.Context, dir Handle, name, target string) error {
	_, err := v.c.Symlink(ctx, nfs4.FileHandle(dir), name, target, nfs4.SetAttr{})
	return err
}

func (v v41Files) Remove(ctx context.Context, dir Handle, name string) error {
	return v.c.Remove(ctx, nfs4.FileHandle(dir), name)
}

func (v v41Files) Rename(ctx context.Context, fromDir Handle, from string, toDir Handle, to string) error {
	return v.c.Rename(ctx, nfs4.FileHandle(fromDir), from, nfs4.FileHandle(toDir), to)
}

func (v v41Files) SetPerm(ctx context.Context, h Handle, perm uint32, atime, mtime time.Time) error {
	set := nfs4.SetAttr{SetMode: true, Mode: perm}
	if !atime.IsZero() {
		set.SetAtime, set.AtimeHow, set.Atime = true, nfs4.SetToClientTime, nfs4.TimeOf(atime)
	}
	if !mtime.IsZero() {
		set.SetMtime, set.MtimeHow, set.Mtime = true, nfs4.SetToClientTime, nfs4.TimeOf(mtime)
	}
	return v.c.Setattr(ctx, nfs4.FileHandle(h), nfs4.AnonymousStateID, set)
}

func (v v41Files) Space(ctx context.Context, dir Handle) (uint64, uint64, error) {
	var ga nfs4.GetattrRes
	err := v.c.compound(ctx, []nfs4.ArgOp{&nfs4.PutFHArgs{FH: nfs4.FileHandle(dir)},
		&nfs4.GetattrArgs{AttrRequest: nfs4.BitmapOf(nfs4.AttrMaxFileSize, nfs4.AttrSpaceAvail)}},
		[]nfs4.ResOp{&nfs4.PutFHRes{}, &ga}, callOpts{})
	return ga.Attr.MaxFileSize, ga.Attr.SpaceAvail, err
}

func (v v41Files) Create(ctx context.Context, dir Handle, name string, perm uint32) (File, error) {
	f, err := v.c.Open(ctx, nfs4.FileHandle(dir), name, OpenOptions{Access: nfs4.ShareAccessBoth, Create: true, Exclusive: true,
		Attr: nfs4.SetAttr{SetMode: true, Mode: perm}})
	if err != nil {
		return nil, err
	}
	return v41File{f}, nil
}

func (v v41Files) Open(ctx context.Context, h Handle, write bool) (File, error) {
	access := uint32(nfs4.ShareAccessRead)
	if write {
		access = nfs4.ShareAccessBoth
	}
	f, err := v.c.OpenFH(ctx, nfs4.FileHandle(h), OpenOptions{Access: access})
	if err != nil {
		return nil, err
	}
	return v41File{f}, nil
}

type v41File struct{ f *File4 }

func (f v41File) Handle() Handle { return Handle(f.f.FH) }

func (f v41File) ReadAt(ctx context.Context, p []byte, off uint64) (int, bool, error) {
	return f.f.ReadAt(ctx, p, off)
}

func (f v41File) WriteAt(ctx context.Context, p []byte, off uint64) (int, [8]byte, error) {
	n, _, verf, err := f.f.WriteAt(ctx, p, off, nfs4.Unstable)
	return n, verf, err
}

func (f v41File) Commit(ctx context.Context) ([8]byte, error) {
	v, err := f.f.c.Commit(ctx, f.f.FH)
	return v, err
}

func (f v41File) Close(ctx context.Context) error { return f.f.Close(ctx) }
