// Command gonfs compares `rpcrdma nfs bench` against three NFSv3 servers
// serving the same tmpfs directory: `rpcrdma nfs serve` over RPC-over-RDMA
// (the software iWARP on loopback) and over TCP, and willscott/go-nfs (the
// most used Go NFS server; TCP only) with its go-billy osfs backend. In the
// same run it measures `rpcrdma bench`'s plain 1 MiB READ and WRITE, the
// RPC-over-RDMA transport without NFS, for the cost of the NFS layer: with
// its in-process server, and with --connect against `rpcrdma serve` in
// another process, as the NFS server is. To split the NFS layer's cost
// from the filesystem's, it also runs against this repository's NFS
// server with READ and WRITE leaving the file's data alone (`gonfs
// serve-nodata`, noDataFS): everything else a READ or WRITE does is the
// real server's. It is a module of its own so that the library does not
// depend on go-nfs:
//
//	cd bench/gonfs && go run . compare [-rounds 5] [-duration 1s] [-crc=false] [-dir /dev/shm/rpcrdma-nfs-compare]
//	cd bench/gonfs && go run . serve [-addr 127.0.0.1:2050] DIR
//	cd bench/gonfs && go run . serve-nodata [-tcp 127.0.0.1:2051] [-rdma 127.0.0.1:20051] DIR
//
// compare builds ../../cmd/rpcrdma, starts `rpcrdma nfs serve DIR`,
// `gonfs serve DIR`, `gonfs serve-nodata DIR` and `rpcrdma serve` as child
// processes, and then runs,
// per round, the plain benches and every case against every server, one
// after the other (the servers' order rotating), so that the servers are
// measured over the same stretch of time and under the same load from the
// rest of the machine. Each figure is the median of its rounds with the
// range; each ratio is taken within a round and reported the same way.
//
// The cases: 1 MiB sequential WRITE and READ with 4 calls in flight on one
// connection (as `rpcrdma bench`'s 1 MiB cases with 4 outstanding), and
// 4 KiB random READ with 32 in flight, all with MPA CRC32c on over RDMA
// unless -crc=false.
//
// go-nfs's quirks, as of v0.0.4: MOUNT is served on the NFS port and has
// NULL, MNT and UMNT only; it answers EXPORT with accept_stat 2
// (PROG_MISMATCH, without the version range RFC 5531 Section 9 requires)
// where PROC_UNAVAIL (3) is meant, which the client reports as a malformed
// reply, so the client is given the export (`--export /`; any path mounts
// the directory served). It answers NULL for any NFS version, accepts any
// credential, runs one call at a time per connection whatever the
// client's queue depth, opens and stats the file for every READ and
// WRITE, and its file handles are random keys into an in-memory cache
// (helpers.NewCachingHandler, here 1024 entries) that a restart forgets.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/go-git/go-billy/v5/osfs"
	nfs "github.com/willscott/go-nfs"
	nfshelper "github.com/willscott/go-nfs/helpers"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "compare":
		err = compare(os.Args[2:])
	case "serve-nodata":
		err = serveNoData(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gonfs:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gonfs compare [flags]\n       gonfs serve [-addr HOST:PORT] DIR\n       gonfs serve-nodata [-tcp HOST:PORT] [-rdma HOST:PORT] DIR")
	os.Exit(2)
}

// serve serves DIR with go-nfs over TCP, NFS and MOUNT on one port, as
// go-nfs's own example/osnfs does.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2050", "TCP address for NFS and MOUNT")
	handles := fs.Int("handles", 1024, "file handles go-nfs's caching handler keeps")
	fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "go-nfs serving %s on %s\n", fs.Arg(0), l.Addr())
	h := nfshelper.NewCachingHandler(nfshelper.NewNullAuthHandler(changeOSFS{osfs.New(fs.Arg(0))}), *handles)
	return nfs.Serve(l, h)
}
