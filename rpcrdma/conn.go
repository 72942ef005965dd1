package rpcrdma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// A Conn is one RPC-over-RDMA connection over an rdma.Conn, in one role:
// requester (Dial) or responder (Accept). It implements rpc.Transport, so an
// rpc.Client runs over a requester Conn and an rpc.Server over a responder
// Conn exactly as they run over TCP.
//
// Goroutines. One goroutine per Conn (the loop) owns the completion queue:
// it decodes every received message, reposts its receive buffer, and
// completes send-queue work. It never blocks on the send queue; everything
// that posts sends (calls, replies, RDMA Reads of a call's chunks, error
// replies) runs on the goroutine of Send or Recv, or on a short-lived
// goroutine for the rare RDMA_ERROR. A responder's loop hands calls that
// need no RDMA Read to a pushed deliver function itself (pushCall), which
// must not block either. Mutexes guard only the small tables below.
//
// Buffers. Receives land in one provider-allocated region of equal slots,
// one per posted receive; each Send is built in a slot of a second region.
// Chunks register the caller's memory directly (rdma.Conn.Register), so
// DDP-eligible data is never copied: arguments are read from the caller's
// buffers by the responder, results are written into the caller's
// ResultBufs.
type Conn struct {
	cfg  Config
	rc   rdma.Conn
	log  *slog.Logger
	lim  wire.Limits
	peer []byte // peer's private data

	responder bool
	versions  []wire.Version // supported, ascending

	// negV[v] is what the private data settle for version v, fixed at
	// connect time before the loop starts.
	negV [3]negotiated

	recvMR    rdma.MR
	recvSlots int
	recvSize  int

	sendMR    rdma.MR
	sendSize  int
	sendFree  chan int      // free slots of sendMR
	sends     []sendSlot    // per send slot: its work request, reused
	recvSGEs  [][1]rdma.SGE // per receive slot: its scatter list, reused
	sqSlots   chan struct{} // one token per free send-queue entry
	readSlots chan struct{} // one token per RDMA Read we may have outstanding (ORD)

	opsMu   sync.Mutex
	ops     map[uint64]func(rdma.Completion) // send-queue work in flight, by ID
	opsIdle chan struct{}                    // closed when ops empties, for drain; nil when no one waits
	opID    atomic.Uint64

	incoming chan inbound // messages for Recv, filled by the loop

	// A requester's messages go to push instead, once rpc.Pusher's Push
	// has set it (dial.go); pushEnded is set once the loop has ended and
	// push has had the final error. A responder's calls without read
	// chunks go from the loop to callPush once Push has set it; pushMu
	// serializes every call of the deliver function either holds.
	pushMu    sync.Mutex
	push      func(*rpc.Msg, error)
	pushEnded bool
	callPush  func(*rpc.Msg, error)

	pulled chan pulledCall // responder: calls whose data chunks have been pulled, for Recv

	closeOnce sync.Once
	done      chan struct{}   // closed when the connection ends
	ctx       context.Context // the connection's: cancelled when it ends
	cancel    context.CancelFunc
	loopDone  chan struct{}
	errMu     sync.Mutex
	err       error

	// Side goroutines (goSide): the sends and reads the loop must not
	// wait for. Close waits for them.
	sideMu     sync.Mutex
	sideClosed bool // set by Close once the loop has ended: no more side goroutines
	side       sync.WaitGroup

	stats counters

	req  *requester   // nil on a responder
	resp *responder   // nil on a requester
	bc   *Backchannel // nil unless Config.BackwardCredits is set
}

// sendSlot is the reusable state of one send buffer: providers do not
// keep a work request after PostSend returns, so each slot's is built
// once.
type sendSlot struct {
	wr     rdma.WorkRequest
	sge    [1]rdma.SGE
	wait   bool       // the poster waits on result
	result chan error // capacity 1
	done   func(rdma.Completion)
}

// inbound is one received message handed from the loop to Recv.
type inbound struct {
	hdr     wire.Header
	payload []byte   // the RPC message after the transport header
	writes  [][]byte // requester: the call's write-chunk buffers
	err     error    // requester: a per-call failure
	im      *inMsg   // responder: the call's pooled state, payload copied in
	// borrowed: payload aliases the receive buffer, which is reposted
	// when the role's onMessage returns; it copies what it passes on.
	borrowed bool
}

