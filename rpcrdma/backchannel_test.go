package rpcrdma

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/capture"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// backPair is a pair with the backward direction on: an rpc.Server on the
// requester's Backchannel and an rpc.Client on the responder's.
type backPair struct {
	*pair
	backSrv *rpc.Server
	backCli *rpc.Client
}

func newBackPair(t *testing.T, np pairFunc, ccfg, scfg *Config, backSrv *rpc.Server) *backPair {
	t.Helper()
	pr := np(t, ccfg, scfg)
	if pr.conn.Backchannel() == nil || pr.resp.Backchannel() == nil {
		t.Fatal("Backchannel is nil with BackwardCredits set")
	}
	bp := &backPair{pair: pr, backSrv: backSrv, backCli: rpc.NewClient(pr.resp.Backchannel())}
	served := make(chan struct{})
	go func() { backSrv.Serve(pr.conn.Backchannel()); close(served) }()
	t.Cleanup(func() {
		bp.backCli.Close()
		backSrv.Close()
		<-served
	})
	return bp
}

func (bp *backPair) backCall(ctx context.Context, proc uint32, args rpc.Body) (rpc.Reply, error) {
	return bp.backCli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: proc, Args: args})
}

// testBackchannel: calls flow both ways on one connection at once, with
// DDP-eligible items inline in the backward direction, and each
// direction's counters see only its own messages.
func testBackchannel(t *testing.T, np pairFunc) {
	bp := newBackPair(t, np, &Config{BackwardCredits: 4}, &Config{BackwardCredits: 4}, testServer())
	ctx := ctxT(t)
	if err := bp.cli.Null(ctx, testProg, testVers); err != nil {
		t.Fatal(err)
	}
	fwdGrant, _ := bp.conn.req.credits.state() // the responder's, from the reply
	var wg sync.WaitGroup
	const n = 20
	for i := range n {
		data := pattern(100+i, byte(i))
		wg.Go(func() {
			rep, err := bp.backCall(ctx, procEcho, ddpArgs(data))
			if err != nil {
				t.Errorf("backward echo %d: %v", i, err)
				return
			}
			d := rpc.NewBodyDecoder(rep.Results)
			if got := d.DDPOpaque(1 << 20); !bytes.Equal(got, data) {
				t.Errorf("backward echo %d: got %d bytes, want %d", i, len(got), len(data))
			}
		})
		wg.Go(func() {
			rep, err := bp.call(ctx, procEcho, ddpArgs(data), nil, 0)
			if err != nil {
				t.Errorf("forward echo %d: %v", i, err)
				return
			}
			d := rpc.NewBodyDecoder(rep.Results)
			if got := d.DDPOpaque(1 << 20); !bytes.Equal(got, data) {
				t.Errorf("forward echo %d: got %d bytes", i, len(got))
			}
		})
	}
	wg.Wait()
	if err := bp.backCli.Null(ctx, testProg, testVers); err != nil {
		t.Errorf("backward NULL: %v", err)
	}
	// The requester counts a backward reply once its Send is posted,
	// which may be after the responder has the reply.
	cs := bp.conn.Stats()
	for deadline := time.Now().Add(5 * time.Second); cs.BackwardReplies < n+1 && time.Now().Before(deadline); cs = bp.conn.Stats() {
		time.Sleep(time.Millisecond)
	}
	ss := bp.resp.Stats()
	if cs.BackwardCalls != n+1 || cs.BackwardReplies != n+1 || ss.BackwardCalls != n+1 || ss.BackwardReplies != n+1 {
		t.Errorf("backward counters: requester %d calls %d replies, responder %d calls %d replies; want %d each",
			cs.BackwardCalls, cs.BackwardReplies, ss.BackwardCalls, ss.BackwardReplies, n+1)
	}
	if cs.CallsSent != n+1 || ss.CallsReceived != n+1 || cs.Dropped != 0 || ss.Dropped != 0 {
		t.Errorf("forward counters: %d calls sent, %d received, dropped %d/%d; want %d, 0 dropped",
			cs.CallsSent, ss.CallsReceived, cs.Dropped, ss.Dropped, n+1)
	}
	if g, _ := bp.conn.req.credits.state(); g != fwdGrant || g == 4 {
		t.Errorf("forward grant moved from %d to %d with backward traffic", fwdGrant, g)
	}
	if g, _ := bp.resp.resp.back.window.state(); g != 4 {
		t.Errorf("backward grant %d, want the requester's 4", g)
	}
}

