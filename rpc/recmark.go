package rpc

// Record marking (RFC 5531 section 11) delimits RPC messages on a byte
// stream such as TCP. A record is one message, sent as one or more
// fragments; each fragment starts with a 4-byte header whose top bit marks
// the last fragment of the record and whose other 31 bits give the
// fragment's length:
//
//	+-+-------------------------------+--------------------+
//	|L|  length (31 bits)             |  fragment data ... |
//	+-+-------------------------------+--------------------+
//
// The reader bounds a record before allocating for it, so a peer cannot make
// it allocate more than the record limit, nor much more than it really sent.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/reuse"
)

const (
	// DefaultMaxRecord is the largest record a StreamTransport accepts by
	// default: 1 MiB of data plus headroom for RPC and upper-layer headers.
	DefaultMaxRecord = 1<<20 + 64<<10
	// DefaultMaxFragments is the least default limit on fragments per
	// record, which bounds the work a peer can cause with empty fragments.
	// The default is the larger of it and one fragment per KiB of the
	// maximum record size; senders use one fragment per record (Linux) or
	// fragments of several KiB (libtirpc).
	DefaultMaxFragments = 1024
	// MaxFragmentLen is the largest length a fragment header can carry.
	MaxFragmentLen = 1<<31 - 1

	lastFragment = 1 << 31
	// readChunk is how much the reader allocates ahead of the data that
	// has arrived, so a fragment that claims more than it sends costs
	// little memory.
	readChunk = 64 << 10
)

// Record-marking failures. The stream is unusable after either: a
// StreamTransport closes the connection.
var (
	ErrRecordTooLarge   = errors.New("rpc: record exceeds the maximum size")
	ErrTooManyFragments = errors.New("rpc: record has too many fragments")
	// ErrHTTP is matched by the error for a record mark that reads as
	// the start of an HTTP message: the peer speaks HTTP, not RPC. It is
	// recognised only where the record would exceed the maximum size, as
	// it always does with the default (an ASCII "HTTP" is a fragment of
	// 1213486160 bytes), so it never refuses a record otherwise accepted;
	// the error matches ErrRecordTooLarge too.
	ErrHTTP = errors.New("rpc: the peer speaks HTTP")
)

// httpError reports a peer that speaks HTTP: an HTTP server answering a
// call ("HTTP/1.1 400 Bad Request", RFC 9112 Section 4), or an HTTP client
// calling ("GET / HTTP/1.1", RFC 9112 Section 3).
type httpError struct {
	peer     string // the peer's address, if the reader knows it
	response bool   // the peer answered; otherwise it made a request
}

func (e *httpError) Error() string {
	who := "the peer"
	if e.peer != "" {
		who = e.peer
	}
	if e.response {
		return "rpc: " + who + " is not an RPC server (it answered with HTTP)"
	}
	return "rpc: " + who + " is not an RPC client (it sent an HTTP request)"
}

func (e *httpError) Unwrap() []error { return []error{ErrHTTP, ErrRecordTooLarge} }

// httpStarts are the first four bytes of HTTP messages: a response's
// status line, and the request lines of the methods of RFC 9110 Section
// 9 and HTTP/2's connection preface (RFC 9113 Section 3.4), whose first
// word is PRI.
var httpStarts = [...]string{"HTTP", "GET ", "HEAD", "POST", "PUT ", "DELE", "CONN", "OPTI", "TRAC", "PATC", "PRI "}

// tooLarge returns the error for a record of n bytes over the maximum:
// an *httpError if the record mark hdr, the first of its record, reads
// as the start of an HTTP message.
func (rr *RecordReader) tooLarge(hdr []byte, first bool, n uint64) error {
	if first {
		for i, s := range httpStarts {
			if string(hdr) == s {
				return &httpError{peer: rr.peer, response: i == 0}
			}
		}
	}
	return &recordError{ErrRecordTooLarge, n, rr.maxRecord}
}

type recordError struct {
	kind error
	n    uint64
	max  int
}

func (e *recordError) Error() string {
	return e.kind.Error() + " (" + strconv.FormatUint(e.n, 10) + " > " + strconv.Itoa(e.max) + ")"
}

func (e *recordError) Unwrap() error { return e.kind }

