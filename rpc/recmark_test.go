package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/leaktest"
	"github.com/go-rpcrdma/rpcrdma/internal/race"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

type recordVector struct {
	name    string
	maxFrag int
	body    func() Body
	hex     string
}

// recordVectors are record-marked streams (RFC 5531 section 11), derived by
// hand: each fragment header is the last-fragment bit and a 31-bit length.
var recordVectors = []recordVector{
	{"rfc5531-s11-one-fragment", 0, sampleBody, "80000024 " + sampleFlat},
	{"rfc5531-s11-four-fragments", 10, sampleBody,
		"0000000a 00000007 00000005 6865" +
			" 0000000a 6c6c6f000000 00000009" +
			" 0000000a 00000004 61626364 0000" +
			" 80000006 0002 78790000"},
	{"rfc5531-s11-empty-record", 0, func() Body { return Body{} }, "80000000"},
	{"rfc5531-s11-exact-fragment", 4, func() Body { return Body{XDR: []byte{1, 2, 3, 4}} }, "80000004 01020304"},
}

func TestRecordGolden(t *testing.T) {
	for _, v := range recordVectors {
		t.Run(v.name, func(t *testing.T) {
			wire := unhex(t, v.hex)
			var buf bytes.Buffer
			w := NewRecordWriter(&buf, v.maxFrag)
			b := v.body()
			n, err := w.WriteRecord(&b)
			if err != nil || n != int64(len(wire)) || !bytes.Equal(buf.Bytes(), wire) {
				t.Errorf("WriteRecord = %d, %v: %x\nwant %x", n, err, buf.Bytes(), wire)
			}
			// Twice in a row reuses the writer's state.
			buf.Reset()
			w.WriteRecord(&b)
			if !bytes.Equal(buf.Bytes(), wire) {
				t.Errorf("second WriteRecord: %x", buf.Bytes())
			}

			r := NewRecordReader(bytes.NewReader(wire), 0, 0)
			rec, err := r.ReadRecord([]byte{0xee})
			if err != nil || !bytes.Equal(rec[1:], b.AppendFlat(nil)) || rec[0] != 0xee {
				t.Errorf("ReadRecord = %x, %v", rec, err)
			}
			if _, err := r.ReadRecord(nil); err != io.EOF {
				t.Errorf("after the record: %v, want io.EOF", err)
			}
			for n := 1; n < len(wire); n++ {
				r := NewRecordReader(bytes.NewReader(wire[:n]), 0, 0)
				if _, err := r.ReadRecord(nil); err != io.ErrUnexpectedEOF {
					t.Fatalf("prefix %d: %v, want io.ErrUnexpectedEOF", n, err)
				}
			}
		})
	}
}

// gatherWriter records the slices it is given, without net.Buffers
// gathering them.
type gatherWriter struct{ writes [][]byte }

func (g *gatherWriter) Write(p []byte) (int, error) {
	g.writes = append(g.writes, p)
	return len(p), nil
}

func TestRecordWriterNoCopy(t *testing.T) {
	b := sampleBody()
	var g gatherWriter
	if _, err := NewRecordWriter(&g, 0).WriteRecord(&b); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, p := range g.writes {
		for _, it := range b.Items {
			if len(p) > 0 && &p[0] == &it.Data[0] {
				found++
			}
		}
	}
	if found != len(b.Items) {
		t.Errorf("%d of %d items written from their own memory", found, len(b.Items))
	}
}

func TestRecordReaderLimits(t *testing.T) {
	read := func(maxRecord, maxFrags int, wire []byte) error {
		_, err := NewRecordReader(bytes.NewReader(wire), maxRecord, maxFrags).ReadRecord(nil)
		return err
	}
	if err := read(1000, 0, unhex(t, "7fffffff")); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("huge fragment: %v", err)
	}
	two := append(unhex(t, "00000258"), make([]byte, 600)...)
	two = append(two, unhex(t, "80000258")...)
	if err := read(1000, 0, two); !errors.Is(err, ErrRecordTooLarge) || err.Error() != "rpc: record exceeds the maximum size (1200 > 1000)" {
		t.Errorf("too large in two fragments: %v", err)
	}
	if err := read(1000, 0, append(unhex(t, "800003e8"), make([]byte, 1000)...)); err != nil {
		t.Errorf("exactly the maximum: %v", err)
	}
	empties := bytes.Repeat(unhex(t, "00000000"), 2000)
	if err := read(0, 0, empties); !errors.Is(err, ErrTooManyFragments) {
		t.Errorf("many empty fragments: %v", err)
	}
	if err := read(0, 3, unhex(t, "00000000 00000000 80000000")); err != nil {
		t.Errorf("three fragments with a limit of 3: %v", err)
	}
}

