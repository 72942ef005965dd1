package roundtrip

import (
	"io"
	"net"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/rawtcp"
)

// MaxRawTCP is the largest message RawTCP sends.
const MaxRawTCP = rawtcp.MaxMessage

// RawTCP starts a loopback TCP server that answers each message with
// rawtcp.AckLen bytes (rawtcp.Serve, as `rpcrdma bench`'s raw baseline),
// connects to it, and returns a function that sends one message of n
// bytes (at most MaxRawTCP) and waits for its acknowledgement: the raw
// round trip the benchmarks of one call at a time are compared with. The
// server and the connection end with tb.
func RawTCP(tb testing.TB) func(n int) error {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		rawtcp.Serve(c)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	msg := rawtcp.Fill(make([]byte, 4+MaxRawTCP))
	ack := make([]byte, rawtcp.AckLen)
	return func(n int) error {
		if _, err := c.Write(rawtcp.Frame(msg, n)); err != nil {
			return err
		}
		_, err := io.ReadFull(c, ack)
		return err
	}
}
