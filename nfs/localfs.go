package nfs

// LocalFS exports a local directory through os.Root, which confines every
// operation to the directory: a name with "..", an absolute symbolic link
// or one that climbs out of the tree fails instead of reaching outside
// (os.Root's documentation lists the guarantees). The Server never follows
// a symbolic link itself: a link's target is data it returns to the client.
//
// Files are named by inode number, as knfsd names them. Only the kernel
// can open a file by inode, so LocalFS remembers the path of every inode it
// has handed out and, for one it does not know (after a restart, or after
// another process moved it), walks the tree to find it again. A path whose
// file now has another inode counts as unknown. An inode number reused by
// a new file after the old one was deleted names the new one: knfsd's
// handles carry a generation number against that, which os gives no
// portable access to.

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"golang.org/x/sys/unix"
)

// LocalFS is an FS over a local directory. Create it with NewLocalFS; it is
// safe for concurrent use.
type LocalFS struct {
	root    *os.Root
	rootIno uint64
	fsid    uint64

	mu     sync.RWMutex
	paths  map[uint64]string    // inode to a path relative to root ("." for the root)
	missed map[uint64]time.Time // inodes a walk did not find, and when

	files fileCache
}

// NewLocalFS returns an FS serving dir, or the error opening it. Close
// releases it.
func NewLocalFS(dir string) (*LocalFS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	fi, err := r.Lstat(".")
	if err != nil {
		r.Close()
		return nil, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	l := &LocalFS{root: r, rootIno: st.Ino, fsid: uint64(st.Dev), paths: map[uint64]string{st.Ino: "."}, missed: make(map[uint64]time.Time)}
	l.files.init(l)
	return l, nil
}

// Close closes the directory and the files kept open.
func (l *LocalFS) Close() error {
	l.files.closeAll()
	return l.root.Close()
}

// Root returns the inode of the exported directory.
func (l *LocalFS) Root() uint64 { return l.rootIno }

// path returns the path of ino, walking the tree if it is not known or
// has moved.
func (l *LocalFS) path(ino uint64) (string, error) {
	l.mu.RLock()
	p, ok := l.paths[ino]
	l.mu.RUnlock()
	if ok {
		if fi, err := l.root.Lstat(p); err == nil && inoOf(fi) == ino {
			return p, nil
		}
	}
	// A walk costs the whole tree: a client repeating calls on the handle
	// of a deleted file gets STALE without one for a while.
	l.mu.RLock()
	when, recent := l.missed[ino]
	l.mu.RUnlock()
	if recent && time.Since(when) < missedFor {
		return "", nfs3.ErrStale
	}
	found := ""
	err := fs.WalkDir(l.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip it
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if inoOf(fi) == ino {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if err != nil || found == "" {
		l.mu.Lock()
		if l.paths[ino] == p {
			delete(l.paths, ino)
		}
		if len(l.missed) >= maxMissed {
			clear(l.missed)
		}
		l.missed[ino] = time.Now()
		l.mu.Unlock()
		return "", nfs3.ErrStale
	}
	l.remember(ino, found)
	return found, nil
}

func (l *LocalFS) remember(ino uint64, p string) {
	l.mu.Lock()
	l.paths[ino] = p
	delete(l.missed, ino)
	l.mu.Unlock()
}

// How long an inode a walk did not find is STALE without another walk,
// and how many such inodes are remembered.
const (
	missedFor = 10 * time.Second
	maxMissed = 4096
)

func inoOf(fi fs.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }

// child returns the path of name in dir.
func (l *LocalFS) child(dir uint64, name string) (string, error) {
	p, err := l.path(dir)
	if err != nil {
		return "", err
	}
	return path.Join(p, name), nil
}

// attr converts what lstat says into fattr3.
func (l *LocalFS) attr(fi fs.FileInfo) nfs3.Attr { return l.statAttr(fi.Sys().(*syscall.Stat_t)) }

// statAttr converts a stat(2) result into fattr3.
func (l *LocalFS) statAttr(st *syscall.Stat_t) nfs3.Attr { return attrOfStat(st, l.fsid) }

// attrOfStat converts a stat(2) result into fattr3 on filesystem fsid.
func attrOfStat(st *syscall.Stat_t, fsid uint64) nfs3.Attr {
	at, mt, ct := statTimes(st)
	a := nfs3.Attr{
		Mode: uint32(st.Mode) & 0o7777, Nlink: uint32(st.Nlink), UID: st.Uid, GID: st.Gid,
		Size: uint64(st.Size), Used: uint64(st.Blocks) * 512,
		Rdev: nfs3.SpecData{Major: unix.Major(uint64(st.Rdev)), Minor: unix.Minor(uint64(st.Rdev))},
		FSID: fsid, FileID: st.Ino,
		Atime: nfs3.TimeOf(time.Unix(int64(at.Sec), int64(at.Nsec))),
		Mtime: nfs3.TimeOf(time.Unix(int64(mt.Sec), int64(mt.Nsec))),
		Ctime: nfs3.TimeOf(time.Unix(int64(ct.Sec), int64(ct.Nsec))),
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		a.Type = nfs3.TypeReg
	case syscall.S_IFDIR:
		a.Type = nfs3.TypeDir
	case syscall.S_IFLNK:
		a.Type = nfs3.TypeLnk
	case syscall.S_IFBLK:
		a.Type = nfs3.TypeBlk
	case syscall.S_IFCHR:
		a.Type = nfs3.TypeChr
	case syscall.S_IFSOCK:
		a.Type = nfs3.TypeSock
	default:
		a.Type = nfs3.TypeFIFO
	}
	return a
}

// Getattr returns the attributes of ino.
func (l *LocalFS) Getattr(ctx context.Context, ino uint64) (nfs3.Attr, error) {
	if f := l.files.cached(ino); f != nil {
		var st syscall.Stat_t
		err := f.fstat(&st)
		l.files.put(f)
		if err == nil {
			return l.statAttr(&st), nil
		}
	}
	p, err := l.path(ino)
	if err != nil {
		return nfs3.Attr{}, err
	}
	fi, err := l.root.Lstat(p)
	if err != nil {
		return nfs3.Attr{}, err
	}
	if inoOf(fi) != ino {
		return nfs3.Attr{}, nfs3.ErrStale
	}
	return l.attr(fi), nil
}

// Setattr changes what a sets, in the order knfsd does (owner, mode,
// size, times), and returns the new attributes.
func (l *LocalFS) Setattr(ctx context.Context, ino uint64, a *nfs3.SetAttr) (nfs3.Attr, error) {
	p, err := l.path(ino)
	if err != nil {
		return nfs3.Attr{}, err
	}
	if a.SetUID || a.SetGID {
		uid, gid := -1, -1
		if a.SetUID {
			uid = int(a.UID)
		}
		if a.SetGID {
			gid = int(a.GID)
		}
		if err := l.root.Lchown(p, uid, gid); err != nil {
			return nfs3.Attr{}, err
		}
	}
	if a.SetMode {
		if err := l.root.Chmod(p, fileMode(a.Mode)); err != nil {
			return nfs3.Attr{}, err
		}
	}
	if a.SetSize {
		f, err := l.files.get(ino, p, true)
		if err != nil {
			return nfs3.Attr{}, err
		}
		err = f.Truncate(int64(a.Size))
		l.files.put(f)
		if err != nil {
			return nfs3.Attr{}, err
		}
	}
	if a.SetAtime != nfs3.DontChange || a.SetMtime != nfs3.DontChange {
		now := time.Now()
		at, mt := time.Time{}, time.Time{} // zero: unchanged (os.Root.Chtimes)
		switch a.SetAtime {
		case nfs3.SetToServerTime:
			at = now
		case nfs3.SetToClientTime:
			at = a.Atime.Time()
		}
		switch a.SetMtime {
		case nfs3.SetToServerTime:
			mt = now
		case nfs3.SetToClientTime:
			mt = a.Mtime.Time()
		}
		if err := l.root.Chtimes(p, at, mt); err != nil {
			return nfs3.Attr{}, err
		}
	}
	return l.Getattr(ctx, ino)
}

// fileMode turns permission bits into an fs.FileMode with setuid, setgid
// and sticky in Go's places.
func fileMode(m uint32) fs.FileMode {
	fm := fs.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		fm |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		fm |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		fm |= fs.ModeSticky
	}
	return fm
}

// Lookup returns the inode of name in dir.
func (l *LocalFS) Lookup(ctx context.Context, dir uint64, name string) (uint64, error) {
	dp, err := l.path(dir)
	if err != nil {
		return 0, err
	}
	p := path.Join(dp, name) // ".." of "." is ".": the root is its own parent
	if strings.HasPrefix(p, "..") {
		p = "."
	}
	fi, err := l.root.Lstat(p)
	if err != nil {
		return 0, err
	}
	ino := inoOf(fi)
	l.remember(ino, p)
	return ino, nil
}

// Readlink returns the target of the link ino.
func (l *LocalFS) Readlink(ctx context.Context, ino uint64) (string, error) {
	p, err := l.path(ino)
	if err != nil {
		return "", err
	}
	return l.root.Readlink(p)
}

// ReadAt reads from the file ino. It reports the end of the file only
// when it read less than len(b): a read that ends exactly there is left to
// the server's check against the size (see FS), which spares a stat per
// READ.
func (l *LocalFS) ReadAt(ctx context.Context, ino uint64, b []byte, off int64) (int, bool, error) {
	f, err := l.files.open(ino, false)
	if err != nil {
		return 0, false, err
	}
	defer l.files.put(f)
	n, err := f.ReadAt(b, off)
	if err == io.EOF {
		return n, true, nil
	}
	return n, false, err
}

// WriteAt writes to the file ino; DATA_SYNC and FILE_SYNC writes are
// synced before it returns, UNSTABLE ones wait for Commit.
func (l *LocalFS) WriteAt(ctx context.Context, ino uint64, b []byte, off int64, stable nfs3.StableHow) (nfs3.StableHow, error) {
	f, err := l.files.open(ino, true)
	if err != nil {
		return 0, err
	}
	defer l.files.put(f)
	if _, err := f.WriteAt(b, off); err != nil {
		return 0, err
	}
	if stable == nfs3.Unstable {
		return nfs3.Unstable, nil
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return nfs3.FileSync, nil
}

// Commit syncs the file ino.
func (l *LocalFS) Commit(ctx context.Context, ino uint64) error {
	f, err := l.files.open(ino, true)
	if err != nil {
		return err
	}
	defer l.files.put(f)
	return f.Sync()
}

// own gives a new file to the caller, when the server may (it runs as
// root), as knfsd does.
func (l *LocalFS) own(ctx context.Context, p string, a *nfs3.SetAttr) {
	c, ok := CredFrom(ctx)
	if !ok || os.Geteuid() != 0 {
		return
	}
	uid, gid := int(c.UID), int(c.GID)
	if a != nil && a.SetUID {
		uid = int(a.UID)
	}
	if a != nil && a.SetGID {
		gid = int(a.GID)
	}
	l.root.Lchown(p, uid, gid)
}

func (l *LocalFS) created(ctx context.Context, p string, a *nfs3.SetAttr) (uint64, error) {
	l.own(ctx, p, a)
	if a != nil && a.SetMode { // exactly, as knfsd: not masked by the server's umask
		if fi, err := l.root.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			l.root.Chmod(p, fileMode(a.Mode))
		}
	}
	fi, err := l.root.Lstat(p)
	if err != nil {
		return 0, err
	}
	ino := inoOf(fi)
	l.remember(ino, p)
	return ino, nil
}

func modeOr(a *nfs3.SetAttr, def uint32) fs.FileMode {
	if a != nil && a.SetMode {
		return fileMode(a.Mode)
	}
	return fileMode(def)
}

// Create makes or opens a regular file.
func (l *LocalFS) Create(ctx context.Context, dir uint64, name string, a *nfs3.SetAttr, exclusive bool) (uint64, error) {
	p, err := l.child(dir, name)
	if err != nil {
		return 0, err
	}
	flag := os.O_RDWR | os.O_CREATE
	if exclusive {
		flag |= os.O_EXCL
	}
	f, err := l.root.OpenFile(p, flag|syscall.O_NOFOLLOW, modeOr(a, 0o644))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return 0, err
	} else if !fi.Mode().IsRegular() {
		return 0, nfs3.ErrExist
	}
	if a != nil && a.SetSize {
		if err := f.Truncate(int64(a.Size)); err != nil {
			return 0, err
		}
	}
	return l.created(ctx, p, a)
}

// Mkdir makes a directory.
func (l *LocalFS) Mkdir(ctx context.Context, dir uint64, name string, a *nfs3.SetAttr) (uint64, error) {
	p, err := l.child(dir, name)
	if err != nil {
		return 0, err
	}
	if err := l.root.Mkdir(p, modeOr(a, 0o755)); err != nil {
		return 0, err
	}
	return l.created(ctx, p, a)
}

// Symlink makes a symbolic link. The target is stored as given: os.Root
// never follows it out of the tree, and the Server never follows it.
func (l *LocalFS) Symlink(ctx context.Context, dir uint64, name, target string, a *nfs3.SetAttr) (uint64, error) {
	p, err := l.child(dir, name)
	if err != nil {
		return 0, err
	}
	if err := l.root.Symlink(target, p); err != nil {
		return 0, err
	}
	return l.created(ctx, p, a)
}

// Link makes a hard link.
func (l *LocalFS) Link(ctx context.Context, ino, dir uint64, name string) error {
	op, err := l.path(ino)
	if err != nil {
		return err
	}
	p, err := l.child(dir, name)
	if err != nil {
		return err
	}
	return l.root.Link(op, p)
}

// Remove removes a non-directory.
func (l *LocalFS) Remove(ctx context.Context, dir uint64, name string) error {
	p, err := l.child(dir, name)
	if err != nil {
		return err
	}
	fi, err := l.root.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return nfs3.ErrIsDir
	}
	if err := l.root.Remove(p); err != nil {
		return err
	}
	l.forget(inoOf(fi), p)
	return nil
}

