package benchprog

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
)

func TestProgramOverTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(&rpc.ServerOptions{Stream: &rpc.StreamOptions{MaxRecord: 4 << 20}})
	var names []string
	RegisterWith(srv, func(name string, h rpc.Handler) rpc.Handler { names = append(names, name); return h })
	go srv.ServeListener(l)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := rpc.DialTCP(ctx, l.Addr().String(), &rpc.StreamOptions{MaxRecord: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := Client{C: rpc.NewClient(tr)}
	defer c.C.Close()

	if want := []string{"NULL", "WRITE", "READ", "LIST", "ECHO", "SLEEP"}; len(names) != len(want) {
		t.Fatalf("registered %v", names)
	}
	if err := c.Null(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, Pattern(100000)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 70001)
	if err := c.Read(ctx, buf); err != nil || !bytes.Equal(buf, Pattern(len(buf))) {
		t.Fatalf("READ: %v", err)
	}
	if p, err := c.List(ctx, 5000); err != nil || !bytes.Equal(p, Pattern(5000)) {
		t.Fatalf("LIST: %v", err)
	}
	if err := c.Echo(ctx, Pattern(3333)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Sleep(ctx, 30*time.Millisecond); err != nil || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("SLEEP: %v after %v", err, time.Since(start))
	}
	var ae *rpc.AcceptError
	if _, err := c.List(ctx, MaxData+1); !errors.As(err, &ae) || ae.Stat != rpc.GarbageArgs {
		t.Fatalf("oversized LIST: %v", err)
	}
	if ProcName(9) != "proc 9" || ProcName(ProcRead) != "READ" {
		t.Fatal("ProcName")
	}
}
