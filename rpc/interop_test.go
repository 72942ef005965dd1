package rpc

// Interoperability with an independent ONC RPC implementation: Debian's
// rpcbind and rpcinfo, built on libtirpc. The tests skip when the tools are
// not installed (package rpcbind).

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The rpcbind protocol (RFC 1833).
const (
	pmapProg        = 100000
	pmapProcSet     = 1 // version 2: mapping -> bool
	pmapProcUnset   = 2 // version 2: mapping -> bool
	pmapProcGetPort = 3 // version 2: mapping -> port
	pmapProcDump    = 4 // version 2: void -> pmaplist
	rpcbProcGetAddr = 3 // versions 3 and 4: rpcb -> string (universal address)
	ipprotoTCP      = 6
)

// lookTool finds an administration tool, which may live in /usr/sbin
// outside a user's PATH.
func lookTool(t *testing.T, name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p, err := exec.LookPath("/usr/sbin/" + name); err == nil {
		return p
	}
	t.Skipf("%s not installed (Debian package rpcbind); skipping interop with libtirpc", name)
	return ""
}

// startRpcbind makes sure rpcbind answers on 127.0.0.1:111 and returns that
// address. An rpcbind already listening (port 111 is system-wide) is used
// as is; otherwise one is started in the foreground (-f) and stopped with
// SIGTERM at cleanup (SIGKILL if it lingers).
func startRpcbind(t *testing.T) string {
	const addr = "127.0.0.1:111"
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Log("using the rpcbind already listening on " + addr)
		return addr
	}
	path := lookTool(t, "rpcbind")
	var stderr bytes.Buffer
	cmd := exec.Command(path, "-f")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start rpcbind: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Skipf("rpcbind exited (%v; it needs root to bind port 111): %s", err, stderr.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("rpcbind does not listen on %s after 5s: %s", addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInteropRpcbind calls libtirpc's rpcbind with our Client.
func TestInteropRpcbind(t *testing.T) {
	addr := startRpcbind(t)
	leaktest.Check(t)
	ctx := ctxTimeout(t, 10*time.Second)
	tr, err := DialTCP(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(tr)
	defer cli.Close()

	for vers := uint32(2); vers <= 4; vers++ {
		if err := cli.Null(ctx, pmapProg, vers); err != nil {
			t.Errorf("NULL version %d: %v", vers, err)
		}
	}

	// DUMP: rpcbind registers itself, version 2 over TCP on port 111.
	rep, err := cli.Call(ctx, &Request{Prog: pmapProg, Vers: 2, Proc: pmapProcDump})
	if err != nil {
		t.Fatal(err)
	}
	type mapping struct{ prog, vers, prot, port uint32 }
	var maps []mapping
	d := NewBodyDecoder(rep.Results)
	for d.Optional() { // pmaplist: a linked list of optional mappings
		maps = append(maps, mapping{d.Uint32(), d.Uint32(), d.Uint32(), d.Uint32()})
	}
	if err := d.Done(); err != nil {
		t.Fatalf("pmaplist: %v", err)
	}
	found := false
	for _, m := range maps {
		found = found || m == mapping{pmapProg, 2, ipprotoTCP, 111}
	}
	if !found {
		t.Errorf("DUMP lacks rpcbind's own TCP mapping: %v", maps)
	}

	// GETPORT (version 2) and GETADDR (versions 3 and 4) for rpcbind itself.
	if port, err := GetPort(ctx, addr, pmapProg, 2, IPProtoTCP); port != 111 || err != nil {
		t.Errorf("GETPORT = %d (%v)", port, err)
	}
	if port, err := GetPort(ctx, addr, 0x3fffffff, 1, IPProtoTCP); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("GETPORT of a program nobody registered = %d (%v)", port, err)
	}
	for vers := uint32(3); vers <= 4; vers++ {
		var args Body
		args.XDR = xdr.AppendUint32(args.XDR, pmapProg) // r_prog
		args.XDR = xdr.AppendUint32(args.XDR, vers)     // r_vers
		args.XDR = xdr.AppendString(args.XDR, "tcp")    // r_netid
		args.XDR = xdr.AppendString(args.XDR, "")       // r_addr
		args.XDR = xdr.AppendString(args.XDR, "")       // r_owner
		rep, err := cli.Call(ctx, &Request{Prog: pmapProg, Vers: vers, Proc: rpcbProcGetAddr, Args: args})
		if err != nil {
			t.Fatal(err)
		}
		d.Reset(rep.Results)
		uaddr := d.Str(1024)
		if err := d.Done(); err != nil || uaddrPort(uaddr) != 111 {
			t.Errorf("GETADDR version %d = %q (%v)", vers, uaddr, err)
		}
	}

	// libtirpc decodes our AUTH_SYS credential, and refuses a malformed one.
	cred, err := authSysParms.Cred()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Call(ctx, &Request{Prog: pmapProg, Vers: 2, Cred: cred}); err != nil {
		t.Errorf("NULL with AUTH_SYS: %v", err)
	}
	bad := OpaqueAuth{Flavor: AuthSys, Body: []byte{0, 0, 0, 1, 0, 0, 1, 0}}
	if _, err := cli.Call(ctx, &Request{Prog: pmapProg, Vers: 2, Cred: bad}); !errors.Is(err, AuthBadCred) {
		t.Errorf("NULL with a malformed AUTH_SYS: %v, want AUTH_BADCRED", err)
	}

	// Status answers from libtirpc.
	_, err = cli.Call(ctx, &Request{Prog: pmapProg, Vers: 9})
	if ae, ok := errors.AsType[*AcceptError](err); !ok || ae.Stat != ProgMismatch || ae.Low != 2 || ae.High != 4 {
		t.Errorf("version 9: %v, want PROG_MISMATCH 2 to 4", err)
	}
	if _, err := cli.Call(ctx, &Request{Prog: pmapProg, Vers: 2, Proc: 99}); !errors.Is(err, &AcceptError{Stat: ProcUnavail}) {
		t.Errorf("procedure 99: %v, want PROC_UNAVAIL", err)
	}
	if _, err := cli.Call(ctx, &Request{Prog: pmapProg, Vers: 2, Proc: pmapProcGetPort}); !errors.Is(err, ErrGarbageArgs) {
		t.Errorf("GETPORT without arguments: %v, want GARBAGE_ARGS", err)
	}
	if _, err := cli.Call(ctx, &Request{Prog: 100001, Vers: 1}); !errors.Is(err, &AcceptError{Stat: ProgUnavail}) {
		t.Errorf("program 100001: %v, want PROG_UNAVAIL", err)
	}
}

// uaddrPort returns the port of a universal address "h1.h2.h3.h4.p1.p2"
// (RFC 5665 section 5.2.3.4), or -1.
func uaddrPort(uaddr string) int {
	parts := strings.Split(uaddr, ".")
	if len(parts) < 3 {
		return -1
	}
	hi, err1 := strconv.Atoi(parts[len(parts)-2])
	lo, err2 := strconv.Atoi(parts[len(parts)-1])
	if err1 != nil || err2 != nil {
		return -1
	}
	return hi<<8 | lo
}

// pmapChange calls PMAPPROC_SET or PMAPPROC_UNSET (RFC 1833 section 3.1)
// for prog and vers over TCP, and returns rpcbind's answer.
func pmapChange(ctx context.Context, t *testing.T, cli *Client, proc, prog, vers uint32, port int) bool {
	var args Body
	for _, v := range []uint32{prog, vers, ipprotoTCP, uint32(port)} {
		args.XDR = xdr.AppendUint32(args.XDR, v)
	}
	rep, err := cli.Call(ctx, &Request{Prog: pmapProg, Vers: 2, Proc: proc, Args: args})
	if err != nil {
		t.Fatalf("PMAPPROC %d: %v", proc, err)
	}
	d := NewBodyDecoder(rep.Results)
	ok := d.Bool()
	if err := d.Done(); err != nil {
		t.Fatalf("PMAPPROC %d result: %v", proc, err)
	}
	return ok
}

// TestInteropRpcinfo has libtirpc's rpcinfo probe our Server. rpcinfo asks
// rpcbind for the program's address even when given a port (-n), so the test
// registers the program with rpcbind through our Client first.
func TestInteropRpcinfo(t *testing.T) {
	rpcinfo := lookTool(t, "rpcinfo")
	rpcbind := startRpcbind(t)
	leaktest.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := newTestServer(nil)
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(l) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != ErrServerClosed {
			t.Errorf("ServeListener: %v", err)
		}
	}()

	ctx := ctxTimeout(t, 10*time.Second)
	tr, err := DialTCP(ctx, rpcbind, nil)
	if err != nil {
		t.Fatal(err)
	}
	pmap := NewClient(tr)
	defer pmap.Close()
	for vers := uint32(1); vers <= 2; vers++ {
		pmapChange(ctx, t, pmap, pmapProcUnset, testProg, vers, 0) // a stale registration
		if !pmapChange(ctx, t, pmap, pmapProcSet, testProg, vers, l.Addr().(*net.TCPAddr).Port) {
			t.Fatalf("rpcbind refused to register version %d", vers)
		}
		defer pmapChange(ctx, t, pmap, pmapProcUnset, testProg, vers, 0)
	}

	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	prog := strconv.Itoa(testProg)

	run := func(args ...string) (stdout, stderr string, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var o, e bytes.Buffer
		cmd := exec.CommandContext(ctx, rpcinfo, append([]string{"-n", port, "-t", "127.0.0.1", prog}, args...)...)
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}

	out, errOut, err := run("1")
	if err != nil || !strings.Contains(out, "program "+prog+" version 1 ready and waiting") {
		t.Errorf("rpcinfo version 1: %v\n%s%s", err, out, errOut)
	}
	// Without a version, rpcinfo learns the range from PROG_MISMATCH and
	// probes each version.
	out, errOut, err = run()
	if err != nil || !strings.Contains(out, "version 1 ready and waiting") || !strings.Contains(out, "version 2 ready and waiting") {
		t.Errorf("rpcinfo all versions: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run("3")
	if err == nil || !strings.Contains(out, "program "+prog+" version 3 is not available") ||
		!strings.Contains(errOut, "Program/version mismatch; low version = 1, high version = 2") {
		t.Errorf("rpcinfo version 3: %v\n%s%s", err, out, errOut)
	}
	if s := srv.Stats(); s.ProgMismatch < 2 || s.Calls < 3 {
		t.Errorf("server stats %+v", s)
	}
}
