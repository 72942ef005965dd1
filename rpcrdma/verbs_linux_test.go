//go:build linux && cgo && verbs

package rpcrdma_test

import (
	"bytes"
	"context"
	"flag"
	"github.com/go-rpcrdma/rpcrdma/internal/benchprog"
	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// TestVerbsLinuxNFS: our requester over the verbs provider against knfsd,
// on the device RPCRDMA_VERBS_DEVICE (optional) at RPCRDMA_VERBS_NFS, or in
// the lab guest (TestVerbsGuest runs it there) on rxe0 and on siw0. Elsewhere
// it skips. NULL,
// GETATTR of a file with 64 calls in flight, a 1 MiB WRITE through a read
// chunk, a 1 MiB READ into a write chunk with the data checked, and
// READDIRPLUS through a reply chunk, then NULL calls one at a time, most
// of them on the short path. knfsd must not invalidate remotely:
// the verbs provider's regions cannot take it.
func TestVerbsLinuxNFS(t *testing.T) {
	type target struct{ addr, device string }
	var targets []target
	switch {
	case os.Getenv("RPCRDMA_VERBS_NFS") != "":
		targets = []target{{os.Getenv("RPCRDMA_VERBS_NFS"), os.Getenv("RPCRDMA_VERBS_DEVICE")}}
	case lab.InGuest():
		targets = []target{{lab.GuestRxeIP + ":20049", "rxe0"}, {lab.GuestSiwIP + ":20049", "siw0"}}
	default:
		t.Skip("RPCRDMA_VERBS_NFS is not set: no knfsd over an RDMA device")
	}
	for _, tg := range targets {
		t.Run(tg.device, func(t *testing.T) { verbsKnfsd(t, tg.addr, tg.device) })
	}
}

func verbsKnfsd(t *testing.T, addr, device string) {
	p, err := verbs.New(verbs.Options{Device: device})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := rpcrdma.Dial(ctx, p, addr, nil)
	if err != nil {
		t.Fatalf("connecting to knfsd at %s: %v", addr, err)
	}
	cli := rpc.NewClient(conn)
	defer func() {
		cli.Close()
		conn.Close()
		if r := p.Resources(); r != (verbs.Resources{}) {
			t.Errorf("resources left after Close: %+v", r)
		}
	}()
	if err := cli.Null(ctx, nfsProg, 3); err != nil {
		t.Fatal(err)
	}
	in := conn.Info()
	if in.Version != 1 || !in.PeerPrivateData || in.RemoteInvalidation || in.Credits < 1 {
		t.Fatalf("negotiated %+v", in)
	}
	dev := conn.RDMA().(*verbs.Conn).Device()
	if device != "" && dev != device {
		t.Fatalf("connection on device %s, want %s", dev, device)
	}
	t.Logf("connected on %s %v: %+v", dev, conn.RDMA().LocalAddr(), in)
	root := rootFH(t, cli)
	fh := lookup(t, cli, root, exportFile(t))

	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*13) + 5
	}
	if err := knfsdDataPaths(t, cli, root, fh, data); err != nil {
		t.Fatal(err)
	}
	// One call at a time, the caller processes the completion queue
	// itself (the short path), sleeping on the device's completion
	// channel: most such calls must take it.
	before := cli.Stats().ShortPath
	const calls = 20
	for range calls {
		if err := cli.Null(ctx, nfsProg, 3); err != nil {
			t.Fatal(err)
		}
	}
	if n := cli.Stats().ShortPath - before; n < calls/2 {
		t.Errorf("%d of %d NULL calls made one at a time took the short path", n, calls)
	}
	s := conn.Stats()
	if s.ReadChunks == 0 || s.ReplyChunks == 0 {
		t.Errorf("stats %+v: want the WRITE in a read chunk and READDIRPLUS in a reply chunk", s)
	}
	if s.RemoteInvalid != 0 {
		t.Errorf("knfsd invalidated %d STags remotely though our private data did not allow it", s.RemoteInvalid)
	}
	if s.ErrorsReceived != [4]uint64{} {
		t.Errorf("RDMA_ERRORs received: %v", s.ErrorsReceived)
	}
}