func TestBackchannel(t *testing.T) { forProviders(t, testBackchannel) }

// TestBackchannelCredits: the responder never has more backward calls
// outstanding than the requester grants, whatever it asks for, and the
// requester drops none.
func TestBackchannelCredits(t *testing.T) {
	var running, most atomic.Int32
	srv := rpc.NewServer(nil)
	srv.Handle(testProg, testVers, procSleep, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		return rpc.Body{}, nil
	})
	bp := newBackPair(t, newPair, &Config{BackwardCredits: 2}, &Config{BackwardCredits: 8}, srv)
	ctx := ctxT(t)
	// The first reply brings the grant; until then one call at a time.
	if _, err := bp.backCall(ctx, procSleep, u32Args(0)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := bp.backCall(ctx, procSleep, u32Args(0)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 2 {
		t.Errorf("%d backward calls ran at once, the requester granted 2", m)
	}
	if m := most.Load(); m < 2 {
		t.Errorf("at most %d backward call ran at once; the grant of 2 was not used", m)
	}
	if d := bp.conn.Stats().Dropped; d != 0 {
		t.Errorf("requester dropped %d messages", d)
	}
	if g, in := bp.resp.resp.back.window.state(); g != 2 || in != 0 {
		t.Errorf("backward window: grant %d, %d in flight; want 2, 0", g, in)
	}
}

// rawBackCall sends a backward call from the responder c without its
// Backchannel's credit check: what a responder ignoring the rules does.
func rawBackCall(t *testing.T, c *Conn, xid uint32, h wire.Header) {
	t.Helper()
	call := (&rpc.CallHeader{XID: xid, RPCVers: rpc.RPCVersion, Prog: testProg, Vers: testVers, Proc: procSleep}).Append(nil)
	call = xdr.AppendUint32(call, 1000) // sleep a second
	h.XID, h.Vers, h.Credits = xid, wire.Version1, 8
	if err := c.sendMsg(context.Background(), &h, [][]byte{call}, 0, false); err != nil {
		t.Fatal(err)
	}
}

// waitDropped waits until c has dropped want messages.
func waitDropped(t *testing.T, c *Conn, want uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Dropped < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if d := c.Stats().Dropped; d != want {
		t.Fatalf("%d messages dropped, want %d", d, want)
	}
}

// TestBackchannelDrops: a requester drops backward calls beyond its
// backward credits, in a form RFC 8167 does not allow (chunk lists), or
// when its backward direction is off; a responder drops backward replies
// to calls it did not send. The forward direction carries on after each.
func TestBackchannelDrops(t *testing.T) {
	ctx := ctxT(t)
	t.Run("overrun", func(t *testing.T) {
		pr := newPair(t, &Config{BackwardCredits: 1}, nil)
		for xid := uint32(1); xid <= 3; xid++ {
			rawBackCall(t, pr.resp, xid, wire.Header{Proc: wire.RDMA_MSG})
		}
		waitDropped(t, pr.conn, 2)
		m, err := pr.conn.Backchannel().Recv()
		if err != nil {
			t.Fatal(err)
		}
		if xid, mt, _ := rpc.PeekHeader(m.XDR); xid != 1 || mt != rpc.MsgCall {
			t.Errorf("delivered xid %d type %v, want the first call", xid, mt)
		}
		// Received but not answered, it still takes the one credit.
		rawBackCall(t, pr.resp, 10, wire.Header{Proc: wire.RDMA_MSG})
		waitDropped(t, pr.conn, 3)
		// Answering it frees its credit: the next one is taken.
		reply := (&rpc.ReplyHeader{XID: 1, Stat: rpc.MsgAccepted, AcceptStat: rpc.Success}).Append(nil)
		if err := pr.conn.Backchannel().Send(ctx, &rpc.Msg{Body: rpc.Body{XDR: reply}}); err != nil {
			t.Fatal(err)
		}
		m.Release()
		rawBackCall(t, pr.resp, 4, wire.Header{Proc: wire.RDMA_MSG})
		if m, err := pr.conn.Backchannel().Recv(); err != nil {
			t.Fatal(err)
		} else if xid, _, _ := rpc.PeekHeader(m.XDR); xid != 4 {
			t.Errorf("delivered xid %d, want 4", xid)
		}
		if _, err := pr.call(ctx, procEcho, ddpArgs([]byte("fwd")), nil, 0); err != nil {
			t.Errorf("forward call after the drops: %v", err)
		}
	})
	t.Run("chunks", func(t *testing.T) {
		pr := newPair(t, &Config{BackwardCredits: 4}, nil)
		h := wire.Header{Proc: wire.RDMA_MSG}
		h.Chunks.Reply = wire.ReplyChunk{Present: true, Chunk: wire.WriteChunk{{Handle: 1, Length: 64, Offset: 0}}}
		rawBackCall(t, pr.resp, 9, h)
		waitDropped(t, pr.conn, 1)
		if _, err := pr.call(ctx, procEcho, ddpArgs([]byte("fwd")), nil, 0); err != nil {
			t.Errorf("forward call after the drop: %v", err)
		}
	})
	t.Run("off", func(t *testing.T) {
		pr := newPair(t, nil, nil)
		if pr.conn.Backchannel() != nil {
			t.Fatal("Backchannel is not nil without BackwardCredits")
		}
		rawBackCall(t, pr.resp, 9, wire.Header{Proc: wire.RDMA_MSG})
		waitDropped(t, pr.conn, 1)
		if _, err := pr.call(ctx, procEcho, ddpArgs([]byte("fwd")), nil, 0); err != nil {
			t.Errorf("forward call after the drop: %v", err)
		}
	})
	t.Run("unknown-reply", func(t *testing.T) {
		pr := newPair(t, &Config{BackwardCredits: 4}, &Config{BackwardCredits: 4})
		reply := (&rpc.ReplyHeader{XID: 77, Stat: rpc.MsgAccepted, AcceptStat: rpc.Success}).Append(nil)
		h := &wire.Header{XID: 77, Vers: wire.Version1, Credits: 4, Proc: wire.RDMA_MSG}
		if err := pr.conn.sendMsg(ctx, h, [][]byte{reply}, 0, false); err != nil {
			t.Fatal(err)
		}
		waitDropped(t, pr.resp, 1)
		if g, in := pr.resp.resp.back.window.state(); g != 1 || in != 0 {
			t.Errorf("backward window after a stray reply: grant %d, %d in flight; want 1, 0", g, in)
		}
		if _, err := pr.call(ctx, procEcho, ddpArgs([]byte("fwd")), nil, 0); err != nil {
			t.Errorf("forward call after the drop: %v", err)
		}
	})
}

// TestBackchannelXIDs: the two directions' XIDs are independent (RFC 8167,
// "XID Values"): a forward call and a backward call with the same XID,
// both outstanding, each get their own reply.
func TestBackchannelXIDs(t *testing.T) {
	conn, resp := dialAccept(t, newIWARP(t), "127.0.0.1:0", &Config{BackwardCredits: 2}, &Config{BackwardCredits: 2})
	defer conn.Close()
	defer resp.Close()
	ctx := ctxT(t)
	const xid = 0x1234
	call := func(proc uint32) *rpc.Msg {
		b := (&rpc.CallHeader{XID: xid, RPCVers: rpc.RPCVersion, Prog: testProg, Vers: testVers, Proc: proc}).Append(nil)
		return &rpc.Msg{Body: rpc.Body{XDR: b}}
	}
	reply := func(tag uint32) *rpc.Msg {
		b := (&rpc.ReplyHeader{XID: xid, Stat: rpc.MsgAccepted, AcceptStat: rpc.Success}).Append(nil)
		return &rpc.Msg{Body: rpc.Body{XDR: xdr.AppendUint32(b, tag)}}
	}
	if err := conn.Send(ctx, call(1)); err != nil {
		t.Fatal(err)
	}
	if err := resp.Backchannel().Send(ctx, call(2)); err != nil {
		t.Fatal(err)
	}
	fwd, err := resp.Recv()
	if err != nil {
		t.Fatal(err)
	}
	back, err := conn.Backchannel().Recv()
	if err != nil {
		t.Fatal(err)
	}
	var fh, bh rpc.CallHeader
	for _, c := range []struct {
		m *rpc.Msg
		h *rpc.CallHeader
	}{{fwd, &fh}, {back, &bh}} {
		d := xdr.NewDecoder(c.m.XDR)
		if err := c.h.Decode(&d); err != nil {
			t.Fatal(err)
		}
	}
	if fh.Proc != 1 || bh.Proc != 2 {
		t.Fatalf("forward call has proc %d, backward %d; want 1 and 2", fh.Proc, bh.Proc)
	}
	// Answer the backward call first, then the forward one.
	if err := conn.Backchannel().Send(ctx, reply(0xbbbb)); err != nil {
		t.Fatal(err)
	}
	if err := resp.Send(ctx, reply(0xffff)); err != nil {
		t.Fatal(err)
	}
	fwd.Release()
	back.Release()
	for _, c := range []struct {
		name string
		recv func() (*rpc.Msg, error)
		want uint32
	}{{"forward", conn.Recv, 0xffff}, {"backward", resp.Backchannel().Recv, 0xbbbb}} {
		m, err := c.recv()
		if err != nil {
			t.Fatalf("%s reply: %v", c.name, err)
		}
		d := xdr.NewDecoder(m.XDR)
		var h rpc.ReplyHeader
		if err := h.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if tag := d.Uint32(); h.XID != xid || tag != c.want {
			t.Errorf("%s reply: xid %#x tag %#x, want %#x %#x", c.name, h.XID, tag, xid, c.want)
		}
	}
	// The backward call has its reply: a second one is refused, and so is
	// a message too short for an RPC header. Neither ends anything.
	if err := conn.Backchannel().Send(ctx, reply(0xbbbb)); err == nil || !strings.Contains(err.Error(), "no backward call") {
		t.Errorf("a second reply to backward call %#x: %v, want refused", xid, err)
	}
	if err := resp.Backchannel().Send(ctx, &rpc.Msg{Body: rpc.Body{XDR: []byte{0, 0, 0, 1}}}); err == nil || !strings.Contains(err.Error(), "no RPC header") {
		t.Errorf("a 4-byte backward call: %v, want refused", err)
	}
	if conn.Err() != nil || resp.Err() != nil {
		t.Errorf("refused backward messages ended the connection: %v / %v", conn.Err(), resp.Err())
	}
}

// TestBackchannelLimits: a backward message that does not fit the inline
// threshold fails its Send and nothing else; a closed Backchannel fails
// Send and Recv with net.ErrClosed and leaves the connection up; the end of
// the connection ends the backward direction's calls.
func TestBackchannelLimits(t *testing.T) {
	bp := newBackPair(t, newPair, &Config{BackwardCredits: 2, InlineRecv: 1024}, &Config{BackwardCredits: 2}, testServer())
	ctx := ctxT(t)
	_, err := bp.backCall(ctx, procEchoFlat, rpc.Body{XDR: xdr.AppendOpaque(nil, make([]byte, 2000))})
	if err == nil || !strings.Contains(err.Error(), "inline threshold") {
		t.Errorf("backward call over the threshold: %v, want an inline threshold error", err)
	}
	if _, err := bp.backCall(ctx, procEchoFlat, rpc.Body{XDR: xdr.AppendOpaque(nil, make([]byte, 500))}); err != nil {
		t.Errorf("backward call after the refused one: %v", err)
	}
	if g, in := bp.resp.resp.back.window.state(); in != 0 || g != 2 {
		t.Errorf("backward window: grant %d, %d in flight; want 2, 0", g, in)
	}

	// Closing the requester's Backchannel ends its rpc.Server's serving;
	// the forward direction carries on.
	bp.conn.Backchannel().Close()
	if _, err := bp.conn.Backchannel().Recv(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Recv after Close: %v, want net.ErrClosed", err)
	}
	if err := bp.conn.Backchannel().Send(ctx, &rpc.Msg{Body: rpc.Body{XDR: make([]byte, 24)}}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Send after Close: %v, want net.ErrClosed", err)
	}
	if _, err := bp.call(ctx, procEcho, ddpArgs([]byte("fwd")), nil, 0); err != nil {
		t.Errorf("forward call after closing the backchannel: %v", err)
	}

	// A backward call the requester will never answer fails when the
	// connection ends.
	done := make(chan error, 1)
	go func() {
		_, err := bp.backCall(context.Background(), procSleep, u32Args(0))
		done <- err
	}()
	// Close once the call has taken a backward credit: it is on its way.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, in := bp.resp.resp.back.window.state(); in == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backward call did not take a credit within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	bp.conn.Close()
	select {
	case err := <-done:
		var ce *rpc.ConnError
		if !errors.As(err, &ce) {
			t.Errorf("backward call cut by the connection's end: %v, want *rpc.ConnError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("backward call still waiting 10 s after the connection ended")
	}
}

// TestBackchannelVersion: backward calls go in the version the requester
// uses, Version Two here, and the requester answers in it.
func TestBackchannelVersion(t *testing.T) {
	v2 := []wire.Version{wire.Version1, wire.Version2}
	bp := newBackPair(t, newPair, &Config{BackwardCredits: 2, Versions: v2}, &Config{BackwardCredits: 2}, testServer())
	ctx := ctxT(t)
	if _, err := bp.call(ctx, procEcho, ddpArgs([]byte("fwd")), nil, 0); err != nil {
		t.Fatal(err)
	}
	if v := wire.Version(bp.resp.resp.back.vers.Load()); v != wire.Version2 {
		t.Errorf("backward calls go in version %d, want 2", v)
	}
	// The responder drops a reply in another version than its call's,
	// so this fails if the requester answers in Version One.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := bp.backCli.Null(short, testProg, testVers); err != nil {
		t.Errorf("backward NULL in Version Two: %v", err)
	}
}

// TestBackchannelReceives: each side posts receives for the backward
// direction on top of the forward ones (RFC 8167, "Managing Receive
// Buffers"), and neither the forward credits asked for nor those granted
// count on them, even when the provider's queue depth caps the receives.
func TestBackchannelReceives(t *testing.T) {
	pr := newPair(t, &Config{Credits: 8, BackwardCredits: 3}, &Config{Grant: GrantPolicy{Max: 16}, BackwardCredits: 5})
	if err := pr.cli.Null(ctxT(t), testProg, testVers); err != nil {
		t.Fatal(err)
	}
	if n, m := pr.conn.recvSlots, pr.conn.req.credits.max; n != 8+1+3 || m != 8 {
		t.Errorf("requester: %d receives posted, %d forward credits at most; want 12 and 8", n, m)
	}
	if n, g := pr.resp.recvSlots, pr.resp.Info().Credits; n != 16+2+5 || g != 16 {
		t.Errorf("responder: %d receives posted, grant %d; want 23 and 16", n, g)
	}

	pr = newPair(t, nil, &Config{Grant: GrantPolicy{Max: 20000}, BackwardCredits: 5})
	if err := pr.cli.Null(ctxT(t), testProg, testVers); err != nil {
		t.Fatal(err)
	}
	if n, g := pr.resp.recvSlots, pr.resp.Info().Credits; n != loopback.MaxQueueDepth || g != uint32(n-2-5) {
		t.Errorf("responder at the provider's depth: %d receives posted, grant %d; want %d and %d", n, g, loopback.MaxQueueDepth, loopback.MaxQueueDepth-7)
	}
}

// TestTsharkBackchannel: tshark decodes a backward call on a live iWARP
// connection as an RPC call from the responder's port, carried in an
// RDMA_MSG with empty chunk lists, and matches it to the requester's reply,
// every CRC good.
func TestTsharkBackchannel(t *testing.T) {
	ctx := ctxT(t)
	l, err := Listen(ctx, newIWARP(t), "127.0.0.1:0", &Config{BackwardCredits: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c := capture.Start(t, port)
	accepted := acceptOne(t, ctx, l)
	cp, err := iwarp.New(iwarp.Options{CRC: iwarp.CRCRequire})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(ctx, cp, l.Addr().String(), &Config{BackwardCredits: 2})
	if err != nil {
		t.Fatal(err)
	}
	resp := accepted()
	srv, backSrv := testServer(), testServer()
	go srv.Serve(resp)
	go backSrv.Serve(conn.Backchannel())
	cli, backCli := rpc.NewClient(conn), rpc.NewClient(resp.Backchannel())
	if err := cli.Null(ctx, testProg, testVers); err != nil {
		t.Fatal(err)
	}
	small := pattern(100, 1)
	rep, err := backCli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: procSum, Args: ddpArgs(small)})
	checkSum(t, rep, err, small)
	backCli.Close()
	cli.Close()
	backSrv.Close()
	srv.Close()
	conn.Close()
	resp.Close()
	path := c.Stop()
	if d := c.Dropped(); d > 0 {
		t.Skipf("the kernel dropped %d packets (machine too busy); the capture is incomplete", d)
	}

	var rows []map[string]string
	for _, row := range capture.Fields(t, path, "frame.number", "tcp.srcport", "udp.srcport", "rpcordma.xid", "rpcordma.msg_type",
		"rpcordma.reads_count", "rpcordma.writes_count", "rpcordma.reply_count",
		"rpc.xid", "rpc.msgtyp", "rpc.program", "rpc.procedure", "rpc.repframe", "rpc.reqframe") {
		if row["udp.srcport"] == "" {
			rows = append(rows, row)
		}
	}
	defer func() {
		if t.Failed() {
			for _, r := range rows {
				t.Logf("%v", r)
			}
		}
	}()
	srvPort := strconv.Itoa(port)
	var back map[string]string
	for _, r := range rows {
		if r["rpc.msgtyp"] == "0" && r["tcp.srcport"] == srvPort {
			if back != nil {
				t.Errorf("frame %s: a second call from the responder", r["frame.number"])
			}
			back = r
		}
	}
	if back == nil {
		t.Fatal("tshark shows no call from the responder's port")
	}
	first := func(v string) string { return strings.Split(v, ",")[0] }
	if first(back["rpc.program"]) != strconv.Itoa(testProg) || first(back["rpc.procedure"]) != strconv.Itoa(procSum) {
		t.Errorf("backward call: program %s procedure %s, want %d %d", back["rpc.program"], back["rpc.procedure"], testProg, procSum)
	}
	if back["rpcordma.msg_type"] != "0" || back["rpcordma.reads_count"] != "0" || back["rpcordma.writes_count"] != "0" || back["rpcordma.reply_count"] != "0" {
		t.Errorf("backward call header: %v, want RDMA_MSG with no chunks", back)
	}
	if back["rpcordma.xid"] != back["rpc.xid"] {
		t.Errorf("backward call: rpcordma.xid %s, rpc.xid %s", back["rpcordma.xid"], back["rpc.xid"])
	}
	var reply map[string]string
	for _, r := range rows {
		// On a call, tshark's "Reply In" is rpc.reqframe.
		if r["frame.number"] == back["rpc.reqframe"] {
			reply = r
		}
	}
	switch {
	case reply == nil:
		t.Errorf("backward call (frame %s) not matched to a reply", back["frame.number"])
	case reply["tcp.srcport"] == srvPort || reply["rpc.msgtyp"] != "1" || reply["rpc.xid"] != back["rpc.xid"] || reply["rpcordma.msg_type"] != "0":
		t.Errorf("backward reply: %v", reply)
	}
	for _, cr := range capture.Shownames(t, path, "iwarp_mpa.crc_check") {
		if !strings.Contains(cr.Showname, "(Good CRC32)") {
			t.Errorf("frame %d: %s", cr.Frame, cr.Showname)
		}
	}
}

// FuzzBackwardReply answers a backward call with an arbitrary message
// whose first word is the call's XID: the responder must not crash; the
// call must end (with a reply or an error), or the message be dropped and
// counted, or the connection end; and while the connection lives, a
// well-formed reply to the call still outstanding must complete it, so no
// credit is lost.
func FuzzBackwardReply(f *testing.F) {
	v1 := func(proc uint32, words ...uint32) []byte { return hdr(0, append([]uint32{1, 2, proc}, words...)...) }
	reply := func(words ...uint32) []byte { return append(v1(0, 0, 0, 0), hdr(0, words...)...) }
	f.Add(reply(1, 0, 0, 0, 0))                                     // a NULL reply (xid filled in)
	f.Add(reply(0, 2))                                              // a call, not a reply
	f.Add(append(v1(0, 1, 1, 1, 5, 64, 0, 0, 0, 0, 0), 0, 0, 0, 1)) // chunk lists
	f.Add(hdr(0, 2, 2, 0, 0, 0, 0, 0, 1, 0))                        // Version Two
	f.Add(v1(4, 2))                                                 // RDMA_ERROR
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) > 4096 || len(msg) < 4 {
			return
		}
		p, conns := peerToResponder(t, &Config{BackwardCredits: 2})
		c := <-conns
		cli := rpc.NewClient(c.Backchannel())
		defer cli.Close()
		done := make(chan error, 2)
		call := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done <- cli.Null(ctx, testProg, testVers)
		}
		go call()
		got := p.receive(5 * time.Second)
		if len(got) < 4 {
			t.Fatal("no backward call arrived")
		}
		xid := binary.BigEndian.Uint32(got)
		m := append([]byte(nil), msg...)
		binary.BigEndian.PutUint32(m, xid)
		if _, err := p.tryExchange(m, time.Millisecond); err != nil {
			return
		}
		// Wait for the call to end, or for the message to be counted as
		// something else: dropped, or taken for a forward call (and
		// answered, refused or dropped there).
		handled := func() bool {
			st := c.Stats()
			return st.Dropped != 0 || st.CallsReceived != 0 || st.ErrorsSent != [4]uint64{}
		}
		pending := false
		for deadline := time.Now().Add(2 * time.Second); !pending; {
			select {
			case <-done:
			case <-c.Done():
				return
			default:
				if pending = handled(); !pending {
					if time.Now().After(deadline) {
						t.Fatalf("backward call neither ended nor was the message dropped after %x", m)
					}
					time.Sleep(100 * time.Microsecond)
				}
				continue
			}
			break
		}
		if c.Err() != nil {
			return
		}
		if !pending {
			// The first call ended: a second must get its credit.
			go call()
			if got = p.receive(5 * time.Second); len(got) < 4 {
				t.Fatalf("no second backward call after %x", m)
			}
			xid = binary.BigEndian.Uint32(got)
		}
		if _, err := p.tryExchange(nullReply(xid, 2), time.Millisecond); err != nil {
			return
		}
		select {
		case err := <-done:
			if err != nil && c.Err() == nil {
				t.Fatalf("backward NULL after %x: %v", m, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("backward NULL after %x did not complete", m)
		}
	})
}

