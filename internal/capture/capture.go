// Package capture records live loopback traffic for tests and reads it back
// through tshark, the independent decoder of the shared notes
// (docs/tshark.md).
//
// Start runs dumpcap (the capture engine tshark itself uses) on lo with a
// filter for one TCP port; Stop ends it and returns the capture file;
// Fields and Shownames run tshark on that file with Options: those the
// notes require (two passes, both iWARP heuristics on and tried first, the
// RDMAP Send reassembly of 4.0.17 off) and two that live captures of our
// programs need (see Options).
//
// Both ends are barriers, not guesses. dumpcap says "Capturing on" before
// the capture runs (with a 512 MiB buffer, about two seconds before: a
// connection opened at once is missed, and a capture that misses the MPA
// exchange decodes nothing), and the file lags the wire (packets are read
// from the kernel ring in blocks and written in batches). Start and Stop
// therefore send UDP datagrams carrying a random token to a port the
// filter also matches, and wait until the token is in the file: every TCP
// packet sent after Start returns and before Stop is called is in the
// capture, unless the kernel dropped it (see Dropped). The probes are UDP,
// which the iWARP decoders ignore; they do not shift TCP stream numbers.
//
// Everything skips the test, with the reason, when tshark or dumpcap is
// missing, in -short mode, or when the capture cannot start (no privilege
// to capture on lo).
package capture

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// bufferMiB is dumpcap's kernel buffer (-B). Bulk RDMA on loopback
	// moves hundreds of MB/s in 64 KiB packets; the 2 MiB default drops
	// thousands of them. A whole bench run (about 300 MB) fits in 512 MiB
	// even when dumpcap gets no CPU for a while; the ring is allocated
	// only while a capture runs.
	bufferMiB = 512
	// startTimeout bounds how long Start waits for the capture to run.
	startTimeout = 20 * time.Second
	// stopTimeout bounds each step of Stop.
	stopTimeout = 20 * time.Second
	// runTimeout bounds one tshark run on a capture file.
	runTimeout = 5 * time.Minute
)

// Options are the tshark options docs/tshark.md explains for reading a
// capture of RPC-over-RDMA over iWARP: -n, -2 (two passes: reply links and
// chunk rebuilding), both heuristics enabled and tried before port-based
// dissectors, and the 4.0.17 RDMAP Send reassembly off.
//
// Live captures need two more:
//
//   - rpc.dissect_unknown_programs: RPC under RPC-over-RDMA is found by a
//     heuristic, which by default drops calls of programs tshark does not
//     know, such as the test and bench programs (0x2000xxxx), and so
//     cannot match their replies either.
//   - tcp.reassemble_out_of_order: a capture on lo of bulk RDMA holds
//     segments out of order (the capture tap sees them in another order
//     than TCP sent them). Without it tshark loses the MPA framing at the
//     first one and decodes garbage ("Terminate", bogus ULPDU lengths) for
//     the rest of the direction. With it, FPDUs held back are decoded in
//     the frame that fills the hole.
var Options = []string{"-n", "-2",
	"--enable-heuristic", "iwarp_mpa_tcp", "--enable-heuristic", "rpcrdma_iwarp",
	"-o", "tcp.try_heuristic_first:TRUE",
	"-o", "iwarp_ddp_rdmap.reassemble_iwarp_rdma_send:FALSE",
	"-o", "rpc.dissect_unknown_programs:TRUE",
	"-o", "tcp.reassemble_out_of_order:TRUE",
}

// A Capture is a running dumpcap on lo.
type Capture struct {
	t       testing.TB
	path    string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	stderr  *lockedBuffer
	probe   *net.UDPConn // receives the probes, so none is refused
	send    *net.UDPConn
	off     int64 // how far the file was searched for a token
	stopped bool
	dropped int
}

