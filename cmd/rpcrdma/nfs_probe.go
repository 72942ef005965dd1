package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs"
	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// nfsProbe runs the probe's steps in turn, each bounded by --timeout on
// its own, so that one a server leaves unanswered does not take the time
// of those after it; ctx's end (a signal) stops it after the step under
// way, whose call it cancels.
func nfsProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nfs probe", "nfs probe [flags] HOST", stderr)
	var f nfsFlags
	f.register(fs)
	fs.BoolVar(&f.human, "h", false, "sizes as df -h prints them: 3.8 GiB")
	jsonOut := fs.Bool("json", false, "print one JSON object: every step with its time, result or error, and what the transport and the session negotiated")
	if err := f.parse(fs, args, 1); err != nil {
		return err
	}
	host := fs.Arg(0)
	rep := probeReport{Host: host, Transport: f.transport, Version: f.vers}
	text, out := stdout, stdout
	if *jsonOut {
		text = io.Discard
		defer func() {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			enc.Encode(&rep)
		}()
	}
	stdout = text
	givenNFS, givenMount := f.nfsPort, f.mountPort
	f.askPorts(ctx, host)
	nfsAddr, mountAddr := f.addrs(host)
	if f.nfsPort != givenNFS || f.mountPort != givenMount {
		fmt.Fprintf(stdout, "%-24s %10s  MOUNT at %s, NFS at %s\n", "PORTMAPPER "+strconv.Itoa(f.rpcbind), "", mountAddr, nfsAddr)
	}
	steps := &probeSteps{ctx: ctx, timeout: f.timeout, w: stdout, rep: &rep}
	timed, result := steps.timed, steps.result

	v3 := f.vers == "3"
	// MOUNT over TCP: NULL and EXPORT.
	var exports []mount.ExportNode
	if v3 {
		f.probeMount(timed, mountAddr, &exports)
	}

	// NFS: NULL per version, and what the transport negotiated.
	var conns []*rpcrdma.Conn
	dial, err := f.dialer(host, &conns)
	if err != nil {
		return err
	}
	var rc *rpc.Client
	if err := timed("connect ("+f.transport+")", func(ctx context.Context) (string, error) {
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
	v4 := f.probeNulls(timed, rc)
	if len(conns) > 0 {
		in := conns[0].Info()
		rep.RPCRDMA = &probeRDMA{Version: int(in.Version), SendInline: in.SendInline, RecvInline: in.RecvInline, Credits: in.Credits,
			RemoteInvalidation: in.RemoteInvalidation, PeerPrivateData: in.PeerPrivateData}
		fmt.Fprintf(stdout, "rpc-over-rdma: version %d, inline send %d receive %d, credits %d, remote invalidation %v, peer private data %v\n",
			in.Version, in.SendInline, in.RecvInline, in.Credits, in.RemoteInvalidation, in.PeerPrivateData)
	}
	cred, _ := f.cred().Cred()
	if v4 {
		rep.Session = sessionOf(f.probe41(timed, rc, dial, cred, !v3))
	}
	if !v3 {
		return result()
	}
	f.probeExports(timed, rc, mountAddr, exports, cred)
	return result()
}

// probeSteps runs the probe's steps, printing each timed, and keeps them
// for --json. Every step is printed, and the probe fails if any did: an
// export that does not mount is as much a failure as a server that does
// not answer.
type probeSteps struct {
	ctx     context.Context // the command's: a signal ends it
	timeout time.Duration   // --timeout, for each step
	w       io.Writer
	rep     *probeReport
	failed  []string
}

// timed runs one step, with a context that --timeout bounds, and returns
// its error; once the command's context has ended it runs none.
func (p *probeSteps) timed(what string, fn func(ctx context.Context) (string, error)) error {
	if err := p.ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	defer cancel()
	start := time.Now()
	s, err := fn(ctx)
	d := time.Since(start)
	step := probeStep{Step: strings.TrimSpace(what), Micros: d.Microseconds(), Result: s}
	defer func() { p.rep.Steps = append(p.rep.Steps, step) }()
	if err != nil {
		fmt.Fprintf(p.w, "%-24s %10s  error: %v\n", what, d.Round(time.Microsecond), err)
		p.failed = append(p.failed, step.Step)
		step.Error = err.Error()
		return err
	}
	fmt.Fprintf(p.w, "%-24s %10s  %s\n", what, d.Round(time.Microsecond), s)
	return nil
}

// result is the probe's outcome: the command context's cause if a signal
// stopped it, else an error naming the steps that failed.
func (p *probeSteps) result() error {
	if p.ctx.Err() != nil {
		return context.Cause(p.ctx)
	}
	if len(p.failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of the probe's steps failed: %s", len(p.failed), strings.Join(p.failed, ", "))
}

// probeNulls calls NULL of NFS versions 2, 3 and 4 and reports whether
// version 4 answered. Versions 2 and 4 (3, with --vers 4.1) are asked to
// learn what the server offers: PROG_MISMATCH is an answer there. The
// version asked for (--vers) must answer.
func (f *nfsFlags) probeNulls(timed probeTimer, rc *rpc.Client) bool {
	v3, v4 := f.vers == "3", false
	for _, v := range []uint32{2, 3, 4} {
		timed(fmt.Sprintf("NFS NULL v%d", v), func(ctx context.Context) (string, error) {
			err := rc.Null(ctx, nfs3.Program, v)
			if ae, ok := errors.AsType[*rpc.AcceptError](err); ok && ae.Stat == rpc.ProgMismatch && (v == 2 || v == 3 && !v3 || v == 4 && v3) {
				return "not offered (" + offeredVersions(ae.Low, ae.High) + ")", nil
			}
			if err != nil {
				return "", err
			}
			v4 = v4 || v == 4
			return "ok", nil
		})
	}
	return v4
}

// probeTimer runs one step of the probe, prints it timed, and returns
// its error; fn's context bounds the step.
type probeTimer func(what string, fn func(ctx context.Context) (string, error)) error

// probeMount asks MOUNT for NULL and EXPORT.
func (f *nfsFlags) probeMount(timed probeTimer, mountAddr string, exports *[]mount.ExportNode) {
	timed("MOUNT NULL (tcp)", func(ctx context.Context) (string, error) {
		t, err := rpc.DialTCP(ctx, mountAddr, nil)
		if err != nil {
			return "", err
		}
		c := rpc.NewClient(t)
		defer c.Close()
		return mountAddr, c.Null(ctx, mount.Program, mount.Version)
	})
	timed("MOUNT EXPORT", func(ctx context.Context) (string, error) {
		var err error
		*exports, err = nfs.Exports(ctx, mountAddr)
		s := ""
		for _, e := range *exports {
			s += e.Dir + " "
		}
		return s, err
	})
}

// probeExports mounts each export, or only --export (for a server that
// does not list them), and asks FSINFO, PATHCONF and FSSTAT.
func (f *nfsFlags) probeExports(timed probeTimer, rc *rpc.Client, mountAddr string, exports []mount.ExportNode, cred rpc.OpaqueAuth) {
	if f.export != "" {
		exports = []mount.ExportNode{{Dir: f.export}}
	}
	for _, e := range exports {
		var root nfs3.FileHandle
		if timed("MNT "+e.Dir, func(ctx context.Context) (string, error) {
			var err error
			root, err = nfs.MountRoot(ctx, mountAddr, e.Dir, cred)
			return fmt.Sprintf("handle %d bytes", len(root)), err
		}) != nil {
			continue
		}
		var c *nfs.Client
		if timed("  FSINFO", func(ctx context.Context) (string, error) {
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
		timed("  PATHCONF", func(ctx context.Context) (string, error) {
			p, err := c.PathConf(ctx, root)
			return fmt.Sprintf("name_max %d link_max %d no_trunc %v case_preserving %v", p.NameMax, p.LinkMax, p.NoTrunc, p.CasePreserving), err
		})
		timed("  FSSTAT", func(ctx context.Context) (string, error) {
			s, err := c.FSStat(ctx, root)
			if f.human {
				return fmt.Sprintf("%s of %s free, %d of %d files free", nfs.Bytes(s.ABytes), nfs.Bytes(s.TBytes), s.AFiles, s.TFiles), err
			}
			return fmt.Sprintf("%d of %d bytes free, %d of %d files free", s.ABytes, s.TBytes, s.AFiles, s.TFiles), err
		})
	}
}

// probe41 asks which NFSv4 minor versions the server speaks and, if 4.1
// is one, sets up a session and prints what it negotiated; with must, a
// failure is the probe's.
func (f *nfsFlags) probe41(timed probeTimer, rc *rpc.Client, dial nfs.Dialer, cred rpc.OpaqueAuth, must bool) *nfs.Info4 {
	has41 := false
	for minor := range uint32(3) {
		timed(fmt.Sprintf("NFSv4.%d", minor), func(ctx context.Context) (string, error) {
			ok, err := nfs.MinorVersionOffered(ctx, rc, minor, cred)
			if !ok || err != nil {
				return "not offered", err
			}
			has41 = has41 || minor == 1
			return "offered", nil
		})
	}
	if !has41 && !must {
		return nil
	}
	var info *nfs.Info4
	timed("SESSION v4.1", func(ctx context.Context) (string, error) {
		c, err := nfs.Mount4(ctx, nfs.Config4{Dial: dial, Cred: f.cred(), Reconnect: rpc.ReconnectConfig{Attempts: 3}})
		if err != nil {
			return "", err
		}
		defer c.Close()
		in := c.Info()
		info = &in
		rdmaIRD := "none"
		if in.Fore.HasRDMAIRD {
			rdmaIRD = fmt.Sprint(in.Fore.RDMAIRD)
		}
		back := "not asked for"
		if in.Backchannel {
			back = "granted"
		}
		impl := in.Implementation
		if impl == "" {
			impl = "(none sent)"
		}
		return fmt.Sprintf("client ID %#x, %d slots, requests up to %d bytes, replies up to %d (%d cached), %d operations\n"+
			"  %-22s server owner %q, scope %q, implementation %s\n"+
			"  %-22s lease %v, backchannel %s, RDMA IRD %s, max read %d, write %d",
			in.ClientID, in.Slots, in.Fore.MaxRequestSize, in.Fore.MaxResponseSize, in.Fore.MaxResponseSizeCached, in.Fore.MaxOperations,
			"", in.ServerOwner, in.ServerScope, impl, "", in.Lease, back, rdmaIRD, in.MaxRead, in.MaxWrite), nil
	})
	return info
}

// probeReport is probe --json's output; the keys are a stable interface.
type probeReport struct {
	Host      string        `json:"host"`
	Transport string        `json:"transport"`
	Version   string        `json:"nfs_version"`
	Steps     []probeStep   `json:"steps"`
	RPCRDMA   *probeRDMA    `json:"rpcrdma,omitempty"`
	Session   *probeSession `json:"session41,omitempty"`
}

// probeSession is what an NFSv4.1 session negotiated.
type probeSession struct {
	ClientID        string  `json:"client_id"`
	Slots           int     `json:"slots"`
	MaxRequestSize  uint32  `json:"max_request_size"`
	MaxResponseSize uint32  `json:"max_response_size"`
	MaxCached       uint32  `json:"max_response_size_cached"`
	MaxOperations   uint32  `json:"max_operations"`
	BackSlots       uint32  `json:"back_channel_slots"`
	Backchannel     bool    `json:"backchannel"`
	LeaseSeconds    int     `json:"lease_seconds"`
	ServerOwner     string  `json:"server_owner"`
	ServerScope     string  `json:"server_scope"`
	Implementation  string  `json:"implementation,omitempty"`
	RDMAIRD         *uint32 `json:"rdma_ird,omitempty"`
	MaxRead         int     `json:"max_read"`
	MaxWrite        int     `json:"max_write"`
}

func sessionOf(in *nfs.Info4) *probeSession {
	if in == nil {
		return nil
	}
	ps := &probeSession{ClientID: fmt.Sprintf("%#x", in.ClientID), Slots: in.Slots, MaxRequestSize: in.Fore.MaxRequestSize,
		MaxResponseSize: in.Fore.MaxResponseSize, MaxCached: in.Fore.MaxResponseSizeCached, MaxOperations: in.Fore.MaxOperations,
		BackSlots: in.Back.MaxRequests, Backchannel: in.Backchannel, LeaseSeconds: int(in.Lease.Seconds()),
		ServerOwner: in.ServerOwner, ServerScope: in.ServerScope, Implementation: in.Implementation, MaxRead: in.MaxRead, MaxWrite: in.MaxWrite}
	if in.Fore.HasRDMAIRD {
		ird := in.Fore.RDMAIRD
		ps.RDMAIRD = &ird
	}
	return ps
}

type probeStep struct {
	Step   string `json:"step"`
	Micros int64  `json:"micros"`
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// probeRDMA is what the RPC-over-RDMA connection negotiated.
type probeRDMA struct {
	Version            int    `json:"version"`
	SendInline         int    `json:"inline_send"`
	RecvInline         int    `json:"inline_recv"`
	Credits            uint32 `json:"credits"`
	RemoteInvalidation bool   `json:"remote_invalidation"`
	PeerPrivateData    bool   `json:"peer_private_data"`
}

// offeredVersions says which versions a PROG_MISMATCH reply says the
// server has: "the server has version 3", or "... versions 3 to 4".
func offeredVersions(low, high uint32) string {
	if low == high {
		return fmt.Sprintf("the server has version %d", low)
	}
	return fmt.Sprintf("the server has versions %d to %d", low, high)
}
