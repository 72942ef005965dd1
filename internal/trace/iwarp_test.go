package trace

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/trace/tracetest"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

var (
	testClient = netip.MustParseAddrPort("192.0.2.1:41000")
	testServer = netip.MustParseAddrPort("192.0.2.2:7000")
)

// signature is what an event says, without where in the capture it was:
// equal for the same stream bytes however TCP carried them.
func signature(e *Event) string {
	s := e.String()
	s = s[strings.Index(s, " ")+1:] // drop the frame number
	if e.Message != nil {
		s = strings.Replace(s, fmt.Sprintf(" first=%d", e.Message.FirstFrame), "", 1)
	}
	return fmt.Sprintf("%s@%d+%d %s", e.Dir, e.Offset, e.Len, s)
}

// signatures returns the signatures of stream 0's events, each direction's
// in order (how the directions interleave depends on the packets).
func signatures(d *decoded) []string {
	var out [2][]string
	for _, e := range d.events {
		if e.Stream == 0 {
			out[e.Dir] = append(out[e.Dir], signature(e))
		}
	}
	return append(out[0], out[1]...)
}

// TestDecodeReordered replays the demo's first connection cut into random
// segments, sent out of order, retransmitted and overlapping, and checks
// that the decoded messages are those of the clean capture.
func TestDecodeReordered(t *testing.T) {
	demo, clean := writeDemo(t)
	want := signatures(decodeBytes(t, clean, Options{}))
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var buf bytes.Buffer
		p := tracetest.NewPcap(&buf)
		c := p.Connect(demo.Client, demo.Server)
		// Cut each direction into segments of 1 to 100 bytes.
		type piece struct{ dir, off, end int }
		var pieces [2][]piece
		for dir, b := range demo.Stream0 {
			for off := 0; off < len(b); {
				end := min(off+1+rng.IntN(100), len(b))
				pieces[dir] = append(pieces[dir], piece{dir, off, end})
				off = end
			}
		}
		// Interleave the directions, swap neighbours, and add copies and
		// overlapping segments.
		var order []piece
		for len(pieces[0])+len(pieces[1]) > 0 {
			dir := rng.IntN(2)
			if len(pieces[dir]) == 0 {
				dir = 1 - dir
			}
			order = append(order, pieces[dir][0])
			pieces[dir] = pieces[dir][1:]
		}
		for i := 0; i+1 < len(order); i++ {
			if rng.IntN(3) == 0 {
				order[i], order[i+1] = order[i+1], order[i]
			}
		}
		for _, pc := range order {
			b := demo.Stream0[pc.dir]
			c.SendAt(pc.dir, pc.off, b[pc.off:pc.end])
			switch rng.IntN(8) {
			case 0: // retransmission
				c.SendAt(pc.dir, pc.off, b[pc.off:pc.end])
			case 1: // overlap reaching back
				from := max(0, pc.off-rng.IntN(50))
				c.SendAt(pc.dir, from, b[from:pc.end])
			}
		}
		d := decodeBytes(t, buf.Bytes(), Options{})
		got := signatures(d)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("seed %d: decoded\n%s\nwant\n%s", seed, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if d.stats.Gaps != 0 {
			t.Fatalf("seed %d: %d gaps", seed, d.stats.Gaps)
		}
	}
}

// conversation writes a connection whose each direction is given as a list
// of TCP segments.
func conversation(t *testing.T, steps func(c *tracetest.Conn)) []byte {
	t.Helper()
	var buf bytes.Buffer
	p := tracetest.NewPcap(&buf)
	steps(p.Connect(testClient, testServer))
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	return buf.Bytes()
}

func rev2Frames(crc bool) (req, rep []byte) {
	f := mpa.FlagEnhanced
	if crc {
		f |= mpa.FlagCRC
	}
	pd := wire.PrivateData{SendSize: 1024, ReceiveSize: 1024}.Append(nil)
	req = tracetest.FrameBytes(mpa.Frame{Kind: mpa.Request, Flags: f, Rev: 2, IRDORD: mpa.IRDORD{IRD: 4, ORD: 4}, PrivateData: pd})
	rep = tracetest.FrameBytes(mpa.Frame{Kind: mpa.Reply, Flags: f, Rev: 2, IRDORD: mpa.IRDORD{IRD: 4, ORD: 4}, PrivateData: pd})
	return req, rep
}

var nullCall = tracetest.NullCall

func kinds(d *decoded) string {
	var ks []string
	for _, e := range d.events {
		k := e.Kind.String()
		if e.Err != nil {
			k += "!"
		}
		ks = append(ks, k)
	}
	return strings.Join(ks, " ")
}

