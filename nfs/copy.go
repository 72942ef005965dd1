package nfs

// Copying whole files, safely: an upload never leaves a partial file
// under the name it was asked to write, and a download never leaves one
// on the local disk. Both write under a temporary name beside the target
// and rename it into place only once the data is complete and checked,
// as rsync and cp --backup-less tools do; a failure, a cancelled context
// included, removes the temporary file.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
)

// cleanupTimeout bounds the REMOVE of a temporary file after a failure,
// which runs even when the caller's context has ended.
const cleanupTimeout = 10 * time.Second

// UploadOptions says how Upload writes a file.
type UploadOptions struct {
	// Mode is the file's permission bits; 0 means 0644.
	Mode uint32
	// Atime and Mtime, if not zero, are set on the file before it
	// takes its name (cp -p, a tree copy).
	Atime, Mtime time.Time
	// Size, if at least 0, is how many bytes r will yield: Upload checks
	// it against the server's largest file size (FSINFO maxfilesize) and
	// free space (FSSTAT abytes) before it creates anything, and fails
	// if r yields another count. -1: unknown, nothing checked before.
	Size int64
	// NoReplace makes Upload fail with NFS3ERR_EXIST when name exists,
	// instead of replacing it as cp(1) does. NFSv3 RENAME has no
	// exclusive form, so a file another client creates between the
	// check and the RENAME is still replaced.
	NoReplace bool
	// Progress, if not nil, is called after each WRITE with the bytes
	// written so far, on Upload's goroutine.
	Progress func(done int64)
}

// Upload writes what r yields to the file name in dir and returns the
// bytes written. name ends up holding either what it held before or all
// of r, never a part: Upload creates a temporary file beside it (GUARDED
// CREATE of ".NAME.XXXXXXXX.part"), writes it with UNSTABLE WRITEs,
// COMMITs, checks that the server's write verifier did not change (a
// restart may have lost unstable data, RFC 1813 Section 3.3.7) and that
// the file holds every byte, sets its mode and times, and RENAMEs it onto
// name. On any failure, ctx's end included, it removes the temporary
// file; if even that fails, the error names it.
func (c *Client) Upload(ctx context.Context, dir nfs3.FileHandle, name string, r io.Reader, o UploadOptions) (int64, error) {
	return Upload(ctx, V3Files(c), Handle(dir), name, r, o)
}

// Upload is Client.Upload over either version; under NFSv4.1 the
// temporary file is written under an OPEN, closed before the RENAME.
func Upload(ctx context.Context, fsys Files, dir Handle, name string, r io.Reader, o UploadOptions) (int64, error) {
	if o.Size >= 0 {
		if err := CheckSpace(ctx, fsys, dir, uint64(o.Size)); err != nil {
			return 0, err
		}
	}
	tmp, f, err := createTemp(ctx, fsys, dir, name)
	if err != nil {
		return 0, err
	}
	n, err := fillTemp(ctx, fsys, dir, f, name, r, o)
	if cerr := f.Close(ctx); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(ctx, dir, tmp, dir, name)
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if rerr := fsys.Remove(rctx, dir, tmp); rerr != nil {
			return n, fmt.Errorf("%w (and removing the temporary file %s failed: %v)", err, tmp, rerr)
		}
		return n, err
	}
	return n, nil
}

// fillTemp writes r to the temporary file fh and checks it, ready to take
// name; Upload removes it if this fails.
func fillTemp(ctx context.Context, fsys Files, dir Handle, f File, name string, r io.Reader, o UploadOptions) (int64, error) {
	n, err := writeAll(ctx, fsys, f, r, o.Progress)
	if err != nil {
		return n, err
	}
	if o.Size >= 0 && n != o.Size {
		return n, fmt.Errorf("nfs: the source yielded %d bytes, not the %d expected (did it change during the copy?)", n, o.Size)
	}
	a, err := fsys.Stat(ctx, f.Handle())
	if err != nil {
		return n, err
	}
	if a.Size != uint64(n) {
		return n, fmt.Errorf("nfs: the server holds %d bytes of the %d written", a.Size, n)
	}
	perm := o.Mode
	if perm == 0 {
		perm = 0o644
	}
	if err := fsys.SetPerm(ctx, f.Handle(), perm, o.Atime, o.Mtime); err != nil {
		return n, err
	}
	if o.NoReplace {
		if _, _, err := fsys.Lookup(ctx, dir, name); err == nil {
			return n, errExist(fsys)
		} else if !isNoEnt(err) {
			return n, err
		}
	}
	return n, nil
}

