package nfs

// Copying directory trees, as cp -r does: directories, regular files,
// symbolic links as links (never followed), with modes and times. Each
// file goes through Upload or downloadIn, so a failure leaves no partial
// file under a final name. Local files are reached only through an
// os.Root, so no name or link a server sends can make a download write
// outside its destination.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// TreeStats counts what a tree copy made.
type TreeStats struct {
	Dirs, Files, Links int
	Bytes              int64
	// Skipped names the files neither a directory, a regular file nor a
	// symbolic link (devices, sockets, FIFOs), which are not copied.
	Skipped []string
}

// TreeOptions says how a tree copy runs.
type TreeOptions struct {
	// Progress, if not nil, is called as each regular file's bytes are
	// copied, with its slash-separated path inside the tree.
	Progress func(path string, done int64)
}

// maxTreeDepth bounds the directory levels a tree copy descends, against
// a server whose directories never end.
const maxTreeDepth = 256

// UploadTree copies the local directory src to name in dir, made if it
// does not exist and merged into if it is a directory, as cp -r copies
// into a new or an existing one. It returns what it copied, up to the
// first failure.
func (c *Client) UploadTree(ctx context.Context, dir nfs3.FileHandle, name, src string, o TreeOptions) (TreeStats, error) {
	return UploadTree(ctx, V3Files(c), Handle(dir), name, src, o)
}

// UploadTree is Client.UploadTree over either version.
func UploadTree(ctx context.Context, fsys Files, dir Handle, name, src string, o TreeOptions) (TreeStats, error) {
	var st TreeStats
	t := tree{fsys: fsys, o: o, st: &st}
	fi, err := os.Lstat(src)
	if err != nil {
		return st, err
	}
	if !fi.IsDir() {
		return st, fmt.Errorf("nfs: %s is not a directory", src)
	}
	err = t.uploadDir(ctx, dir, name, src, name, fi, 0)
	return st, err
}

// tree is one tree copy's settings and counts.
type tree struct {
	fsys Files
	o    TreeOptions
	st   *TreeStats
}

// uploadDir copies the local directory src, whose information is fi, to
// name in dir; rel is its path in the tree.
func (t tree) uploadDir(ctx context.Context, dir Handle, name, src, rel string, fi fs.FileInfo, depth int) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("nfs: %s: more than %d levels of directories", src, maxTreeDepth)
	}
	dh, err := t.fsys.Mkdir(ctx, dir, name, 0o700)
	if isExist(err) {
		var a FileInfo
		if dh, a, err = t.fsys.Lookup(ctx, dir, name); err == nil && !a.IsDir() {
			err = fmt.Errorf("nfs: %s exists on the server and is not a directory", rel)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	t.st.Dirs++
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, r := filepath.Join(src, e.Name()), path.Join(rel, e.Name())
		efi, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case efi.IsDir():
			err = t.uploadDir(ctx, dh, e.Name(), p, r, efi, depth+1)
		case efi.Mode().IsRegular():
			err = t.uploadFile(ctx, dh, e.Name(), p, r, efi)
		case efi.Mode()&fs.ModeSymlink != 0:
			err = t.uploadLink(ctx, dh, e.Name(), p, r)
		default:
			t.st.Skipped = append(t.st.Skipped, r)
		}
		if err != nil {
			return err
		}
	}
	// Mode and times last: the children's writes would change the
	// times, and a read-only mode would refuse them.
	if err := t.fsys.SetPerm(ctx, dh, uint32(fi.Mode().Perm()), fi.ModTime(), fi.ModTime()); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	return nil
}

func (t tree) uploadFile(ctx context.Context, dir Handle, name, src, rel string, fi fs.FileInfo) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	uo := UploadOptions{Mode: uint32(fi.Mode().Perm()), Atime: fi.ModTime(), Mtime: fi.ModTime(), Size: fi.Size()}
	if t.o.Progress != nil {
		uo.Progress = func(n int64) { t.o.Progress(rel, n) }
	}
	n, err := Upload(ctx, t.fsys, dir, name, f, uo)
	t.st.Bytes += n
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	t.st.Files++
	return nil
}