// RecordReader reads records from a byte stream (RFC 5531 section 11). It
// is not safe for concurrent use.
type RecordReader struct {
	r         io.Reader
	maxRecord int
	maxFrags  int
	hdr       [4]byte

	// The record next is reading, kept across an interrupted read.
	cur    []byte // its data so far
	hdrN   int    // bytes of the current fragment header read
	left   int    // bytes of the current fragment's data still to read
	frags  int    // fragment headers read
	last   bool   // the current fragment is the record's last
	inFrag bool   // the current fragment's header has been read

	peer string // the peer's address for errors; "" if unknown
}

// NewRecordReader returns a RecordReader reading from r that accepts records
// of at most maxRecord bytes of data in at most maxFragments fragments;
// values <= 0 select the defaults (see DefaultMaxFragments). r should be
// buffered: the reader reads each 4-byte header separately.
func NewRecordReader(r io.Reader, maxRecord, maxFragments int) *RecordReader {
	if maxRecord <= 0 {
		maxRecord = DefaultMaxRecord
	}
	if maxFragments <= 0 {
		maxFragments = max(DefaultMaxFragments, maxRecord>>10)
	}
	return &RecordReader{r: r, maxRecord: maxRecord, maxFrags: maxFragments}
}

// ReadRecord reads the next record, appends its data (without fragment
// headers) to dst and returns the extended slice.
//
// It returns io.EOF if the stream ends cleanly before a record, and
// io.ErrUnexpectedEOF if it ends inside one. A record whose fragments add up
// to more than the maximum fails with an error wrapping ErrRecordTooLarge as
// soon as the fragment header saying so arrives, before anything is
// allocated for it (also matching ErrHTTP when its record mark reads as the
// start of an HTTP message); one with too many fragments fails with
// ErrTooManyFragments. After an error the stream position is undefined.
func (rr *RecordReader) ReadRecord(dst []byte) ([]byte, error) {
	start := len(dst)
	for frags := 1; ; frags++ {
		if frags > rr.maxFrags {
			return dst, &recordError{ErrTooManyFragments, uint64(frags), rr.maxFrags}
		}
		if _, err := io.ReadFull(rr.r, rr.hdr[:]); err != nil {
			if err == io.EOF && frags > 1 {
				err = io.ErrUnexpectedEOF
			}
			return dst, err
		}
		h := binary.BigEndian.Uint32(rr.hdr[:])
		n := int(h &^ lastFragment)
		if have := len(dst) - start; n > rr.maxRecord-have {
			return dst, rr.tooLarge(rr.hdr[:], frags == 1, uint64(have)+uint64(n))
		}
		fragEnd := len(dst) + n
		for n > 0 {
			k := min(n, readChunk)
			dst = growRecord(dst, start, k, fragEnd)
			m := len(dst)
			dst = dst[:m+k]
			if _, err := io.ReadFull(rr.r, dst[m:]); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return dst[:m], err
			}
			n -= k
		}
		if h&lastFragment != 0 {
			return dst, nil
		}
	}
}