// TestVerbsGuestClientMount: in the lab guest, the kernel's NFS client
// (xprtrdma) mounts from our responder over the verbs provider on rxe0
// (RoCE v2) and on siw0. The responder serves NFSv4 NULL and answers every
// COMPOUND with NFS4ERR_SERVERFAULT, so the mount fails; what is checked is
// the exchange: the connection accepted, the client's RFC 8797 private data
// recognised (zero-padded to 56 bytes on RoCE), and calls answered.
func TestVerbsGuestClientMount(t *testing.T) {
	if !lab.InGuest() {
		t.Skip("runs in the lab guest (TestVerbsGuest), which has an NFS client and RDMA devices")
	}
	for _, tg := range []struct{ ip, device string }{{lab.GuestRxeIP, "rxe0"}, {lab.GuestSiwIP, "siw0"}} {
		t.Run(tg.device, func(t *testing.T) {
			p, err := verbs.New(verbs.Options{Device: tg.device})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			// Not 20049: knfsd listens there on every device.
			var ac acceptedConns
			l, err := rpcrdma.Listen(ctx, p, tg.ip+":20050", &rpcrdma.Config{ConnState: ac.state})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			srv := rpc.NewServer(nil)
			var compounds atomic.Int32
			srv.Handle(nfsProg, 4, nfs4Compound, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
				compounds.Add(1)
				d := c.Decoder()
				tag := d.Opaque(1024)
				d.Uint32() // minorversion
				if n := d.Uint32(); d.Err() != nil || n == 0 {
					return rpc.Body{}, rpc.ErrGarbageArgs
				}
				op := d.Uint32()
				var res rpc.Body
				res.XDR = xdr.AppendUint32(res.XDR, 10006) // NFS4ERR_SERVERFAULT
				res.XDR = xdr.AppendOpaque(res.XDR, tag)
				res.XDR = xdr.AppendUint32(res.XDR, 1)
				res.XDR = xdr.AppendUint32(res.XDR, op)
				res.XDR = xdr.AppendUint32(res.XDR, 10006)
				return res, nil
			})
			accepted, wait := serveEach(ctx, l, srv, &ac)
			os.MkdirAll("/mnt/verbs", 0o755)
			mount := exec.CommandContext(ctx, "timeout", "30", "mount", "-t", "nfs4", "-o", "vers=4.0,proto=rdma,port=20050", tg.ip+":/", "/mnt/verbs")
			out, err := mount.CombinedOutput()
			t.Logf("mount: %v: %s", err, bytes.TrimSpace(out))
			if err == nil {
				exec.Command("umount", "-f", "/mnt/verbs").Run()
				t.Errorf("the mount succeeded against a server that fails every COMPOUND")
			}
			l.Close()
			got := accepted()
			for _, c := range got {
				select {
				case <-c.Done():
				case <-time.After(2 * time.Second):
				}
			}
			srv.Close()
			wait()
			if len(got) == 0 {
				t.Fatal("the kernel's client never connected")
			}
			for i, c := range got {
				rc := c.RDMA().(*verbs.Conn)
				t.Logf("connection %d on %s: peer private data %d bytes %x, %+v, calls %d, replies %d",
					i, rc.Device(), len(rc.PeerPrivateData()), rc.PeerPrivateData(), c.Info(), c.Stats().CallsReceived, c.Stats().RepliesSent)
				if rc.Device() != tg.device {
					t.Errorf("connection %d on %s, want %s", i, rc.Device(), tg.device)
				}
				if in := c.Info(); !in.PeerPrivateData || in.SendInline != 4096 {
					t.Errorf("connection %d: the client's RFC 8797 private data was not recognised: %+v", i, in)
				}
			}
			if compounds.Load() == 0 {
				t.Errorf("no COMPOUND reached the responder")
			}
			if r := p.Resources(); r != (verbs.Resources{}) {
				t.Errorf("resources left: %+v", r)
			}
		})
	}
}

var flagPeer = flag.Bool("verbs.peer", false, "TestVerbsToHostIWARP: a responder over the software iWARP listens on the host (TestVerbsGuestToIWARP starts it)")