// TestGapResync: the capture misses a whole FPDU, then half of one;
// decoding resumes at the next captured segment each time.
func TestGapResync(t *testing.T) {
	req, rep := rev2Frames(true)
	var lostLen int
	capture := conversation(t, func(c *tracetest.Conn) {
		c.Send(0, req)
		c.Send(1, rep)
		c.Send(0, nullCall(true, 1, 1))
		lost := nullCall(true, 2, 2)
		lostLen = len(lost)
		c.Skip(0, lostLen)
		c.Send(0, nullCall(true, 3, 3))
		c.Ack(1) // the server acknowledges everything: the hole is for good
		split := nullCall(true, 4, 4)
		c.Send(0, split[:10])
		c.Skip(0, len(split)-10)
		c.Send(0, nullCall(true, 5, 5))
		c.Ack(1)
	})
	d := decodeBytes(t, capture, Options{})
	if got, want := kinds(d), "mpa-frame mpa-frame fpdu gap fpdu gap! fpdu"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	var xids []uint32
	for _, e := range d.events {
		if e.RPCRDMA != nil {
			xids = append(xids, e.RPCRDMA.XID)
		}
	}
	if fmt.Sprint(xids) != "[1 3 5]" {
		t.Errorf("xids %v", xids)
	}
	if g := d.events[3]; g.Len != uint64(lostLen) || g.Err != nil {
		t.Errorf("first gap: %s", d.text[3])
	}
	if g := d.events[5]; !strings.Contains(g.Err.Error(), "cuts an FPDU: its first 10 bytes") {
		t.Errorf("second gap: %s", d.text[5])
	}
	if d.stats.Gaps != 2 {
		t.Errorf("stats %+v", d.stats)
	}
}

// TestMarkers: both sides ask for markers (RFC 5044 section 7.1), with
// CRC; FPDUs long enough to hold markers decode, markers removed.
func TestMarkers(t *testing.T) {
	req := tracetest.FrameBytes(mpa.Frame{Kind: mpa.Request, Flags: mpa.FlagMarker | mpa.FlagCRC, Rev: 1})
	rep := tracetest.FrameBytes(mpa.Frame{Kind: mpa.Reply, Flags: mpa.FlagMarker, Rev: 1})
	var m [2]mpa.Markers
	payload := bytes.Repeat([]byte("markers!"), 150) // 1200 bytes: two or three markers each
	capture := conversation(t, func(c *tracetest.Conn) {
		c.Send(0, req)
		c.Send(1, rep)
		for msn := uint32(1); msn <= 3; msn++ {
			for dir := range 2 {
				seg := ddp.Segment{Header: ddp.Untagged(ddp.OpSend, true, 0, msn, 0), Payload: payload}
				b := m[dir].AppendFPDU(nil, true, seg.Append(nil))
				c.Send(dir, b[:len(b)/2]) // markers and FPDUs cut across segments
				c.Send(dir, b[len(b)/2:])
			}
		}
	})
	d := decodeBytes(t, capture, Options{})
	fpdus := 0
	for i, e := range d.events {
		if e.Err != nil {
			t.Errorf("%s", d.text[i])
		}
		if e.Kind != KindFPDU {
			continue
		}
		fpdus++
		if e.FPDU.Markers < 2 || !e.FPDU.CRCOK || !bytes.Equal(e.DDP.Payload, payload) {
			t.Errorf("%s", d.text[i])
		}
		checkJSON(t, "marker FPDU", d.json[i], map[string]any{"mpa.markers": e.FPDU.Markers, "mpa.crc_ok": true})
	}
	if fpdus != 6 {
		t.Errorf("%d FPDUs\n%s", fpdus, strings.Join(d.text, "\n"))
	}
}

// TestMarkersGap: a stream with markers cannot be resynchronised after a
// gap; the direction stops with one error.
func TestMarkersGap(t *testing.T) {
	req := tracetest.FrameBytes(mpa.Frame{Kind: mpa.Request, Rev: 1})
	rep := tracetest.FrameBytes(mpa.Frame{Kind: mpa.Reply, Flags: mpa.FlagMarker, Rev: 1})
	var m mpa.Markers
	capture := conversation(t, func(c *tracetest.Conn) {
		c.Send(0, req)
		c.Send(1, rep)
		for msn := uint32(1); msn <= 3; msn++ {
			seg := ddp.Segment{Header: ddp.Untagged(ddp.OpSend, true, 0, msn, 0), Payload: make([]byte, 100)}
			b := m.AppendFPDU(nil, false, seg.Append(nil))
			if msn == 2 {
				c.Skip(0, len(b))
				continue
			}
			c.Send(0, b)
		}
		c.Ack(1)
	})
	d := decodeBytes(t, capture, Options{})
	if got, want := kinds(d), "mpa-frame mpa-frame fpdu gap!"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
}