// next reads the next record into fresh memory, which it returns. Unlike
// ReadRecord, it can be interrupted and resumed: when a read of the
// underlying reader fails, next returns the error and keeps what it has
// read of the record, and the next call carries on from there. That is
// for a read interrupted by a deadline (StreamTransport.recv); the
// caller decides whether an error ends the stream. It returns io.EOF if
// the stream ends before a record, io.ErrUnexpectedEOF inside one, and
// the errors of ReadRecord for records over the limits.
func (rr *RecordReader) next() ([]byte, error) {
	for {
		if !rr.inFrag {
			if rr.frags >= rr.maxFrags {
				return nil, &recordError{ErrTooManyFragments, uint64(rr.frags) + 1, rr.maxFrags}
			}
			for rr.hdrN < len(rr.hdr) {
				n, err := rr.r.Read(rr.hdr[rr.hdrN:])
				rr.hdrN += n
				if err != nil && rr.hdrN < len(rr.hdr) {
					if err == io.EOF && (rr.frags > 0 || rr.hdrN > 0) {
						err = io.ErrUnexpectedEOF
					}
					return nil, err
				}
			}
			h := binary.BigEndian.Uint32(rr.hdr[:])
			n := int(h &^ lastFragment)
			if have := len(rr.cur); n > rr.maxRecord-have {
				return nil, rr.tooLarge(rr.hdr[:], rr.frags == 0, uint64(have)+uint64(n))
			}
			rr.hdrN = 0
			rr.frags++
			rr.left, rr.last, rr.inFrag = n, h&lastFragment != 0, true
		}
		for rr.left > 0 {
			if len(rr.cur) == cap(rr.cur) {
				// Allocate little ahead of the data (growRecord).
				rr.cur = growRecord(rr.cur, 0, min(rr.left, readChunk), len(rr.cur)+rr.left)
			}
			m := len(rr.cur)
			n, err := rr.r.Read(rr.cur[m:min(cap(rr.cur), m+rr.left)])
			rr.cur = rr.cur[:m+n]
			rr.left -= n
			if err != nil && rr.left > 0 {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
		}
		rr.inFrag = false
		if rr.last {
			rec := rr.cur
			if rec == nil {
				rec = []byte{}
			}
			rr.cur, rr.frags = nil, 0
			return rec, nil
		}
	}
}

// growRecord returns dst with room for k more bytes of a fragment that ends
// at fragEnd, for a record that starts at dst[start]. It allocates at most
// readChunk plus four times what has arrived ahead of the data, so a
// fragment that claims more than it sends costs little memory; within that
// bound it allocates the rest of the fragment at once, rather than letting
// append grow by a quarter at a time. A 1 MiB record thus costs three
// allocations adding up to 1.4 MiB, not a dozen adding up to 5 MiB with as
// many copies.
func growRecord(dst []byte, start, k, fragEnd int) []byte {
	need := len(dst) + k
	if need <= cap(dst) {
		return dst
	}
	ahead := 4 * (len(dst) - start)
	c := max(need, len(dst)+ahead)
	if fragEnd-len(dst) <= ahead {
		c = max(need, fragEnd)
	}
	return slices.Grow(dst, c-len(dst))
}

// RecordWriter writes records to a byte stream (RFC 5531 section 11) with
// one vectored write per record (net.Buffers): the data of a Body's
// held-apart items is written from where it lies, not copied. It is not
// safe for concurrent use.
type RecordWriter struct {
	w       io.Writer
	maxFrag int

	// Per-record state, reused.
	hdrs   []byte
	bufs   net.Buffers
	out    net.Buffers // bufs while WriteTo consumes it: a local would escape, one allocation a record
	remain int         // bytes of the record not yet covered by a fragment header
	left   int         // bytes left in the current fragment
	zeros  [4]byte
}

// NewRecordWriter returns a RecordWriter writing to w in fragments of at
// most maxFragment bytes; a value <= 0 or above MaxFragmentLen selects
// MaxFragmentLen, which sends every practical record as one fragment.
func NewRecordWriter(w io.Writer, maxFragment int) *RecordWriter {
	if maxFragment <= 0 || maxFragment > MaxFragmentLen {
		maxFragment = MaxFragmentLen
	}
	return &RecordWriter{w: w, maxFrag: maxFragment}
}

// WriteRecord writes b, flattened (see Body.AppendFlat), as one record and
// returns the number of bytes written to the stream, fragment headers
// included. b must be valid (Body.Validate). It keeps no reference to b's
// memory after it returns. An error leaves the stream unusable if any bytes
// were written.
func (rw *RecordWriter) WriteRecord(b *Body) (int64, error) {
	total := b.Len()
	nfrag := max(1, (total+rw.maxFrag-1)/rw.maxFrag)
	// The headers are sliced into bufs, so hdrs must not move once filled.
	rw.hdrs = slices.Grow(rw.hdrs[:0], 4*nfrag)
	rw.bufs = rw.bufs[:0]
	rw.remain, rw.left = total, 0

	prev := 0
	for _, it := range b.Items {
		rw.add(b.XDR[prev:it.Offset])
		rw.add(it.Data)
		rw.add(rw.zeros[:(4-len(it.Data)&3)&3])
		prev = it.Offset
	}
	rw.add(b.XDR[prev:])
	if len(rw.bufs) == 0 {
		rw.header() // an empty record is one empty last fragment
	}

	rw.out = rw.bufs
	n, err := rw.out.WriteTo(rw.w)
	rw.out = nil
	clear(rw.bufs[:cap(rw.bufs)]) // drop references to the caller's memory
	return n, err
}

// add appends p to the write vector, starting fragments as they fill.
func (rw *RecordWriter) add(p []byte) {
	for len(p) > 0 {
		if rw.left == 0 {
			rw.header()
		}
		k := min(len(p), rw.left)
		rw.bufs = append(rw.bufs, p[:k])
		p = p[k:]
		rw.left -= k
	}
}

// header starts the next fragment.
func (rw *RecordWriter) header() {
	n := min(rw.remain, rw.maxFrag)
	rw.remain -= n
	h := uint32(n)
	if rw.remain == 0 {
		h |= lastFragment
	}
	off := len(rw.hdrs)
	rw.hdrs = binary.BigEndian.AppendUint32(rw.hdrs, h)
	rw.bufs = append(rw.bufs, rw.hdrs[off:off+4:off+4])
	rw.left = n
}

// StreamOptions configures a StreamTransport. The zero value selects the
// defaults.
type StreamOptions struct {
	// MaxRecord is the largest record Recv accepts, in bytes of data; a
	// larger one closes the connection. 0 selects DefaultMaxRecord.
	MaxRecord int
	// MaxFragments is the largest number of fragments per record Recv
	// accepts. 0 selects a default (see DefaultMaxFragments).
	MaxFragments int
	// MaxFragment is the largest fragment Send writes. 0 selects
	// MaxFragmentLen (one fragment per record).
	MaxFragment int
}

// StreamTransport is a Transport over a byte stream (TCP) with record
// marking (RFC 5531 section 11). Send flattens a Msg's Body, gathering the
// held-apart items into one vectored write; Recv returns every message with
// its data inline (no Items). It ignores ResultBufs and MaxReply.
type StreamTransport struct {
	conn net.Conn

	// sendLock is a one-slot semaphore held while a record is written, so
	// that waiting for it can be cancelled; it guards wr.
	sendLock chan struct{}
	wr       *RecordWriter
	// interruptWrite sets a write deadline in the past, interrupting a
	// Send whose ctx ended, and then signals writeInterrupted; made once,
	// like interrupt below.
	interruptWrite   func()
	writeInterrupted chan struct{}

	// Owned by the goroutine receiving: the one calling Recv, or, once
	// Push was called, the one with the receive turn (stream_push.go).
	rd      *RecordReader
	br      *bufio.Reader // rd's
	recvErr error
	// interrupt sets a read deadline in the past, interrupting a
	// recv whose ctx ended, and then signals interrupted. Made
	// once, so that recv allocates only what context.AfterFunc
	// does.
	interrupt   func()
	interrupted chan struct{}
	// msgs holds a received Msg its receiver has released, for the next
	// recv: a Msg, not its memory, which the receiver may keep
	// (Msg.Release).
	msgs reuse.Spare[recvMsg]

	push streamPush

	closeOnce sync.Once
	closed    chan struct{}
}

// NewStreamTransport returns a StreamTransport over c, which it owns from
// then on (Close closes it). o may be nil.
func NewStreamTransport(c net.Conn, o *StreamOptions) *StreamTransport {
	var opts StreamOptions
	if o != nil {
		opts = *o
	}
	t := &StreamTransport{
		conn:        c,
		sendLock:    make(chan struct{}, 1),
		wr:          NewRecordWriter(c, opts.MaxFragment),
		br:          bufio.NewReaderSize(c, 32<<10),
		closed:      make(chan struct{}),
		interrupted: make(chan struct{}, 1),
		push:        streamPush{wake: make(chan struct{}, 1), want: true},

		writeInterrupted: make(chan struct{}, 1),
	}
	t.interruptWrite = func() {
		t.conn.SetWriteDeadline(time.Unix(1, 0)) // in the past: interrupts the write
		t.writeInterrupted <- struct{}{}
	}
	t.rd = NewRecordReader(t.br, opts.MaxRecord, opts.MaxFragments)
	if a := c.RemoteAddr(); a != nil {
		t.rd.peer = a.String()
	}
	t.interrupt = func() {
		t.conn.SetReadDeadline(time.Unix(1, 0)) // in the past: interrupts the read
		t.interrupted <- struct{}{}
	}
	return t
}

// DialTCP connects to addr ("host:port") over TCP and returns a
// StreamTransport over the connection. o may be nil.
func DialTCP(ctx context.Context, addr string, o *StreamOptions) (*StreamTransport, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewStreamTransport(c, o), nil
}

// Send writes m as one record. Concurrent Sends are serialized; ctx bounds
// the wait for the connection and the write itself.
//
// It returns ctx's error if ctx ends before any byte is written (the
// connection stays usable), an error wrapping ErrDDPItem if m's Body is
// invalid, and a *ConnError otherwise; a write that fails or is interrupted
// part-way closes the transport, since the stream can no longer be framed.
func (t *StreamTransport) Send(ctx context.Context, m *Msg) error {
	if err := m.Body.Validate(); err != nil {
		return err
	}
	select {
	case t.sendLock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.closed:
		return &ConnError{Err: net.ErrClosed}
	}
	defer func() { <-t.sendLock }()
	select {
	case <-t.closed:
		return &ConnError{Err: net.ErrClosed}
	default:
	}

	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, t.interruptWrite)
	}
	n, err := t.wr.WriteRecord(&m.Body)
	if stop != nil && !stop() {
		<-t.writeInterrupted
		if err == nil || n == 0 {
			t.conn.SetWriteDeadline(time.Time{})
		}
		if err != nil && n == 0 {
			return ctx.Err()
		}
	}
	if err != nil {
		t.Close()
		return &ConnError{Err: err}
	}
	return nil
}

