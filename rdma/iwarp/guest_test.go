package iwarp_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The Linux kernel as a peer of this provider, in the qemu VM of the
// repository's lab/ folder (Linux 6.1 knfsd and NFS client over
// soft-iWARP; boot it with lab/run-all.sh):
//
//   - TestGuestClientMount: the guest's NFS client (xprtrdma) mounts
//     through qemu's guestfwd 10.0.2.100:20049 -> 127.0.0.1:30049, where an
//     RPC-over-RDMA responder over this provider answers it;
//   - TestGuestServerNull: this provider dials knfsd (svcrdma) at
//     127.0.0.1:20049 and sends an RPC-over-RDMA NULL call built by hand.
//
// Both skip unless the VM runs ($WORK/qemu.pid alive, LAB-READY on the
// console; WORK defaults to /tmp/rpcrdma-lab) and check after each case
// that the guest kernel logged no BUG, Oops or WARNING: a malformed frame
// can crash siw (docs/linux-interop.md section 1).

const (
	guestNFSProg       = 100003
	guestNFS4Compound  = 1
	guestNFS4ErrFault  = 10006 // NFS4ERR_SERVERFAULT
	guestMountTimeout  = 20    // seconds, the guest's timeout(1) on mount
	guestRPCRDMAHdrLen = 28
)

// requestRecorder is an rdma.Provider that lets an iwarp.Provider listen
// and records the MPA Request of every connection request it hands out.
type requestRecorder struct {
	*iwarp.Provider
	mu   sync.Mutex
	reqs []mpa.Frame
}

func (p *requestRecorder) Listen(ctx context.Context, addr string) (rdma.Listener, error) {
	l, err := p.Provider.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &recordingListener{Listener: l, p: p}, nil
}

func (p *requestRecorder) requests() []mpa.Frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]mpa.Frame(nil), p.reqs...)
}

type recordingListener struct {
	rdma.Listener
	p *requestRecorder
}

func (l *recordingListener) Accept(ctx context.Context) (rdma.ConnRequest, error) {
	req, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	f := req.(*iwarp.ConnRequest).Request()
	f.PrivateData = bytes.Clone(f.PrivateData)
	l.p.mu.Lock()
	l.p.reqs = append(l.p.reqs, f)
	l.p.mu.Unlock()
	return req, nil
}

// guestCalls records the calls an rpc.Server authenticated.
type guestCalls struct {
	mu    sync.Mutex
	calls []string
}

func (g *guestCalls) auth(ctx context.Context, c *rpc.Call) (rpc.OpaqueAuth, error) {
	g.mu.Lock()
	g.calls = append(g.calls, c.Header.String())
	g.mu.Unlock()
	return rpc.DefaultAuth(ctx, c)
}

func (g *guestCalls) list() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

// compoundServerFault answers any NFSv4 COMPOUND with NFS4ERR_SERVERFAULT
// on its first operation: a well-formed COMPOUND4res that no client can
// take for success. ops receives "minorversion/first op" of each call.
func compoundServerFault(ops chan<- string) rpc.Handler {
	return func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		d := c.Decoder()
		tag := d.Opaque(1024)
		minor := d.Uint32()
		n := d.Uint32()
		var op uint32
		if n > 0 {
			op = d.Uint32()
		}
		if d.Err() != nil {
			return rpc.Body{}, rpc.ErrGarbageArgs
		}
		select {
		case ops <- fmt.Sprintf("minorversion %d, %d ops, first op %d", minor, n, op):
		default:
		}
		var res rpc.Body
		res.XDR = xdr.AppendUint32(res.XDR, guestNFS4ErrFault)
		res.XDR = xdr.AppendOpaque(res.XDR, tag)
		if n == 0 {
			res.XDR = xdr.AppendUint32(res.XDR, 0)
			return res, nil
		}
		res.XDR = xdr.AppendUint32(res.XDR, 1)
		res.XDR = xdr.AppendUint32(res.XDR, op)
		res.XDR = xdr.AppendUint32(res.XDR, guestNFS4ErrFault)
		return res, nil
	}
}

