package main

import (
	"context"
	"flag"
	"io"
	"path"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// fileCmd parses the flags and remote arguments common to ls, cat and cp;
// the context it returns ends at ctx's end or after --timeout.
func fileCmd(ctx context.Context, name, synopsis string, nargs int, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*nfsFlags, []string, context.Context, context.CancelFunc, error) {
	fs := newFlags("nfs "+name, "nfs "+synopsis, stderr)
	f := new(nfsFlags)
	f.register(fs)
	if extra != nil {
		extra(fs)
	}
	if err := f.parse(fs, args, nargs); err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
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
	full   string // as the argument gave it, from the server's root
	fh     nfs3.FileHandle
	attr   nfs3.Attr
	cancel context.CancelFunc
}

// remoteFileCmd parses the command line of ls or cat and looks its
// argument up; the caller closes the result.
func remoteFileCmd(ctx context.Context, name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*remoteFile, error) {
	f, rest, ctx, cancel, err := fileCmd(ctx, name, name+" [flags] HOST:/export/path", 1, args, stderr, extra)
	if err != nil {
		return nil, err
	}
	rf := &remoteFile{ctx: ctx, cancel: cancel}
	if r, ok := parseRemote(rest[0]); ok {
		rf.full = path.Clean(r.path)
	}
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

func nfsCat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	rf, err := remoteFileCmd(ctx, "cat", args, stderr, nil)
	if err != nil {
		return err
	}
	defer rf.close()
	_, err = rf.c.Download(rf.ctx, rf.fh, stdout)
	return err
}