// uploadLink makes name in dir a symbolic link to where the local link
// src points, replacing a link of that name but nothing else.
func (t tree) uploadLink(ctx context.Context, dir Handle, name, src, rel string) error {
	target, err := os.Readlink(src)
	if err != nil {
		return err
	}
	if _, a, err := t.fsys.Lookup(ctx, dir, name); err == nil {
		if !a.IsLink() {
			return fmt.Errorf("nfs: %s exists on the server and is not a symbolic link", rel)
		}
		if err := t.fsys.Remove(ctx, dir, name); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	if err := t.fsys.Symlink(ctx, dir, name, filepath.ToSlash(target)); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	t.st.Links++
	return nil
}

// DownloadTree copies the remote directory fh to the local path dst,
// made if it does not exist and merged into if it is a directory. It
// returns what it copied, up to the first failure. It refuses names a
// server should never send ("", ".", "..", or with a slash) and
// directories that contain themselves.
func (c *Client) DownloadTree(ctx context.Context, fh nfs3.FileHandle, dst string, o TreeOptions) (TreeStats, error) {
	return DownloadTree(ctx, V3Files(c), Handle(fh), dst, o)
}

// DownloadTree is Client.DownloadTree over either version.
func DownloadTree(ctx context.Context, fsys Files, h Handle, dst string, o TreeOptions) (TreeStats, error) {
	var st TreeStats
	root, err := os.OpenRoot(filepath.Dir(dst))
	if err != nil {
		return st, err
	}
	defer root.Close()
	a, err := fsys.Stat(ctx, h)
	if err != nil {
		return st, err
	}
	if !a.IsDir() {
		if fsys.Version() == "3" {
			return st, &Error{Proc: nfs3.ProcReaddirplus, Stat: nfs3.ErrNotDir}
		}
		return st, &Error4{Op: nfs4.OpReaddir, Stat: nfs4.ErrNotDir}
	}
	name := filepath.Base(dst)
	t := tree{fsys: fsys, o: o, st: &st}
	err = t.downloadDir(ctx, h, a, root, name, name, nil)
	return st, err
}

// downloadDir copies the remote directory fh, whose attributes are a, to
// name in root; rel is its path in the tree and above its ancestors.
func (t tree) downloadDir(ctx context.Context, h Handle, a FileInfo, root *os.Root, name, rel string, above []uint64) error {
	key := a.FileID
	if len(above) >= maxTreeDepth {
		return fmt.Errorf("nfs: %s: more than %d levels of directories", rel, maxTreeDepth)
	}
	for _, k := range above {
		if k == key {
			return fmt.Errorf("nfs: %s: the server lists a directory inside itself", rel)
		}
	}
	if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	sub, err := root.OpenRoot(name) // fails on a link out of root, or a file
	if err != nil {
		return err
	}
	defer sub.Close()
	t.st.Dirs++
	ents, err := t.fsys.List(ctx, h)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00") {
			return fmt.Errorf("nfs: %s: the server lists a file named %q", rel, e.Name)
		}
		r := path.Join(rel, e.Name)
		switch ea := e.Info; {
		case ea.IsDir():
			err = t.downloadDir(ctx, e.Handle, ea, sub, e.Name, r, append(above, key))
		case ea.IsRegular():
			var do DownloadOptions
			if t.o.Progress != nil {
				do.Progress = func(n int64) { t.o.Progress(r, n) }
			}
			var n int64
			n, err = downloadIn(ctx, t.fsys, e.Handle, sub, e.Name, do)
			t.st.Bytes += n
			if err == nil {
				t.st.Files++
			}
		case ea.IsLink():
			err = t.downloadLink(ctx, e.Handle, sub, e.Name)
			if err == nil {
				t.st.Links++
			}
		default:
			t.st.Skipped = append(t.st.Skipped, r)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
	}
	if err := sub.Chmod(".", os.FileMode(a.Perm&0o777)); err != nil {
		return err
	}
	return sub.Chtimes(".", a.Atime, a.Mtime)
}

// downloadLink makes name in root a symbolic link to the remote link
// fh's target, replacing a link of that name but nothing else. The
// link is made, never followed.
func (t tree) downloadLink(ctx context.Context, h Handle, root *os.Root, name string) error {
	target, err := t.fsys.ReadLink(ctx, h)
	if err != nil {
		return err
	}
	if fi, err := root.Lstat(name); err == nil {
		if fi.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("%s exists and is not a symbolic link", name)
		}
		if err := root.Remove(name); err != nil {
			return err
		}
	}
	return root.Symlink(target, name)
}
