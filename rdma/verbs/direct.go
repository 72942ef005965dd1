//go:build linux && cgo && verbs

package verbs

import "github.com/go-rpcrdma/rpcrdma/rdma"

// Interrupting a Wait (rdma.WaitInterrupter). A pending interrupt is a
// token in Conn.intr, a channel of capacity one: InterruptWait puts it
// there, and Wait takes it when it has no completions to return, before
// it spins (Options.BusyPoll) and while it blocks. So a goroutine that
// takes over the completion queue from another (package rpcrdma's short
// path) waits in Wait itself, spinning on Poll in busy-poll mode as the
// goroutine it replaced did, and is woken by the completion channel's
// goroutine as that one was.

var _ rdma.WaitInterrupter = (*Conn)(nil)

// InterruptWait implements rdma.WaitInterrupter. It does not allocate and
// never blocks.
func (c *Conn) InterruptWait() {
	select {
	case c.intr <- struct{}{}:
	default:
	}
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
