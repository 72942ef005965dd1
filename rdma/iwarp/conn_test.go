package iwarp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/internal/memreg"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestConformanceSmallMSS runs the suite with FPDUs of at most 530 bytes,
// so that Sends, Writes and Read Responses of every size are segmented.
func TestConformanceSmallMSS(t *testing.T) {
	if testing.Short() {
		t.Skip("slow with small FPDUs")
	}
	conformance(t, Options{CRC: CRCRequire, MSS: 536})
}

// TestPeerEndings checks how our side ends when the raw peer leaves: a FIN
// inside an FPDU is a disconnect, a reset a lost connection, and a
// Terminate in siw's layout is decoded as the TerminateError it means.
func TestPeerEndings(t *testing.T) {
	for _, role := range []string{"responder", "initiator"} {
		for _, tc := range []struct {
			name string
			run  func(*rawPeer)
			want func(*testing.T, error)
		}{
			{"FIN inside an FPDU", func(r *rawPeer) {
				r.write(mpa.AppendFPDU(nil, r.crc, make([]byte, 40))[:20])
				r.nc.(*net.TCPConn).CloseWrite() // a FIN, not a reset for unread data
			}, func(t *testing.T, err error) {
				if !errors.Is(err, rdma.ErrDisconnected) {
					t.Errorf("error %v, want ErrDisconnected", err)
				}
			}},
			{"reset", func(r *rawPeer) {
				r.nc.(*net.TCPConn).SetLinger(0)
				r.nc.Close()
			}, func(t *testing.T, err error) {
				if !errors.Is(err, rdma.ErrConnectionLost) && !errors.Is(err, rdma.ErrDisconnected) {
					t.Errorf("error %v, want ErrConnectionLost", err)
				}
			}},
			{"siw Terminate", func(r *rawPeer) {
				term := ddp.Terminate{Cause: ddp.CauseDDPUntaggedNoBuffer, Layout: ddp.LayoutSiw, HdrCt: ddp.HdrCtM | ddp.HdrCtD | ddp.HdrCtR,
					ReadRequestOmitted: true, SegmentLen: 100, DDPHeader: ddp.Untagged(ddp.OpSend, true, 0, 1, 0)}
				r.sendSeg(ddp.Segment{Header: ddp.Untagged(ddp.OpTerminate, true, ddp.QNTerminate, 1, 0), Terminate: term})
			}, func(t *testing.T, err error) {
				wantTerm(t, err, ddp.CauseDDPUntaggedNoBuffer, true)
			}},
		} {
			t.Run(role+"/"+tc.name, func(t *testing.T) {
				rdmatest.CheckGoroutines(t)
				p := newProvider(t, Options{})
				r, c, _ := connectRaw(t, p, role == "responder", true, rdma.ConnConfig{})
				postRecv(t, c, 1, 64)
				tc.run(r)
				tc.want(t, waitEnd(t, c))
				if n := c.Poll(make([]rdma.Completion, 4)); n != 1 {
					t.Errorf("%d completions, want the flushed receive", n)
				}
				if err := c.PostRecv(2, nil); !errors.Is(err, net.ErrClosed) {
					t.Errorf("post after the end: %v", err)
				}
			})
		}
	}
}

// TestLocalProtection invalidates the source of a posted Send before it
// runs (our responder is fenced): the Send fails with
// StatusLocalProtection and the connection ends with an RDMAP local
// catastrophic Terminate, as on an RNIC.
func TestLocalProtection(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p := newProvider(t, Options{})
	s := serve(t, p, rdma.ConnConfig{})
	r := rawDial(t, s.ln.Addr())
	r.initiate(request(false, nil))
	c := s.next(t)
	m := alloc(t, c, 8, 0)
	rdmatest.Post(t, c, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{rdmatest.Whole(m)}})
	rdmatest.Post(t, c, rdma.WorkRequest{ID: 2, Op: rdma.OpSend})
	m.Invalidate()
	r.rdmaWrite(rtrSTag, 0, nil) // lifts the fence
	r.expectTerminate(ddp.MakeCause(ddp.LayerRDMAP, 0, 0xff), nil, 0)
	wantTerm(t, waitEnd(t, c), ddp.MakeCause(ddp.LayerRDMAP, 0, 0xff), false)
	wantCompletions(rdma.StatusLocalProtection, rdma.StatusFlushed)(t, c)
}

// stallPlacement has the raw peer r send the first 2000 bytes of an RDMA
// Write of payload into m, and waits until c's reader is placing it: its
// placing region is m's. (placeMu alone is also held for a moment by any
// other placement, such as that of the zero-length Write that lifted the
// fence just before, so a wait on it could end before this Write's
// placement had begun.) It returns the whole FPDU, for the caller to
// send the rest.
func stallPlacement(t *testing.T, r *rawPeer, c *Conn, m rdma.MR, payload []byte) []byte {
	t.Helper()
	seg := ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, true, uint32(m.STag()), m.TO()), Payload: payload}
	b := mpa.AppendFPDU(nil, false, seg.Append(nil))
	r.write(b[:2000])
	reg := memreg.RegionOf(m)
	deadline := time.Now().Add(rawTimeout)
	for c.placing.Load() != reg {
		if time.Now().After(deadline) {
			t.Fatalf("the reader never started placing")
		}
		time.Sleep(time.Millisecond)
	}
	return b
}

