// Package rawtcp is the raw TCP exchange that the benchmarks compare RPC
// with: a message is a 4-byte big-endian length and that many bytes, and
// the server answers each with AckLen bytes. `rpcrdma bench`'s rawtcp
// cases and the test benchmarks' raw round trip (internal/roundtrip) both
// speak it, so that their baselines are one thing.
package rawtcp

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

const (
	// MaxMessage is the largest message Serve takes.
	MaxMessage = 1 << 20
	// AckLen is the length of the server's answer to each message.
	AckLen = 64
)

// Serve answers the messages that arrive on c, each with AckLen bytes,
// until reading or writing c fails (io.EOF when the peer closed it
// between messages) or a message is longer than MaxMessage. It reads
// through a buffer, so that a small message costs it one read system
// call, as a raw ping-pong's would, not one for the length and one for
// the rest; a large message still goes straight into its buffer once the
// buffered part is taken.
func Serve(c net.Conn) error {
	br := bufio.NewReaderSize(c, 64<<10)
	buf := make([]byte, max(MaxMessage, AckLen))
	for {
		if _, err := io.ReadFull(br, buf[:4]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(buf)
		if n > MaxMessage {
			return fmt.Errorf("rawtcp: message of %d bytes, more than %d", n, MaxMessage)
		}
		if _, err := io.ReadFull(br, buf[:n]); err != nil {
			return err
		}
		if _, err := c.Write(buf[:AckLen]); err != nil {
			return err
		}
	}
}

// Frame makes msg, which has room for at least 4+n bytes, the message
// that carries its n bytes after the length, and returns it. It panics
// if n is negative or more than MaxMessage.
func Frame(msg []byte, n int) []byte {
	if n < 0 || n > MaxMessage {
		panic(fmt.Sprintf("rawtcp: message of %d bytes, want 0 to %d", n, MaxMessage))
	}
	binary.BigEndian.PutUint32(msg, uint32(n))
	return msg[:4+n]
}

// Message returns a new message of n bytes, each one written (Fill).
func Message(n int) []byte { return Frame(Fill(make([]byte, 4+n)), n) }

// Fill writes a pattern of non-zero bytes over b and returns it. A
// baseline must send what a program sends, data it has written: Linux
// maps a fresh buffer that nothing has written to one shared zero page,
// so sending one reads the same 4 KiB again and again from the cache,
// and a 1 MiB write(2) of it measured 3x faster in the kernel's copy
// than of written data (perf, on loopback).
func Fill(b []byte) []byte {
	for i := range b {
		b[i] = byte(i*7) | 1
	}
	return b
}
