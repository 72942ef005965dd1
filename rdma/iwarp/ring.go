package iwarp

// ring is a fixed-capacity FIFO addressed by absolute sequence numbers: the
// element pushed n-th has sequence n and stays in the same slot until
// popped, so other queues may refer to it by sequence. Slots are reused
// without being cleared, which keeps their slices' backing arrays and so
// keeps posting free of allocations once every slot has been used.
type ring[T any] struct {
	buf        []T
	head, tail uint64 // sequence of the oldest element; of the next push
}

func newRing[T any](n int) ring[T] { return ring[T]{buf: make([]T, max(n, 1))} }

func (r *ring[T]) len() int   { return int(r.tail - r.head) }
func (r *ring[T]) full() bool { return r.len() == len(r.buf) }

// at returns the element with sequence seq, which must be in the ring.
func (r *ring[T]) at(seq uint64) *T { return &r.buf[seq%uint64(len(r.buf))] }

// push appends a slot and returns it for the caller to fill. The caller has
// checked that the ring is not full: the queue depths are enforced before.
func (r *ring[T]) push() *T {
	if r.full() {
		panic("iwarp: ring overflow")
	}
	r.tail++
	return r.at(r.tail - 1)
}

// front returns the oldest element; the ring must not be empty.
func (r *ring[T]) front() *T { return r.at(r.head) }

func (r *ring[T]) pop() { r.head++ }

// clear empties the ring.
func (r *ring[T]) clear() { r.head = r.tail }
