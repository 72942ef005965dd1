// Package benchprog is the bench program that `rpcrdma serve` offers and
// `rpcrdma bench` and `rpcrdma ping` call: one procedure per RPC-over-RDMA
// data path, with client helpers that mark the right items DDP-eligible.
//
// Program Number is 0x20049001, in RFC 5531's range for user-defined
// programs (0x20000000-0x3fffffff), version 1:
//
//	NULL   0  void -> void                       inline both ways
//	WRITE  1  opaque data<> (DDP) -> uint32 n    read chunk for large data
//	READ   2  uint32 n -> opaque data<> (DDP)    write chunk into the caller's buffer
//	LIST   3  uint32 n -> opaque data<>          reply chunk for large n (not DDP-eligible)
//	ECHO   4  opaque data<> -> opaque data<>     long call and long reply for large data
//	SLEEP  5  uint32 ms -> void                  waits ms milliseconds (at most 10 s): in-flight calls for shutdown tests
//
// READ and LIST return n bytes of a fixed pattern; WRITE returns the number
// of bytes it received and ECHO returns its argument.
package benchprog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The program and its procedures.
const (
	Prog = 0x20049001
	Vers = 1

	ProcNull  = 0
	ProcWrite = 1
	ProcRead  = 2
	ProcList  = 3
	ProcEcho  = 4
	ProcSleep = 5
)

// MaxData bounds every opaque of the program.
const MaxData = 16 << 20

// ProcName returns the procedure's name, or "proc N".
func ProcName(p uint32) string {
	switch p {
	case ProcNull:
		return "NULL"
	case ProcWrite:
		return "WRITE"
	case ProcRead:
		return "READ"
	case ProcList:
		return "LIST"
	case ProcEcho:
		return "ECHO"
	case ProcSleep:
		return "SLEEP"
	}
	return fmt.Sprintf("proc %d", p)
}

// Register adds the program to srv.
func Register(srv *rpc.Server) { RegisterWith(srv, nil) }

// RegisterWith adds the program to srv with each handler passed through
// wrap (with the procedure's name) when wrap is not nil, for metrics or
// logging.
func RegisterWith(srv *rpc.Server, wrap func(name string, h rpc.Handler) rpc.Handler) {
	// Every procedure but SLEEP returns promptly.
	handle := func(proc uint32, h rpc.Handler) {
		if wrap != nil {
			h = wrap(ProcName(proc), h)
		}
		if proc == ProcSleep {
			srv.Handle(Prog, Vers, proc, h)
		} else {
			srv.HandleShort(Prog, Vers, proc, h)
		}
	}
	handle(ProcNull, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		return rpc.Body{}, nil
	})
	handle(ProcWrite, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		p := c.Decoder().DDPOpaque(MaxData)
		return rpc.Body{XDR: xdr.AppendUint32(nil, uint32(len(p)))}, nil
	})
	handle(ProcRead, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		n := c.Decoder().Uint32()
		if n > MaxData {
			return rpc.Body{}, rpc.ErrGarbageArgs
		}
		var b rpc.Body
		b.AppendDDPOpaque(Pattern(int(n)))
		return b, nil
	})
	handle(ProcList, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		n := c.Decoder().Uint32()
		if n > MaxData {
			return rpc.Body{}, rpc.ErrGarbageArgs
		}
		return rpc.Body{XDR: xdr.AppendOpaque(make([]byte, 0, xdr.OpaqueLen(int(n))), Pattern(int(n)))}, nil
	})
	handle(ProcEcho, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		p := c.Decoder().Opaque(MaxData)
		return rpc.Body{XDR: xdr.AppendOpaque(make([]byte, 0, xdr.OpaqueLen(len(p))), p)}, nil
	})
	handle(ProcSleep, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		ms := min(c.Decoder().Uint32(), 10000)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return rpc.Body{}, ctx.Err()
		}
		return rpc.Body{}, nil
	})
}

var pattern = sync.OnceValue(func() []byte {
	p := make([]byte, MaxData)
	for i := range p {
		p[i] = byte(i*131 + i>>8)
	}
	return p
})

// Pattern returns the first n bytes (at most MaxData) of the program's
// data pattern. The slice is shared: do not modify it.
func Pattern(n int) []byte { return pattern()[:n:n] }

