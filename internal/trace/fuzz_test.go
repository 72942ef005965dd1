package trace

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/trace/tracetest"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

// checkEvent checks what every event must satisfy, whatever the input:
// printable, encodable as JSON, inside its stream.
func checkEvent(t *testing.T, e *Event, streamLen [2]uint64) {
	if e.Kind < KindMPAFrame || e.Kind > KindIncomplete || e.Dir > FromResponder {
		t.Fatalf("event kind %v dir %v", e.Kind, e.Dir)
	}
	_ = e.String()
	b, err := json.Marshal(e) // checks that MarshalJSON's output is valid JSON
	if err != nil {
		t.Fatalf("JSON: %v\n%s", err, b)
	}
	if e.Kind != KindGap && e.Offset+e.Len > streamLen[e.Dir] {
		t.Fatalf("%s: ends at %d, past the stream's %d bytes", e, e.Offset+e.Len, streamLen[e.Dir])
	}
}

// The fuzz targets take two large inputs; run them with a bounded
// minimization, or the first interesting input takes the whole budget:
//
//	go test -run XXX -fuzz FuzzTraceStream -fuzztime 10s -fuzzminimizetime 200x ./internal/trace/

// FuzzTraceStream feeds the two directions of one connection to the iWARP
// decoder in chunks of a size the fuzzer picks, turning some chunks into
// gaps: nothing may panic, and every event must be well formed.
func FuzzTraceStream(f *testing.F) {
	demo, _ := writeDemo(f)
	f.Add(demo.Stream0[0], demo.Stream0[1], uint8(40), uint8(0), false, false)
	f.Add(demo.Stream0[0], demo.Stream0[1], uint8(7), uint8(5), false, false)
	f.Add(demo.Stream0[0][32:], demo.Stream0[1][32:], uint8(200), uint8(0), true, true)
	req := tracetest.FrameBytes(mpa.Frame{Kind: mpa.Request, Flags: mpa.FlagMarker | mpa.FlagCRC, Rev: 1})
	rep := tracetest.FrameBytes(mpa.Frame{Kind: mpa.Reply, Flags: mpa.FlagMarker, Rev: 1})
	var m [2]mpa.Markers
	seg := ddp.Segment{Header: ddp.Untagged(ddp.OpSend, true, 0, 1, 0), Payload: make([]byte, 700)}
	f.Add(append(req, m[0].AppendFPDU(nil, true, seg.Append(nil))...), append(rep, m[1].AppendFPDU(nil, true, seg.Append(nil))...), uint8(100), uint8(0), false, false)
	f.Add([]byte(mpa.RequestKey+"\x00\x01\x00\x00"), []byte(mpa.ReplyKey+"\x20\x01\x00\x00junk"), uint8(3), uint8(0), false, false)

	f.Fuzz(func(t *testing.T, a, b []byte, chunk, gapEvery uint8, forced, crc bool) {
		streams := [2][]byte{a, b}
		streamLen := [2]uint64{uint64(len(a)), uint64(len(b))}
		d := NewDecoder(Options{CRC: crc}, func(e *Event) { checkEvent(t, e, streamLen) })
		c := newConn(d, 0, testClient, testServer, forced)
		d.order = append(d.order, c)
		size := int(chunk)%97 + 1
		var off [2]int
		frame, n := 0, 0
		for off[0] < len(a) || off[1] < len(b) {
			for dir := range 2 {
				if off[dir] >= len(streams[dir]) {
					continue
				}
				end := min(off[dir]+size, len(streams[dir]))
				frame++
				n++
				if gapEvery != 0 && n%int(gapEvery) == 0 {
					c.side[dir].gap(uint64(off[dir]), uint64(end-off[dir]), frame, time.Time{})
				} else {
					c.side[dir].data(uint64(off[dir]), streams[dir][off[dir]:end], frame, time.Time{})
				}
				off[dir] = end
			}
		}
		d.Close()
	})
}

// FuzzCapture decodes arbitrary capture files: the reader, the link, IP
// and TCP parsers and the reassembler must never panic.
func FuzzCapture(f *testing.F) {
	_, capture := writeDemo(f)
	f.Add(capture)
	pkts, err := readAll(f, capture)
	if err == nil {
		f.Add(toPcapng(f, pkts))
	}
	var buf bytes.Buffer
	p := tracetest.NewPcap(&buf)
	c := p.Connect(testClient, testServer)
	c.Send(0, []byte(mpa.RequestKey+"\x40\x01\x00\x00"))
	c.Skip(1, 20)
	c.SendAt(0, 10, []byte("overlapping"))
	c.Send(1, []byte("after a gap"))
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, capture []byte) {
		r, err := NewReader(bytes.NewReader(capture))
		if err != nil {
			return
		}
		Decode(r, Options{Ports: []uint16{testServer.Port()}}, func(e *Event) {
			_ = e.String()
			if _, err := json.Marshal(e); err != nil {
				t.Fatal(err)
			}
		})
	})
}
