package rpcrdma

import (
	"context"
	"os"
	"net"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/capture"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

func TestZZDump(t *testing.T) {
	ctx := ctxT(t)
	l, err := Listen(ctx, newIWARP(t), "127.0.0.1:0", nil)
	if err != nil { t.Fatal(err) }
	srv := testServer()
	srv.Handle(100003, 3, 6, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		d := c.Decoder()
		d.Opaque(64); d.Uint32(); d.Uint32(); n := d.Uint32()
		var out rpc.Body
		out.XDR = xdr.AppendUint32(out.XDR, 0)
		out.XDR = xdr.AppendBool(out.XDR, false)
		out.XDR = xdr.AppendUint32(out.XDR, n)
		out.XDR = xdr.AppendBool(out.XDR, true)
		out.AppendDDPOpaque(pattern(int(n), 7))
		return out, nil
	})
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, srv) }()
	defer func() { l.Close(); srv.Close(); <-done }()
	c := capture.Start(t, l.Addr().(*net.TCPAddr).Port)
	cp, _ := iwarp.New(iwarp.Options{CRC: iwarp.CRCRequire})
	conn, err := Dial(ctx, cp, l.Addr().String(), nil)
	if err != nil { t.Fatal(err) }
	cli := rpc.NewClient(conn)
	call := func(proc uint32, args rpc.Body, bufs [][]byte, maxReply int) {
		_, err := cli.Call(ctx, &rpc.Request{Prog: testProg, Vers: testVers, Proc: proc, Args: args, ResultBufs: bufs, MaxReply: maxReply})
		if err != nil { t.Fatal(err) }
	}
	call(procSum, ddpArgs(pattern(100, 1)), nil, 0)
	call(procSum, ddpArgs(pattern(64<<10, 2)), nil, 0)
	call(procRead, u32Args(32<<10), [][]byte{make([]byte, 32<<10)}, 0)
	call(procBig, u32Args(20000), nil, 20100)
	call(procEchoFlat, rpc.Body{XDR: xdr.AppendOpaque(nil, pattern(9000, 9))}, nil, 9100)
	{
		var a rpc.Body
		a.XDR = xdr.AppendOpaque(nil, []byte("fh-12345"))
		a.XDR = xdr.AppendUint32(a.XDR, 0)
		a.XDR = xdr.AppendUint32(a.XDR, 0)
		a.XDR = xdr.AppendUint32(a.XDR, 10000)
		_, err := cli.Call(ctx, &rpc.Request{Prog: 100003, Vers: 3, Proc: 6, Args: a, ResultBufs: [][]byte{make([]byte, 10000)}})
		if err != nil { t.Fatal(err) }
	}
	cli.Close(); conn.Close()
	path := c.Stop(); t.Log(path); os.Link(path, "/tmp/exp/dump/t1.pcapng")
	fs := []string{"frame.number", "tcp.stream", "iwarp_mpa.crc_flag", "iwarp_mpa.ulpdulength", "iwarp_rdma.opcode", "iwarp_ddp.msn", "iwarp_ddp.stag", "iwarp_ddp.tagged_offset", "rpcordma.xid", "rpcordma.msg_type", "rpcordma.position", "rpcordma.rdma_handle", "rpcordma.rdma_offset", "rpc.xid", "rpc.msgtyp", "rpc.program", "rpc.procedure", "rpc.repframe", "rpc.reqframe", "_ws.malformed", "_ws.expert.message", "udp.dstport", "nfs.data", "nfs.count3", "nfs.status"}
	for _, r := range capture.Fields(t, path, fs...) {
		var b strings.Builder
		for _, f := range fs { if v, ok := r[f]; ok { b.WriteString(f + "=" + v + " ") } }
		t.Log(b.String())
	}
	for _, s := range capture.Shownames(t, path, "iwarp_mpa.crc_check") { t.Log(s) }
}
