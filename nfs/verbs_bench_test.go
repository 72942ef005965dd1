//go:build linux && cgo && verbs

package nfs_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/internal/roundtrip"
	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
)

// An NFSv3 GETATTR round trip to Linux's knfsd, made by this package's
// client over the verbs provider (BenchmarkVerbsGetattr) and by Linux's
// own NFS/RDMA client (BenchmarkKernelGetattr), so the two can be
// compared with each other and with perftest's ib_send_lat in one guest
// run (lab/bench-getattr.sh). Both report the median round trip
// (p50-ns/op) beside the mean (ns/op).

// warmup is the calls each benchmark makes before it measures.
const warmup = 50

// BenchmarkVerbsGetattr asks GETATTR of the export's root, one call at a
// time, of the knfsd at RPCRDMA_VERBS_ADDR (MOUNT on TCP port 20048, NFS
// over RDMA on 20049; export RPCRDMA_NFS_EXPORT, default /export) through
// RPCRDMA_VERBS_DEVICE; in the lab guest, its own knfsd over rxe0.
func BenchmarkVerbsGetattr(b *testing.B) {
	ip, device := lab.VerbsTarget(b, "the address of an NFS/RDMA server on an RDMA device (lab/bench-getattr.sh runs this in the lab guest)")
	export := os.Getenv("RPCRDMA_NFS_EXPORT")
	if export == "" {
		export = "/export"
	}
	p, err := verbs.New(verbs.Options{Device: device})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, err := nfs.Mount(ctx, nfs.MountConfig{
		MountAddr: net.JoinHostPort(ip, "20048"),
		Export:    export,
		Dial:      nfs.RDMA(p, net.JoinHostPort(ip, "20049"), nil),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	root := c.Root()
	roundtrip.Measure(b, warmup, func() error {
		_, err := c.Getattr(ctx, root)
		return err
	})
}

// BenchmarkKernelGetattr calls stat(2) on RPCRDMA_KERNEL_NFS_PATH, the
// root of a kernel NFS mount with noac, where each stat is one GETATTR:
// it reports the mount's GETATTR count in /proc/self/mountstats per stat
// (getattrs/op), which must be 1 for the round trip to be a GETATTR's.
func BenchmarkKernelGetattr(b *testing.B) {
	path := os.Getenv("RPCRDMA_KERNEL_NFS_PATH")
	if path == "" {
		b.Skip("set RPCRDMA_KERNEL_NFS_PATH to the root of a kernel NFS mount with noac (lab/bench-getattr.sh does)")
	}
	before := mountGetattrs(b, path)
	roundtrip.Measure(b, warmup, func() error {
		_, err := os.Stat(path)
		return err
	})
	b.ReportMetric(float64(mountGetattrs(b, path)-before)/float64(warmup+b.N), "getattrs/op")
}

// mountGetattrs returns the GETATTR calls the kernel's NFS client has made
// on the mount at path, from /proc/self/mountstats.
func mountGetattrs(b *testing.B, path string) uint64 {
	data, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		b.Fatal(err)
	}
	in := false
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "device" {
			in = len(f) > 4 && f[3] == "on" && f[4] == path
			continue
		}
		if in && len(f) > 1 && f[0] == "GETATTR:" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				b.Fatalf("mountstats: %q: %v", line, err)
			}
			return n
		}
	}
	b.Fatalf("no GETATTR count for %s in /proc/self/mountstats", path)
	return 0
}
