package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// cpOptions are nfs cp's own flags.
type cpOptions struct {
	recursive, noClobber, preserve bool
}

// nfsCp copies one file or, with -r, one tree, between the local disk
// and an export, as cp(1) would: into a directory under the source's
// own name, and never leaving a partial file under a final name (the
// library writes through a temporary name, nfs.Client.Upload and
// DownloadFile).
func nfsCp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o cpOptions
	f, rest, mctx, cancel, err := fileCmd(ctx, "cp", "cp [flags] SRC DST    (one of them HOST:/export/path, the other local)", 2, args, stderr,
		func(fs *flag.FlagSet) {
			fs.BoolVar(&o.recursive, "r", false, "copy directories and what they hold; symbolic links are copied as links")
			fs.BoolVar(&o.noClobber, "n", false, "do not replace an existing file")
			fs.BoolVar(&o.preserve, "p", false, "keep the source's modification time on an upload (-r and downloads always do)")
		})
	if err != nil {
		return err
	}
	defer cancel()
	src, srcRemote := parseRemote(rest[0])
	dst, dstRemote := parseRemote(rest[1])
	pr := newCopyProgress(stderr)
	start := time.Now()
	var n int64
	switch {
	case srcRemote && !dstRemote:
		n, err = f.cpDown(ctx, mctx, src, rest[1], o, pr)
	case dstRemote && !srcRemote:
		n, err = f.cpUp(ctx, mctx, rest[0], dst, o, pr)
	default:
		return usagef("one of SRC and DST must be HOST:/export/path, the other a local path")
	}
	pr.clear()
	if err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Fprintf(stderr, "%d bytes in %v (%.1f MB/s)\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds()/1e6)
	return nil
}

// kindCheck refuses what cp copies only with -r: a directory or a
// symbolic link. what names the source.
func (o cpOptions) kindCheck(what string, dir, link bool) error {
	switch {
	case o.recursive:
		return nil
	case dir:
		return fmt.Errorf("%s is a directory: copy it with -r", what)
	case link:
		return fmt.Errorf("%s is a symbolic link: copy it with -r, which copies it as a link", what)
	}
	return nil
}

// cpUp copies the local src to the remote dst; mctx bounds mounting.
func (f *nfsFlags) cpUp(ctx, mctx context.Context, src string, dst remote, o cpOptions, pr *copyProgress) (int64, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		return 0, err
	}
	isLink := fi.Mode()&fs.ModeSymlink != 0
	if err := o.kindCheck(src, fi.IsDir(), isLink); err != nil {
		return 0, err
	}
	if !fi.IsDir() && !isLink && !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file (%v)", src, fi.Mode().Type())
	}
	c, p, err := f.mountRemote(mctx, dst, nil)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	dir, name, err := remoteTarget(ctx, c, p, dst.path, filepath.Base(src), fi.IsDir())
	if err != nil {
		return 0, err
	}
	switch {
	case fi.IsDir():
		st, err := c.UploadTree(ctx, dir, name, src, nfs.TreeOptions{Progress: pr.file})
		reportTree(pr, st)
		return st.Bytes, err
	case isLink:
		target, err := os.Readlink(src)
		if err == nil {
			_, err = c.Symlink(ctx, dir, name, filepath.ToSlash(target), nfs3.SetAttr{})
		}
		return 0, err
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	uo := nfs.UploadOptions{Mode: uint32(fi.Mode().Perm()), Size: fi.Size(), NoReplace: o.noClobber,
		Progress: func(n int64) { pr.file(src, n) }}
	if o.preserve {
		uo.Atime, uo.Mtime = fi.ModTime(), fi.ModTime()
	}
	pr.total = fi.Size()
	return c.Upload(ctx, dir, name, in, uo)
}