// TestBadCRC: a corrupted FPDU is shown with its CRC verdict and decoding
// goes on.
func TestBadCRC(t *testing.T) {
	req, rep := rev2Frames(true)
	capture := conversation(t, func(c *tracetest.Conn) {
		c.Send(0, req)
		c.Send(1, rep)
		bad := nullCall(true, 1, 1)
		bad[30] ^= 0xff
		c.Send(0, bad)
		c.Send(0, nullCall(true, 2, 2))
	})
	d := decodeBytes(t, capture, Options{})
	if got, want := kinds(d), "mpa-frame mpa-frame fpdu! fpdu"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	if !strings.Contains(d.text[2], "BAD-CRC") || !strings.Contains(d.text[2], "CRC mismatch") {
		t.Errorf("%s", d.text[2])
	}
	checkJSON(t, "bad CRC", d.json[2], map[string]any{"mpa.crc_ok": false})
	checkJSON(t, "good CRC", d.json[3], map[string]any{"mpa.crc_ok": true, "rpcrdma.xid": 2})
}

// TestReject: a rejecting Reply ends the connection; bytes after it are an
// error.
func TestReject(t *testing.T) {
	capture := conversation(t, func(c *tracetest.Conn) {
		c.Send(0, tracetest.FrameBytes(mpa.Frame{Kind: mpa.Request, Rev: 1, PrivateData: []byte("active")}))
		c.Send(1, tracetest.FrameBytes(mpa.Frame{Kind: mpa.Reply, Flags: mpa.FlagReject, Rev: 1, PrivateData: []byte("passive")}))
		c.Send(0, nullCall(false, 1, 1))
	})
	d := decodeBytes(t, capture, Options{})
	if got, want := kinds(d), "mpa-frame mpa-frame error!"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	checkJSON(t, "reject", d.json[1], map[string]any{"mpa.reject_flag": true, "mpa.private_data": "70617373697665"})
	if !strings.Contains(d.text[2], "after the MPA Reply rejected") {
		t.Errorf("%s", d.text[2])
	}
}

// TestPeerToPeerRTR: RFC 6581 peer-to-peer mode; the initiator's first
// FPDU is a zero-length RDMA Write RTR, which is shown as such and not
// taken for a message.
func TestPeerToPeerRTR(t *testing.T) {
	w := mpa.IRDORD{PeerToPeer: true, RTR: mpa.RTRWrite | mpa.RTRRead, IRD: 1, ORD: 1}
	capture := conversation(t, func(c *tracetest.Conn) {
		c.Send(0, tracetest.FrameBytes(mpa.Frame{Kind: mpa.Request, Flags: mpa.FlagEnhanced, Rev: 2, IRDORD: w}))
		c.Send(1, tracetest.FrameBytes(mpa.Frame{Kind: mpa.Reply, Flags: mpa.FlagEnhanced, Rev: 2, IRDORD: w}))
		c.Send(0, mpa.AppendFPDU(nil, false, mpa.AppendRTR(nil, mpa.RTRWrite)))
		c.Send(0, nullCall(false, 7, 1))
	})
	d := decodeBytes(t, capture, Options{})
	if got, want := kinds(d), "mpa-frame mpa-frame fpdu fpdu"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	checkJSON(t, "request", d.json[0], map[string]any{"mpa.p2p": true, "mpa.rtr": "Write|Read"})
	checkJSON(t, "rtr", d.json[2], map[string]any{"rdmap.rtr": "Write", "rdmap.opcode": "RDMA Write", "rpcrdma": absent})
	checkJSON(t, "call", d.json[3], map[string]any{"rdmap.rtr": absent, "rpcrdma.xid": 7})
	if !strings.Contains(d.text[2], "rtr=Write") {
		t.Errorf("%s", d.text[2])
	}
}