// Rmdir removes an empty directory.
func (l *LocalFS) Rmdir(ctx context.Context, dir uint64, name string) error {
	p, err := l.child(dir, name)
	if err != nil {
		return err
	}
	fi, err := l.root.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return nfs3.ErrNotDir
	}
	if err := l.root.Remove(p); err != nil {
		return err
	}
	l.forget(inoOf(fi), p)
	return nil
}

func (l *LocalFS) forget(ino uint64, p string) {
	l.mu.Lock()
	if l.paths[ino] == p {
		delete(l.paths, ino)
	}
	l.mu.Unlock()
	l.files.drop(ino)
}

// Rename renames, and moves the remembered paths under a renamed
// directory along with it.
func (l *LocalFS) Rename(ctx context.Context, fromDir uint64, fromName string, toDir uint64, toName string) error {
	from, err := l.child(fromDir, fromName)
	if err != nil {
		return err
	}
	to, err := l.child(toDir, toName)
	if err != nil {
		return err
	}
	if err := l.root.Rename(from, to); err != nil {
		return err
	}
	l.mu.Lock()
	for ino, p := range l.paths {
		switch {
		case p == from:
			l.paths[ino] = to
		case strings.HasPrefix(p, from+"/"):
			l.paths[ino] = to + p[len(from):]
		case p == to:
			delete(l.paths, ino) // replaced
		}
	}
	l.mu.Unlock()
	return nil
}