// TestBackchannelReplyHoldsCredit: a backward reply waiting for Recv still
// holds its call's credit, so the responder never has more replies queued
// than it has room for, however slowly its rpc.Client reads them. (A
// reply used to give its credit back on arrival: under load the next
// calls' replies overflowed the queue and were dropped.)
func TestBackchannelReplyHoldsCredit(t *testing.T) {
	conn, resp := dialAccept(t, loopback.New(), "", &Config{BackwardCredits: 2}, &Config{BackwardCredits: 2})
	defer conn.Close()
	defer resp.Close()
	ctx := ctxT(t)
	bc, back := resp.Backchannel(), conn.Backchannel()
	call := func(xid uint32) *rpc.Msg {
		return &rpc.Msg{Body: rpc.Body{XDR: (&rpc.CallHeader{XID: xid, RPCVers: rpc.RPCVersion, Prog: testProg, Vers: testVers}).Append(nil)}}
	}
	answer := func() {
		m, err := back.Recv()
		if err != nil {
			t.Fatal(err)
		}
		xid, _, _ := rpc.PeekHeader(m.XDR)
		rep := (&rpc.ReplyHeader{XID: xid, Stat: rpc.MsgAccepted, AcceptStat: rpc.Success}).Append(nil)
		if err := back.Send(ctx, &rpc.Msg{Body: rpc.Body{XDR: rep}}); err != nil {
			t.Fatal(err)
		}
		m.Release()
	}
	// The first reply brings the grant of 2.
	if err := bc.Send(ctx, call(1)); err != nil {
		t.Fatal(err)
	}
	answer()
	if _, err := bc.Recv(); err != nil {
		t.Fatal(err)
	}
	// Two calls answered, their replies left unread.
	for xid := uint32(2); xid <= 3; xid++ {
		if err := bc.Send(ctx, call(xid)); err != nil {
			t.Fatal(err)
		}
		answer()
	}
	for deadline := time.Now().Add(5 * time.Second); resp.Stats().BackwardReplies < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := bc.Send(short, call(4)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third call with two replies unread: %v, want to wait for a credit", err)
	}
	if _, err := bc.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := bc.Send(ctx, call(5)); err != nil {
		t.Fatalf("a call after Recv took a reply: %v", err)
	}
	answer()
	for range 2 {
		if _, err := bc.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if d := resp.Stats().Dropped; d != 0 {
		t.Errorf("responder dropped %d messages", d)
	}
}
