package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
)

// TestClientOfHTTPServer: a client pointed at an HTTP server, which
// answers its call with an HTTP error, is told that the address is not an
// RPC server, not that a record of 1213486160 bytes is too large.
func TestClientOfHTTPServer(t *testing.T) {
	leaktest.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Read(make([]byte, 512))
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := DialTCP(ctx, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(tr)
	defer c.Close()
	err = c.Null(ctx, 100003, 3)
	want := l.Addr().String() + " is not an RPC server (it answered with HTTP)"
	if !errors.Is(err, ErrHTTP) || !errors.Is(err, net.ErrClosed) || !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), want) {
		t.Errorf("NULL to an HTTP server: %v; want an error containing %q", err, want)
	}
	if n := strings.Count(err.Error(), "rpc: "); n != 1 {
		t.Errorf("NULL to an HTTP server: %q says \"rpc: \" %d times, want once", err, n)
	}
	<-served
}

// TestServerOfHTTPClient: a server whose peer sends an HTTP request ends
// the connection with an error saying so.
func TestServerOfHTTPClient(t *testing.T) {
	leaktest.Check(t)
	c1, c2 := net.Pipe()
	defer c2.Close()
	go io.WriteString(c2, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	srv := NewServer(nil)
	err := srv.Serve(NewStreamTransport(c1, nil))
	if !errors.Is(err, ErrHTTP) || !strings.Contains(err.Error(), "pipe is not an RPC client (it sent an HTTP request)") {
		t.Errorf("Serve of an HTTP client: %v", err)
	}
}

// TestRecordReaderHTTP: a record mark reading "HTTP" or a request method
// is reported as HTTP at the start of a record when it exceeds the
// maximum, and nowhere else.
func TestRecordReaderHTTP(t *testing.T) {
	for _, tt := range []struct {
		name, in  string
		max       int
		http      bool
		wantError error
	}{
		{"response", "HTTP/1.0 200 OK\r\n", 0, true, ErrHTTP},
		{"request", "POST /rpc HTTP/1.1\r\n", 0, true, ErrHTTP},
		{"h2-preface", "PRI * HTTP/2.0\r\n", 0, true, ErrHTTP},
		// "HTTP" as the second fragment's mark: too large, not HTTP.
		{"second-fragment", "\x00\x00\x00\x04abcdHTTP", 0, false, ErrRecordTooLarge},
		// A maximum above the length "HTTP" reads as: a fragment like
		// any other, which here ends early.
		{"within-maximum", "HTTP/1.0 200 OK\r\n", MaxFragmentLen, false, io.ErrUnexpectedEOF},
		{"binary", "\x7f\xff\xff\xff", 0, false, ErrRecordTooLarge},
	} {
		for _, resumable := range []bool{false, true} {
			rr := NewRecordReader(strings.NewReader(tt.in), tt.max, 0)
			var err error
			if resumable {
				_, err = rr.next()
			} else {
				_, err = rr.ReadRecord(nil)
			}
			if !errors.Is(err, tt.wantError) || errors.Is(err, ErrHTTP) != tt.http {
				t.Errorf("%s (resumable %v): %v, want %v", tt.name, resumable, err, tt.wantError)
			}
			if tt.http && !strings.HasPrefix(err.Error(), "rpc: the peer is not an RPC ") {
				t.Errorf("%s: %q", tt.name, err)
			}
		}
	}
}

// TestReconnectingClientOfHTTPServer: a reconnecting Client that reaches
// an HTTP server gives up at once, instead of dialing the same server
// again until its attempts run out.
func TestReconnectingClientOfHTTPServer(t *testing.T) {
	leaktest.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Read(make([]byte, 512))
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n400 Bad Request")
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := DialClient(ctx, ReconnectConfig{Attempts: 4, MinBackoff: time.Millisecond,
		Dial: func(ctx context.Context) (Transport, error) { return DialTCP(ctx, l.Addr().String(), nil) }})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Null(ctx, 100003, 3)
	if !errors.Is(err, ErrHTTP) || !strings.Contains(err.Error(), "is not an RPC server (it answered with HTTP)") {
		t.Errorf("NULL to an HTTP server: %v; want it named not an RPC server", err)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the Client dialed the HTTP server %d times, want once", n)
	}
	c.Close()
	l.Close()
	<-served
}