// TestInvalidateStalledPlacement has the peer stop in the middle of an
// RDMA Write's payload while we invalidate the region: Invalidate returns
// within the handshake timeout, having ended the connection, so nothing
// can be placed afterwards.
func TestInvalidateStalledPlacement(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p := newProvider(t, Options{HandshakeTimeout: 200 * time.Millisecond})
	r, c, _ := connectRaw(t, p, true, false, rdma.ConnConfig{})
	m := alloc(t, c, 4096, rdma.AccessRemoteWrite)
	stallPlacement(t, r, c, m, make([]byte, 4000))
	start := time.Now()
	m.Invalidate()
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("invalidate took %v", d)
	}
	if err := waitEnd(t, c); !errors.Is(err, rdma.ErrConnectionLost) {
		t.Errorf("error %v, want ErrConnectionLost", err)
	}
	m.Release()
}

// TestFirstWriteTrailerHeld: with SiwFirstSendDelay, an initiator
// sends its first write without the last FPDU's trailer and the trailer a
// moment later in a segment of its own (for Linux siw's accept race). The
// responder must still get the message whole, CRC checked.
func TestFirstWriteTrailerHeld(t *testing.T) {
	p, err := New(Options{CRC: CRCRequire, FirstSendDelay: SiwFirstSendDelay})
	if err != nil {
		t.Fatal(err)
	}
	a, b := rdmatest.Pair(t, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0"}, rdma.ConnConfig{}, rdma.ConnConfig{})
	defer a.Close()
	defer b.Close()
	if !a.(*Conn).CRC() {
		t.Fatal("CRC not negotiated")
	}
	rbuf := rdmatest.Alloc(t, b, 64, rdma.AccessLocalWrite)
	rdmatest.PostRecv(t, b, 1, rdma.SGE{MR: rbuf, Length: 64})
	src := rdmatest.Alloc(t, a, 64, 0)
	copy(src.Bytes(), "first message, trailer held back")
	rdmatest.Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Local: []rdma.SGE{{MR: src, Length: 32}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs := make([]rdma.Completion, 1)
	if _, err := b.Wait(ctx, cs); err != nil || cs[0].Status != rdma.StatusSuccess || cs[0].Len != 32 {
		t.Fatalf("receive: %+v %v", cs[0], err)
	}
	if got := string(rbuf.Bytes()[:32]); got != "first message, trailer held back" {
		t.Fatalf("received %q", got)
	}
}

// TestFirstSendDelayOnlyWhenAsked: a connection between two of these
// providers, with the default options, may send at once; the delay a
// Linux siw responder needs applies only when Options.FirstSendDelay asks
// for it, and only to the initiator.
func TestFirstSendDelayOnlyWhenAsked(t *testing.T) {
	for _, d := range []time.Duration{0, SiwFirstSendDelay} {
		p, err := New(Options{FirstSendDelay: d})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		a, b := rdmatest.Pair(t, rdmatest.Config{Provider: p, ListenAddr: "127.0.0.1:0"}, rdma.ConnConfig{}, rdma.ConnConfig{})
		up := time.Now()
		for _, c := range []*Conn{a.(*Conn), b.(*Conn)} {
			c.mu.Lock()
			from := c.sendFrom
			c.mu.Unlock()
			switch {
			case c.initiator && d > 0 && from.Before(start.Add(d)):
				t.Errorf("FirstSendDelay %v: the initiator may send %v after it dialed", d, from.Sub(start))
			case (!c.initiator || d == 0) && from.After(up):
				t.Errorf("FirstSendDelay %v: initiator %v holds its first FPDU until %v after the connection is up", d, c.initiator, from.Sub(up))
			}
		}
		a.Close()
		b.Close()
	}
}

// TestInvalidateOtherThanPlaced: while the reader is stalled in the middle
// of an RDMA Write into one region, invalidating and releasing another
// returns at once and leaves the connection up; the Write then completes.
func TestInvalidateOtherThanPlaced(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	p := newProvider(t, Options{HandshakeTimeout: 5 * time.Second})
	r, c, _ := connectRaw(t, p, true, false, rdma.ConnConfig{})
	m := alloc(t, c, 4096, rdma.AccessRemoteWrite)
	other := alloc(t, c, 4096, rdma.AccessRemoteWrite)
	payload := bytes.Repeat([]byte{7}, 4000)
	b := stallPlacement(t, r, c, m, payload)
	start := time.Now()
	other.Invalidate()
	other.Release()
	if d := time.Since(start); d > time.Second {
		t.Errorf("invalidating and releasing another region took %v", d)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("connection ended: %v", err)
	}
	postRecv(t, c, 1, 64)
	r.write(b[2000:])
	r.send(nil) // after the Write: once it arrives, the Write is placed
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs := make([]rdma.Completion, 1)
	if _, err := c.Wait(ctx, cs); err != nil || cs[0].Status != rdma.StatusSuccess {
		t.Fatalf("receive after the Write: %+v %v", cs[0], err)
	}
	if !bytes.Equal(m.Bytes()[:4000], payload) {
		t.Error("the Write was not placed whole")
	}
}