// TestVerbsToHostIWARP: in the lab guest, our requester over the verbs
// provider on siw0 calls our responder over the pure-Go iWARP on the host,
// through qemu's forward from GuestPeerIP: NULL, a 1 MiB WRITE (read
// chunk), a 1 MiB READ (write chunk) with the data checked, and a 64 KiB
// long call and reply. TestVerbsGuestToIWARP runs it with -verbs.peer.
func TestVerbsToHostIWARP(t *testing.T) {
	if !*flagPeer {
		t.Skip("needs -verbs.peer and a responder on the host (TestVerbsGuestToIWARP)")
	}
	p, err := verbs.New(verbs.Options{Device: "siw0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	conn, err := rpcrdma.Dial(ctx, p, lab.GuestPeerIP+":20049", nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := rpc.NewClient(conn)
	defer func() {
		cli.Close()
		conn.Close()
	}()
	bc := benchprog.Client{C: cli}
	if err := bc.Null(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bc.Write(ctx, benchprog.Pattern(1<<20)); err != nil {
		t.Fatalf("WRITE 1 MiB: %v", err)
	}
	buf := make([]byte, 1<<20)
	if err := bc.Read(ctx, buf); err != nil || !bytes.Equal(buf, benchprog.Pattern(len(buf))) {
		t.Fatalf("READ 1 MiB: %v, data equal %v", err, bytes.Equal(buf, benchprog.Pattern(len(buf))))
	}
	if err := bc.Echo(ctx, benchprog.Pattern(64<<10)); err != nil {
		t.Fatalf("ECHO 64 KiB: %v", err)
	}
	s := conn.Stats()
	t.Logf("over %s to %v: %+v; stats %+v", conn.RDMA().(*verbs.Conn).Device(), conn.RDMA().RemoteAddr(), conn.Info(), s)
	if s.ReadChunks == 0 || s.LongCalls == 0 {
		t.Errorf("stats %+v: want a read chunk and a long call", s)
	}
}

// TestVerbsSharedReceives: in the lab guest, a responder over the verbs
// provider with Bounds.SharedReceives receives from a real shared receive
// queue (ibv_create_srq) on rxe0 and on siw0: 24 connections, each with
// 8 calls in flight (NULL, and a 64 KiB WRITE through a read chunk with
// its data checked by the server), all answered; the responder's
// connections have no receive queue of their own; the queue and
// everything else is given back at the end.
func TestVerbsSharedReceives(t *testing.T) {
	if !lab.InGuest() {
		t.Skip("runs in the lab guest (TestVerbsGuest), which has RDMA devices")
	}
	// The 24 requesters register about 1 MiB each; siw counts that
	// against RLIMIT_MEMLOCK even for root, and the guest's is 8 MiB.
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		t.Fatal(err)
	}
	big := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &big); err != nil {
		t.Fatalf("raising the memlock limit for 24 requesters: %v", err)
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim)
	for _, tg := range []struct{ ip, device string }{{lab.GuestRxeIP, "rxe0"}, {lab.GuestSiwIP, "siw0"}} {
		t.Run(tg.device, func(t *testing.T) {
			const conns, inFlight, pool = 24, 8, 96
			p, err := verbs.New(verbs.Options{Device: tg.device})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var ac acceptedConns
			l, err := rpcrdma.Listen(ctx, p, tg.ip+":0", &rpcrdma.Config{Bounds: rpcrdma.Bounds{SharedReceives: pool}, ConnState: ac.state})
			if err != nil {
				t.Fatal(err)
			}
			if r := p.Resources(); r.SRQs != 1 {
				t.Errorf("listening with a shared pool: %+v, want one shared receive queue", r)
			}
			srv := rpc.NewServer(nil)
			benchprog.Register(srv)
			accepted, wait := serveEach(ctx, l, srv, &ac)

			clients := make([]*rpc.Client, conns)
			rconns := make([]*rpcrdma.Conn, conns)
			for i := range clients {
				c, err := rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
				for try := 1; err != nil && tg.device == "siw0" && try < 3; try++ {
					// Once in a CI run (2026-11-29) the first connect
					// to a fresh listener on the guest's siw0 was
					// reset ("rdma_connect: connection reset by
					// peer"); what this test is about is the shared
					// receives, so it logs that and dials again.
					t.Logf("connection %d, attempt %d: %v", i, try, err)
					time.Sleep(100 * time.Millisecond)
					c, err = rpcrdma.Dial(ctx, p, l.Addr().String(), nil)
				}
				if err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				rconns[i], clients[i] = c, rpc.NewClient(c)
			}
			data := benchprog.Pattern(64 << 10)
			errs := make(chan error, conns*inFlight)
			for i := range clients {
				bc := benchprog.Client{C: clients[i]}
				for k := range inFlight {
					go func() {
						if k%2 == 0 {
							errs <- bc.Null(ctx)
						} else {
							errs <- bc.Write(ctx, data)
						}
					}()
				}
			}
			for range conns * inFlight {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			st := l.Stats()
			t.Logf("%d connections on %s: listener %+v", conns, tg.device, st)
			for i, c := range rconns {
				if s := c.Stats(); s.ErrorsReceived != [4]uint64{} {
					t.Errorf("connection %d: RDMA_ERRORs received: %v", i, s.ErrorsReceived)
				}
			}
			if got := accepted(); len(got) != conns {
				t.Errorf("%d connections accepted, want %d", len(got), conns)
			}
			for i, c := range accepted() {
				if lim := c.RDMA().Limits(); lim.RecvQueueDepth != 0 {
					t.Errorf("responder connection %d has a receive queue of its own: %+v", i, lim)
				}
			}
			for _, c := range clients {
				c.Close()
			}
			for _, c := range rconns {
				c.Close()
			}
			l.Close()
			srv.Close()
			wait()
			deadline := time.Now().Add(10 * time.Second)
			for p.Resources() != (verbs.Resources{}) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if r := p.Resources(); r != (verbs.Resources{}) {
				t.Errorf("resources left: %+v", r)
			}
		})
	}
}

// serveEach serves srv on l with rpcrdma.Serve until l is closed or ctx
// is done; ac is l's Config.ConnState. accepted returns the connections
// accepted so far; wait waits for Serve to return and for every
// connection to close (close l and srv first).
func serveEach(ctx context.Context, l *rpcrdma.Listener, srv *rpc.Server, ac *acceptedConns) (accepted func() []*rpcrdma.Conn, wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		rpcrdma.Serve(ctx, l, srv)
	}()
	return ac.list, func() { <-done; ac.open.Wait() }
}