// ReadDir lists a directory in name order; cookie n resumes after the
// n-th name.
func (l *LocalFS) ReadDir(ctx context.Context, dir uint64, cookie uint64, emit func(name string, ino, next uint64) bool) (bool, error) {
	p, err := l.path(dir)
	if err != nil {
		return false, err
	}
	f, err := l.root.Open(p)
	if err != nil {
		return false, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return false, err
	}
	slices.Sort(names)
	if cookie > uint64(len(names)) {
		return false, nfs3.ErrBadCookie
	}
	for i := cookie; i < uint64(len(names)); i++ {
		cp := path.Join(p, names[i])
		fi, err := l.root.Lstat(cp)
		if err != nil {
			continue // gone meanwhile
		}
		ino := inoOf(fi)
		l.remember(ino, cp)
		if !emit(names[i], ino, i+1) {
			return false, nil
		}
	}
	return true, nil
}

// Statfs reports the space of the filesystem holding the directory.
func (l *LocalFS) Statfs(ctx context.Context) (FSStat, error) {
	f, err := l.root.Open(".")
	if err != nil {
		return FSStat{}, err
	}
	defer f.Close()
	var s syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &s); err != nil {
		return FSStat{}, err
	}
	// The fields' types differ between systems (FreeBSD's Bavail and
	// Ffree are signed: negative within the root's reserve).
	bs := uint64(s.Bsize)
	free := uint64(max(s.Ffree, 0))
	return FSStat{
		TotalBytes: uint64(s.Blocks) * bs, FreeBytes: uint64(s.Bfree) * bs, AvailBytes: uint64(max(s.Bavail, 0)) * bs,
		TotalFiles: uint64(s.Files), FreeFiles: free, AvailFiles: free,
	}, nil
}