// guestClientPD is the RFC 8797 private data the Linux 6.1 NFS client sends
// (docs/linux-interop.md section 1): version 1, remote invalidation OK,
// 4096/4096.
var guestClientPD = []byte{0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x03, 0x03}

// TestGuestClientMount lets the guest's NFS client mount from an
// RPC-over-RDMA responder over this provider. The responder serves NFSv4
// NULL and answers COMPOUND with NFS4ERR_SERVERFAULT, so the mount fails;
// what is checked is the exchange: an enhanced MPA v2 Request with the
// client's RFC 8797 private data, accepted, and the NULL call answered.
func TestGuestClientMount(t *testing.T) {
	lab.Require(t)
	lab.Lock(t, "peer") // PeerAddr, where the guest's client connects
	rdmatest.CheckGoroutines(t)
	mark := lab.DmesgMark(t)
	defer lab.CheckDmesg(t, mark)

	ip, err := iwarp.New(iwarp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := &requestRecorder{Provider: ip}
	ctx, cancel := context.WithTimeout(context.Background(), 2*lab.CmdTimeout)
	defer cancel()
	l, err := rpcrdma.Listen(ctx, p, lab.PeerAddr, nil)
	if err != nil {
		t.Fatalf("listening where the guest's client connects: %v", err)
	}
	defer l.Close()

	var calls guestCalls
	ops := make(chan string, 16)
	srv := rpc.NewServer(&rpc.ServerOptions{Auth: calls.auth})
	srv.Handle(guestNFSProg, 4, guestNFS4Compound, compoundServerFault(ops))
	var (
		mu     sync.Mutex
		conns  []*rpcrdma.Conn
		served sync.WaitGroup
	)
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			served.Add(1)
			go func() {
				defer served.Done()
				srv.Serve(c)
			}()
		}
	}()

	mount := fmt.Sprintf("timeout %d mount -t nfs4 -o vers=4.0,proto=rdma,port=20049 10.0.2.100:/ /mnt; echo mount rc=$?", guestMountTimeout)
	start := time.Now()
	out, _ := lab.Run(t, mount, lab.CmdTimeout)
	t.Logf("guest: %s (%.1fs): %s", mount, time.Since(start).Seconds(), strings.TrimSpace(out))
	// Whatever the client does next meets a closed port: socat's refusal
	// is a clean MPA-level failure for siw now that its stderr is muted.
	l.Close()
	<-accepting
	mu.Lock()
	got := append([]*rpcrdma.Conn(nil), conns...)
	mu.Unlock()
	// The client closes after its answers; give our side a moment to see
	// it before closing what is left.
	for _, c := range got {
		select {
		case <-c.Done():
		case <-time.After(2 * time.Second):
		}
	}
	srv.Close()
	served.Wait()
	close(ops)

	if strings.Contains(out, "mount rc=0") {
		umount, _ := lab.Run(t, "umount -f /mnt", lab.CmdTimeout)
		t.Errorf("the mount succeeded against a server that fails every COMPOUND: %s", umount)
	}
	for _, c := range calls.list() {
		t.Logf("call received: %s", c)
	}
	for op := range ops {
		t.Logf("COMPOUND: %s (answered NFS4ERR_SERVERFAULT)", op)
	}

	reqs := p.requests()
	if len(reqs) == 0 || len(got) == 0 {
		t.Fatalf("the guest's client never connected (%d MPA Requests, %d connections)", len(reqs), len(got))
	}
	for i, f := range reqs {
		t.Logf("MPA Request %d: %v, private data %x", i, f, f.PrivateData)
		if f.Rev != 2 || !f.Enhanced() {
			t.Errorf("MPA Request %d: revision %d, enhanced %v; want an enhanced revision 2 Request", i, f.Rev, f.Enhanced())
		}
		if f.Flags&(mpa.FlagMarker|mpa.FlagCRC) != 0 {
			t.Errorf("MPA Request %d asks for markers or CRC: %v", i, f.Flags)
		}
		if !bytes.Equal(f.PrivateData, guestClientPD) {
			t.Errorf("MPA Request %d: private data %x, want %x (RFC 8797 as Linux 6.1 sends it)", i, f.PrivateData, guestClientPD)
		}
	}
	var answered bool
	for i, c := range got {
		s := c.Stats()
		rc := c.RDMA().(*iwarp.Conn)
		lim := rc.Limits()
		t.Logf("connection %d: %v, MPA rev %d, CRC %v, IRD %d ORD %d, peer private data %x, %+v; calls received %d, replies sent %d, errors sent %v",
			i, rc, rc.Revision(), rc.CRC(), lim.IRD, lim.ORD, rc.PeerPrivateData(), c.Info(), s.CallsReceived, s.RepliesSent, s.ErrorsSent)
		if rc.Revision() != 2 || !bytes.Equal(rc.PeerPrivateData(), guestClientPD) {
			t.Errorf("connection %d: revision %d, private data %x", i, rc.Revision(), rc.PeerPrivateData())
		}
		if in := c.Info(); !in.PeerPrivateData || !in.RemoteInvalidation || in.SendInline != 4096 {
			t.Errorf("connection %d negotiated %+v", i, in)
		}
		if s.ErrorsSent != [4]uint64{} {
			t.Errorf("connection %d: RDMA_ERRORs sent %v", i, s.ErrorsSent)
		}
		if s.CallsReceived >= 1 && s.RepliesSent >= 1 {
			answered = true
		}
	}
	if !answered {
		t.Error("no connection received and answered a call")
	}
	var null bool
	for _, c := range calls.list() {
		null = null || strings.Contains(c, "prog=100003 vers=4 proc=0 ")
	}
	if !null {
		t.Error("the guest's client sent no NFSv4 NULL")
	}
	if n := ip.Stats().TerminatesSent + ip.Stats().TerminatesRecv; n != 0 {
		t.Errorf("%d Terminates on the guest's connections", n)
	}
}

