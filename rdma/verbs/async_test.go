//go:build linux && cgo && verbs

package verbs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestAsyncEvents: every connection up on a device is watched for the
// device's asynchronous events, and the watcher goes away (goroutine and
// fd, which newProvider's cleanup counts) with the last connection. An
// event ends exactly the connections it affects, with an error naming it:
// the kernel raises QP, CQ and port errors only on faults a test cannot
// cause on a software device, so the events are handed to the watcher's
// dispatch as ibv_get_async_event would return them.
func TestAsyncEvents(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		rdmatest.CheckGoroutines(t)
		p := newProvider(t, tg, Options{})
		cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
		var conns []*Conn
		for range 3 {
			a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
			conns = append(conns, a.(*Conn), b.(*Conn))
		}
		if n := watching(conns[0]); n != len(conns) {
			t.Fatalf("the watcher watches %d connections, want %d", n, len(conns))
		}
		w := conns[0].watcher
		// check dispatches e and checks that it ended the connections in
		// ended with an error naming it, and left those in untouched up.
		// (A connection that ends also ends its peer, through rdma_cm.)
		check := func(e asyncEvent, name string, ended, untouched []*Conn) {
			t.Helper()
			w.dispatch(tg.device, e)
			for _, c := range ended {
				err := c.Err()
				if err == nil || !errors.Is(err, rdma.ErrConnectionLost) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), tg.device) {
					t.Errorf("%s: connection %d: error %v, want one naming %s on %s", name, c.qpNum, err, name, tg.device)
				}
			}
			for _, c := range untouched {
				if err := c.Err(); err != nil {
					t.Errorf("%s: connection %d ended: %v", name, c.qpNum, err)
				}
			}
		}
		// Events that end nothing.
		check(asyncEvent{kind: eventCommEst, qpNum: conns[0].qpNum}, "IBV_EVENT_COMM_EST", nil, conns)
		check(asyncEvent{kind: eventPortActive, port: conns[0].port}, "IBV_EVENT_PORT_ACTIVE", nil, conns)
		check(asyncEvent{kind: eventQPFatal, qpNum: conns[0].qpNum}, "IBV_EVENT_QP_FATAL", conns[:1], conns[2:])
		check(asyncEvent{kind: eventCQErr, cq: conns[2].cqAddr}, "IBV_EVENT_CQ_ERR", conns[2:3], conns[4:])
		// Both ends of the last pair are on the device's one port; which
		// of them the event reaches first, the other may end first by its
		// peer's disconnect.
		portErr := asyncEvent{kind: eventPortErr, port: conns[4].port}
		for _, c := range conns {
			if !portErr.affects(c) {
				t.Errorf("a port error on port %d does not affect connection %d on port %d", portErr.port, c.qpNum, c.port)
			}
		}
		if (asyncEvent{kind: eventPortErr, port: conns[4].port + 1}).affects(conns[4]) {
			t.Errorf("a port error on another port affects connection %d", conns[4].qpNum)
		}
		w.dispatch(tg.device, portErr)
		named := 0
		for _, c := range conns[4:] {
			select {
			case <-c.Done():
			case <-time.After(cfg.Timeout):
				t.Fatalf("IBV_EVENT_PORT_ERR: connection %d has not ended", c.qpNum)
			}
			if err := c.Err(); strings.Contains(err.Error(), "IBV_EVENT_PORT_ERR") {
				named++
			} else if !errors.Is(err, rdma.ErrDisconnected) && !errors.Is(err, rdma.ErrConnectionLost) {
				t.Errorf("IBV_EVENT_PORT_ERR: connection %d: error %v", c.qpNum, err)
			}
		}
		if named == 0 {
			t.Errorf("IBV_EVENT_PORT_ERR: no connection's error names it: %v, %v", conns[4].Err(), conns[5].Err())
		}
		if !(asyncEvent{kind: eventDeviceFatal}).affects(conns[0]) {
			t.Errorf("a fatal device error does not affect connection %d", conns[0].qpNum)
		}
		for _, c := range conns {
			select {
			case <-c.Done():
			case <-time.After(cfg.Timeout):
				t.Fatalf("connection %d has not ended", c.qpNum)
			}
		}
		for _, c := range conns {
			c.Close()
		}
		if n := watching(conns[0]); n != 0 {
			t.Errorf("after Close the watcher still watches %d connections", n)
		}
		watchersMu.Lock()
		left := len(watchers)
		watchersMu.Unlock()
		if left != 0 {
			t.Errorf("%d watchers left after the last connection closed", left)
		}
	})
}
