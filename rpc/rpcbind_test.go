package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// TestGetPort asks a portmapper of our own: a registered mapping gives
// its port, an unregistered one ErrNotRegistered, a port past 65535 an
// error, and a mapping's fields arrive in RFC 1833's order.
func TestGetPort(t *testing.T) {
	srv := NewServer(nil)
	var mu sync.Mutex
	var got []uint32
	srv.Handle(PortmapProgram, PortmapVersion, ProcGetPort, func(_ context.Context, c *Call) (Body, error) {
		d := c.Decoder()
		m := []uint32{d.Uint32(), d.Uint32(), d.Uint32(), d.Uint32()}
		if err := d.Done(); err != nil {
			return Body{}, err
		}
		mu.Lock()
		got = m
		mu.Unlock()
		port := uint32(0)
		switch {
		case m[0] == 100005 && m[1] == 3 && m[2] == IPProtoTCP:
			port = 20048
		case m[0] == 7:
			port = 70000
		}
		return Body{XDR: xdr.AppendUint32(nil, port)}, nil
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.ServeListener(l); close(done) }()
	defer func() { srv.Close(); <-done }()
	ctx := ctxTimeout(t, 10e9)
	if port, err := GetPort(ctx, l.Addr().String(), 100005, 3, IPProtoTCP); port != 20048 || err != nil {
		t.Errorf("GETPORT MOUNT v3 tcp = %d %v", port, err)
	}
	mu.Lock()
	m := got
	mu.Unlock()
	if len(m) != 4 || m[0] != 100005 || m[1] != 3 || m[2] != 6 || m[3] != 0 {
		t.Errorf("the mapping arrived as %v", m)
	}
	if _, err := GetPort(ctx, l.Addr().String(), 100005, 3, IPProtoUDP); !errors.Is(err, ErrNotRegistered) || !strings.Contains(err.Error(), "100005 version 3") {
		t.Errorf("unregistered: %v", err)
	}
	if _, err := GetPort(ctx, l.Addr().String(), 7, 1, IPProtoTCP); err == nil {
		t.Error("a port past 65535 was taken")
	}
}
