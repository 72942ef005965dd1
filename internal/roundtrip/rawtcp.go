package roundtrip

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// MaxRawTCP is the largest message RawTCP sends.
const MaxRawTCP = 1 << 20

// RawTCP starts a loopback TCP server that answers each message with a
// 64-byte acknowledgement, connects to it, and returns a function that
// sends one message of n bytes (at most MaxRawTCP) and waits for its
// acknowledgement: the raw round trip the benchmarks of one call at a
// time are compared with. A message is its length (4 bytes) and that
// many bytes; the server reads through a buffer, so that a small message
// costs it one read system call, as a raw ping-pong would, not one for
// the length and one for the rest. The server and the connection end
// with tb.
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
		br := bufio.NewReaderSize(c, 64<<10)
		buf := make([]byte, MaxRawTCP)
		for {
			if _, err := io.ReadFull(br, buf[:4]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(buf)
			if n > MaxRawTCP {
				return
			}
			if _, err := io.ReadFull(br, buf[:n]); err != nil {
				return
			}
			if _, err := c.Write(buf[:64]); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	msg := make([]byte, 4+MaxRawTCP)
	ack := make([]byte, 64)
	return func(n int) error {
		if n < 0 || n > MaxRawTCP {
			panic("roundtrip: RawTCP message size out of range")
		}
		binary.BigEndian.PutUint32(msg, uint32(n))
		if _, err := c.Write(msg[:4+n]); err != nil {
			return err
		}
		_, err := io.ReadFull(c, ack)
		return err
	}
}
