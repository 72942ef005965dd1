package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
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

// openFiles reaches the files of r: with --vers 3 it mounts the export
// r.path lies in and returns the path inside it, with --vers 4.1 it sets
// up a session and returns r.path, from the server's NFSv4 root. conns,
// if not nil, collects the RDMA connections; close ends it all.
func (f *nfsFlags) openFiles(ctx context.Context, r remote, conns *[]*rpcrdma.Conn, nconns int) (nfs.Files, string, func(), error) {
	if f.vers == "3" {
		c, p, err := f.mountRemote(ctx, r, conns)
		if err != nil {
			return nil, "", nil, err
		}
		return nfs.V3Files(c), p, func() { c.Close() }, nil
	}
	if r.port != 0 {
		f.nfsPort = r.port
	}
	f.askPorts(ctx, r.host)
	dial, err := f.dialer(r.host, conns)
	if err != nil {
		return nil, "", nil, err
	}
	c, err := nfs.Mount4(ctx, nfs.Config4{Dial: dial, Conns: nconns, Cred: f.cred(), Reconnect: rpc.ReconnectConfig{Attempts: 3}})
	if err != nil {
		return nil, "", nil, err
	}
	return nfs.V41Files(c), r.path, func() { c.Close() }, nil
}

// lookupRemote reaches the files HOST:/export/path lies in and looks the
// path up. It returns the files, the path inside them, the path's handle
// and information, and what closes them.
func (f *nfsFlags) lookupRemote(ctx context.Context, arg string) (nfs.Files, string, nfs.Handle, nfs.FileInfo, func(), error) {
	r, ok := parseRemote(arg)
	if !ok {
		return nil, "", nil, nfs.FileInfo{}, nil, errNotRemote
	}
	fsys, p, closeFn, err := f.openFiles(ctx, r, nil, 1)
	if err != nil {
		return nil, "", nil, nfs.FileInfo{}, nil, err
	}
	h, a, err := fsys.LookupPath(ctx, p)
	if err != nil {
		closeFn()
		return nil, "", nil, nfs.FileInfo{}, nil, err
	}
	return fsys, p, h, a, closeFn, nil
}

// remoteFile is the one HOST:/export/path argument of ls and cat, looked
// up.
type remoteFile struct {
	ctx     context.Context
	fsys    nfs.Files
	path    string // inside the export (NFSv3) or from the root (NFSv4.1)
	full    string // as the argument gave it, from the server's root
	h       nfs.Handle
	info    nfs.FileInfo
	closeFn func()
	cancel  context.CancelFunc
	// parent is the command's context, without --timeout: a transfer
	// may take longer than a call (ctx bounds connecting and the lookup).
	parent context.Context
}

// remoteFileCmd parses the command line of ls or cat and looks its
// argument up; the caller closes the result.
func remoteFileCmd(parent context.Context, name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*remoteFile, error) {
	f, rest, ctx, cancel, err := fileCmd(parent, name, name+" [flags] HOST:/export/path", 1, args, stderr, extra)
	if err != nil {
		return nil, err
	}
	rf := &remoteFile{ctx: ctx, parent: parent, cancel: cancel}
	dirOnly := false // a path ending in "/" names a directory, as in POSIX path resolution
	if r, ok := parseRemote(rest[0]); ok {
		rf.full = path.Clean(r.path)
		dirOnly = strings.HasSuffix(r.path, "/") && rf.full != "/"
	}
	if rf.fsys, rf.path, rf.h, rf.info, rf.closeFn, err = f.lookupRemote(ctx, rest[0]); err != nil {
		cancel()
		return nil, err
	}
	if dirOnly && !rf.info.IsDir() && !rf.info.IsLink() {
		rf.close()
		return nil, fmt.Errorf("%s/: not a directory", rf.full)
	}
	return rf, nil
}

// close unmounts and ends the command's time bound.
func (rf *remoteFile) close() {
	rf.closeFn()
	rf.cancel()
}

// modeString renders a type and mode as ls -l does.
func modeString(a nfs.FileInfo) string {
	var t byte = '-'
	switch {
	case a.IsDir():
		t = 'd'
	case a.IsLink():
		t = 'l'
	case a.Type&fs.ModeCharDevice != 0:
		t = 'c'
	case a.Type&fs.ModeDevice != 0:
		t = 'b'
	case a.Type&fs.ModeSocket != 0:
		t = 's'
	case a.Type&fs.ModeNamedPipe != 0:
		t = 'p'
	}
	b := []byte{t}
	for i := 8; i >= 0; i-- {
		if a.Perm&(1<<i) != 0 {
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
	_, err = nfs.Download(rf.parent, rf.fsys, rf.h, stdout)
	return named(rf.full, err)
}