// guestNullCall builds an RPC-over-RDMA Version One RDMA_MSG carrying an
// NFSv3 NULL call, by hand: the 28-byte transport header (xid, vers,
// credits, proc, three empty chunk lists) and the 40-byte RPC call.
func guestNullCall(b []byte, xid uint32) []byte {
	b = xdr.AppendUint32(b, xid)
	b = xdr.AppendUint32(b, 1)  // rdma_vers
	b = xdr.AppendUint32(b, 32) // rdma_credit requested
	b = xdr.AppendUint32(b, uint32(wire.RDMA_MSG))
	b = xdr.AppendUint32(b, 0) // no read list
	b = xdr.AppendUint32(b, 0) // no write list
	b = xdr.AppendUint32(b, 0) // no reply chunk
	h := rpc.CallHeader{XID: xid, RPCVers: rpc.RPCVersion, Prog: guestNFSProg, Vers: 3, Proc: 0}
	return h.Append(b)
}

// TestGuestServerNull dials knfsd with this provider, with and without
// MPA CRC, offering RFC 8797 private data, and has an NFSv3 NULL call
// built by hand on the bare rdma.Conn answered.
func TestGuestServerNull(t *testing.T) {
	for _, tc := range []struct {
		name string
		crc  iwarp.CRCPolicy
	}{
		{"crc=off", iwarp.CRCFollow},
		{"crc=on", iwarp.CRCRequire},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab.Require(t)
			rdmatest.CheckGoroutines(t)
			mark := lab.DmesgMark(t)
			defer lab.CheckDmesg(t, mark)

			// SiwFirstSendDelay covers siw's accept race.
			p, err := iwarp.New(iwarp.Options{CRC: tc.crc, FirstSendDelay: iwarp.SiwFirstSendDelay})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pd := wire.PrivateData{SendSize: 4096, ReceiveSize: 4096}.Append(nil)
			var recv rdma.MR
			cfg := rdma.ConnConfig{PrivateData: pd, Prepare: func(c rdma.Conn) error {
				var err error
				if recv, err = c.Alloc(4096, rdma.AccessLocalWrite); err != nil {
					return err
				}
				return c.PostRecv(1, []rdma.SGE{rdmatest.Whole(recv)})
			}}
			rc, err := p.Dial(ctx, lab.KnfsdAddr, cfg)
			if err != nil {
				t.Fatalf("dialing knfsd at %s: %v", lab.KnfsdAddr, err)
			}
			defer rc.Close()
			c := rc.(*iwarp.Conn)
			t.Logf("%v: MPA rev %d, CRC %v, MULPDU %d, limits %+v, knfsd private data %x",
				c, c.Revision(), c.CRC(), c.MULPDU(), c.Limits(), c.PeerPrivateData())
			if c.Revision() != 2 || c.CRC() != (tc.crc == iwarp.CRCRequire) {
				t.Errorf("MPA revision %d, CRC %v", c.Revision(), c.CRC())
			}
			var spd wire.PrivateData
			if !spd.Decode(c.PeerPrivateData()) || spd.SendSize != 4096 || spd.ReceiveSize != 4096 {
				t.Errorf("knfsd's private data %x decodes as %v", c.PeerPrivateData(), spd)
			}

			send, err := c.Alloc(4096, 0)
			if err != nil {
				t.Fatal(err)
			}
			const xid = 0x474f0001
			msg := guestNullCall(send.Bytes()[:0], xid)
			if len(msg) != guestRPCRDMAHdrLen+40 {
				t.Fatalf("call is %d bytes", len(msg))
			}
			if err := c.PostSend(&rdma.WorkRequest{ID: 2, Op: rdma.OpSend, Local: []rdma.SGE{{MR: send, Length: len(msg)}}}); err != nil {
				t.Fatal(err)
			}
			var reply []byte
			cs := make([]rdma.Completion, 2)
			for sent, received := false, false; !sent || !received; {
				n, err := c.Wait(ctx, cs)
				if err != nil {
					t.Fatalf("waiting for the reply (sent %v, received %v): %v", sent, received, err)
				}
				for _, cmp := range cs[:n] {
					if cmp.Status != rdma.StatusSuccess {
						t.Fatalf("completion %+v (%v)", cmp, c.Err())
					}
					switch cmp.ID {
					case 1:
						received = true
						reply = recv.Bytes()[:cmp.Len]
					case 2:
						sent = true
					}
				}
			}
			t.Logf("reply (%d bytes): %s", len(reply), hex.EncodeToString(reply))

			var h wire.Header
			n, err := h.Decode(reply)
			if err == nil {
				err = h.Validate(wire.DirReply, wire.Limits{})
			}
			if err != nil {
				t.Fatalf("transport header: %v", err)
			}
			t.Logf("transport header: %v", &h)
			if h.XID != xid || h.Vers != wire.Version1 || h.Proc != wire.RDMA_MSG || h.Credits < 1 ||
				len(h.Chunks.Reads) != 0 || len(h.Chunks.Writes) != 0 || h.Chunks.Reply.Present {
				t.Errorf("transport header %v", &h)
			}
			d := xdr.NewDecoder(reply[n:])
			var rh rpc.ReplyHeader
			if err := rh.Decode(&d); err != nil {
				t.Fatalf("RPC reply: %v", err)
			}
			t.Logf("RPC reply: %v", &rh)
			if rh.XID != xid || rh.Stat != rpc.MsgAccepted || rh.AcceptStat != rpc.Success || d.Len() != 0 {
				t.Errorf("RPC reply %v with %d bytes of results", &rh, d.Len())
			}
			if err := c.Err(); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Errorf("connection: %v", err)
			}
		})
	}
}
