package verbs

import (
	"errors"
	"log/slog"
	"time"
)

// ErrNotBuilt is returned by New in a build without the verbs provider
// (see Available).
var ErrNotBuilt = errors.New("verbs: this binary was built without the verbs provider: " +
	"install libibverbs-dev and librdmacm-dev (rdma-core), and build on Linux with cgo " +
	"and -tags verbs")

// Provider limits and defaults. A ConnConfig value of zero picks the
// default; a larger value than the device allows is lowered to what the
// device allows (ibv_query_device), and never above the Max constants.
const (
	DefaultQueueDepth = 128
	MaxQueueDepth     = 16384
	DefaultReadDepth  = 16 // IRD and ORD
	MaxReadDepth      = 128
	MaxSGE            = 16 // the most SGEs the provider asks a queue pair for

	// DefaultResolveTimeout bounds address and route resolution in Dial
	// (rdma_resolve_addr, rdma_resolve_route); Dial's context can only
	// shorten it.
	DefaultResolveTimeout = 5 * time.Second
)

// Private data sizes of an InfiniBand or RoCE connection (rdma_cm over the
// InfiniBand CM, InfiniBand Architecture Specification Volume 1, section
// 12.6): a REQ carries 92 bytes, of which rdma_cm takes 36 for its own
// header, a REP 196 and a REJ 148. The receiver sees the whole area,
// zero-padded. iWARP carries more, exactly (RFC 5044 section 7.1); the
// provider enforces the smaller sizes everywhere, so that an upper layer
// that works on one transport works on all of them.
const (
	MaxDialPrivateData   = 56
	MaxAcceptPrivateData = 196
	MaxRejectPrivateData = 148
)

// Options configure a Provider. The zero value asks for the defaults.
type Options struct {
	// Device, if not empty, names the RDMA device (as ibv_devices lists
	// it: "mlx5_0", "rxe0", "siw0") that connections must use. rdma_cm
	// chooses the device from the IP address (the one the local address
	// belongs to); a connection or listener that lands on another device
	// fails with an error naming both.
	Device string

	// BusyPoll, if positive, makes Conn.Wait poll the completion queue
	// for up to this long before it sleeps on the completion channel:
	// lower latency for a CPU. If negative, Wait never sleeps: it polls
	// until a completion arrives, its context is done or the connection
	// ends, as perftest does in its default mode, and so keeps a CPU
	// busy for each goroutine in Wait even when nothing comes. A window
	// shorter than the round trip saves little: the Wait that gives up
	// sleeps as in the event mode. Zero (the default) never busy-polls.
	BusyPoll time.Duration

	// ResolveTimeout bounds address and route resolution; zero means
	// DefaultResolveTimeout.
	ResolveTimeout time.Duration

	// Logger receives connection events at debug level; nil discards
	// them.
	Logger *slog.Logger
}

// Resources counts the verbs and rdma_cm objects a Provider holds: the
// leak check. Every count returns to zero once every Conn and Listener has
// been closed and every MR released.
type Resources struct {
	EventChannels int // rdma_cm event channels
	IDs           int // rdma_cm identifiers (listeners, connections, requests)
	PDs           int // protection domains
	CompChannels  int // completion channels
	CQs           int // completion queues
	QPs           int // queue pairs
	MRs           int // registered memory regions
	Files         int // file descriptors wrapped for Go's poller
	SRQs          int // shared receive queues
}