// TestRecordReaderNoAllocation checks that a fragment claiming a lot but
// sending little costs little memory, and one claiming more than the limit
// costs none.
func TestRecordReaderNoAllocation(t *testing.T) {
	measure := func(maxRecord int, wire []byte) (uint64, error) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := NewRecordReader(bytes.NewReader(wire), maxRecord, 0).ReadRecord(nil)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, err
	}
	wire := append(unhex(t, "a0000000"), make([]byte, 10)...) // claims 512 MiB
	n, err := measure(1<<30, wire)
	if err != io.ErrUnexpectedEOF || n > 1<<20 {
		t.Errorf("512 MiB claimed within the limit: %d bytes allocated, %v", n, err)
	}
	n, err = measure(DefaultMaxRecord, unhex(t, "ffffffff"))
	if !errors.Is(err, ErrRecordTooLarge) || n > 4096 {
		t.Errorf("2 GiB claimed over the limit: %d bytes allocated, %v", n, err)
	}
}

// TestRecordReaderLargeRecord: a 1 MiB record that arrives whole costs
// little more than 1 MiB to read, not the several MiB of growing a slice a
// quarter at a time.
func TestRecordReaderLargeRecord(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector changes what is allocated")
	}
	const size = 1 << 20
	wire := binary.BigEndian.AppendUint32(nil, size|lastFragment)
	wire = append(wire, make([]byte, size)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec, err := NewRecordReader(bytes.NewReader(wire), 0, 0).ReadRecord(nil)
	runtime.ReadMemStats(&after)
	if err != nil || len(rec) != size {
		t.Fatalf("read %d bytes, %v", len(rec), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > size*3/2 {
		t.Errorf("ReadRecord: %d bytes allocated to read a %d-byte record", n, size)
	}
	// The same through next, which StreamTransport.Recv uses.
	runtime.ReadMemStats(&before)
	rec, err = NewRecordReader(bytes.NewReader(wire), 0, 0).next()
	runtime.ReadMemStats(&after)
	if err != nil || len(rec) != size {
		t.Fatalf("next read %d bytes, %v", len(rec), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > size*3/2 {
		t.Errorf("next: %d bytes allocated to read a %d-byte record", n, size)
	}
}

func TestRecordRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		var stream bytes.Buffer
		w := NewRecordWriter(&stream, 1+r.IntN(40))
		var want [][]byte
		for range r.IntN(5) {
			var b Body
			for range r.IntN(4) {
				b.XDR = xdr.AppendOpaque(b.XDR, randBytes(r, 50))
				b.AppendDDPOpaque(randBytes(r, 50))
			}
			want = append(want, b.AppendFlat(nil))
			if _, err := w.WriteRecord(&b); err != nil {
				t.Fatal(err)
			}
		}
		rd := NewRecordReader(&stream, 0, 0)
		for i, w := range want {
			got, err := rd.ReadRecord(nil)
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("record %d: %x, %v\nwant %x", i, got, err, w)
			}
		}
		if _, err := rd.ReadRecord(nil); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	}
}

// pipeTransports returns two StreamTransports over net.Pipe, closed at
// cleanup.
func pipeTransports(t *testing.T, o *StreamOptions) (*StreamTransport, *StreamTransport) {
	c1, c2 := net.Pipe()
	a, b := NewStreamTransport(c1, o), NewStreamTransport(c2, o)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestStreamTransport(t *testing.T) {
	leaktest.Check(t)
	a, b := pipeTransports(t, &StreamOptions{MaxFragment: 8})
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			m := &Msg{Body: sampleBody()}
			m.XDR = xdr.AppendUint32(m.XDR, uint32(i))
			if err := a.Send(context.Background(), m); err != nil {
				t.Error(err)
			}
		})
	}
	seen := map[uint32]bool{}
	flat := unhex(t, sampleFlat)
	for range n {
		m, err := b.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Items) != 0 || !bytes.Equal(m.XDR[:len(flat)], flat) || len(m.XDR) != len(flat)+4 {
			t.Fatalf("received %x", m.XDR)
		}
		seen[uint32(m.XDR[len(flat)+3])] = true
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("received %d distinct messages, want %d", len(seen), n)
	}

	bad := &Msg{Body: Body{Items: []DDPItem{{Offset: 3}}}}
	if err := a.Send(context.Background(), bad); !errors.Is(err, ErrDDPItem) {
		t.Errorf("invalid body: %v", err)
	}

	// The peer closing ends Recv with io.EOF, then Recv keeps failing.
	a.Close()
	for range 2 {
		if _, err := b.Recv(); !errors.Is(err, net.ErrClosed) || !errors.Is(err, io.EOF) {
			t.Errorf("Recv after peer close: %v", err)
		}
	}
	if err := a.Send(context.Background(), &Msg{}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStreamTransportLocalClose(t *testing.T) {
	leaktest.Check(t)
	a, _ := pipeTransports(t, nil)
	done := make(chan error)
	go func() { _, err := a.Recv(); done <- err }()
	time.Sleep(10 * time.Millisecond)
	a.Close()
	err := <-done
	if !errors.Is(err, net.ErrClosed) || err.Error() != "rpc: connection closed" {
		t.Errorf("Recv after Close: %v", err)
	}
}

func TestStreamTransportSendContext(t *testing.T) {
	leaktest.Check(t)
	a, b := pipeTransports(t, nil)

	// Nobody reads: the deadline interrupts the write before any byte
	// went out, and the transport stays usable.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	m := &Msg{Body: Body{XDR: []byte{1, 2, 3, 4}}}
	if err := a.Send(ctx, m); err != context.DeadlineExceeded {
		t.Fatalf("Send = %v, want DeadlineExceeded", err)
	}
	got := make(chan *Msg)
	go func() { m, _ := b.Recv(); got <- m }()
	if err := a.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if r := <-got; !bytes.Equal(r.XDR, m.XDR) {
		t.Errorf("received %x", r.XDR)
	}

	// A cancelled context fails while waiting for the send lock.
	a.sendLock <- struct{}{}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := a.Send(ctx2, m); err != context.Canceled {
		t.Errorf("Send waiting for the lock = %v", err)
	}
	<-a.sendLock
}

// TestStreamTransportPartialWrite checks that a write interrupted mid-record
// closes the transport.
func TestStreamTransportPartialWrite(t *testing.T) {
	leaktest.Check(t)
	c1, c2 := net.Pipe()
	a := NewStreamTransport(c1, nil)
	defer a.Close()
	defer c2.Close()
	// Cancel once part of the record (6 bytes) has been read: the write
	// is then blocked mid-record, however long the reader took.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		io.ReadFull(c2, make([]byte, 6))
		cancel()
	}()
	m := &Msg{Body: sampleBody()}
	if err := a.Send(ctx, m); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Send = %v, want a connection error", err)
	}
	if err := a.Send(context.Background(), m); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Send after a partial write = %v", err)
	}
}