// ErrMismatch: a result did not carry what the procedure promises.
var ErrMismatch = errors.New("benchprog: result does not match")

// Client calls the program.
type Client struct{ C *rpc.Client }

// Null calls NULL.
func (c Client) Null(ctx context.Context) error { return c.C.Null(ctx, Prog, Vers) }

// Write sends data as a DDP-eligible argument.
func (c Client) Write(ctx context.Context, data []byte) error {
	var args rpc.Body
	args.AppendDDPOpaque(data)
	// The reply is decoded here and dropped: it can go in scratch memory.
	rb := smallReplies.Get().(*[smallReply]byte)
	defer smallReplies.Put(rb)
	rep, err := c.C.Call(ctx, &rpc.Request{Prog: Prog, Vers: Vers, Proc: ProcWrite, Args: args, ReplyBuf: rb[:0]})
	if err != nil {
		return err
	}
	d := rpc.NewBodyDecoder(rep.Results)
	if n := d.Uint32(); d.Done() != nil || int(n) != len(data) {
		return fmt.Errorf("%w: WRITE of %d bytes acknowledged %d", ErrMismatch, len(data), n)
	}
	return nil
}

// smallReply is room for a reply carrying a few words.
const smallReply = 256

var smallReplies = sync.Pool{New: func() any { return new([smallReply]byte) }}

// Read reads len(buf) bytes into buf, offered as a write chunk.
func (c Client) Read(ctx context.Context, buf []byte) error {
	rep, err := c.C.Call(ctx, &rpc.Request{
		Prog: Prog, Vers: Vers, Proc: ProcRead,
		Args:       rpc.Body{XDR: xdr.AppendUint32(nil, uint32(len(buf)))},
		ResultBufs: [][]byte{buf},
	})
	if err != nil {
		return err
	}
	d := rpc.NewBodyDecoder(rep.Results)
	if n := d.DDPOpaqueInto(buf); d.Done() != nil || n != len(buf) {
		return fmt.Errorf("%w: READ of %d bytes returned %d (%v)", ErrMismatch, len(buf), n, d.Err())
	}
	return nil
}

// List asks for an n-byte non-DDP result, which needs a reply chunk when
// it does not fit inline, and returns it.
func (c Client) List(ctx context.Context, n int) ([]byte, error) {
	rep, err := c.C.Call(ctx, &rpc.Request{
		Prog: Prog, Vers: Vers, Proc: ProcList,
		Args:     rpc.Body{XDR: xdr.AppendUint32(nil, uint32(n))},
		MaxReply: xdr.OpaqueLen(n) + 64,
	})
	if err != nil {
		return nil, err
	}
	d := rpc.NewBodyDecoder(rep.Results)
	p := d.Opaque(MaxData)
	if d.Done() != nil || len(p) != n {
		return nil, fmt.Errorf("%w: LIST of %d bytes returned %d (%v)", ErrMismatch, n, len(p), d.Err())
	}
	return p, nil
}

// Echo sends data inline (not DDP-eligible), which makes a long call and a
// long reply when it is large, and checks that it comes back.
func (c Client) Echo(ctx context.Context, data []byte) error {
	rep, err := c.C.Call(ctx, &rpc.Request{
		Prog: Prog, Vers: Vers, Proc: ProcEcho,
		Args:     rpc.Body{XDR: xdr.AppendOpaque(nil, data)},
		MaxReply: xdr.OpaqueLen(len(data)) + 64,
	})
	if err != nil {
		return err
	}
	d := rpc.NewBodyDecoder(rep.Results)
	p := d.Opaque(MaxData)
	if d.Done() != nil || len(p) != len(data) {
		return fmt.Errorf("%w: ECHO of %d bytes returned %d (%v)", ErrMismatch, len(data), len(p), d.Err())
	}
	return nil
}

// Sleep calls SLEEP, which returns after d (at most 10 s).
func (c Client) Sleep(ctx context.Context, d time.Duration) error {
	_, err := c.C.Call(ctx, &rpc.Request{
		Prog: Prog, Vers: Vers, Proc: ProcSleep,
		Args: rpc.Body{XDR: xdr.AppendUint32(nil, uint32(d/time.Millisecond))},
	})
	return err
}
