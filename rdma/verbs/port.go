package verbs

import (
	"errors"
	"syscall"
)

// listenAttempts bounds the rdma_cm identifiers Listen tries for port 0
// when the port rdma_cm picked turns out to be in use.
const listenAttempts = 16

// retryPortInUse calls listen, which binds and listens on a new rdma_cm
// identifier each time, until it succeeds, fails otherwise than with
// EADDRINUSE, or has been called listenAttempts times; it returns how many
// times it called listen and listen's last error. Only port 0 is retried:
// an explicit port in use is the caller's to know about at once.
//
// rdma_cm picks a port for port 0 from its own port space only. On an
// iWARP device the port is a TCP port too, and Linux's siw binds a kernel
// TCP socket to it when it listens, which fails with EADDRINUSE when an
// ordinary socket (a connection's local port, say) holds that port. A
// bound identifier cannot be bound again, so each attempt takes a new one.
func retryPortInUse(port int, listen func() error) (attempts int, err error) {
	for attempts = 1; ; attempts++ {
		err = listen()
		if err == nil || port != 0 || attempts == listenAttempts || !errors.Is(err, syscall.EADDRINUSE) {
			return attempts, err
		}
	}
}