// createTemp makes an empty file of mode 0600 under a new temporary name
// beside name in dir (GUARDED, so it never takes over an existing file)
// and returns the name and the file, open for writing.
func createTemp(ctx context.Context, fsys Files, dir Handle, name string) (string, File, error) {
	var err error
	for range 3 {
		var b [4]byte
		rand.Read(b[:])
		tmp := tmpName(name, hex.EncodeToString(b[:]))
		var f File
		f, err = fsys.Create(ctx, dir, tmp, 0o600)
		if err == nil {
			return tmp, f, nil
		}
		if !isExist(err) {
			return "", nil, err
		}
	}
	return "", nil, err
}

// isExist, isNoEnt, errExist: the statuses of either version.
func isExist(err error) bool { return errors.Is(err, nfs3.ErrExist) || errors.Is(err, nfs4.ErrExist) }
func isNoEnt(err error) bool { return errors.Is(err, nfs3.ErrNoEnt) || errors.Is(err, nfs4.ErrNoEnt) }

func errExist(fsys Files) error {
	if fsys.Version() == "3" {
		return &Error{Proc: nfs3.ProcRename, Stat: nfs3.ErrExist}
	}
	return &Error4{Op: nfs4.OpRename, Stat: nfs4.ErrExist}
}

// tmpName is the temporary name of name: hidden, marked, and within the
// 255 bytes most file systems allow a name.
func tmpName(name, suffix string) string {
	const most = 255 - len("..12345678.part")
	if len(name) > most {
		name = name[:most]
	}
	return "." + name + "." + suffix + ".part"
}

// writeAll writes r to fh from offset 0 with UNSTABLE WRITEs of MaxWrite
// bytes, one buffer reused, and COMMITs; it fails if the write verifier
// changes on the way (the server restarted and may have lost data).
func writeAll(ctx context.Context, fsys Files, f File, r io.Reader, progress func(int64)) (int64, error) {
	buf := make([]byte, fsys.MaxWrite())
	var off uint64
	var verf0 [8]byte
	first := true
	for {
		n, rerr := io.ReadFull(r, buf)
		for done := 0; done < n; {
			w, verf, err := f.WriteAt(ctx, buf[done:n], off+uint64(done))
			if err != nil {
				return int64(off) + int64(done), err
			}
			if w == 0 {
				return int64(off) + int64(done), errors.New("nfs: WRITE made no progress")
			}
			if first {
				verf0, first = verf, false
			} else if verf != verf0 {
				return int64(off) + int64(done), errRestarted
			}
			done += w
		}
		off += uint64(n)
		if n > 0 && progress != nil {
			progress(int64(off))
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return int64(off), fmt.Errorf("nfs: reading the source: %w", rerr)
		}
	}
	verf, err := f.Commit(ctx)
	if err != nil {
		return int64(off), err
	}
	if !first && verf != verf0 {
		return int64(off), errRestarted
	}
	return int64(off), nil
}

// errRestarted: the write verifier changed, so the server may have lost
// unstable data (RFC 1813 Section 3.3.7).
var errRestarted = errors.New("nfs: the server restarted during the copy (its write verifier changed) and may have lost data; copy again")

// CheckSpace fails, saying the limit, if a file of size bytes cannot fit
// in dir's file system: over the server's largest file size (FSINFO
// maxfilesize) or over the free space it offers this user (FSSTAT
// abytes). It creates nothing.
func (c *Client) CheckSpace(ctx context.Context, dir nfs3.FileHandle, size uint64) error {
	return CheckSpace(ctx, V3Files(c), Handle(dir), size)
}

// CheckSpace is Client.CheckSpace over either version: NFSv4.1 asks the
// maxfilesize and space_avail attributes.
func CheckSpace(ctx context.Context, fsys Files, dir Handle, size uint64) error {
	maxSize, avail, err := fsys.Space(ctx, dir)
	src := [2]string{"FSINFO maxfilesize", "FSSTAT"}
	if fsys.Version() != "3" {
		src = [2]string{"maxfilesize", "space_avail"}
	}
	if maxSize > 0 && size > maxSize {
		return fmt.Errorf("nfs: %s is over the largest file the server allows (%s %s)", Bytes(size), src[0], Bytes(maxSize))
	}
	if err != nil {
		return err
	}
	if size > avail {
		return fmt.Errorf("nfs: %s is over the free space on the server (%s: %s available)", Bytes(size), src[1], Bytes(avail))
	}
	return nil
}

// Bytes formats a byte count as df -h does, in powers of 1024: "512 B",
// "1.5 KiB", "3.0 GiB".
func Bytes(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n), 0
	for v >= 1024 && unit < 6 {
		v /= 1024
		unit++
	}
	return fmt.Sprintf("%.1f %ciB", v, " KMGTPE"[unit])
}

