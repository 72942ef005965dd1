package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// cmdNFS dispatches the NFS subcommands; ctx ends at SIGINT or SIGTERM.
func cmdNFS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	withCtx := func(f func(context.Context, []string, io.Writer, io.Writer) error) func([]string, io.Writer, io.Writer) error {
		return func(args []string, stdout, stderr io.Writer) error { return f(ctx, args, stdout, stderr) }
	}
	subs := []command{
		{"probe", "what an NFS server offers: NULL, exports, FSINFO, PATHCONF, FSSTAT, transport, each timed", withCtx(nfsProbe)},
		{"ls", "list HOST:/export/path (READDIRPLUS)", withCtx(nfsLs)},
		{"cat", "write HOST:/export/path to stdout", withCtx(nfsCat)},
		{"cp", "copy files from or to HOST:/export/path, through a temporary name", withCtx(nfsCp)},
		{"bench", "sequential or random READ/WRITE against HOST:/export", withCtx(nfsBench)},
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
			if err := c.run(args[1:], stdout, stderr); err != nil {
				return &namedError{name: "nfs " + c.name, err: err}
			}
			return nil
		}
	}
	fmt.Fprintf(stderr, "rpcrdma nfs: unknown subcommand %q\n", args[0])
	return errUsage
}

// nfsFlags are the connection settings of the NFS client subcommands.
type nfsFlags struct {
	vers      string // "3" or "4.1"
	transport string
	nfsPort   int
	mountPort int
	rpcbind   int  // the portmapper's port; 0: not asked
	human     bool // probe -h
	export    string
	uid, gid  uint
	timeout   time.Duration
	tf        transportFlags
}

func (f *nfsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.vers, "vers", "3", "NFS version: 3 (with MOUNT), or 4.1 (a session; paths from the server's root)")
	fs.StringVar(&f.transport, "transport", "rdma", "how NFS travels: rdma (the software iWARP) or tcp; MOUNT always uses TCP (RFC 8267)")
	fs.IntVar(&f.nfsPort, "nfs-port", 0, "NFS port (default: over tcp what the server's portmapper says, else 2049; over rdma 20049, RFC 8267)")
	fs.IntVar(&f.mountPort, "mount-port", 0, "MOUNT port on TCP (default: what the server's portmapper says, as mount.nfs asks; else with --transport tcp the NFS port, else 2049, where rpcrdma nfs serve serves it)")
	fs.IntVar(&f.rpcbind, "rpcbind-port", rpc.PortmapPort, "the server's portmapper (rpcbind), asked for the ports not given (RFC 1833); 0: not asked")
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
	if f.vers != "3" && f.vers != "4.1" {
		return usagef("--vers %q: want 3 or 4.1", f.vers)
	}
	if f.transport != "rdma" && f.transport != "tcp" {
		return usagef("--transport %q: want rdma or tcp", f.transport)
	}
	return f.tf.check()
}