// Recv reads the next record and returns it as a Msg with everything inline;
// the Msg's memory belongs to the caller, and Msg.Release gives the Msg
// itself back for reuse (not the memory). Only one goroutine may call Recv
// at a time, and none once Push has been called (Pusher).
//
// Every error is a *ConnError and is returned again by later calls: the peer
// closed (io.EOF), the transport was closed (net.ErrClosed), the record was
// too large or too fragmented (ErrRecordTooLarge, ErrTooManyFragments), the
// peer speaks HTTP (ErrHTTP; the error names the peer's address), or the
// connection failed. Recv closes the transport on error.
func (t *StreamTransport) Recv() (*Msg, error) {
	return t.recv(context.Background())
}

// recv is Recv, except that when ctx ends before a whole record has
// arrived it returns ctx.Err() and leaves the transport usable: what it
// read of the record is kept, and the next recv carries on from there
// (SendDeliver). It interrupts a blocked read by setting the connection's
// read deadline, and clears the deadline before it returns.
func (t *StreamTransport) recv(ctx context.Context) (*Msg, error) {
	if t.recvErr != nil {
		return nil, t.recvErr
	}
	var stop func() bool
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		stop = context.AfterFunc(ctx, t.interrupt)
	}
	buf, err := t.rd.next()
	if stop != nil && !stop() {
		<-t.interrupted
		t.conn.SetReadDeadline(time.Time{})
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !t.isClosed() {
			return nil, ctx.Err()
		}
	}
	if err != nil {
		if t.isClosed() {
			err = net.ErrClosed
		} else {
			t.Close()
		}
		t.recvErr = &ConnError{Err: err}
		return nil, t.recvErr
	}
	rm := t.msgs.Get(&recvMsgs)
	if rm.release == nil {
		rm.release = func() {
			t := rm.t
			if t == nil {
				return // released already
			}
			rm.t, rm.m = nil, Msg{}
			t.msgs.Put(rm, &recvMsgs)
		}
	}
	rm.t = t
	rm.m = Msg{Body: Body{XDR: buf}, Release: rm.release}
	return &rm.m, nil
}

// recvMsg is a Msg recv returns, recycled once released.
type recvMsg struct {
	m       Msg
	t       *StreamTransport // whose spare it goes back to; nil once released
	release func()           // m.Release, bound once
}

var recvMsgs sync.Pool

func (t *StreamTransport) isClosed() bool {
	select {
	case <-t.closed:
		return true
	default:
		return false
	}
}

// Close closes the connection, making a blocked Recv and Send return, and
// returns the error of closing it. It is safe to call concurrently and more
// than once; later calls return nil.
func (t *StreamTransport) Close() error {
	var err error
	t.closeOnce.Do(func() {
		close(t.closed)
		err = t.conn.Close()
		t.push.nudge() // a parked reader receives the error that ends t
	})
	return err
}

// LocalAddr returns the local network address of the connection.
func (t *StreamTransport) LocalAddr() net.Addr { return t.conn.LocalAddr() }

// RemoteAddr returns the remote network address of the connection.
func (t *StreamTransport) RemoteAddr() net.Addr { return t.conn.RemoteAddr() }
