//go:build linux && cgo && verbs

package verbs

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/roundtrip"
	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// The benchmarks run on one device, connected to itself: perftest's
// ib_write_bw, ib_read_bw and ib_send_lat with -R (rdma_cm) measure the
// same thing, and the lab compares the two in one guest run. Run them in
// the guest with -verbs.addr and -verbs.device, -test.bench and
// -test.benchtime.

func benchPair(b *testing.B, opts Options) (rdma.Conn, rdma.Conn) {
	tg := targets(b)[0]
	if opts.Device == "" {
		opts.Device = tg.device
	}
	p, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	return rdmatest.Pair(b, rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0"},
		rdma.ConnConfig{SendQueueDepth: 128, ORD: 16}, rdma.ConnConfig{IRD: 16})
}

// benchBulk keeps depth RDMA Writes or Reads of size bytes outstanding, as
// ib_write_bw and ib_read_bw do (their default depth is 128 for Writes;
// Reads are bounded by the ORD, 16 here).
func benchBulk(b *testing.B, op rdma.Op, size, depth int, opts Options) {
	a, r := benchPair(b, opts)
	local, err := a.Alloc(size, rdma.AccessLocalWrite)
	if err != nil {
		b.Fatal(err)
	}
	defer local.Release()
	remote, err := r.Alloc(size, rdma.AccessRemoteRead|rdma.AccessRemoteWrite)
	if err != nil {
		b.Fatal(err)
	}
	defer remote.Release()
	wr := rdma.WorkRequest{Op: op, Local: []rdma.SGE{{MR: local, Length: size}}, RemoteSTag: remote.STag(), RemoteTO: remote.TO()}
	ctx := context.Background()
	cs := make([]rdma.Completion, depth)
	b.SetBytes(int64(size))
	b.ResetTimer()
	posted, done := 0, 0
	for done < b.N {
		for posted < b.N && posted-done < depth {
			if err := a.PostSend(&wr); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		n, err := a.Wait(ctx, cs)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cs[:n] {
			if c.Status != rdma.StatusSuccess {
				b.Fatalf("%v: %v", c.Op, c.Status)
			}
		}
		done += n
	}
}

func BenchmarkWrite1MiB(b *testing.B) { benchBulk(b, rdma.OpWrite, 1<<20, 16, Options{}) }
func BenchmarkRead1MiB(b *testing.B)  { benchBulk(b, rdma.OpRead, 1<<20, 16, Options{}) }

// The same polling only (a negative Options.BusyPoll), beside perftest's
// default (polling) mode; the two above sleep on completion events, as
// perftest's -e does.
func BenchmarkWrite1MiBBusyPoll(b *testing.B) {
	benchBulk(b, rdma.OpWrite, 1<<20, 16, Options{BusyPoll: -1})
}
func BenchmarkRead1MiBBusyPoll(b *testing.B) {
	benchBulk(b, rdma.OpRead, 1<<20, 16, Options{BusyPoll: -1})
}

// benchPingPong is ib_send_lat's exchange: 2-byte Sends back and forth,
// one outstanding. The reported ns/op is a round trip's mean, p50-ns/op
// its median: twice ib_send_lat's typical figure.
func benchPingPong(b *testing.B, opts Options) {
	a, r := benchPair(b, opts)
	ctx := context.Background()
	mk := func(c rdma.Conn) (rdma.MR, rdma.MR) {
		s, err := c.Alloc(2, 0)
		if err != nil {
			b.Fatal(err)
		}
		d, err := c.Alloc(64*2, rdma.AccessLocalWrite)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 64 {
			if err := c.PostRecv(uint64(i), []rdma.SGE{{MR: d, Offset: 2 * i, Length: 2}}); err != nil {
				b.Fatal(err)
			}
		}
		return s, d
	}
	as, ad := mk(a)
	rs, rd := mk(r)
	wait := func(c rdma.Conn, d rdma.MR, want int) {
		var cs [2]rdma.Completion
		for got := 0; got < want; {
			n, err := c.Wait(ctx, cs[:want-got])
			if err != nil {
				b.Fatal(err)
			}
			for _, x := range cs[:n] {
				if x.Status != rdma.StatusSuccess {
					b.Fatalf("%v: %v", x.Op, x.Status)
				}
				if x.Op == rdma.OpRecv {
					if err := c.PostRecv(x.ID, []rdma.SGE{{MR: d, Offset: 2 * int(x.ID), Length: 2}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			got += n
		}
	}
	done := make(chan struct{})
	go func() { // the responder echoes
		defer close(done)
		wr := rdma.WorkRequest{Op: rdma.OpSend, Local: []rdma.SGE{{MR: rs, Length: 2}}}
		for range b.N {
			wait(r, rd, 1) // the Send arrived
			if err := r.PostSend(&wr); err != nil {
				b.Error(err)
				return
			}
			wait(r, rd, 1) // its Send completed
		}
	}()
	wr := rdma.WorkRequest{Op: rdma.OpSend, Local: []rdma.SGE{{MR: as, Length: 2}}}
	// No warm-up: the responder echoes b.N Sends.
	roundtrip.Measure(b, 0, func() error {
		if err := a.PostSend(&wr); err != nil {
			return err
		}
		wait(a, ad, 2) // the Send's completion and the echo
		return nil
	})
	<-done
}

func BenchmarkPingPong(b *testing.B)         { benchPingPong(b, Options{}) }
func BenchmarkPingPongBusyPoll(b *testing.B) { benchPingPong(b, Options{BusyPoll: -1}) }

// BenchmarkPingPongBusyPollWindow spins 200 µs before it sleeps: under a
// slow emulator (the lab's qemu TCG guest) most Waits give up before the
// round trip ends and sleep as in the event mode.
func BenchmarkPingPongBusyPollWindow(b *testing.B) {
	benchPingPong(b, Options{BusyPoll: 200 * time.Microsecond})
}

// BenchmarkPollEmpty is one Poll of an empty completion queue: a busy
// Wait's iteration costs this and a runtime.Gosched.
func BenchmarkPollEmpty(b *testing.B) {
	a, _ := benchPair(b, Options{})
	var cs [4]rdma.Completion
	for b.Loop() {
		if a.Poll(cs[:]) != 0 {
			b.Fatal("a completion on an idle connection")
		}
	}
}

// BenchmarkGosched is runtime.Gosched alone, for BenchmarkPollEmpty.
func BenchmarkGosched(b *testing.B) {
	for b.Loop() {
		runtime.Gosched()
	}
}
