package verbs

import (
	"errors"
	"syscall"
)

// portAttempts bounds the rdma_cm identifiers Listen (port 0) and Dial try
// when the port rdma_cm picked for them turns out to be taken.
const portAttempts = 16

// errPicked marks a failure caused by a port rdma_cm picked (retryPicked).
var errPicked = errors.New("port chosen by rdma_cm")

// pickedPort is an errno about a port rdma_cm picked.
type pickedPort struct{ errno error }

func (e pickedPort) Error() string   { return e.errno.Error() + " (" + errPicked.Error() + ")" }
func (e pickedPort) Unwrap() []error { return []error{e.errno, errPicked} }

// pickedPortErr returns errno marked with errPicked when it says that a
// port rdma_cm picked is taken, else errno.
func pickedPortErr(errno error) error {
	if errors.Is(errno, syscall.EADDRINUSE) || errors.Is(errno, syscall.EADDRNOTAVAIL) {
		return pickedPort{errno}
	}
	return errno
}

// retryPicked calls try, which makes a new rdma_cm identifier each time,
// until it succeeds, fails otherwise than because of a port rdma_cm picked
// (errPicked), or has been called portAttempts times; it returns how many
// times it called try and try's last error.
//
// rdma_cm picks a port (a listener's port 0, every active side's source
// port) from its own port space only. On an iWARP device the port is a TCP
// port too: Linux's siw binds a kernel TCP socket to it, which fails
// (EADDRINUSE, or EADDRNOTAVAIL when connecting) when an ordinary socket
// of the host holds that port. A bound identifier cannot be bound again,
// so each attempt takes a new one, and rdma_cm picks again.
func retryPicked(try func() error) (attempts int, err error) {
	for attempts = 1; ; attempts++ {
		err = try()
		if err == nil || attempts == portAttempts || !errors.Is(err, errPicked) {
			return attempts, err
		}
	}
}
