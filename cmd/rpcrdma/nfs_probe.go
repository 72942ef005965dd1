package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

func nfsProbe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nfs probe", "nfs probe [flags] HOST", stderr)
	var f nfsFlags
	f.register(fs)
	if err := f.parse(fs, args, 1); err != nil {
		return err
	}
	host := fs.Arg(0)
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	nfsAddr, mountAddr := f.addrs(host)
	// Every step is printed, and the probe fails if any did: an export
	// that does not mount is as much a failure as a server that does not
	// answer.
	var failed []string
	timed := func(what string, fn func() (string, error)) error {
		start := time.Now()
		s, err := fn()
		d := time.Since(start)
		if err != nil {
			fmt.Fprintf(stdout, "%-24s %10s  error: %v\n", what, d.Round(time.Microsecond), err)
			failed = append(failed, strings.TrimSpace(what))
			return err
		}
		fmt.Fprintf(stdout, "%-24s %10s  %s\n", what, d.Round(time.Microsecond), s)
		return nil
	}
	result := func() error {
		if len(failed) == 0 {
			return nil
		}
		return fmt.Errorf("%d of the probe's steps failed: %s", len(failed), strings.Join(failed, ", "))
	}

	// MOUNT over TCP: NULL and EXPORT.
	var exports []mount.ExportNode
	timed("MOUNT NULL (tcp)", func() (string, error) {
		t, err := rpc.DialTCP(ctx, mountAddr, nil)
		if err != nil {
			return "", err
		}
		c := rpc.NewClient(t)
		defer c.Close()
		return mountAddr, c.Null(ctx, mount.Program, mount.Version)
	})
	timed("MOUNT EXPORT", func() (string, error) {
		var err error
		exports, err = nfs.Exports(ctx, mountAddr)
		s := ""
		for _, e := range exports {
			s += e.Dir + " "
		}
		return s, err
	})

	// NFS: NULL per version, and what the transport negotiated.
	var conns []*rpcrdma.Conn
	dial, err := f.dialer(host, &conns)
	if err != nil {
		return err
	}
	var rc *rpc.Client
	if err := timed("connect ("+f.transport+")", func() (string, error) {
		t, err := dial(ctx)
		if err != nil {
			return "", err
		}
		rc = rpc.NewClient(t)
		return nfsAddr, nil
	}); err != nil {
		return result()
	}
	defer rc.Close()
	// Versions 2 and 4 are asked after to learn what the server offers:
	// PROG_MISMATCH is an answer there. Version 3 is the one spoken here.
	for _, v := range []uint32{2, 3, 4} {
		timed(fmt.Sprintf("NFS NULL v%d", v), func() (string, error) {
			err := rc.Null(ctx, nfs3.Program, v)
			if ae, ok := errors.AsType[*rpc.AcceptError](err); ok && ae.Stat == rpc.ProgMismatch && v != nfs3.Version {
				return "not offered (" + offeredVersions(ae.Low, ae.High) + ")", nil
			}
			if err != nil {
				return "", err
			}
			return "ok", nil
		})
	}
	if len(conns) > 0 {
		in := conns[0].Info()
		fmt.Fprintf(stdout, "rpc-over-rdma: version %d, inline send %d receive %d, credits %d, remote invalidation %v, peer private data %v\n",
			in.Version, in.SendInline, in.RecvInline, in.Credits, in.RemoteInvalidation, in.PeerPrivateData)
	}

	// Each export, or only --export (for a server that does not list
	// them): MNT, FSINFO, PATHCONF, FSSTAT.
	if f.export != "" {
		exports = []mount.ExportNode{{Dir: f.export}}
	}
	cred, _ := f.cred().Cred()
	for _, e := range exports {
		var root nfs3.FileHandle
		if timed("MNT "+e.Dir, func() (string, error) {
			var err error
			root, err = nfs.MountRoot(ctx, mountAddr, e.Dir, cred)
			return fmt.Sprintf("handle %d bytes", len(root)), err
		}) != nil {
			continue
		}
		var c *nfs.Client
		if timed("  FSINFO", func() (string, error) {
			var err error
			c, err = nfs.NewClient(ctx, rc, root, cred)
			if err != nil {
				return "", err
			}
			in, err := c.FSInfo(ctx, root)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("rtmax %d rtpref %d wtmax %d wtpref %d dtpref %d maxfilesize %d", in.RTMax, in.RTPref, in.WTMax, in.WTPref, in.DTPref, in.MaxFileSize), nil
		}) != nil {
			continue
		}
		timed("  PATHCONF", func() (string, error) {
			p, err := c.PathConf(ctx, root)
			return fmt.Sprintf("name_max %d link_max %d no_trunc %v case_preserving %v", p.NameMax, p.LinkMax, p.NoTrunc, p.CasePreserving), err
		})
		timed("  FSSTAT", func() (string, error) {
			s, err := c.FSStat(ctx, root)
			return fmt.Sprintf("%d of %d bytes free, %d of %d files free", s.ABytes, s.TBytes, s.AFiles, s.TFiles), err
		})
	}
	return result()
}

// offeredVersions says which versions a PROG_MISMATCH reply says the
// server has: "the server has version 3", or "... versions 3 to 4".
func offeredVersions(low, high uint32) string {
	if low == high {
		return fmt.Sprintf("the server has version %d", low)
	}
	return fmt.Sprintf("the server has versions %d to %d", low, high)
}
