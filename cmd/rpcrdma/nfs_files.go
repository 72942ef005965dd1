package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"text/tabwriter"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// fileCmd parses the flags and remote arguments common to ls, cat and cp.
func fileCmd(name, synopsis string, nargs int, args []string, stderr io.Writer) (*nfsFlags, []string, context.Context, context.CancelFunc, error) {
	fs := newFlags("nfs "+name, "nfs "+synopsis, stderr)
	f := new(nfsFlags)
	f.register(fs)
	if err := f.parse(fs, args, nargs); err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	return f, fs.Args(), ctx, cancel, nil
}

// lookupRemote mounts the export HOST:/export/path lies in and looks the
// path up. It returns the client, which the caller closes, the path
// inside the export, and the path's handle and attributes.
func (f *nfsFlags) lookupRemote(ctx context.Context, arg string) (*nfs.Client, string, nfs3.FileHandle, nfs3.Attr, error) {
	r, ok := parseRemote(arg)
	if !ok {
		return nil, "", nil, nfs3.Attr{}, errNotRemote
	}
	c, p, err := f.mountRemote(ctx, r, nil)
	if err != nil {
		return nil, "", nil, nfs3.Attr{}, err
	}
	fh, a, err := c.LookupPath(ctx, p)
	if err != nil {
		c.Close()
		return nil, "", nil, nfs3.Attr{}, err
	}
	return c, p, fh, a, nil
}

// remoteFile is the one HOST:/export/path argument of ls and cat, looked
// up on its mounted export.
type remoteFile struct {
	ctx    context.Context
	c      *nfs.Client
	path   string // inside the export
	fh     nfs3.FileHandle
	attr   nfs3.Attr
	cancel context.CancelFunc
}

// remoteFileCmd parses the command line of ls or cat and looks its
// argument up; the caller closes the result.
func remoteFileCmd(name string, args []string, stderr io.Writer) (*remoteFile, error) {
	f, rest, ctx, cancel, err := fileCmd(name, name+" [flags] HOST:/export/path", 1, args, stderr)
	if err != nil {
		return nil, err
	}
	rf := &remoteFile{ctx: ctx, cancel: cancel}
	if rf.c, rf.path, rf.fh, rf.attr, err = f.lookupRemote(ctx, rest[0]); err != nil {
		cancel()
		return nil, err
	}
	return rf, nil
}

// close unmounts and ends the command's time bound.
func (rf *remoteFile) close() {
	rf.c.Close()
	rf.cancel()
}

func nfsLs(args []string, stdout, stderr io.Writer) error {
	rf, err := remoteFileCmd("ls", args, stderr)
	if err != nil {
		return err
	}
	defer rf.close()
	ctx, c, p, fh, a := rf.ctx, rf.c, rf.path, rf.fh, rf.attr
	tw := tabwriter.NewWriter(stdout, 0, 0, 1, ' ', tabwriter.AlignRight)
	line := func(name string, a nfs3.Attr) {
		t := time.Unix(int64(a.Mtime.Seconds), 0).UTC().Format("2006-01-02 15:04")
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t %s\t %s\t\n", modeString(a), a.Nlink, a.UID, a.GID, a.Size, t, name)
	}
	if a.Type != nfs3.TypeDir {
		line(path.Base(p), a)
		return tw.Flush()
	}
	ents, err := c.ReadDirPlus(ctx, fh)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		line(e.Name, e.Attr.Attr)
	}
	return tw.Flush()
}

// modeString renders a type and mode as ls -l does.
func modeString(a nfs3.Attr) string {
	t := map[nfs3.FType]byte{nfs3.TypeDir: 'd', nfs3.TypeLnk: 'l', nfs3.TypeBlk: 'b', nfs3.TypeChr: 'c', nfs3.TypeSock: 's', nfs3.TypeFIFO: 'p'}[a.Type]
	if t == 0 {
		t = '-'
	}
	b := []byte{t}
	for i := 8; i >= 0; i-- {
		if a.Mode&(1<<i) != 0 {
			b = append(b, "rwxrwxrwx"[8-i])
		} else {
			b = append(b, '-')
		}
	}
	return string(b)
}

