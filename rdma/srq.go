package rdma

import "context"

// SharedRecvProvider is implemented by providers that offer shared receive
// queues (see the package documentation).
type SharedRecvProvider interface {
	Provider

	// NewSharedRecvQueue creates a shared receive queue. It returns an
	// error matching ErrInvalid for invalid limits.
	NewSharedRecvQueue(cfg SharedRecvConfig) (SharedRecvQueue, error)
}

// SharedRecvConfig configures a shared receive queue.
type SharedRecvConfig struct {
	// Depth bounds the receives outstanding on the queue: posted and whose
	// completion has not yet been returned by Poll or Wait. Zero picks the
	// provider default; a value above the provider's maximum is lowered to
	// it. Depth reports the value in force.
	Depth int
}

// SharedRecvQueue is a receive queue shared by the connections attached to
// it (ConnConfig.SharedRecv). Its methods are safe for concurrent use.
type SharedRecvQueue interface {
	// Alloc returns a zeroed region of size bytes of provider-owned
	// memory with AccessLocalWrite, owned by the queue, for its receives.
	// It is the device's until MR.Release or Close, and stays safe to
	// touch after them, as Conn.Alloc's. It returns an error
	// matching ErrInvalid for a negative size, and ErrClosed once the
	// queue is closed.
	Alloc(size int) (MR, error)

	// PostRecv posts a receive of up to the SGEs' total length, which
	// the next Send arriving on any attached connection consumes. The
	// SGEs' MRs must be the queue's own (Alloc) and valid. sgl is not
	// retained. It returns an error matching ErrQueueFull when Depth
	// receives are outstanding, ErrInvalid for a bad SGE, and ErrClosed
	// once the queue is closed.
	PostRecv(id uint64, sgl []SGE) error

	// Poll copies up to len(cs) available receive completions into cs
	// and returns how many. It does not block. Each completion's Conn
	// names the connection that consumed the receive.
	Poll(cs []Completion) int

	// Wait blocks until at least one completion is available and copies
	// up to len(cs) of them into cs. It returns (0, ctx.Err()) when ctx
	// is done, and (0, ErrClosed) once the queue is closed and every
	// completion has been returned. len(cs) must be at least 1.
	Wait(ctx context.Context, cs []Completion) (int, error)

	// Depth returns the queue's depth in force.
	Depth() int

	// Posted returns how many receives are posted and not yet consumed
	// by an arriving Send: what the attached connections can still
	// receive.
	Posted() int

	// ArmLimit arms the limit event: once fewer than limit receives are
	// posted, LimitReached delivers one token and the limit is disarmed.
	// A limit of zero disarms it. If fewer than limit are posted already,
	// the token is delivered at once. It returns an error matching
	// ErrInvalid for a negative limit or one above Depth.
	ArmLimit(limit int) error

	// LimitReached returns the channel on which the limit event is
	// delivered. It has a capacity of one: tokens are not queued beyond
	// that.
	LimitReached() <-chan struct{}

	// Close flushes every receive still posted with StatusFlushed,
	// releases the queue's memory, and unblocks Wait. It returns an error
	// matching ErrInvalid, and does nothing, while a connection attached
	// to the queue has not been closed. A closed queue's completions stay
	// available to Poll and Wait. Close is idempotent.
	Close() error
}
