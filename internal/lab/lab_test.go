package lab

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// These tests check the lab's contract (lab/README.md) from the host; each
// skips unless the VM runs.

const (
	nfsProg       = 100003
	mountProg     = 100005
	mountProcExp  = 5 // MOUNTPROC3_EXPORT, RFC 1813 Section 5.2.5
	pmapProg      = 100000
	pmapGetPort   = 3 // PMAPPROC_GETPORT, RFC 1833 Section 3.2
	ipprotoTCP    = 6
	maxExportPath = 1024
)

// TestDevices checks that rdma-core in the guest lists both devices: its
// provider plug-ins are in the image and rxe0 and siw0 exist.
func TestDevices(t *testing.T) {
	Require(t)
	out, rc := Run(t, "ibv_devices", CmdTimeout)
	if rc != 0 {
		t.Fatalf("ibv_devices: exit status %d\n%s", rc, out)
	}
	for _, dev := range []string{"rxe0", "siw0"} {
		if !slices.ContainsFunc(strings.Fields(out), func(f string) bool { return f == dev }) {
			t.Errorf("ibv_devices does not list %s:\n%s", dev, out)
		}
	}
	out, rc = Run(t, "rdma link show", CmdTimeout)
	for _, want := range []string{"link rxe0/1 state ACTIVE", "netdev eth1", "link siw0/1 state ACTIVE", "netdev eth0"} {
		if rc != 0 || !strings.Contains(out, want) {
			t.Errorf("rdma link show (exit status %d) lacks %q:\n%s", rc, want, out)
		}
	}
}

