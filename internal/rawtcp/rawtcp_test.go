package rawtcp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// TestMessage: the golden bytes of a message (its payload written, never
// zero: see Fill), and Frame's bounds.
func TestMessage(t *testing.T) {
	if got, want := Message(3), []byte{0, 0, 0, 3, 0x1d, 0x23, 0x2b}; !bytes.Equal(got, want) {
		t.Errorf("Message(3) = %x, want %x", got, want)
	}
	for _, n := range []int{-1, MaxMessage + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Frame(%d) did not panic", n)
				}
			}()
			Frame(make([]byte, 4), n)
		}()
	}
}

// TestServe: empty, small and largest messages each get AckLen bytes back,
// in order; a message over MaxMessage ends Serve with an error, and so
// does the peer's close, with io.EOF.
func TestServe(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(b) }()
	ack := make([]byte, AckLen)
	for _, n := range []int{0, 64, MaxMessage} {
		go a.Write(Message(n))
		if _, err := io.ReadFull(a, ack); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], MaxMessage+1)
	a.Write(hdr[:])
	if err := <-done; err == nil {
		t.Fatal("Serve took a message over MaxMessage")
	}

	a2, b2 := net.Pipe()
	go func() { done <- Serve(b2) }()
	a2.Close()
	if err := <-done; err != io.EOF {
		t.Fatalf("Serve after the peer's close: %v, want io.EOF", err)
	}
}