func TestStreamTransportRecordTooLarge(t *testing.T) {
	leaktest.Check(t)
	c1, c2 := net.Pipe()
	a := NewStreamTransport(c1, &StreamOptions{MaxRecord: 1024})
	defer a.Close()
	defer c2.Close()
	go c2.Write(unhex(t, "fffffff0")) // claims almost 2 GiB
	_, err := a.Recv()
	if !errors.Is(err, ErrRecordTooLarge) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Recv = %v", err)
	}
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("peer read after rejection: %v, want io.EOF (connection closed)", err)
	}
}

func TestDialTCP(t *testing.T) {
	leaktest.Check(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := DialTCP(ctx, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b := NewStreamTransport(c, nil)
	defer b.Close()
	if a.RemoteAddr().String() != l.Addr().String() || b.RemoteAddr().String() != a.LocalAddr().String() {
		t.Errorf("addresses: %v %v %v", a.RemoteAddr(), b.RemoteAddr(), a.LocalAddr())
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB, several read chunks
	var body Body
	body.AppendDDPOpaque(big)
	go a.Send(ctx, &Msg{Body: body})
	m, err := b.Recv()
	if err != nil || !bytes.Equal(m.XDR[4:], big) {
		t.Fatalf("Recv: %v", err)
	}
	if _, err := DialTCP(ctx, "127.0.0.1:1", nil); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("dial to a closed port: %v", err)
	}
}

// TestTCPNullAllocs bounds what a NULL over TCP allocates, client and
// server together, once warm: each end's received record (its memory is
// the receiver's to keep) and the server's context.AfterFunc for its
// Send. The Msgs themselves come back through Release, and a record's
// write vector does not escape.
func TestTCPNullAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop values")
	}
	h := newTCPHarness(t, nil)
	ctx := context.Background()
	null := func() {
		if err := h.cli.Null(ctx, testProg, 1); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		null()
	}
	if n := testing.AllocsPerRun(300, null); n > 4 {
		t.Errorf("NULL over TCP: %.2f allocations per call, want at most 4", n)
	}
}
