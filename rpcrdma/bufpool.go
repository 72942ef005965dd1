package rpcrdma

import (
	"math/bits"
	"sync"
)

// Buffers for pulled read chunks come from size-classed pools (powers of
// two from 4 KiB to 16 MiB): a responder pulling 1 MiB per call would
// otherwise allocate and zero 1 MiB per call. They go back when the
// rpc.Server is done with the call (rpc.Msg.Release).

const (
	minPoolShift = 12 // 4 KiB
	maxPoolShift = 24 // 16 MiB
)

var bufPools [maxPoolShift - minPoolShift + 1]sync.Pool

// poolClass returns the pool index for n bytes, or -1 for sizes outside
// the pooled range.
func poolClass(n int) int {
	if n <= 0 || n > 1<<maxPoolShift {
		return -1
	}
	shift := bits.Len(uint(n - 1))
	return max(shift, minPoolShift) - minPoolShift
}

// getBuf returns a slice of length n, from a pool when n is in range. Its
// contents are not zeroed: callers overwrite all n bytes.
func getBuf(n int) []byte {
	c := poolClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minPoolShift))
}

// putBuf returns b, which getBuf returned, to its pool.
func putBuf(b []byte) {
	c := poolClass(cap(b))
	if c < 0 || cap(b) != 1<<(c+minPoolShift) {
		return
	}
	b = b[:cap(b)]
	bufPools[c].Put(&b)
}
