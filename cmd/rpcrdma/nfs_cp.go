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
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
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
		return 0, fmt.Errorf("%s is a %s, not a regular file", src, nfs.TypeName(fi.Mode()))
	}
	fsys, p, closeFn, err := f.openFiles(mctx, dst, nil, 1)
	if err != nil {
		return 0, err
	}
	defer closeFn()
	dir, name, full, err := remoteTarget(ctx, fsys, p, dst.path, filepath.Base(src), fi.IsDir())
	if err != nil {
		return 0, err
	}
	switch {
	case fi.IsDir():
		st, err := nfs.UploadTree(ctx, fsys, dir, name, src, nfs.TreeOptions{Progress: pr.file})
		reportTree(pr, st)
		return st.Bytes, named(full, err)
	case isLink:
		target, err := os.Readlink(src)
		if err == nil {
			err = named(full, fsys.Symlink(ctx, dir, name, filepath.ToSlash(target)))
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
	n, err := nfs.Upload(ctx, fsys, dir, name, in, uo)
	return n, named(full, err)
}

// named prefixes err with name, the remote file it concerns as the
// server's root sees it, unless err names a local file already (an
// *fs.PathError) or is the end of the command's context.
func named(name string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	if _, ok := errors.AsType[*fs.PathError](err); ok {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// remoteTarget returns the directory and name a copy of srcName goes to
// at p (the path as fsys looks it up; full is as given), and the
// target's path as given, for messages: into p under srcName if p is a
// directory or ends in a slash, else p itself, whose parent must be a
// directory. A file does not replace a directory.
func remoteTarget(ctx context.Context, fsys nfs.Files, p, full, srcName string, srcDir bool) (nfs.Handle, string, string, error) {
	h, a, err := fsys.LookupPath(ctx, p)
	switch {
	case err == nil && a.IsDir():
		target := path.Join(full, srcName)
		if _, ea, err := fsys.Lookup(ctx, h, srcName); err == nil && ea.IsDir() && !srcDir {
			return nil, "", "", fmt.Errorf("%s is a directory: a file cannot replace it", target)
		}
		return h, srcName, target, nil
	case strings.HasSuffix(full, "/"):
		if err == nil {
			return nil, "", "", fmt.Errorf("%s: not a directory", full)
		}
		return nil, "", "", err
	case err != nil && !isNoEnt(err):
		return nil, "", "", err
	case err == nil && srcDir:
		return nil, "", "", fmt.Errorf("%s exists and is not a directory", full)
	}
	dir, da, err := fsys.LookupPath(ctx, path.Dir(path.Clean("/"+p)))
	if err != nil {
		return nil, "", "", err
	}
	if !da.IsDir() {
		return nil, "", "", fmt.Errorf("%s: not a directory", path.Dir(full))
	}
	return dir, path.Base(p), path.Clean(full), nil
}

// isNoEnt reports whether err is either version's NOENT.
func isNoEnt(err error) bool { return errors.Is(err, nfs3.ErrNoEnt) || errors.Is(err, nfs4.ErrNoEnt) }

// cpDown copies the remote src to the local dst; mctx bounds mounting.
func (f *nfsFlags) cpDown(ctx, mctx context.Context, src remote, dst string, o cpOptions, pr *copyProgress) (int64, error) {
	fsys, p, closeFn, err := f.openFiles(mctx, src, nil, 1)
	if err != nil {
		return 0, err
	}
	defer closeFn()
	h, a, err := fsys.LookupPath(ctx, p)
	if err != nil {
		return 0, err
	}
	what := src.host + ":" + src.path
	if err := o.kindCheck(what, a.IsDir(), a.IsLink()); err != nil {
		return 0, err
	}
	if !a.IsDir() && !a.IsLink() && !a.IsRegular() {
		return 0, fmt.Errorf("%s is a %s, not a regular file", what, nfs.TypeName(a.Type))
	}
	name := path.Base(path.Clean("/" + src.path))
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, name)
		if fi, err := os.Lstat(dst); err == nil && fi.IsDir() && !a.IsDir() {
			return 0, fmt.Errorf("%s is a directory: a file cannot replace it", dst)
		}
	} else if strings.HasSuffix(dst, string(filepath.Separator)) || strings.HasSuffix(dst, "/") {
		return 0, fmt.Errorf("%s: not a directory", dst)
	}
	switch {
	case a.IsDir():
		st, err := nfs.DownloadTree(ctx, fsys, h, dst, nfs.TreeOptions{Progress: pr.file})
		reportTree(pr, st)
		return st.Bytes, named(src.path, err)
	case a.IsLink():
		target, err := fsys.ReadLink(ctx, h)
		if err != nil {
			return 0, named(src.path, err)
		}
		return 0, os.Symlink(target, dst)
	}
	if o.noClobber {
		if _, err := os.Lstat(dst); err == nil {
			return 0, fmt.Errorf("%s exists (-n: not replaced)", dst)
		}
	}
	var do nfs.DownloadOptions
	do.Progress = func(n int64) { pr.file(dst, n) }
	pr.total = int64(a.Size)
	n, err := nfs.DownloadFile(ctx, fsys, h, dst, do)
	return n, named(src.path, err)
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
