package iwarp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// chunkReader returns data in chunks of sizes drawn from its own seed,
// some of them empty, and then err.
type chunkReader struct {
	data []byte
	r    *rand.Rand
	err  error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, c.err
	}
	n := min(len(p), len(c.data), c.r.IntN(40))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// TestRxBufLikeBufio runs random Peeks, Discards, Reads and Buffereds on
// an rxBuf and on a bufio.Reader of the same size over the same stream
// (chunked alike, ending in EOF or another error) and compares every
// result: the receive path relies on bufio's semantics, errors included.
func TestRxBufLikeBufio(t *testing.T) {
	boom := errors.New("boom")
	for seed := range uint64(300) {
		data := make([]byte, rand.N(600))
		for i := range data {
			data[i] = byte(i * 7)
		}
		end := io.EOF
		if seed%3 == 0 {
			end = boom
		}
		const size = 64
		ours := newRxBuf(&chunkReader{data: data, r: rand.New(rand.NewPCG(seed, 1)), err: end}, size)
		std := bufio.NewReaderSize(&chunkReader{data: data, r: rand.New(rand.NewPCG(seed, 1)), err: end}, size)
		ops := rand.New(rand.NewPCG(seed, 2))
		for step := range 200 {
			switch op := ops.IntN(4); op {
			case 0:
				n := ops.IntN(size+8) - 1
				a, aerr := ours.Peek(n)
				b, berr := std.Peek(n)
				if !bytes.Equal(a, b) || aerr != berr {
					t.Fatalf("seed %d step %d: Peek(%d) = %d bytes, %v; bufio %d bytes, %v", seed, step, n, len(a), aerr, len(b), berr)
				}
			case 1:
				n := ops.IntN(2*size) - 1
				a, aerr := ours.Discard(n)
				b, berr := std.Discard(n)
				if a != b || aerr != berr {
					t.Fatalf("seed %d step %d: Discard(%d) = %d, %v; bufio %d, %v", seed, step, n, a, aerr, b, berr)
				}
			case 2:
				pa, pb := make([]byte, ops.IntN(2*size)), []byte(nil)
				pb = make([]byte, len(pa))
				a, aerr := ours.Read(pa)
				b, berr := std.Read(pb)
				if a != b || aerr != berr || !bytes.Equal(pa[:a], pb[:b]) {
					t.Fatalf("seed %d step %d: Read(%d) = %d, %v; bufio %d, %v", seed, step, len(pa), a, aerr, b, berr)
				}
			case 3:
				if a, b := ours.Buffered(), std.Buffered(); a != b {
					t.Fatalf("seed %d step %d: Buffered %d, bufio %d", seed, step, a, b)
				}
			}
		}
	}
}

// TestRxBufNoProgress: a stream that returns nothing, forever, ends a
// Peek with io.ErrNoProgress, as bufio's does.
func TestRxBufNoProgress(t *testing.T) {
	b := newRxBuf(readerFunc(func([]byte) (int, error) { return 0, nil }), 16)
	if _, err := b.Peek(4); err != io.ErrNoProgress {
		t.Errorf("Peek: %v, want io.ErrNoProgress", err)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
