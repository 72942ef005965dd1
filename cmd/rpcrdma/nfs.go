package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// cmdNFS dispatches the NFS subcommands.
func cmdNFS(args []string, stdout, stderr io.Writer) error {
	subs := []command{
		{"probe", "what an NFS server offers: NULL, exports, FSINFO, PATHCONF, FSSTAT, transport, each timed", nfsProbe},
		{"ls", "list HOST:/export/path (READDIRPLUS)", nfsLs},
		{"cat", "write HOST:/export/path to stdout", nfsCat},
		{"cp", "copy a file from or to HOST:/export/path", nfsCp},
		{"bench", "sequential or random READ/WRITE against HOST:/export", nfsBench},
		{"serve", "serve a directory over NFSv3 on RDMA and TCP, MOUNT on TCP", nfsServe},
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprintln(w, "usage: rpcrdma nfs SUBCOMMAND [flags] [args]")
		fmt.Fprintln(w, "\nNFSv3 (RFC 1813) over RPC-over-RDMA or TCP, without a kernel mount.\n\nsubcommands:")
		for _, c := range subs {
			fmt.Fprintf(w, "  %-6s %s\n", c.name, c.summary)
		}
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	for _, c := range subs {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "rpcrdma nfs: unknown subcommand %q\n", args[0])
	return errUsage
}

// nfsFlags are the connection settings of the NFS client subcommands.
type nfsFlags struct {
	transport string
	nfsPort   int
	mountPort int
	export    string
	uid, gid  uint
	timeout   time.Duration
	tf        transportFlags
}

func (f *nfsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.transport, "transport", "rdma", "how NFS travels: rdma (the software iWARP) or tcp; MOUNT always uses TCP (RFC 8267)")
	fs.IntVar(&f.nfsPort, "nfs-port", 0, "NFS port (default 20049 for rdma, 2049 for tcp)")
	fs.IntVar(&f.mountPort, "mount-port", 0, "MOUNT port on TCP (default: with --transport tcp the NFS port, else 2049, where rpcrdma nfs serve and willscott/go-nfs serve it; knfsd: mountd's, often 20048)")
	fs.StringVar(&f.export, "export", "", "the export the path lies in, mounted without asking MOUNT EXPORT for the list (for servers without EXPORT, such as willscott/go-nfs)")
	fs.UintVar(&f.uid, "uid", 0, "AUTH_SYS uid")
	fs.UintVar(&f.gid, "gid", 0, "AUTH_SYS gid")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "bound on connecting and on each call")
	f.tf.register(fs, false)
}

// parse parses args into fs, on which f is registered, checks f, and
// wants nargs arguments after the flags.
func (f *nfsFlags) parse(fs *flag.FlagSet, args []string, nargs int) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	if fs.NArg() != nargs {
		fs.Usage()
		return errUsage
	}
	return nil
}

func (f *nfsFlags) check() error {
	if f.transport != "rdma" && f.transport != "tcp" {
		return fmt.Errorf("--transport %q: want rdma or tcp", f.transport)
	}
	return f.tf.check()
}

func (f *nfsFlags) addrs(host string) (nfsAddr, mountAddr string) {
	port := f.nfsPort
	if port == 0 {
		port = 20049
		if f.transport == "tcp" {
			port = 2049
		}
	}
	mport := f.mountPort
	if mport == 0 {
		mport = 2049
		if f.transport == "tcp" {
			mport = port
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), net.JoinHostPort(host, strconv.Itoa(mport))
}

// dialer returns how to reach host's NFS service, recording RDMA
// connections in conns.
func (f *nfsFlags) dialer(host string, conns *[]*rpcrdma.Conn) (nfs.Dialer, error) {
	nfsAddr, _ := f.addrs(host)
	if f.transport == "tcp" {
		return nfs.TCP(nfsAddr), nil
	}
	p, err := f.tf.provider()
	if err != nil {
		return nil, err
	}
	cfg := f.tf.config(f.tf.logger())
	return func(ctx context.Context) (rpc.Transport, error) {
		c, err := rpcrdma.Dial(ctx, p, nfsAddr, cfg)
		if err == nil && conns != nil {
			*conns = append(*conns, c)
		}
		return c, err
	}, nil
}

func (f *nfsFlags) cred() *rpc.AuthSysParms {
	return &rpc.AuthSysParms{MachineName: "rpcrdma", UID: uint32(f.uid), GID: uint32(f.gid)}
}

// remote is HOST:/path split at the colon.
type remote struct{ host, path string }

func parseRemote(s string) (remote, bool) {
	i := strings.Index(s, ":/")
	if i <= 0 {
		return remote{}, false
	}
	return remote{host: strings.Trim(s[:i], "[]"), path: s[i+1:]}, true
}

// mountRemote finds the export r.path lies in (the longest listed one
// that is a prefix), mounts it and returns the client and the path inside.
func (f *nfsFlags) mountRemote(ctx context.Context, r remote, conns *[]*rpcrdma.Conn) (*nfs.Client, string, error) {
	_, mountAddr := f.addrs(r.host)
	export := f.export
	if export == "" {
		var err error
		if export, err = findExport(ctx, mountAddr, r); err != nil {
			return nil, "", err
		}
	} else if !inExport(r.path, export) {
		return nil, "", fmt.Errorf("%s is not in --export %s", r.path, export)
	}
	dial, err := f.dialer(r.host, conns)
	if err != nil {
		return nil, "", err
	}
	c, err := nfs.Mount(ctx, nfs.MountConfig{MountAddr: mountAddr, Export: export, Dial: dial, Cred: f.cred(),
		Reconnect: rpc.ReconnectConfig{Attempts: 3}})
	if err != nil {
		return nil, "", err
	}
	return c, strings.TrimPrefix(r.path, export), nil
}

type mountExport = mount.ExportNode

// findExport returns the export r.path lies in: the longest of the
// server's exports (MOUNT EXPORT) that is a prefix of it.
func findExport(ctx context.Context, mountAddr string, r remote) (string, error) {
	exports, err := nfs.Exports(ctx, mountAddr)
	if err != nil {
		return "", err
	}
	slices.SortFunc(exports, func(a, b mountExport) int { return len(b.Dir) - len(a.Dir) })
	for _, e := range exports {
		if inExport(r.path, e.Dir) {
			return e.Dir, nil
		}
	}
	return "", fmt.Errorf("%s is in none of %s's exports", r.path, r.host)
}

// inExport reports whether p is export or lies under it.
func inExport(p, export string) bool {
	return p == export || strings.HasPrefix(p, strings.TrimSuffix(export, "/")+"/")
}

var errNotRemote = errors.New("want HOST:/export/path")