func dialTCP(t *testing.T, addr string) *rpc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := rpc.DialTCP(ctx, addr, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	cli := rpc.NewClient(tr)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestNFSTCP checks that knfsd answers NULL over TCP at NFSTCPAddr in NFS
// versions 3 and 4.
func TestNFSTCP(t *testing.T) {
	Require(t)
	cli := dialTCP(t, NFSTCPAddr)
	ctx, cancel := context.WithTimeout(context.Background(), CmdTimeout)
	defer cancel()
	for _, vers := range []uint32{3, 4} {
		if err := cli.Null(ctx, nfsProg, vers); err != nil {
			t.Errorf("NFSv%d NULL at %s: %v", vers, NFSTCPAddr, err)
		}
	}
}

// TestMountd checks that rpc.mountd answers at MountdAddr: NULL, and
// EXPORT listing both of the guest's exports.
func TestMountd(t *testing.T) {
	Require(t)
	cli := dialTCP(t, MountdAddr)
	ctx, cancel := context.WithTimeout(context.Background(), CmdTimeout)
	defer cancel()
	if err := cli.Null(ctx, mountProg, 3); err != nil {
		t.Fatalf("MOUNT v3 NULL at %s: %v", MountdAddr, err)
	}
	rep, err := cli.Call(ctx, &rpc.Request{Prog: mountProg, Vers: 3, Proc: mountProcExp})
	if err != nil {
		t.Fatalf("MOUNT v3 EXPORT at %s: %v", MountdAddr, err)
	}
	// exports: a list of (ex_dir, ex_groups), ex_groups a list of names.
	var dirs []string
	d := rpc.NewBodyDecoder(rep.Results)
	for d.Optional() {
		dirs = append(dirs, d.Str(maxExportPath))
		for d.Optional() {
			d.Str(maxExportPath)
		}
	}
	if err := d.Done(); err != nil {
		t.Fatalf("EXPORT reply: %v", err)
	}
	for _, want := range []string{"/export", "/export-ro"} {
		if !slices.Contains(dirs, want) {
			t.Errorf("EXPORT lists %q, not %s", dirs, want)
		}
	}
}

// TestRPCBind checks that the guest's rpcbind answers at RPCBindAddr and
// maps MOUNT version 3 over TCP to mountd's fixed port, 20048.
func TestRPCBind(t *testing.T) {
	Require(t)
	cli := dialTCP(t, RPCBindAddr)
	ctx, cancel := context.WithTimeout(context.Background(), CmdTimeout)
	defer cancel()
	var args rpc.Body
	for _, v := range []uint32{mountProg, 3, ipprotoTCP, 0} {
		args.XDR = xdr.AppendUint32(args.XDR, v)
	}
	rep, err := cli.Call(ctx, &rpc.Request{Prog: pmapProg, Vers: 2, Proc: pmapGetPort, Args: args})
	if err != nil {
		t.Fatalf("PMAP GETPORT at %s: %v", RPCBindAddr, err)
	}
	d := rpc.NewBodyDecoder(rep.Results)
	port := d.Uint32()
	if err := d.Done(); err != nil || port != 20048 {
		t.Errorf("GETPORT(MOUNT v3, TCP) = %d (%v), want 20048", port, err)
	}
}

// TestRunTestBinary runs this package's TestGuestSide in the guest, built
// static and, with the verbs tag, as a cgo binary linked against the host's
// C library.
func TestRunTestBinary(t *testing.T) {
	for name, tags := range map[string][]string{"static": nil, "cgo": {"verbs"}} {
		t.Run(name, func(t *testing.T) {
			out := RunTestBinary(t, ".", tags, "-test.v", "-test.run", "^TestGuestSide$")
			if !strings.Contains(out, "--- PASS: TestGuestSide") {
				t.Errorf("TestGuestSide did not pass in the guest:\n%s", out)
			}
		})
	}
}

// TestGuestSide runs only in the guest (TestRunTestBinary puts it there): it
// sees both RDMA devices and the read-only export, it runs from /share, and
// /share is read-only.
func TestGuestSide(t *testing.T) {
	if !InGuest() {
		t.Skip("runs only in the lab guest (TestRunTestBinary)")
	}
	for _, dev := range []string{"rxe0", "siw0"} {
		if _, err := os.Stat("/sys/class/infiniband/" + dev); err != nil {
			t.Errorf("device %s: %v", dev, err)
		}
	}
	// /export/hello.txt is there too, but tests over NFS may write
	// files beside it.
	if b, err := os.ReadFile("/export-ro/readme.txt"); err != nil || string(b) != "read-only export of the lab guest\n" {
		t.Errorf("/export-ro/readme.txt: %q, %v", b, err)
	}
	exe, err := os.Executable()
	if err != nil || !strings.HasPrefix(exe, "/share/") {
		t.Errorf("the test binary is %q (%v), not in /share", exe, err)
	}
	if err := os.WriteFile("/share/x", nil, 0o644); err == nil {
		os.Remove("/share/x")
		t.Errorf("/share is writable in the guest")
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"-test.v":        "-test.v",
		"^TestX$":        `'^TestX$'`,
		"":               "''",
		"a b":            "'a b'",
		"it's":           `'it'\''s'`,
		"-test.run=A|B":  "'-test.run=A|B'",
		"/share/x,y:z.t": "/share/x,y:z.t",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestLock: a lab lock is exclusive while its test runs, also against
// another open of its file (as another process makes), and free after.
// It needs no VM.
func TestLock(t *testing.T) {
	t.Setenv("WORK", t.TempDir())
	t.Run("held", func(t *testing.T) {
		Lock(t, "peer")
		if unlock, err := lockFile("peer.lock", 50*time.Millisecond); err == nil {
			unlock()
			t.Error("the peer lock was taken twice")
		}
	})
	unlock, err := lockFile("peer.lock", 10*time.Second)
	if err != nil {
		t.Fatalf("the peer lock is still held after its test: %v", err)
	}
	unlock()
}

func TestLinesAfter(t *testing.T) {
	out := "[    1.500000] early\n[  347.817711] siw: crc error\nno stamp\n[ 348.000000] later\n"
	got := LinesAfter(out, 1.5)
	want := []string{"[  347.817711] siw: crc error", "[ 348.000000] later"}
	if !slices.Equal(got, want) {
		t.Errorf("LinesAfter(.., 1.5) = %q, want %q", got, want)
	}
	if got := LinesAfter(out, 348); len(got) != 0 {
		t.Errorf("LinesAfter(.., 348) = %q, want none", got)
	}
}