// Info describes what a connection negotiated.
type Info struct {
	Version            wire.Version // version in use (requester); highest served (responder)
	PeerPrivateData    bool         // the peer sent RFC 8797 private data
	SendInline         int          // largest Send this side posts
	RecvInline         int          // this side's receive buffer size
	RemoteInvalidation bool         // Send With Invalidate is used on this connection
	Credits            uint32       // requester: current grant; responder: grant offered
	Local, Remote      net.Addr
}

// Info returns what the connection negotiated so far. For a requester the
// version and credits settle with the first reply.
func (c *Conn) Info() Info {
	v := c.versions[len(c.versions)-1]
	if c.req != nil {
		v = c.req.version()
	}
	n := c.negV[v]
	in := Info{
		PeerPrivateData: n.peerPD,
		SendInline:      n.sendLimit,
		RecvInline:      n.recvLimit,
		Local:           c.rc.LocalAddr(),
		Remote:          c.rc.RemoteAddr(),
	}
	if c.req != nil {
		in.Version = c.req.version()
		in.Credits, _ = c.req.credits.state()
		in.RemoteInvalidation = !c.cfg.NoRemoteInvalidation
	} else {
		in.Version = v
		in.Credits = c.resp.grant
		in.RemoteInvalidation = n.peerInvalidates && !c.cfg.NoRemoteInvalidation
	}
	return in
}

// RDMA returns the underlying RDMA connection, for its limits and address.
func (c *Conn) RDMA() rdma.Conn { return c.rc }

// RemoteAddr returns the peer's address. An rpc.Server's reply cache uses
// it to tell clients apart.
func (c *Conn) RemoteAddr() net.Addr { return c.rc.RemoteAddr() }

// setup allocates the buffer rings and posts every receive. It runs from
// rdma.ConnConfig.Prepare, before the peer may send.
func (c *Conn) setup(rc rdma.Conn, recvSlots int) error {
	c.rc = rc
	c.peer = rc.PeerPrivateData()
	lim := rc.Limits()
	c.recvSlots = min(recvSlots, lim.RecvQueueDepth)
	c.recvSize = c.cfg.inlineRecv()
	var err error
	c.recvSGEs = make([][1]rdma.SGE, c.recvSlots)
	c.recvMR, err = rc.Alloc(c.recvSlots*c.recvSize, rdma.AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("rpcrdma: allocating %d receive buffers: %w", c.recvSlots, err)
	}
	c.stats.Registered.Add(int64(c.recvSlots * c.recvSize))
	for i := 0; i < c.recvSlots; i++ {
		if err := c.postRecv(i); err != nil {
			return err
		}
	}
	// Send slots: enough for every credit plus error replies, bounded by
	// the send queue, which Writes and Reads share.
	sq := lim.SendQueueDepth
	nsend := max(min(c.recvSlots+2, sq/2), 1)
	c.sendSize = c.cfg.inlineSend()
	c.sendMR, err = rc.Alloc(nsend*c.sendSize, 0)
	if err != nil {
		return fmt.Errorf("rpcrdma: allocating %d send buffers: %w", nsend, err)
	}
	c.stats.Registered.Add(int64(nsend * c.sendSize))
	c.sendFree = make(chan int, nsend)
	c.sends = make([]sendSlot, nsend)
	for i := 0; i < nsend; i++ {
		s := &c.sends[i]
		s.result = make(chan error, 1)
		// A waiting poster frees the slot once it has the result; else
		// the completion frees it.
		s.done = func(comp rdma.Completion) {
			if s.wait {
				s.result <- c.compErr(comp, "Send")
			} else {
				c.sendFree <- i
			}
		}
		c.sendFree <- i
	}
	c.sqSlots = make(chan struct{}, sq)
	for i := 0; i < sq; i++ {
		c.sqSlots <- struct{}{}
	}
	ord := max(lim.ORD, 1)
	c.readSlots = make(chan struct{}, ord)
	for i := 0; i < ord; i++ {
		c.readSlots <- struct{}{}
	}
	c.incoming = make(chan inbound, c.recvSlots+1)
	c.pulled = make(chan pulledCall, c.recvSlots+1)
	return nil
}