// Download copies the regular file fh to w, one READ of MaxRead bytes at
// a time into one buffer, and returns the bytes copied. A directory or
// another non-regular file fails at once with NFS3ERR_ISDIR or
// NFS3ERR_INVAL, before anything is written to w.
func (c *Client) Download(ctx context.Context, fh nfs3.FileHandle, w io.Writer) (int64, error) {
	return Download(ctx, V3Files(c), Handle(fh), w)
}

// Download is Client.Download over either version; under NFSv4.1 the
// file is read under an OPEN.
func Download(ctx context.Context, fsys Files, h Handle, w io.Writer) (int64, error) {
	a, err := fsys.Stat(ctx, h)
	if err != nil {
		return 0, err
	}
	if err := regular(fsys, a); err != nil {
		return 0, err
	}
	f, err := fsys.Open(ctx, h, false)
	if err != nil {
		return 0, err
	}
	defer f.Close(context.WithoutCancel(ctx))
	buf := make([]byte, fsys.MaxRead())
	var off uint64
	for {
		n, eof, err := f.ReadAt(ctx, buf, off)
		if err != nil {
			return int64(off), err
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return int64(off), err
		}
		off += uint64(n)
		if eof || n == 0 {
			return int64(off), nil
		}
	}
}

// regular fails unless a is a regular file's, with the status of
// fsys's version.
func regular(fsys Files, a FileInfo) error {
	switch {
	case a.IsRegular():
		return nil
	case a.IsDir() && fsys.Version() == "3":
		return &Error{Proc: nfs3.ProcRead, Stat: nfs3.ErrIsDir}
	case a.IsDir():
		return &Error4{Op: nfs4.OpRead, Stat: nfs4.ErrIsDir}
	case fsys.Version() == "3":
		return fmt.Errorf("nfs: a %s is not a regular file: %w", TypeName(a.Type), nfs3.ErrInval)
	}
	return fmt.Errorf("nfs: a %s is not a regular file: %w", TypeName(a.Type), nfs4.ErrInval)
}

// DownloadOptions says how DownloadFile writes a local file.
type DownloadOptions struct {
	// Mode is the file's permission bits; 0 means the remote file's.
	Mode os.FileMode
	// Progress, if not nil, is called after each READ with the bytes
	// copied so far, on DownloadFile's goroutine.
	Progress func(done int64)
}

// DownloadFile copies the regular file fh to the local file dst and
// returns the bytes copied. dst ends up holding either what it held
// before or the whole file: DownloadFile writes a temporary file beside
// it (".NAME.XXXXXXXX.part", mode 0600), syncs it to disk, gives it its
// mode and the remote file's times, and renames it onto dst; any failure,
// ctx's end included, removes it.
func (c *Client) DownloadFile(ctx context.Context, fh nfs3.FileHandle, dst string, o DownloadOptions) (int64, error) {
	return DownloadFile(ctx, V3Files(c), Handle(fh), dst, o)
}

// DownloadFile is Client.DownloadFile over either version.
func DownloadFile(ctx context.Context, fsys Files, h Handle, dst string, o DownloadOptions) (int64, error) {
	root, err := os.OpenRoot(filepath.Dir(dst))
	if err != nil {
		return 0, err
	}
	defer root.Close()
	return downloadIn(ctx, fsys, h, root, filepath.Base(dst), o)
}

// downloadIn is DownloadFile into name inside root, which no name a
// server sends can leave.
func downloadIn(ctx context.Context, fsys Files, h Handle, root *os.Root, name string, o DownloadOptions) (int64, error) {
	a, err := fsys.Stat(ctx, h)
	if err != nil {
		return 0, err
	}
	if err := regular(fsys, a); err != nil {
		return 0, err
	}
	var f *os.File
	var tmp string
	for range 3 {
		var b [4]byte
		rand.Read(b[:])
		tmp = tmpName(name, hex.EncodeToString(b[:]))
		if f, err = root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	var w io.Writer = f
	if o.Progress != nil {
		w = &progressWriter{w: f, f: o.Progress}
	}
	n, err := Download(ctx, fsys, h, w)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	mode := o.Mode
	if mode == 0 {
		mode = os.FileMode(a.Perm & 0o777)
	}
	if err == nil {
		err = root.Chmod(tmp, mode)
	}
	if err == nil {
		err = root.Chtimes(tmp, a.Atime, a.Mtime)
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return n, err
	}
	return n, nil
}

// progressWriter calls f with the running total after each Write.
type progressWriter struct {
	w io.Writer
	n int64
	f func(int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	p.f(p.n)
	return n, err
}
