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
	var st TreeStats
	fi, err := os.Lstat(src)
	if err != nil {
		return st, err
	}
	if !fi.IsDir() {
		return st, fmt.Errorf("nfs: %s is not a directory", src)
	}
	err = c.uploadDir(ctx, dir, name, src, name, fi, &st, o, 0)
	return st, err
}

// uploadDir copies the local directory src, whose information is fi, to
// name in dir; rel is its path in the tree.
func (c *Client) uploadDir(ctx context.Context, dir nfs3.FileHandle, name, src, rel string, fi fs.FileInfo, st *TreeStats, o TreeOptions, depth int) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("nfs: %s: more than %d levels of directories", src, maxTreeDepth)
	}
	dh, err := c.Mkdir(ctx, dir, name, nfs3.SetAttr{SetMode: true, Mode: 0o700})
	if errors.Is(err, nfs3.ErrExist) {
		var a nfs3.Attr
		if dh, a, err = c.Lookup(ctx, dir, name); err == nil && a.Type != nfs3.TypeDir {
			err = fmt.Errorf("nfs: %s exists on the server and is not a directory", rel)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	st.Dirs++
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
			err = c.uploadDir(ctx, dh, e.Name(), p, r, efi, st, o, depth+1)
		case efi.Mode().IsRegular():
			err = c.uploadFile(ctx, dh, e.Name(), p, r, efi, st, o)
		case efi.Mode()&fs.ModeSymlink != 0:
			err = c.uploadLink(ctx, dh, e.Name(), p, r, st)
		default:
			st.Skipped = append(st.Skipped, r)
		}
		if err != nil {
			return err
		}
	}
	// Mode and times last: the children's writes would change the
	// times, and a read-only mode would refuse them.
	_, err = c.Setattr(ctx, dh, nfs3.SetAttr{SetMode: true, Mode: uint32(fi.Mode().Perm()),
		SetAtime: nfs3.SetToClientTime, Atime: nfs3.TimeOf(fi.ModTime()),
		SetMtime: nfs3.SetToClientTime, Mtime: nfs3.TimeOf(fi.ModTime())}, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	return nil
}

func (c *Client) uploadFile(ctx context.Context, dir nfs3.FileHandle, name, src, rel string, fi fs.FileInfo, st *TreeStats, o TreeOptions) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	uo := UploadOptions{Mode: uint32(fi.Mode().Perm()), Atime: fi.ModTime(), Mtime: fi.ModTime(), Size: fi.Size()}
	if o.Progress != nil {
		uo.Progress = func(n int64) { o.Progress(rel, n) }
	}
	n, err := c.Upload(ctx, dir, name, f, uo)
	st.Bytes += n
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	st.Files++
	return nil
}

// uploadLink makes name in dir a symbolic link to where the local link
// src points, replacing a link of that name but nothing else.
func (c *Client) uploadLink(ctx context.Context, dir nfs3.FileHandle, name, src, rel string, st *TreeStats) error {
	target, err := os.Readlink(src)
	if err != nil {
		return err
	}
	if _, a, err := c.Lookup(ctx, dir, name); err == nil {
		if a.Type != nfs3.TypeLnk {
			return fmt.Errorf("nfs: %s exists on the server and is not a symbolic link", rel)
		}
		if err := c.Remove(ctx, dir, name); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	if _, err := c.Symlink(ctx, dir, name, filepath.ToSlash(target), nfs3.SetAttr{}); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	st.Links++
	return nil
}

// DownloadTree copies the remote directory fh to the local path dst,
// made if it does not exist and merged into if it is a directory. It
// returns what it copied, up to the first failure. It refuses names a
// server should never send ("", ".", "..", or with a slash) and
// directories that contain themselves.
func (c *Client) DownloadTree(ctx context.Context, fh nfs3.FileHandle, dst string, o TreeOptions) (TreeStats, error) {
	var st TreeStats
	root, err := os.OpenRoot(filepath.Dir(dst))
	if err != nil {
		return st, err
	}
	defer root.Close()
	a, err := c.Getattr(ctx, fh)
	if err != nil {
		return st, err
	}
	if a.Type != nfs3.TypeDir {
		return st, &Error{Proc: nfs3.ProcReaddirplus, Stat: nfs3.ErrNotDir}
	}
	name := filepath.Base(dst)
	err = c.downloadDir(ctx, fh, a, root, name, name, &st, o, nil)
	return st, err
}

// fileKey names a file on the server, to find a directory inside itself.
type fileKey struct{ fsid, fileid uint64 }

// downloadDir copies the remote directory fh, whose attributes are a, to
// name in root; rel is its path in the tree and above its ancestors.
func (c *Client) downloadDir(ctx context.Context, fh nfs3.FileHandle, a nfs3.Attr, root *os.Root, name, rel string, st *TreeStats, o TreeOptions, above []fileKey) error {
	key := fileKey{a.FSID, a.FileID}
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
	st.Dirs++
	ents, err := c.ReadDirPlus(ctx, fh)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Name == "." || e.Name == ".." {
			continue
		}
		if e.Name == "" || strings.ContainsAny(e.Name, "/\x00") {
			return fmt.Errorf("nfs: %s: the server lists a file named %q", rel, e.Name)
		}
		r := path.Join(rel, e.Name)
		efh, ea := e.FH.FH, e.Attr.Attr
		if !e.FH.Present || !e.Attr.Present {
			if efh, ea, err = c.Lookup(ctx, fh, e.Name); err != nil {
				return fmt.Errorf("%s: %w", r, err)
			}
		}
		switch ea.Type {
		case nfs3.TypeDir:
			err = c.downloadDir(ctx, efh, ea, sub, e.Name, r, st, o, append(above, key))
		case nfs3.TypeReg:
			var do DownloadOptions
			if o.Progress != nil {
				do.Progress = func(n int64) { o.Progress(r, n) }
			}
			var n int64
			n, err = c.downloadIn(ctx, efh, sub, e.Name, do)
			st.Bytes += n
			if err == nil {
				st.Files++
			}
		case nfs3.TypeLnk:
			err = c.downloadLink(ctx, efh, sub, e.Name)
			if err == nil {
				st.Links++
			}
		default:
			st.Skipped = append(st.Skipped, r)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
	}
	if err := sub.Chmod(".", os.FileMode(a.Mode&0o777)); err != nil {
		return err
	}
	return sub.Chtimes(".", a.Atime.Time(), a.Mtime.Time())
}

// downloadLink makes name in root a symbolic link to the remote link
// fh's target, replacing a link of that name but nothing else. The
// link is made, never followed.
func (c *Client) downloadLink(ctx context.Context, fh nfs3.FileHandle, root *os.Root, name string) error {
	target, err := c.Readlink(ctx, fh)
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
