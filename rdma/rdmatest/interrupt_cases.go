package rdmatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// interrupter returns c as an rdma.WaitInterrupter, or skips the test if
// the provider's connections are not.
func interrupter(t *testing.T, c rdma.Conn) rdma.WaitInterrupter {
	t.Helper()
	wi, ok := c.(rdma.WaitInterrupter)
	if !ok {
		t.Skipf("connection %T cannot interrupt a Wait", c)
	}
	return wi
}

// testWaitInterrupt: InterruptWait makes a blocked Wait return (0, nil);
// one made while no Wait runs makes the next Wait return at once; it
// takes no completion away and does not allocate.
func testWaitInterrupt(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	wa := interrupter(t, a)
	ctx := Context(t, cfg)
	var cs [4]rdma.Completion

	// A Wait in progress.
	type result struct {
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		var cs [1]rdma.Completion
		n, err := a.Wait(ctx, cs[:])
		res <- result{n, err}
	}()
	time.Sleep(10 * time.Millisecond) // let it block (it must return either way)
	wa.InterruptWait()
	if r := <-res; r.n != 0 || r.err != nil {
		t.Fatalf("interrupted Wait with nothing posted returned %d, %v; want 0, nil", r.n, r.err)
	}

	// An interrupt before the Wait: the Wait returns although nothing
	// completes; the interrupt is then consumed.
	wa.InterruptWait()
	if n, err := a.Wait(ctx, cs[:]); n != 0 || err != nil {
		t.Fatalf("Wait after InterruptWait returned %d, %v; want 0, nil", n, err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	n, err := a.Wait(short, cs[:])
	cancel()
	if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Wait after one InterruptWait returned %d, %v; want the deadline", n, err)
	}

	// Interrupts do not lose or reorder completions.
	rm := Alloc(t, b, 64, rdma.AccessLocalWrite)
	sm := Alloc(t, a, 64, 0)
	const sends = 3
	for i := range sends {
		PostRecv(t, b, uint64(100+i), rdma.SGE{MR: rm, Offset: i * 16, Length: 16})
	}
	for i := range sends {
		wa.InterruptWait()
		Post(t, a, rdma.WorkRequest{ID: uint64(i + 1), Op: rdma.OpSend, Local: []rdma.SGE{{MR: sm, Offset: i * 16, Length: 16}}})
	}
	var got []rdma.Completion
	for tries := 0; len(got) < sends; tries++ {
		if tries > 1000 {
			t.Fatalf("after %d Waits, completions %+v", tries, got)
		}
		n, err := a.Wait(ctx, cs[:])
		if err != nil {
			t.Fatalf("Wait for the Sends' completions after %+v: %v", got, err)
		}
		got = append(got, cs[:n]...)
	}
	for i, c := range got {
		Want(t, c, uint64(i+1), rdma.OpSend, rdma.StatusSuccess, 16)
	}
	for i, c := range WaitN(t, cfg, b, sends) {
		Want(t, c, uint64(100+i), rdma.OpRecv, rdma.StatusSuccess, 16)
	}

	if allocs := testing.AllocsPerRun(100, wa.InterruptWait); allocs != 0 {
		t.Errorf("InterruptWait allocates %v times", allocs)
	}
}

// testWaitInterruptEnd: InterruptWait after the connection has ended
// changes nothing: Wait still returns the connection's error.
func testWaitInterruptEnd(t *testing.T, cfg Config) {
	a, _ := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	wa := interrupter(t, a)
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	wa.InterruptWait()
	if _, err := Drain(t, cfg, a); !errors.Is(err, rdma.ErrClosed) {
		t.Fatalf("Wait after Close and InterruptWait: %v, want ErrClosed", err)
	}
	wa.InterruptWait()
	var cs [1]rdma.Completion
	if n, err := a.Wait(Context(t, cfg), cs[:]); n != 0 || !errors.Is(err, rdma.ErrClosed) {
		t.Fatalf("second Wait after the end: %d, %v; want 0, ErrClosed", n, err)
	}
}