// remoteTarget returns the directory and name a copy of srcName goes to
// at p (the path inside the export; full is as given): into p under
// srcName if p is a directory or ends in a slash, else p itself, whose
// parent must be a directory. A file does not replace a directory.
func remoteTarget(ctx context.Context, c *nfs.Client, p, full, srcName string, srcDir bool) (nfs3.FileHandle, string, error) {
	fh, a, err := c.LookupPath(ctx, p)
	switch {
	case err == nil && a.Type == nfs3.TypeDir:
		if _, ea, err := c.Lookup(ctx, fh, srcName); err == nil && ea.Type == nfs3.TypeDir && !srcDir {
			return nil, "", fmt.Errorf("%s/%s is a directory: a file cannot replace it", strings.TrimSuffix(full, "/"), srcName)
		}
		return fh, srcName, nil
	case strings.HasSuffix(full, "/"):
		if err == nil {
			return nil, "", fmt.Errorf("%s: %w", full, &nfs.Error{Proc: nfs3.ProcLookup, Stat: nfs3.ErrNotDir})
		}
		return nil, "", err
	case err != nil && !errors.Is(err, nfs3.ErrNoEnt):
		return nil, "", err
	case err == nil && srcDir:
		return nil, "", fmt.Errorf("%s exists and is not a directory", full)
	}
	dir, da, err := c.LookupPath(ctx, path.Dir(path.Clean("/"+p)))
	if err != nil {
		return nil, "", err
	}
	if da.Type != nfs3.TypeDir {
		return nil, "", fmt.Errorf("%s: %w", path.Dir(full), &nfs.Error{Proc: nfs3.ProcLookup, Stat: nfs3.ErrNotDir})
	}
	return dir, path.Base(p), nil
}

// cpDown copies the remote src to the local dst; mctx bounds mounting.
func (f *nfsFlags) cpDown(ctx, mctx context.Context, src remote, dst string, o cpOptions, pr *copyProgress) (int64, error) {
	c, p, err := f.mountRemote(mctx, src, nil)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	fh, a, err := c.LookupPath(ctx, p)
	if err != nil {
		return 0, err
	}
	what := src.host + ":" + src.path
	if err := o.kindCheck(what, a.Type == nfs3.TypeDir, a.Type == nfs3.TypeLnk); err != nil {
		return 0, err
	}
	if a.Type != nfs3.TypeDir && a.Type != nfs3.TypeLnk && a.Type != nfs3.TypeReg {
		return 0, fmt.Errorf("%s is not a regular file (%v)", what, a.Type)
	}
	name := path.Base(path.Clean("/" + src.path))
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, name)
		if fi, err := os.Lstat(dst); err == nil && fi.IsDir() && a.Type != nfs3.TypeDir {
			return 0, fmt.Errorf("%s is a directory: a file cannot replace it", dst)
		}
	} else if strings.HasSuffix(dst, string(filepath.Separator)) || strings.HasSuffix(dst, "/") {
		return 0, fmt.Errorf("%s: not a directory", dst)
	}
	switch a.Type {
	case nfs3.TypeDir:
		st, err := c.DownloadTree(ctx, fh, dst, nfs.TreeOptions{Progress: pr.file})
		reportTree(pr, st)
		return st.Bytes, err
	case nfs3.TypeLnk:
		target, err := c.Readlink(ctx, fh)
		if err == nil {
			err = os.Symlink(target, dst)
		}
		return 0, err
	}
	if o.noClobber {
		if _, err := os.Lstat(dst); err == nil {
			return 0, fmt.Errorf("%s exists (-n: not replaced)", dst)
		}
	}
	var do nfs.DownloadOptions
	do.Progress = func(n int64) { pr.file(dst, n) }
	pr.total = int64(a.Size)
	return c.DownloadFile(ctx, fh, dst, do)
}

// reportTree says what a tree copy skipped.
func reportTree(pr *copyProgress, st nfs.TreeStats) {
	pr.clear()
	for _, s := range st.Skipped {
		fmt.Fprintf(pr.w, "rpcrdma nfs cp: %s skipped: not a directory, regular file or symbolic link\n", s)
	}
	fmt.Fprintf(pr.w, "%d directories, %d files, %d symbolic links\n", st.Dirs, st.Files, st.Links)
}

// copyProgress draws one line of progress on a terminal, at most five
// times a second, and nothing elsewhere.
type copyProgress struct {
	w     io.Writer
	on    bool
	start time.Time
	last  time.Time
	total int64 // of the one file copied; 0 in a tree
	drawn bool
}

func newCopyProgress(w io.Writer) *copyProgress {
	return &copyProgress{w: w, on: isTerminal(w), start: time.Now()}
}

// file reports done bytes of the file name.
func (p *copyProgress) file(name string, done int64) {
	if !p.on || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	rate := float64(done) / time.Since(p.start).Seconds()
	line := fmt.Sprintf("%s  %s", name, nfs.Bytes(uint64(done)))
	if p.total > 0 {
		left := time.Duration(float64(p.total-done) / rate * float64(time.Second))
		line += fmt.Sprintf(" of %s  %.1f MB/s  %v left", nfs.Bytes(uint64(p.total)), rate/1e6, left.Round(time.Second))
	} else {
		line += fmt.Sprintf("  %.1f MB/s", rate/1e6)
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
	p.drawn = true
}

// clear erases the progress line, if one is drawn.
func (p *copyProgress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}
