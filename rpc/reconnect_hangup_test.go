package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
)

// TestReconnectHangUps: a peer that closes every connection once a call
// arrives, without answering, makes the Client give up after its
// attempts (5 connections without Attempts), saying so, instead of
// redialing until the call's context ends.
func TestReconnectHangUps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		attempts  int
		refuseAt  int // dials from this one on fail (0: none do)
		dials     int
		want      string
		wantCause error
	}{
		{"attempts", 3, 0, 4, "the server keeps closing the connection before answering: closed 4 connections in a row (the last: " + net.ErrClosed.Error() + ")", net.ErrClosed},
		{"default", 0, 0, 5, "closed 5 connections in a row", net.ErrClosed},
		{"mixed", 3, 3, 4, "reconnecting: the server closed 2 connections in a row before answering, and 2 dials failed; the last: refused (test)", errRefusedTest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					mu    sync.Mutex
					dials int
				)
				dial := func(ctx context.Context) (Transport, error) {
					mu.Lock()
					dials++
					n := dials
					mu.Unlock()
					if tc.refuseAt > 0 && n >= tc.refuseAt {
						return nil, errRefusedTest
					}
					a, b := memPair()
					go func() {
						b.Recv() // a call came: hang up
						b.Close()
					}()
					return a, nil
				}
				c, err := DialClient(context.Background(), ReconnectConfig{Dial: dial, Attempts: tc.attempts})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				start := time.Now()
				err = c.Null(ctx, testProg, 1)
				if _, ok := errors.AsType[*ConnError](err); !ok || !errors.Is(err, net.ErrClosed) || !errors.Is(err, tc.wantCause) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("call to a peer that hangs up: %v\nwant a *ConnError containing %q", err, tc.want)
				}
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("the call failed after %v", d)
				}
				mu.Lock()
				defer mu.Unlock()
				if dials != tc.dials {
					t.Errorf("%d dials, want %d", dials, tc.dials)
				}
			})
		})
	}
}

var errRefusedTest = errors.New("refused (test)")

// TestReconnectHangUpsTCP: over TCP, the error names the peer's address
// and how the last connection ended (EOF, or a reset: the peer closed
// with the call unread).
func TestReconnectHangUpsTCP(t *testing.T) {
	leaktest.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() {
		l.Close()
		wg.Wait()
	}()
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 512)) // the call
			c.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialClient(ctx, ReconnectConfig{Attempts: 3, MinBackoff: time.Millisecond, Dial: func(ctx context.Context) (Transport, error) {
		t, err := DialTCP(ctx, l.Addr().String(), nil)
		if err != nil {
			return nil, err
		}
		return t, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	err = c.Null(ctx, testProg, 1)
	want := "rpc: connection failed: " + l.Addr().String() + " keeps closing the connection before answering: closed 4 connections in a row (the last: "
	if !errors.Is(err, net.ErrClosed) || err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("NULL: %v\nwant %s", err, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the call failed after %v", d)
	}
}
