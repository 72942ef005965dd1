package rpcrdma

import (
	"bytes"
	"context"
	"testing"
)

// TestSendSlotsLastInFirstOut checks that send slots are reused last in,
// first out: one call at a time builds every Send in the same slot, so
// the other slots' memory is never written.
func TestSendSlotsLastInFirstOut(t *testing.T) {
	pr := newPair(t, nil, nil)
	c := pr.conn
	if len(c.sends) < 2 {
		t.Fatalf("%d send slots, want at least 2", len(c.sends))
	}
	for i := range 20 {
		if err := pr.cli.Null(context.Background(), testProg, testVers); err != nil {
			t.Fatalf("NULL %d: %v", i, err)
		}
	}
	buf := c.sendMR.Bytes()
	if bytes.Count(buf[:c.sendSize], []byte{0}) == c.sendSize {
		t.Fatal("slot 0 was never written")
	}
	if n := bytes.Count(buf[c.sendSize:], []byte{0}); n != len(buf)-c.sendSize {
		t.Errorf("slots 1..%d hold %d written bytes; one call at a time should use slot 0 alone", len(c.sends)-1, len(buf)-c.sendSize-n)
	}

	// Freed slots come back in reverse order.
	ctx := context.Background()
	a, err := c.takeSendSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.takeSendSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.putSendSlot(a)
	c.putSendSlot(b)
	if got, err := c.takeSendSlot(ctx); err != nil || got != b {
		t.Errorf("after freeing %d then %d, took %d (%v), want %d", a, b, got, err, b)
	} else {
		c.putSendSlot(got)
	}
}