// Start begins capturing TCP port port on lo into a file in t.TempDir and
// returns once the capture is running. It skips t when tshark or dumpcap is
// missing, in -short mode, or when the capture cannot start. The capture is
// stopped at cleanup if Stop was not called.
func Start(t testing.TB, port int) *Capture {
	t.Helper()
	if testing.Short() {
		t.Skip("live capture skipped in -short mode")
	}
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed (Debian: apt-get install tshark); skipping the live-capture oracle")
	}
	dumpcap, err := exec.LookPath("dumpcap")
	if err != nil {
		t.Skip("dumpcap (part of tshark) is not in PATH; skipping the live-capture oracle")
	}
	if port <= 0 || port > 65535 {
		t.Fatalf("capture: bad port %d", port)
	}
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skipf("capture: no loopback UDP socket for the probes: %v", err)
	}
	send, err := net.DialUDP("udp4", nil, probe.LocalAddr().(*net.UDPAddr))
	if err != nil {
		probe.Close()
		t.Skipf("capture: no loopback UDP socket for the probes: %v", err)
	}
	c := &Capture{
		t:      t,
		path:   filepath.Join(t.TempDir(), fmt.Sprintf("port%d.pcapng", port)),
		exited: make(chan struct{}),
		stderr: &lockedBuffer{},
		probe:  probe,
		send:   send,
	}
	filter := fmt.Sprintf("tcp port %d or (udp and dst port %d)", port, probe.LocalAddr().(*net.UDPAddr).Port)
	c.cmd = exec.Command(dumpcap, "-i", "lo", "-B", strconv.Itoa(bufferMiB), "-f", filter, "-w", c.path)
	c.cmd.Stdout = io.Discard
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		probe.Close()
		send.Close()
		t.Skipf("capture: cannot run dumpcap: %v", err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.cleanup)
	if err := c.barrier("start", startTimeout); err != nil {
		c.kill()
		msg, _, _ := strings.Cut(strings.TrimSpace(c.stderr.String()), "\n\n") // dumpcap's advice follows a blank line
		t.Skipf("capture on lo did not start (root or CAP_NET_RAW is needed): %v\ndumpcap: %s", err, msg)
	}
	return c
}

// Path returns the capture file.
func (c *Capture) Path() string { return c.path }

// Stop waits until every packet sent before the call is in the file, stops
// dumpcap and returns the capture file. It fails the test if dumpcap does
// not stop cleanly.
func (c *Capture) Stop() string {
	c.t.Helper()
	if c.stopped {
		return c.path
	}
	if err := c.barrier("stop", stopTimeout); err != nil {
		c.kill()
		c.t.Fatalf("capture: %v\ndumpcap: %s", err, c.stderr.String())
	}
	c.stopped = true
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		c.kill()
		c.t.Fatalf("capture: interrupting dumpcap: %v", err)
	}
	select {
	case <-c.exited:
	case <-time.After(stopTimeout):
		c.kill()
		c.t.Fatalf("capture: dumpcap did not stop within %v\n%s", stopTimeout, c.stderr.String())
	}
	c.closeProbes()
	if c.waitErr != nil {
		c.t.Fatalf("capture: dumpcap: %v\n%s", c.waitErr, c.stderr.String())
	}
	if m := droppedRE.FindStringSubmatch(c.stderr.String()); m != nil {
		c.dropped, _ = strconv.Atoi(m[1])
	}
	return c.path
}

// droppedRE matches dumpcap's closing statistics, e.g. "Packets
// received/dropped on interface 'Loopback: lo': 34/0 (...)".
var droppedRE = regexp.MustCompile(`received/dropped on interface [^\n]*: \d+/(\d+)`)

// Dropped returns how many packets the kernel dropped because dumpcap did
// not keep up, as dumpcap reported when it stopped. A capture with drops
// has holes in its TCP streams.
func (c *Capture) Dropped() int { return c.dropped }