func newConn(cfg Config, responder bool) *Conn {
	c := &Conn{
		cfg:       cfg,
		log:       cfg.logger(),
		lim:       cfg.Limits,
		responder: responder,
		ops:       make(map[uint64]func(rdma.Completion)),
		done:      make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if responder {
		c.versions = sortVersions(cfg.versions(wire.Version1, wire.Version2))
	} else {
		c.versions = sortVersions(cfg.versions(wire.Version1))
	}
	return c
}

func sortVersions(vs []wire.Version) []wire.Version {
	out := make([]wire.Version, 0, 2)
	for _, v := range []wire.Version{wire.Version1, wire.Version2} {
		for _, w := range vs {
			if w == v {
				out = append(out, v)
				break
			}
		}
	}
	if len(out) == 0 {
		out = append(out, wire.Version1)
	}
	return out
}

func (c *Conn) supports(v wire.Version) bool {
	for _, w := range c.versions {
		if w == v {
			return true
		}
	}
	return false
}

// recvBuf returns receive slot i.
func (c *Conn) recvBuf(i int) []byte {
	return c.recvMR.Bytes()[i*c.recvSize : (i+1)*c.recvSize]
}

func (c *Conn) postRecv(i int) error {
	sgl := c.recvSGEs[i][:]
	sgl[0] = rdma.SGE{MR: c.recvMR, Offset: i * c.recvSize, Length: c.recvSize}
	err := c.rc.PostRecv(uint64(i), sgl)
	if err != nil {
		return fmt.Errorf("rpcrdma: posting receive %d: %w", i, err)
	}
	return nil
}

// start settles the inline sizes and runs the loop.
func (c *Conn) start() {
	for _, v := range []wire.Version{wire.Version1, wire.Version2} {
		c.negV[v] = negotiate(&c.cfg, c.peer, v)
	}
	go c.loop()
}

// loop owns the completion queue until the connection ends.
func (c *Conn) loop() {
	defer close(c.loopDone)
	cs := make([]rdma.Completion, 32)
	for {
		n, err := c.rc.Wait(context.Background(), cs)
		for _, comp := range cs[:n] {
			if comp.Op == rdma.OpRecv {
				c.onRecv(comp)
			} else {
				c.onSendQueue(comp)
			}
		}
		if err != nil {
			c.fail(err)
			// Drain what the provider flushed so every waiter hears.
			for {
				n := c.rc.Poll(cs)
				if n == 0 {
					break
				}
				for _, comp := range cs[:n] {
					// Messages received before the end still count:
					// a peer may send its last replies and close.
					if comp.Op == rdma.OpRecv {
						c.onRecv(comp)
					} else {
						c.onSendQueue(comp)
					}
				}
			}
			c.failOps()
			c.endPush()
			return
		}
	}
}

// onSendQueue completes one send-queue work request.
func (c *Conn) onSendQueue(comp rdma.Completion) {
	c.opsMu.Lock()
	done := c.ops[comp.ID]
	delete(c.ops, comp.ID)
	if len(c.ops) == 0 && c.opsIdle != nil {
		close(c.opsIdle)
		c.opsIdle = nil
	}
	c.opsMu.Unlock()
	c.sqSlots <- struct{}{}
	if done != nil {
		done(comp)
	}
}

// failOps completes every send-queue operation the provider did not, after
// the connection has ended.
func (c *Conn) failOps() {
	c.opsMu.Lock()
	ops := c.ops
	c.ops = map[uint64]func(rdma.Completion){}
	c.opsMu.Unlock()
	for id, done := range ops {
		done(rdma.Completion{ID: id, Status: rdma.StatusFlushed})
	}
}

// onRecv handles a received message in the loop: it copies the message out,
// reposts the buffer and dispatches by role.
func (c *Conn) onRecv(comp rdma.Completion) {
	slot := int(comp.ID)
	if comp.Status != rdma.StatusSuccess {
		return // flushed: the connection is ending
	}
	if comp.Invalidated {
		c.stats.add(statRemoteInvalid, 1)
	}
	msg := c.recvBuf(slot)[:comp.Len]
	var in inbound
	_, derr := in.hdr.Decode(msg)
	if derr == nil && in.hdr.HasPayload() {
		in.payload, in.borrowed = msg[in.hdr.EncodedLen():], true
	}
	// The header's lists were copied by Decode except Optional.Info, which
	// aliases the buffer.
	if len(in.hdr.Optional.Info) > 0 {
		in.hdr.Optional.Info = append([]byte(nil), in.hdr.Optional.Info...)
	}
	var raw []byte
	if derr != nil {
		raw = append([]byte(nil), msg[:min(len(msg), wire.PrefixLen+4)]...)
	}
	// Dispatch before reposting: when the peer has closed after its last
	// message, the repost fails, and the message must still count.
	if c.responder {
		c.resp.onMessage(&in, derr, raw)
	} else {
		c.req.onMessage(&in, derr)
	}
	// A repost fails only once the connection has ended; the provider
	// then returns every completion it still holds before Wait reports
	// the end, and the loop fails the connection there. Failing it here
	// would forget calls whose replies are still in those completions.
	if c.Err() == nil {
		if err := c.postRecv(slot); err != nil {
			c.log.Debug("rpcrdma: receive not reposted", "slot", slot, "err", err)
		}
	}
}

// deliver hands a message to Recv. The peer can have no more messages in
// flight than there are receive slots, and Recv drains the channel, so a
// full channel means Recv is not being called; the message is then dropped
// rather than stalling the loop.
func (c *Conn) deliver(in inbound) bool {
	if c.req != nil {
		c.pushMu.Lock()
		defer c.pushMu.Unlock()
		if c.push != nil {
			c.push(c.replyOf(in))
			return true
		}
	} else if c.pushCall(&in) {
		return true
	}
	select {
	case c.incoming <- in:
		return true
	default:
		c.drop(DropCreditOverrun, in.hdr.XID, "why", "receive queue full")
		return false
	}
}

// pushCall hands a responder's call straight to the rpc.Server that
// Push registered, on the loop, when nothing in taking it can block: no
// read chunks to pull (their Reads may wait for the send queue) and not
// CONF_RDMA (answered by Recv, whose Send may wait for a slot). It
// reports whether it took the call; the rest go through Recv.
func (c *Conn) pushCall(in *inbound) bool {
	if len(in.hdr.Chunks.Reads) > 0 || isConfigCall(in.payload) {
		return false
	}
	c.pushMu.Lock()
	defer c.pushMu.Unlock()
	if c.callPush == nil {
		return false
	}
	if c.resp.overrun() {
		// Recv's queue, which is as long as the receives, drops what
		// overflows it; this path drops what goes beyond it.
		c.drop(DropCreditOverrun, in.hdr.XID)
		in.im.free()
		return true
	}
	if m, ok, _ := c.resp.recvCall(in); ok {
		// Without read chunks recvCall pulls nothing and so has no
		// connection error to report; a call it refused is answered.
		c.callPush(m, nil)
	}
	return true
}

// isConfigCall reports whether the RPC call b is to the Connection
// Configuration Protocol's program.
func isConfigCall(b []byte) bool {
	return len(b) >= 16 && binary.BigEndian.Uint32(b[12:]) == wire.ConfigProgram
}

// post posts a send-queue work request whose completion runs done on the
// loop goroutine. It waits for a free send-queue entry, respecting ctx.
func (c *Conn) post(ctx context.Context, wr *rdma.WorkRequest, done func(rdma.Completion)) error {
	if err := take(ctx, c.sqSlots, c.done, c.Err); err != nil {
		return err
	}
	wr.ID = c.opID.Add(1)
	c.opsMu.Lock()
	c.ops[wr.ID] = done
	c.opsMu.Unlock()
	if err := c.rc.PostSend(wr); err != nil {
		c.opsMu.Lock()
		_, mine := c.ops[wr.ID]
		delete(c.ops, wr.ID)
		c.opsMu.Unlock()
		if !mine {
			// The connection ended meanwhile, and failOps has
			// completed the request as flushed: done has the outcome.
			return nil
		}
		c.sqSlots <- struct{}{}
		if errors.Is(err, net.ErrClosed) {
			return c.connErr(err)
		}
		return fmt.Errorf("rpcrdma: posting %v: %w", wr.Op, err)
	}
	return nil
}

// takeValue receives from ch, waiting until ctx or done ends first (then
// ctx's error, or ended's). It tries a receive alone first: with a value
// ready, that costs much less than the select, and it is the common case
// (a free send slot or send-queue entry).
func takeValue[T any](ctx context.Context, ch chan T, done <-chan struct{}, ended func() error) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	default:
	}
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	case <-done:
		var zero T
		return zero, ended()
	}
}