// fileCache keeps recently used files open, so that a stream of READs and
// WRITEs does not open the file (walking its path through os.Root) each
// time. A file handed out is referenced until put back; dropped files
// close when their last user puts them back.
type fileCache struct {
	l     *LocalFS
	mu    sync.Mutex
	files map[uint64]*openFile
	order []uint64 // least recently opened first
}

type openFile struct {
	*os.File
	ino      uint64
	writable bool
	refs     int
	dropped  bool
}

const maxOpenFiles = 64

// fstat is os.File.Stat without its allocation. The caller holds a
// reference, so the descriptor stays open; regular files are not in Go's
// poller, so Fd does not change how they block.
func (f *openFile) fstat(st *syscall.Stat_t) error {
	return syscall.Fstat(int(f.Fd()), st)
}

func (c *fileCache) init(l *LocalFS) { c.l, c.files = l, make(map[uint64]*openFile) }

// open returns ino open for reading, or writing too.
func (c *fileCache) open(ino uint64, write bool) (*openFile, error) {
	c.mu.Lock()
	if f, ok := c.files[ino]; ok && (f.writable || !write) {
		f.refs++
		c.mu.Unlock()
		return f, nil
	}
	c.mu.Unlock()
	p, err := c.l.path(ino)
	if err != nil {
		return nil, err
	}
	return c.get(ino, p, write)
}