func nfsCat(args []string, stdout, stderr io.Writer) error {
	rf, err := remoteFileCmd("cat", args, stderr)
	if err != nil {
		return err
	}
	defer rf.close()
	_, err = download(rf.ctx, rf.c, rf.fh, stdout)
	return err
}

// download copies the file fh to w, one READ of MaxRead bytes at a time,
// and returns the bytes copied.
func download(ctx context.Context, c *nfs.Client, fh nfs3.FileHandle, w io.Writer) (int64, error) {
	buf := make([]byte, c.MaxRead())
	var off uint64
	for {
		n, eof, err := c.Read(ctx, fh, buf, off)
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

// upload writes r to the file fh with UNSTABLE WRITEs and a COMMIT, and
// fails if the server's write verifier changed meanwhile (it restarted
// and may have lost data).
func upload(ctx context.Context, c *nfs.Client, fh nfs3.FileHandle, r io.Reader) (int64, error) {
	buf := make([]byte, c.MaxWrite())
	var off uint64
	var verf0 nfs3.Verf
	for first := true; ; first = false {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			done := 0
			for done < n {
				w, _, verf, err := c.Write(ctx, fh, buf[done:n], off+uint64(done), nfs3.Unstable)
				if err != nil {
					return int64(off), err
				}
				if first {
					verf0 = verf
				} else if verf != verf0 {
					return int64(off), errors.New("the server restarted during the copy (write verifier changed); copy again")
				}
				done += w
			}
			off += uint64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return int64(off), rerr
		}
	}
	verf, err := c.Commit(ctx, fh)
	if err != nil {
		return int64(off), err
	}
	if off > 0 && verf != verf0 {
		return int64(off), errors.New("the server restarted before COMMIT (write verifier changed); copy again")
	}
	return int64(off), nil
}

func nfsCp(args []string, stdout, stderr io.Writer) error {
	f, rest, ctx, cancel, err := fileCmd("cp", "cp [flags] SRC DST (one of them HOST:/export/path)", 2, args, stderr)
	if err != nil {
		return err
	}
	defer cancel()
	_, srcRemote := parseRemote(rest[0])
	dst, dstRemote := parseRemote(rest[1])
	start := time.Now()
	var n int64
	switch {
	case srcRemote && !dstRemote:
		c, _, fh, _, err := f.lookupRemote(ctx, rest[0])
		if err != nil {
			return err
		}
		defer c.Close()
		out, err := os.Create(rest[1])
		if err != nil {
			return err
		}
		if n, err = download(ctx, c, fh, out); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	case dstRemote && !srcRemote:
		in, err := os.Open(rest[0])
		if err != nil {
			return err
		}
		defer in.Close()
		c, p, err := f.mountRemote(ctx, dst, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		dir, _, err := c.LookupPath(ctx, path.Dir(p))
		if err != nil {
			return err
		}
		name := path.Base(p)
		if fh, a, err := c.Lookup(ctx, dir, name); err == nil && a.Type == nfs3.TypeDir {
			dir, name = fh, path.Base(rest[0]) // into a directory
		}
		fh, err := c.Create(ctx, dir, name, nfs3.Unchecked, nfs3.SetAttr{SetMode: true, Mode: 0o644, SetSize: true})
		if err != nil {
			return err
		}
		if n, err = upload(ctx, c, fh, in); err != nil {
			return err
		}
	default:
		return errors.New("one of SRC and DST must be HOST:/export/path, the other local")
	}
	d := time.Since(start)
	fmt.Fprintf(stderr, "%d bytes in %v (%.1f MB/s)\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds()/1e6)
	return nil
}
