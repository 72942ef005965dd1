package trace

import (
	"bytes"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/trace/tracetest"
)

// BenchmarkDecode decodes a capture of 2000 NULL calls and replies, each
// FPDU in its own TCP segment, with CRCs.
func BenchmarkDecode(b *testing.B) {
	var buf bytes.Buffer
	p := tracetest.NewPcap(&buf)
	c := p.Connect(testClient, testServer)
	req, rep := rev2Frames(true)
	c.Send(0, req)
	c.Send(1, rep)
	for i := range uint32(2000) {
		c.Send(0, tracetest.NullCall(true, i, i+1))
		c.Send(1, tracetest.NullCall(true, i, i+1)) // a call as the reply: same size, same work
	}
	capture := buf.Bytes()
	b.SetBytes(int64(len(capture)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(capture))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if _, err := Decode(r, Options{}, func(*Event) { n++ }); err != nil || n != 4002 {
			b.Fatalf("%d events, %v", n, err)
		}
	}
}