// barrier sends probes carrying a fresh token until the token is in the
// capture file, or until timeout.
func (c *Capture) barrier(what string, timeout time.Duration) error {
	var tok [16]byte
	rand.Read(tok[:])
	token := []byte("rpcrdma-capture-" + what + "-" + hex.EncodeToString(tok[:]))
	deadline := time.Now().Add(timeout)
	var lastSent time.Time
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("dumpcap exited: %v", c.waitErr)
		default:
		}
		if time.Since(lastSent) >= 100*time.Millisecond {
			c.send.Write(token)
			lastSent = time.Now()
		}
		found, err := c.search(token)
		if err != nil {
			return err
		}
		if found {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s probe did not reach %s within %v", what, c.path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// search looks for token in the part of the file not searched yet (with
// an overlap for a token cut by the previous read).
func (c *Capture) search(token []byte) (bool, error) {
	f, err := os.Open(c.path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	start := max(c.off-int64(len(token)), 0)
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return false, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	buf := make([]byte, 0, 2<<20)
	tmp := make([]byte, 1<<20)
	pos := start
	for {
		n, err := r.Read(tmp)
		buf = append(buf, tmp[:n]...)
		pos += int64(n)
		if bytes.Contains(buf, token) {
			c.off = pos
			return true, nil
		}
		if len(buf) > len(token) {
			buf = append(buf[:0], buf[len(buf)-len(token):]...)
		}
		if err == io.EOF {
			c.off = pos
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

func (c *Capture) kill() {
	c.cmd.Process.Kill()
	select {
	case <-c.exited:
	case <-time.After(stopTimeout):
	}
	c.closeProbes()
}

func (c *Capture) closeProbes() {
	c.probe.Close()
	c.send.Close()
}

// cleanup ends a capture the test did not stop.
func (c *Capture) cleanup() {
	select {
	case <-c.exited:
		c.closeProbes()
	default:
		c.kill()
	}
}

// lockedBuffer collects a process's stderr while others read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// tshark starts tshark on path with Options and args, and returns its
// standard output and a function that waits for it to end, failing t if
// it did not succeed.
func tshark(t testing.TB, path string, args ...string) (io.Reader, func()) {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (Debian: apt-get install tshark)")
	}
	cmd := exec.Command(bin, append(append(append([]string{}, Options...), "-r", path), args...)...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("tshark: %v", err)
	}
	timer := time.AfterFunc(runTimeout, func() { cmd.Process.Kill() })
	return out, func() {
		t.Helper()
		io.Copy(io.Discard, out)
		err := cmd.Wait()
		if !timer.Stop() {
			t.Fatalf("tshark on %s did not finish within %v", path, runTimeout)
		}
		if err != nil {
			t.Fatalf("tshark %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, stderr.String())
		}
	}
}

// Fields runs tshark on the capture at path and returns, for every frame,
// the values of fields: each value as tshark prints it, several
// occurrences in one frame joined by commas (-E occurrence=a -E
// aggregator=,). A field the frame lacks is absent from its map.
func Fields(t testing.TB, path string, fields ...string) []map[string]string {
	t.Helper()
	return FieldsFilter(t, path, "", fields...)
}

// FieldsFilter is Fields for the frames that match the display filter
// (all frames if filter is empty).
func FieldsFilter(t testing.TB, path, filter string, fields ...string) []map[string]string {
	t.Helper()
	if len(fields) == 0 {
		t.Fatal("capture.Fields: no fields")
	}
	args := []string{"-T", "fields", "-E", "header=n", "-E", "separator=/t", "-E", "quote=n",
		"-E", "occurrence=a", "-E", "aggregator=,"}
	if filter != "" {
		args = append(args, "-Y", filter)
	}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, wait := tshark(t, path, args...)
	var rows []map[string]string
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != len(fields) {
			t.Errorf("tshark printed %d columns for %d fields: %q", len(cols), len(fields), sc.Text())
			continue
		}
		row := make(map[string]string, len(fields))
		for i, v := range cols {
			if v != "" {
				row[fields[i]] = v
			}
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Errorf("reading tshark's output: %v", err)
	}
	wait()
	return rows
}

// A Showname is one occurrence of a field in tshark's PDML output.
type Showname struct {
	Frame    int
	Show     string // the value, as -T fields prints it
	Showname string // the display text, e.g. "CRC check: 0x81cf973f (Good CRC32)"
}

// Shownames returns every occurrence of field in the capture at path, with
// its display text: the only place tshark 4.0 gives some verdicts, such as
// the MPA CRC check (iwarp_mpa.crc_check).
func Shownames(t testing.TB, path, field string) []Showname {
	t.Helper()
	proto, _, _ := strings.Cut(field, ".")
	out, wait := tshark(t, path, "-T", "pdml", "-Y", field, "-J", "frame "+proto)
	var res []Showname
	frame := 0
	dec := xml.NewDecoder(out)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("tshark's PDML: %v", err)
			break
		}
		el, ok := tok.(xml.StartElement)
		if !ok || el.Name.Local != "field" {
			continue
		}
		attr := func(n string) string {
			for _, a := range el.Attr {
				if a.Name.Local == n {
					return a.Value
				}
			}
			return ""
		}
		switch attr("name") {
		case "frame.number":
			frame, _ = strconv.Atoi(attr("show"))
		case field:
			res = append(res, Showname{Frame: frame, Show: attr("show"), Showname: attr("showname")})
		}
	}
	wait()
	return res
}