// take is takeValue for a channel of tokens.
func take(ctx context.Context, ch chan struct{}, done <-chan struct{}, ended func() error) error {
	_, err := takeValue(ctx, ch, done, ended)
	return err
}

// sendMsg builds the message hdr followed by pieces in a send slot and
// posts it as a Send (with Invalidate when inv is not zero). It waits for a
// free send slot. If wait is true it returns after the Send completes, else
// after posting.
func (c *Conn) sendMsg(ctx context.Context, hdr *wire.Header, pieces [][]byte, inv rdma.STag, wait bool) error {
	slot, err := takeValue(ctx, c.sendFree, c.done, c.Err)
	if err != nil {
		return err
	}
	n := hdr.EncodedLen()
	for _, p := range pieces {
		n += len(p)
	}
	if n > c.sendSize {
		c.sendFree <- slot
		return fmt.Errorf("rpcrdma: message of %d bytes exceeds the %d-byte send buffer", n, c.sendSize)
	}
	off := slot * c.sendSize
	msg := hdr.Append(c.sendMR.Bytes()[off : off : off+c.sendSize])
	for _, p := range pieces {
		msg = append(msg, p...)
	}
	s := &c.sends[slot]
	s.sge[0] = rdma.SGE{MR: c.sendMR, Offset: off, Length: len(msg)}
	s.wr = rdma.WorkRequest{Op: rdma.OpSend, Local: s.sge[:]}
	if inv != 0 {
		s.wr.Op = rdma.OpSendInvalidate
		s.wr.InvalidateSTag = inv
	}
	s.wait = wait
	c.stats.add(statInlineBytes, uint64(len(msg)))
	if err := c.post(ctx, &s.wr, s.done); err != nil {
		c.sendFree <- slot
		return err
	}
	if !wait {
		return nil
	}
	err = <-s.result
	c.sendFree <- slot
	return err
}

