package rpc

import (
	"errors"
	"testing"
)

// TestOutcome: a call's outcome reaches its caller exactly once, whether
// it comes before the caller looks (held in pc.res, the short path),
// after the caller has committed to wait (on done), or races with the
// commit; and arrived reports it either way.
func TestOutcome(t *testing.T) {
	newPC := func() *pendingCall {
		pc := &pendingCall{done: make(chan callResult, 1)}
		pc.arrived = func() bool { return pc.state.Load() == outcomeHeld || len(pc.done) > 0 }
		return pc
	}
	want := errors.New("outcome")

	pc := newPC()
	if _, ok := pc.take(); ok || pc.arrived() {
		t.Fatal("an outcome before any came")
	}
	pc.complete(callResult{err: want})
	if !pc.arrived() {
		t.Error("arrived false with the outcome held")
	}
	if len(pc.done) != 0 {
		t.Error("the outcome went to done though nobody waited there")
	}
	if r, ok := pc.take(); !ok || r.err != want {
		t.Errorf("take after complete: %v, %v", r.err, ok)
	}

	pc = newPC()
	if _, ok := pc.commit(); ok {
		t.Fatal("commit found an outcome before any came")
	}
	pc.complete(callResult{err: want})
	if pc.state.Load() != outcomeWait || len(pc.done) != 1 {
		t.Errorf("after a commit the outcome did not go to done (state %d)", pc.state.Load())
	}
	if !pc.arrived() {
		t.Error("arrived false with the outcome on done")
	}
	if r, ok := pc.take(); !ok || r.err != want {
		t.Errorf("take from done: %v, %v", r.err, ok)
	}

	// Race the completion against the caller's wait: the caller gets
	// the outcome once, and nothing is left behind.
	for range 2000 {
		pc := newPC()
		go pc.complete(callResult{err: want})
		if r := pc.wait(); r.err != want {
			t.Fatalf("wait: %v", r.err)
		}
		if len(pc.done) != 0 {
			t.Fatal("an outcome left on done")
		}
	}
}
