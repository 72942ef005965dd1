package rpc

import (
	"context"
	"net"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

func BenchmarkCallHeaderAppendDecode(b *testing.B) {
	h := goldenCall(b, callVectors[1])
	buf := make([]byte, 0, h.EncodedLen())
	b.SetBytes(int64(h.EncodedLen()))
	b.ReportAllocs()
	for b.Loop() {
		buf = h.Append(buf[:0])
		var g CallHeader
		d := xdr.NewDecoder(buf)
		if err := g.Decode(&d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEcho measures a 4 KiB echo call over record marking on a pipe.
func BenchmarkEcho(b *testing.B) {
	c1, c2 := net.Pipe()
	srv, _ := newTestServer(nil)
	go srv.Serve(NewStreamTransport(c2, nil))
	cli := NewClient(NewStreamTransport(c1, nil))
	defer srv.Close()
	defer cli.Close()
	payload := make([]byte, 4096)
	var args Body
	args.AppendDDPOpaque(payload)
	dst := make([]byte, len(payload))
	b.SetBytes(int64(2 * len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		rep, err := cli.Call(context.Background(), &Request{Prog: testProg, Vers: 1, Proc: procEcho, Args: args})
		if err != nil {
			b.Fatal(err)
		}
		d := NewBodyDecoder(rep.Results)
		d.DDPOpaqueInto(dst)
		if err := d.Done(); err != nil {
			b.Fatal(err)
		}
	}
}
