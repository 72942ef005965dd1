package rpcrdma

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// Pulling read chunks with RDMA Reads, for both roles: a responder pulls
// a call's read chunks (responder.prepare), a requester an RFC 5666
// read-chunk reply (requester.pullReply). startPull posts the Reads, as
// many in flight as the ORD allows, and calls back once the last one has
// completed; pull waits for that.

// pull reads every chunk into memory of its own, all Reads in flight at
// once up to the ORD, and returns the chunks' contents. With pooled, the
// buffers come from getBuf and are the caller's to give back with putBuf;
// on error pull gives them back itself.
func (c *Conn) pull(chunks []wire.ReadChunk, pooled bool) ([][]byte, error) {
	type result struct {
		bufs [][]byte
		err  error
	}
	ch := make(chan result, 1)
	c.startPull(chunks, pooled, func(bufs [][]byte, err error) { ch <- result{bufs, err} })
	r := <-ch
	return r.bufs, r.err
}

// A pulling is one startPull in progress.
type pulling struct {
	c      *Conn
	pooled bool
	bufs   [][]byte
	mrs    []rdma.MR
	// left counts the Reads posted and not completed, plus one while
	// startPull is still posting; whoever takes it to zero finishes.
	left atomic.Int32
	mu   sync.Mutex
	err  error
	done func(bufs [][]byte, err error)
	// timer ends the connection if the Reads take longer than
	// Bounds.PullTimeout (a responder's only); stopped at the end.
	timer *time.Timer
}

func (p *pulling) setErr(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

// put drops one count of p.left, finishing the pull at zero: the sinks are
// deregistered (every Read has completed, so nothing is placed into them
// any more) and done hears the outcome.
func (p *pulling) put() {
	if p.left.Add(-1) != 0 {
		return
	}
	p.c.stopTimer(p.timer)
	p.c.releaseAll(p.mrs)
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err != nil {
		if p.pooled {
			for _, b := range p.bufs {
				if b != nil {
					putBuf(b)
				}
			}
		}
		p.done(nil, err)
		return
	}
	p.done(p.bufs, nil)
}

// startPull posts the RDMA Reads that pull every chunk into memory of its
// own, as many in flight as the ORD allows; it waits only for Read slots.
// Once every Read has completed, done runs with the chunks' contents, or
// with a connection error (its buffers then given back): on the loop
// goroutine when the last Read completes there, so done must not block,
// or on the caller's when posting failed after no Read was posted. With
// pooled, the buffers come from getBuf and become done's to give back with
// putBuf. The caller has checked each chunk against maxChunk.
func (c *Conn) startPull(chunks []wire.ReadChunk, pooled bool, done func(bufs [][]byte, err error)) {
	p := &pulling{c: c, pooled: pooled, bufs: make([][]byte, len(chunks)), mrs: make([]rdma.MR, 0, len(chunks)), done: done}
	p.left.Store(1)
	if d := c.cfg.Bounds.pullTimeout(); d > 0 && c.ln != nil {
		// RDMA Reads cannot be cancelled one by one: a peer that
		// withholds its Read Responses loses the connection, whose end
		// flushes them and so releases what they hold.
		p.timer = c.afterFunc(d, func() { c.closeFor(LimitPullTimeout) })
	}
	defer p.put()
	maxMsg := max(c.rc.Limits().MaxMessageSize, 4096)
	ctx := c.ctx
	for i, ch := range chunks {
		n := ch.Length()
		if pooled {
			p.bufs[i] = getBuf(int(n))
		} else {
			p.bufs[i] = make([]byte, n)
		}
		mr, err := c.register(p.bufs[i], rdma.AccessLocalWrite)
		if err != nil {
			p.setErr(fmt.Errorf("rpcrdma: registering read sink: %w", err))
			return
		}
		p.mrs = append(p.mrs, mr)
		off := 0
		for _, seg := range ch.Segments {
			for done := 0; done < int(seg.Length); {
				k := min(int(seg.Length)-done, maxMsg)
				select {
				case <-c.readSlots:
				case <-c.done:
					p.setErr(c.Err())
					return
				}
				wr := &rdma.WorkRequest{
					Op:         rdma.OpRead,
					Local:      []rdma.SGE{{MR: mr, Offset: off, Length: k}},
					RemoteSTag: rdma.STag(seg.Handle),
					RemoteTO:   seg.Offset + uint64(done),
				}
				p.left.Add(1)
				err := c.post(ctx, wr, func(comp rdma.Completion) {
					c.readSlots <- struct{}{}
					if err := c.compErr(comp, "RDMA Read"); err != nil {
						p.setErr(err)
					}
					p.put()
				})
				if err != nil {
					c.readSlots <- struct{}{}
					p.setErr(err)
					p.left.Add(-1)
					return
				}
				off += k
				done += k
			}
		}
		c.stats.add(statReadChunks, 1)
		c.stats.add(statReadChunkBytes, n)
	}
}

// maxChunk bounds the memory one read chunk can make the responder
// allocate.
const maxChunk = 64 << 20