// TestForcedPort: a capture that starts after the handshake decodes only
// on a forced port, with CRC as --crc says.
func TestForcedPort(t *testing.T) {
	var buf bytes.Buffer
	p := tracetest.NewPcap(&buf)
	c := p.Accept(testClient, testServer)
	c.Send(0, nullCall(true, 1, 1))
	c.Send(1, nullCall(true, 2, 1))
	capture := buf.Bytes()

	d := decodeBytes(t, capture, Options{})
	if len(d.events) != 0 || d.stats.Streams != 1 || d.stats.IWARP != 0 {
		t.Errorf("not forced: %+v\n%s", d.stats, strings.Join(d.text, "\n"))
	}
	d = decodeBytes(t, capture, Options{Ports: []uint16{7000}, CRC: true})
	if got, want := kinds(d), "fpdu fpdu"; got != want || d.stats.IWARP != 1 {
		t.Fatalf("forced: events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	checkJSON(t, "forced", d.json[0], map[string]any{"mpa.crc_ok": true, "rpcrdma.xid": 1, "dir": "i>r"})
	checkJSON(t, "forced", d.json[1], map[string]any{"mpa.crc_ok": true, "rpcrdma.xid": 2, "dir": "r>i"})
	d = decodeBytes(t, capture, Options{Ports: []uint16{7000}})
	checkJSON(t, "forced without --crc", d.json[0], map[string]any{"mpa.crc_ok": absent, "rpcrdma.xid": 1})
}

// TestMissingReply: the Reply is not in the capture; the initiator's FPDUs
// are decoded at the end with the Request's CRC flag, and the assumption
// is reported.
func TestMissingReply(t *testing.T) {
	req, _ := rev2Frames(true)
	var buf bytes.Buffer
	p := tracetest.NewPcap(&buf)
	c := p.Connect(testClient, testServer)
	c.Send(0, req)
	c.Send(0, nullCall(true, 1, 1))
	d := decodeBytes(t, buf.Bytes(), Options{})
	if got, want := kinds(d), "mpa-frame error! fpdu"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	if !strings.Contains(d.text[1], "the capture ends before both MPA frames") {
		t.Errorf("%s", d.text[1])
	}
	checkJSON(t, "fpdu", d.json[2], map[string]any{"mpa.crc_ok": true, "rpcrdma.xid": 1})
}

// TestIncomplete: the capture ends inside a multi-segment Send and inside
// an FPDU.
func TestIncomplete(t *testing.T) {
	req, rep := rev2Frames(false)
	capture := conversation(t, func(c *tracetest.Conn) {
		c.Send(0, req)
		c.Send(1, rep)
		segs := tracetest.SendSegments(ddp.OpSend, 1, make([]byte, 100), 40)
		c.Send(0, tracetest.FPDUs(false, segs[:2]))
		c.Send(1, nullCall(false, 1, 1)[:20])
	})
	d := decodeBytes(t, capture, Options{})
	if got, want := kinds(d), "mpa-frame mpa-frame fpdu fpdu incomplete! incomplete!"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	if !strings.Contains(d.text[4], "2 segments (80 bytes) without its last") || !strings.Contains(d.text[5], "ends inside an FPDU") {
		t.Errorf("%s\n%s", d.text[4], d.text[5])
	}
}

// TestNotIWARP: a connection that does not start with an MPA key is left
// alone, and a reused 4-tuple is a new stream.
func TestNotIWARP(t *testing.T) {
	var buf bytes.Buffer
	p := tracetest.NewPcap(&buf)
	c := p.Connect(testClient, testServer)
	c.Send(0, []byte("GET / HTTP/1.1\r\n\r\n"))
	c.Send(1, []byte("HTTP/1.1 200 OK\r\n\r\n"))
	req, rep := rev2Frames(false)
	c = p.Connect(testClient, testServer) // the same 4-tuple again
	c.Send(0, req)
	c.Send(1, rep)
	d := decodeBytes(t, buf.Bytes(), Options{})
	if got, want := kinds(d), "mpa-frame mpa-frame"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	if d.stats.Streams != 2 || d.stats.IWARP != 1 || d.events[0].Stream != 1 {
		t.Errorf("stats %+v, stream %d", d.stats, d.events[0].Stream)
	}
}

// TestMalformedMPAFrame: a Request with an impossible revision stops that
// side with an error naming the field.
func TestMalformedMPAFrame(t *testing.T) {
	bad := tracetest.FrameBytes(mpa.Frame{Kind: mpa.Request, Rev: 1})
	bad[17] = 9
	capture := conversation(t, func(c *tracetest.Conn) {
		c.Send(0, bad)
		c.Send(0, nullCall(false, 1, 1))
	})
	d := decodeBytes(t, capture, Options{})
	if got, want := kinds(d), "error!"; got != want {
		t.Fatalf("events %s, want %s\n%s", got, want, strings.Join(d.text, "\n"))
	}
	if !strings.Contains(d.text[0], "MPA Request at stream offset 0") || !strings.Contains(d.text[0], "Rev") {
		t.Errorf("%s", d.text[0])
	}
}