func (f *nfsFlags) addrs(host string) (nfsAddr, mountAddr string) {
	port := f.nfsPort
	if port == 0 {
		port = nfs.PortRDMA
		if f.transport == "tcp" {
			port = nfs.PortTCP
		}
	}
	mport := f.mountPort
	if mport == 0 {
		mport = nfs.PortTCP
		if f.transport == "tcp" {
			mport = port
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), net.JoinHostPort(host, strconv.Itoa(mport))
}

// askPorts fills in the ports not given from host's portmapper (RFC 1833
// GETPORT), as mount.nfs does: MOUNT version 3 over TCP, and with
// --transport tcp NFS too (NFS over RDMA has its own port, RFC 8267
// Section 6.1). A portmapper that does not answer within a few seconds,
// or knows nothing of the program, leaves the defaults.
func (f *nfsFlags) askPorts(ctx context.Context, host string) {
	if f.rpcbind == 0 || f.mountPort != 0 && (f.nfsPort != 0 || f.transport != "tcp") {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	pm := net.JoinHostPort(host, strconv.Itoa(f.rpcbind))
	if f.transport == "tcp" && f.nfsPort == 0 {
		vers := uint32(nfs3.Version)
		if f.vers != "3" {
			vers = nfs4.Version
		}
		if p, err := rpc.GetPort(ctx, pm, nfs3.Program, vers, rpc.IPProtoTCP); err == nil {
			f.nfsPort = p
		} else if ctx.Err() != nil {
			return
		}
	}
	if f.mountPort == 0 && f.vers == "3" {
		if p, err := rpc.GetPort(ctx, pm, mount.Program, mount.Version, rpc.IPProtoTCP); err == nil {
			f.mountPort = p
		}
	}
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
	if f.vers != "3" {
		// Receives for the NFSv4.1 backchannel (RFC 8167), which the
		// session then asks for: callbacks come on this connection.
		cfg.BackwardCredits = 4
	}
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

// remote is HOST:/path, HOST:PORT:/path or [V6ADDR]:PORT:/path split:
// the port, if given, is the NFS port, as mount.nfs's port= option.
type remote struct {
	host, path string
	port       int // 0: not given
}

// parseRemote splits s if it names a remote path; a local path (no
// colon before its first slash) is not one.
func parseRemote(s string) (remote, bool) {
	i := strings.Index(s, ":/")
	if i <= 0 || strings.Contains(s[:i], "/") {
		return remote{}, false
	}
	r := remote{host: s[:i], path: s[i+1:]}
	if strings.HasPrefix(r.host, "[") { // [v6] or [v6]:port
		end := strings.Index(r.host, "]")
		if end < 0 {
			return remote{}, false
		}
		rest := r.host[end+1:]
		r.host = r.host[1:end]
		if rest != "" {
			p, ok := parsePort(strings.TrimPrefix(rest, ":"))
			if !ok || rest[0] != ':' {
				return remote{}, false
			}
			r.port = p
		}
	} else if h, p, ok := strings.Cut(r.host, ":"); ok {
		port, ok := parsePort(p)
		if !ok || strings.Contains(p, ":") {
			return remote{}, false
		}
		r.host, r.port = h, port
	}
	return r, r.host != ""
}

func parsePort(s string) (int, bool) {
	p, err := strconv.Atoi(s)
	return p, err == nil && p > 0 && p < 1<<16
}

// mountRemote finds the export r.path lies in (the longest listed one
// that is a prefix), mounts it and returns the client and the path inside.
func (f *nfsFlags) mountRemote(ctx context.Context, r remote, conns *[]*rpcrdma.Conn) (*nfs.Client, string, error) {
	if r.port != 0 {
		f.nfsPort = r.port
	}
	f.askPorts(ctx, r.host)
	_, mountAddr := f.addrs(r.host)
	export := f.export
	if export == "" {
		var err error
		if export, err = nfs.FindExport(ctx, mountAddr, r.path); err != nil {
			return nil, "", f.mountHint(err, mountAddr)
		}
	} else if !nfs.InExport(r.path, export) {
		return nil, "", fmt.Errorf("%s is not in --export %s", r.path, export)
	}
	dial, err := f.dialer(r.host, conns)
	if err != nil {
		return nil, "", err
	}
	c, err := nfs.Mount(ctx, nfs.MountConfig{MountAddr: mountAddr, Export: export, Dial: dial, Cred: f.cred(),
		Reconnect: rpc.ReconnectConfig{Attempts: 3}})
	if err != nil {
		return nil, "", f.mountHint(err, mountAddr)
	}
	return c, strings.TrimPrefix(r.path, export), nil
}

// mountHint says what to do when nothing answers MOUNT at addr (err is a
// refused connection): where its port came from, and how to give it.
func (f *nfsFlags) mountHint(err error, addr string) error {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return err
	}
	if f.mountPort != 0 {
		return fmt.Errorf("no MOUNT service at %s (--mount-port): %w", addr, err)
	}
	return fmt.Errorf("no MOUNT service at %s, the default port (no portmapper told another): give its port with --mount-port (nfs serve prints it), or use --vers 4.1, which needs no MOUNT: %w", addr, err)
}

var errNotRemote = usagef("want HOST:/export/path, HOST:PORT:/export/path or [IPV6]:PORT:/export/path")