// compErr turns a failed completion into an error. Every failed
// completion means the connection has ended (rdma.Status), so the error is
// a connection error. It runs on the loop and must not block.
func (c *Conn) compErr(comp rdma.Completion, what string) error {
	if comp.Status == rdma.StatusSuccess {
		return nil
	}
	if err := c.Err(); err != nil {
		return err
	}
	if err := c.rc.Err(); err != nil {
		// Why the provider ended the connection (a Terminate, say)
		// says more than the status; the loop may not have heard yet.
		return &ConnError{Op: what, Err: err}
	}
	return &ConnError{Op: what, Err: fmt.Errorf("completion status %v", comp.Status)}
}

// fail ends the connection with err (the first error wins).
func (c *Conn) fail(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = c.connErr(err)
	}
	c.errMu.Unlock()
	c.closeOnce.Do(func() {
		close(c.done)
		c.cancel()
		c.rc.Close()
		if c.req != nil {
			c.req.closeAll(c.Err())
		} else if c.resp != nil {
			c.resp.closeAll()
		}
		if c.bc != nil {
			c.bc.end(c.Err())
		}
	})
}

func (c *Conn) connErr(err error) error {
	var ce *ConnError
	if errors.As(err, &ce) {
		return err
	}
	return &ConnError{Op: "connection", Err: err}
}

// Err returns nil while the connection is up, then why it ended, as a
// *ConnError (which matches net.ErrClosed).
func (c *Conn) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// closeDrain bounds how long Close waits for posted work to complete.
const closeDrain = time.Second

// drain waits, for up to d, until no send-queue work is outstanding or
// the connection has ended.
func (c *Conn) drain(d time.Duration) {
	c.opsMu.Lock()
	if len(c.ops) == 0 {
		c.opsMu.Unlock()
		return
	}
	if c.opsIdle == nil {
		c.opsIdle = make(chan struct{})
	}
	idle := c.opsIdle
	c.opsMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
	case <-c.done:
	case <-t.C:
	}
}

// Done is closed when the connection ends.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close ends the connection. Messages already posted (a reply the
// rpc.Server has sent, say) go out first, for up to closeDrain. Calls
// outstanding on a requester then fail with a connection error; Recv
// returns. It waits for the loop and every side goroutine to exit and is
// idempotent.
func (c *Conn) Close() error {
	c.drain(closeDrain)
	c.fail(rdma.ErrClosed)
	<-c.loopDone
	c.sideMu.Lock()
	c.sideClosed = true
	c.sideMu.Unlock()
	c.side.Wait()
	return nil
}

// goSide runs f on a goroutine of its own that Close waits for: work the
// loop must not wait for (sending RDMA_ERROR or RDMA_DONE, pulling a
// read-chunk reply, resending a call after ERR_VERS). f must return soon
// once the connection has ended; its sends and reads take c.ctx. It
// reports false, without running f, once Close has stopped waiting for
// new ones, which happens only after the loop has ended: so the loop can
// count on f running.
func (c *Conn) goSide(f func()) bool {
	c.sideMu.Lock()
	defer c.sideMu.Unlock()
	if c.sideClosed {
		return false
	}
	c.side.Add(1)
	go func() {
		defer c.side.Done()
		f()
	}()
	return true
}

// sideSendTimeout bounds a side goroutine's Send: an RDMA_ERROR or
// RDMA_DONE waits for a send slot at most this long.
const sideSendTimeout = 10 * time.Second
