//go:build linux && cgo && verbs

package rpcrdma_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"os"
	"testing"
	"time"

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
// READDIRPLUS through a reply chunk. knfsd must not invalidate remotely:
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
	fh := lookup(t, cli, root, "hello.txt")

	getattr := func() error {
		var a rpc.Body
		a.XDR = xdr.AppendOpaque(a.XDR, fh)
		rep, err := cli.Call(ctx, &rpc.Request{Prog: nfsProg, Vers: 3, Proc: nfs3GetAttr, Cred: authSys(t), Args: a})
		if err != nil {
			return err
		}
		d := rpc.NewBodyDecoder(rep.Results)
		if st, ftype := d.Uint32(), d.Uint32(); st != 0 || ftype != 1 || d.Err() != nil {
			return fmt.Errorf("GETATTR: status %d type %d %v", st, ftype, d.Err())
		}
		return nil
	}
	errs := make(chan error, 64)
	for range 64 {
		go func() { errs <- getattr() }()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*13) + 5
	}
	d := nfsCall(t, cli, 3, nfs3Write, nfs3WriteArgs(fh, data), nil, 0)
	if st := d.Uint32(); st != 0 {
		t.Fatalf("WRITE: status %d", st)
	}
	if d.Bool() {
		d.Skip(24)
	}
	skipPostOpAttr(d)
	if n := d.Uint32(); n != uint32(len(data)) || d.Err() != nil {
		t.Fatalf("WRITE: count %d (%v)", n, d.Err())
	}
	buf := make([]byte, len(data))
	d = nfsCall(t, cli, 3, nfs3Read, nfs3ReadArgs(fh, uint32(len(data))), [][]byte{buf}, 0)
	if st := d.Uint32(); st != 0 {
		t.Fatalf("READ: status %d", st)
	}
	skipPostOpAttr(d)
	count := d.Uint32()
	d.Bool() // eof
	n := d.DDPOpaqueInto(buf)
	if d.Err() != nil || n != len(data) || count != uint32(n) || !bytes.Equal(buf, data) {
		t.Fatalf("READ: %d bytes (count %d), equal %v, %v", n, count, bytes.Equal(buf[:n], data[:n]), d.Err())
	}

	var rd rpc.Body
	rd.XDR = xdr.AppendOpaque(rd.XDR, root)
	rd.XDR = xdr.AppendUint64(rd.XDR, 0)        // cookie
	rd.XDR = append(rd.XDR, make([]byte, 8)...) // cookieverf
	rd.XDR = xdr.AppendUint32(rd.XDR, 4096)     // dircount
	rd.XDR = xdr.AppendUint32(rd.XDR, 32768)    // maxcount
	d = nfsCall(t, cli, 3, nfs3ReadDirPlus, rd, nil, 32768+512)
	if st := d.Uint32(); st != 0 || d.Err() != nil {
		t.Fatalf("READDIRPLUS: status %d %v", st, d.Err())
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
