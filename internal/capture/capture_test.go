package capture

import (
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCapture captures one TCP connection that moves 4 MiB, sent as fast
// as loopback takes it right up to Stop, and checks that every byte and
// the handshake are in the file, and that tshark reads it through Fields
// and Shownames.
func TestCapture(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c := Start(t, port)

	received := make(chan int64, 1)
	go func() {
		s, err := l.Accept()
		if err != nil {
			received <- -1
			return
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(20 * time.Second))
		n, _ := io.Copy(io.Discard, s)
		received <- n
	}()
	conn, err := net.DialTimeout("tcp4", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	const total = 4 << 20
	chunk := make([]byte, 256<<10)
	for sent := 0; sent < total; sent += len(chunk) {
		if _, err := conn.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	if n := <-received; n != total {
		t.Fatalf("server received %d bytes, want %d", n, total)
	}
	path := c.Stop()
	if c.Stop() != path {
		t.Error("a second Stop returned another path")
	}
	if d := c.Dropped(); d > 0 {
		t.Skipf("the kernel dropped %d packets (machine too busy); the capture is incomplete", d)
	}

	rows := Fields(t, path, "frame.number", "tcp.stream", "tcp.dstport", "tcp.seq", "tcp.len", "tcp.flags.syn", "tcp.flags.fin", "udp.dstport")
	var syns, fins, probes int
	var data [][2]int // [seq, seq+len) of each segment to the server
	for i, r := range rows {
		if r["frame.number"] != strconv.Itoa(i+1) {
			t.Fatalf("row %d is frame %q", i, r["frame.number"])
		}
		if r["udp.dstport"] != "" {
			probes++
			continue
		}
		if r["tcp.stream"] != "0" {
			t.Errorf("frame %d: TCP stream %q, want only stream 0", i+1, r["tcp.stream"])
		}
		if r["tcp.flags.syn"] == "1" {
			syns++
		}
		if r["tcp.flags.fin"] == "1" {
			fins++
		}
		if r["tcp.dstport"] == strconv.Itoa(port) {
			seq, _ := strconv.Atoi(r["tcp.seq"])
			if n, _ := strconv.Atoi(r["tcp.len"]); n > 0 {
				data = append(data, [2]int{seq, seq + n})
			}
		}
	}
	// The stream's bytes are the union of the segments' ranges: on a
	// loaded machine TCP resends even on loopback, and tshark does not
	// mark every resent segment as a retransmission.
	slices.SortFunc(data, func(a, b [2]int) int { return a[0] - b[0] })
	bytes, end := 0, 0
	for _, d := range data {
		if d[1] > end {
			bytes += d[1] - max(d[0], end)
			end = d[1]
		}
	}
	if bytes != total || syns != 2 || fins < 1 || probes < 2 {
		t.Errorf("captured %d payload bytes to the server (want %d), %d SYNs (want 2), %d FINs, %d probes (want 2 or more)", bytes, total, syns, fins, probes)
	}

	sn := Shownames(t, path, "tcp.flags.syn")
	if len(sn) == 0 {
		t.Fatal("no tcp.flags.syn shownames")
	}
	for _, s := range sn {
		if s.Frame < 1 || !strings.Contains(s.Showname, "Syn:") {
			t.Errorf("showname %+v", s)
		}
	}
	if got := FieldsFilter(t, path, "tcp.flags.syn == 1 && tcp.flags.ack == 0", "frame.number"); len(got) != 1 {
		t.Errorf("filter matched %d frames, want the one SYN", len(got))
	}
}
