package nfs

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/race"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// exportDir returns a Server exporting dir as /export, and its LocalFS,
// closed when tb ends.
func exportDir(tb testing.TB, dir string) (*Server, *LocalFS) {
	tb.Helper()
	fsys, err := NewLocalFS(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fsys.Close() })
	s, err := NewServer(ServerConfig{Exports: []Export{{Path: "/export", FS: fsys}}})
	if err != nil {
		tb.Fatal(err)
	}
	return s, fsys
}

// benchServer returns a Server exporting a directory with a 4 MiB file,
// and the file's handle.
func benchServer(b testing.TB) (*Server, nfs3.FileHandle) {
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), make([]byte, 4<<20), 0o644)
	s, fsys := exportDir(b, dir)
	ino, err := fsys.Lookup(context.Background(), fsys.Root(), "f")
	if err != nil {
		b.Fatal(err)
	}
	return s, s.byID[s.exports[0].id].key.handle(nil, ino)
}

// benchHandler runs h on args b.N times, as rpc.Server would (AfterReply
// included), and reports
// the allocations per call: the server's cost per READ or WRITE without
// the transport's.
func benchHandler(b *testing.B, h rpc.Handler, args rpc.Body, size int) {
	ctx := context.Background()
	var c rpc.Call
	c.AuthSys = &rpc.AuthSysParms{UID: 0, GID: 0}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		c.Args = args
		c.Decoder().Reset(args)
		res, err := h(ctx, &c)
		if err != nil || len(res.XDR) < 4 || res.XDR[3] != 0 {
			b.Fatalf("%x %v", res.XDR, err)
		}
		if c.AfterReply != nil {
			c.AfterReply(res)
			c.AfterReply = nil
		}
	}
}

func BenchmarkServerRead(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			s, fh := benchServer(b)
			var args rpc.Body
			(&nfs3.ReadArgs{FH: fh, Count: uint32(size)}).Append(&args)
			benchHandler(b, s.read, args, size)
		})
	}
}

func BenchmarkServerWrite(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			s, fh := benchServer(b)
			var args rpc.Body
			(&nfs3.WriteArgs{FH: fh, Count: uint32(size), Stable: nfs3.Unstable, Data: make([]byte, size)}).Append(&args)
			benchHandler(b, s.write, args, size)
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return "1MiB"
	}
	return "4KiB"
}

