//go:build linux && cgo && verbs

package verbs

import "github.com/go-rpcrdma/rpcrdma/rdma"

// Interrupting a Wait (rdma.WaitInterrupter). A pending interrupt is a
// token in Conn.intr, a channel of capacity one: InterruptWait puts it
// there and kicks a Wait parked on the completion channel (the leader),
// and Wait takes it when it has no completions to return, before it spins
// (Options.BusyPoll) and while it blocks, as leader or follower. So a
// goroutine that takes over the completion queue from another (package
// rpcrdma's short path) waits in Wait itself, spinning on Poll in
// busy-poll mode as the goroutine it replaced did, or parked on the
// completion channel as that one was.

var _ rdma.WaitInterrupter = (*Conn)(nil)

// InterruptWait implements rdma.WaitInterrupter. It does not allocate and
// never blocks but for the connection's lock, which no one holds long.
func (c *Conn) InterruptWait() {
	select {
	case c.intr <- struct{}{}:
	default:
	}
	// After the token: awaitChannel clears the kick, then looks for a
	// token, so either it sees this one or this kick comes after the
	// clear.
	c.kick()
}

// interrupted takes a pending interrupt, and reports whether there was
// one.
func (c *Conn) interrupted() bool {
	select {
	case <-c.intr:
		return true
	default:
		return false
	}
}