// cached returns ino if it is open, or nil.
func (c *fileCache) cached(ino uint64) *openFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[ino]
	if !ok {
		return nil
	}
	f.refs++
	return f
}

// get opens p, which must be ino, and caches it.
func (c *fileCache) get(ino uint64, p string, write bool) (*openFile, error) {
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	f, err := c.l.root.OpenFile(p, flag|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || inoOf(fi) != ino {
		f.Close()
		return nil, nfs3.ErrStale
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		if fi.IsDir() {
			return nil, nfs3.ErrIsDir
		}
		return nil, nfs3.ErrInval
	}
	of := &openFile{File: f, ino: ino, writable: write, refs: 2}
	c.mu.Lock()
	if old, ok := c.files[ino]; ok {
		c.dropLocked(old)
	}
	c.files[ino] = of
	c.order = append(c.order, ino)
	if len(c.order) > 4*maxOpenFiles { // reopened files left stale entries
		c.order = slices.DeleteFunc(c.order, func(i uint64) bool { return c.files[i] == nil })
	}
	for len(c.files) > maxOpenFiles && len(c.order) > 0 {
		if old, ok := c.files[c.order[0]]; ok && old != of {
			c.dropLocked(old)
		}
		c.order = c.order[1:]
	}
	c.mu.Unlock()
	return of, nil
}

func (c *fileCache) dropLocked(f *openFile) {
	if c.files[f.ino] == f {
		delete(c.files, f.ino)
	}
	if !f.dropped {
		f.dropped = true
		f.refs--
		if f.refs == 0 {
			f.Close()
		}
	}
}

func (c *fileCache) put(f *openFile) {
	c.mu.Lock()
	f.refs--
	if f.refs == 0 {
		f.Close()
	}
	c.mu.Unlock()
}

func (c *fileCache) drop(ino uint64) {
	c.mu.Lock()
	if f, ok := c.files[ino]; ok {
		c.dropLocked(f)
	}
	c.mu.Unlock()
}

func (c *fileCache) closeAll() {
	c.mu.Lock()
	for _, f := range c.files {
		c.dropLocked(f)
	}
	c.mu.Unlock()
}

var _ FS = (*LocalFS)(nil)