// BenchmarkClient measures 1 MiB READs and WRITEs through the Client,
// one at a time, against an in-process Server over each transport.
func BenchmarkClient(b *testing.B) {
	for _, tr := range []string{"tcp", "iwarp"} {
		for _, op := range []string{"write", "read"} {
			b.Run(tr+"/"+op, func(b *testing.B) {
				e := newEnv(b, tr)
				c := e.mount(b, "/export")
				ctx := context.Background()
				fh, err := c.Create(ctx, c.Root(), "f", nfs3.Unchecked, nfs3.SetAttr{})
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, 1<<20)
				if _, err := c.WriteAt(ctx, fh, buf, 0); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				for b.Loop() {
					if op == "write" {
						_, _, _, err = c.Write(ctx, fh, buf, 0, nfs3.Unstable)
					} else {
						_, _, err = c.Read(ctx, fh, buf, 0)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestServerIOAllocs: in steady state a READ or WRITE allocates nothing on
// the server, the READ's data buffer included (readState, writeState,
// rpc.Call.AfterReply).
func TestServerIOAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop values")
	}
	s, fh := benchServer(t)
	var readArgs, smallReadArgs, writeArgs rpc.Body
	(&nfs3.ReadArgs{FH: fh, Count: 1 << 20}).Append(&readArgs)
	(&nfs3.ReadArgs{FH: fh, Count: 4 << 10}).Append(&smallReadArgs)
	(&nfs3.WriteArgs{FH: fh, Count: 1 << 20, Stable: nfs3.Unstable, Data: make([]byte, 1<<20)}).Append(&writeArgs)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		h     rpc.Handler
		args  rpc.Body
		items int
	}{{"READ", s.read, readArgs, 1}, {"4 KiB READ", s.read, smallReadArgs, 1}, {"WRITE", s.write, writeArgs, 0}} {
		var c rpc.Call
		c.AuthSys = &rpc.AuthSysParms{}
		allocs := testing.AllocsPerRun(100, func() {
			c.Args = tc.args
			c.Decoder().Reset(tc.args)
			res, err := tc.h(ctx, &c)
			if err != nil || len(res.XDR) < 4 || res.XDR[3] != 0 || len(res.Items) != tc.items || c.AfterReply == nil {
				t.Fatalf("%s: %x %v", tc.name, res.XDR, err)
			}
			c.AfterReply(res)
			c.AfterReply = nil
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call", tc.name, allocs)
		}
	}
}

// BenchmarkClientQD4 measures 1 MiB READs and WRITEs through the Client
// with four calls in flight on one connection, as `rpcrdma nfs bench --qd
// 4` makes them, against an in-process Server.
func BenchmarkClientQD4(b *testing.B) {
	for _, tr := range []string{"tcp", "iwarp"} {
		for _, op := range []string{"write", "read"} {
			b.Run(tr+"/"+op, func(b *testing.B) {
				e := newEnv(b, tr)
				c := e.mount(b, "/export")
				ctx := context.Background()
				fh, err := c.Create(ctx, c.Root(), "f", nfs3.Unchecked, nfs3.SetAttr{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.WriteAt(ctx, fh, make([]byte, 4<<20), 0); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				b.SetParallelism(max(1, 4/runtime.GOMAXPROCS(0)))
				var next atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					buf := make([]byte, 1<<20)
					for pb.Next() {
						off := next.Add(1) % 4 << 20
						var err error
						if op == "write" {
							_, _, _, err = c.Write(ctx, fh, buf, off, nfs3.Unstable)
						} else {
							_, _, err = c.Read(ctx, fh, buf, off)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// TestServerReadBuffers: a READ of a few KiB takes a small buffer, not
// one of MaxIO, and a burst of READs in flight leaves at most the bounded
// number of buffers idle.
func TestServerReadBuffers(t *testing.T) {
	s, fh := benchServer(t)
	ctx := context.Background()
	read := func(count uint32) (*rpc.Call, rpc.Body) {
		var args rpc.Body
		(&nfs3.ReadArgs{FH: fh, Count: count}).Append(&args)
		c := &rpc.Call{Args: args, AuthSys: &rpc.AuthSysParms{}}
		c.Decoder().Reset(args)
		res, err := s.read(ctx, c)
		if err != nil || len(res.Items) != 1 || len(res.Items[0].Data) != int(count) {
			t.Fatalf("READ %d: %v %v", count, res.Items, err)
		}
		return c, res
	}
	c, res := read(4 << 10)
	if n := cap(res.Items[0].Data); n != smallRead {
		t.Errorf("a 4 KiB READ's buffer holds %d bytes, want %d", n, smallRead)
	}
	c.AfterReply(res)
	const burst = 2 * max(bigBufsKept, smallBufsKept)
	for _, count := range []uint32{4 << 10, 1 << 20} {
		var calls []*rpc.Call
		var results []rpc.Body
		for range burst {
			c, res := read(count)
			calls, results = append(calls, c), append(results, res)
		}
		for i, c := range calls {
			c.AfterReply(results[i])
		}
	}
	if len(s.smallBufs.kept) != smallBufsKept || len(s.bigBufs.kept) != bigBufsKept || len(s.reads.kept) > statesKept {
		t.Errorf("after bursts of %d READs: %d small and %d MaxIO buffers, %d states idle; want %d, %d and at most %d",
			burst, len(s.smallBufs.kept), len(s.bigBufs.kept), len(s.reads.kept), smallBufsKept, bigBufsKept, statesKept)
	}
	for _, b := range s.bigBufs.kept {
		if len(b) != int(s.maxIO) {
			t.Fatalf("an idle MaxIO buffer holds %d bytes", len(b))
		}
	}
}
