package rpcrdma

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/capture"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// tshark judges a real connection (docs/tshark.md): one
// call per data path over the software iWARP with CRC, captured live on
// lo, must decode in tshark into matched RPC calls and replies of the
// expected procedures, with every chunk rebuilt where the notes say and
// every CRC good.
//
// One tshark 4.0.17 limit shapes the write-chunk check: it rebuilds a
// reply whose data came in a write chunk only when the upper layer's
// dissector says where the data goes, which NFS does and an unknown
// program cannot. So the write chunk is exercised twice: procRead (the
// RDMA Writes and the reduced RDMA_MSG reply are checked, the reply's RPC
// is not dissected by tshark) and an NFSv3 READ-shaped call, whose reply
// tshark rebuilds with the data in place (nfs.data).

// NFSv3 READ (RFC 1813 section 3.3.6), as tshark's NFS dissector knows it.
const (
	tsNFSProg    = 100003
	tsNFSVers    = 3
	tsNFSRead    = 6
	tsNFSReadLen = 10000
)

// tsFields are the tshark fields the test reads.
var tsFields = []string{
	"frame.number", "tcp.stream", "udp.srcport",
	"iwarp_mpa.crc_flag", "iwarp_mpa.ulpdulength",
	"iwarp_rdma.opcode", "iwarp_ddp.stag",
	"rpcordma.xid", "rpcordma.version", "rpcordma.msg_type",
	"rpcordma.reads_count", "rpcordma.writes_count", "rpcordma.reply_count",
	"rpcordma.position", "rpcordma.rdma_handle", "rpcordma.rdma_length",
	"rpc.xid", "rpc.msgtyp", "rpc.program", "rpc.procedure", "rpc.reqframe", "rpc.repframe",
	"nfs.data",
}

// tsFrame is one frame as tshark decoded it: each field's occurrences.
type tsFrame struct {
	n int
	f map[string][]string
}

func (fr tsFrame) all(k string) []string { return fr.f[k] }

func (fr tsFrame) first(k string) string {
	if v := fr.f[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// tsFPDU is one FPDU of a frame: opcode, ULPDU length and, if tagged, STag.
type tsFPDU struct {
	opcode string
	ulpdu  int
	stag   string
}

// fpdus pairs the per-FPDU fields of a frame (iwarp_ddp.stag occurs only
// on tagged FPDUs: RDMA Write and Read Response).
func (fr tsFrame) fpdus() []tsFPDU {
	ops, lens, stags := fr.all("iwarp_rdma.opcode"), fr.all("iwarp_mpa.ulpdulength"), fr.all("iwarp_ddp.stag")
	var res []tsFPDU
	for i, op := range ops {
		f := tsFPDU{opcode: op}
		if i < len(lens) {
			f.ulpdu, _ = strconv.Atoi(lens[i])
		}
		if (op == "0x00" || op == "0x02") && len(stags) > 0 {
			f.stag, stags = stags[0], stags[1:]
		}
		res = append(res, f)
	}
	return res
}

const (
	tsOpWrite        = "0x00"
	tsOpReadRequest  = "0x01"
	tsOpReadResponse = "0x02"
	tsTaggedHdr      = 14 // DDP tagged header with the RDMAP control byte
)

// TestTsharkLive runs one call per data path over a live, captured
// connection and checks what tshark makes of it.
func TestTsharkLive(t *testing.T) {
	ctx := ctxT(t)
	l, err := Listen(ctx, newIWARP(t), "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer()
	srv.Handle(tsNFSProg, tsNFSVers, tsNFSRead, func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		d := c.Decoder()
		d.Opaque(64) // nfs_fh3
		d.Uint32()   // offset3, high word
		d.Uint32()   // offset3, low word
		n := d.Uint32()
		if err := d.Done(); err != nil {
			return rpc.Body{}, err
		}
		var out rpc.Body
		out.XDR = xdr.AppendUint32(out.XDR, 0)   // NFS3_OK
		out.XDR = xdr.AppendBool(out.XDR, false) // post_op_attr
		out.XDR = xdr.AppendUint32(out.XDR, n)   // count
		out.XDR = xdr.AppendBool(out.XDR, true)  // eof
		out.AppendDDPOpaque(pattern(int(n), 7))  // data: DDP-eligible
		return out, nil
	})
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, l, srv) }()
	defer func() {
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, rpc.ErrServerClosed) {
			t.Errorf("Serve returned %v after Shutdown, want rpc.ErrServerClosed", err)
		}
	}()

	c := capture.Start(t, l.Addr().(*net.TCPAddr).Port)

	cp, err := iwarp.New(iwarp.Options{CRC: iwarp.CRCRequire})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(ctx, cp, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := rpc.NewClient(conn)
	call := func(prog, vers, proc uint32, args rpc.Body, bufs [][]byte, maxReply int) (rpc.Reply, error) {
		return cli.Call(ctx, &rpc.Request{Prog: prog, Vers: vers, Proc: proc, Args: args, ResultBufs: bufs, MaxReply: maxReply})
	}

	// inline
	small := pattern(100, 1)
	rep, err := call(testProg, testVers, procSum, ddpArgs(small), nil, 0)
	checkSum(t, rep, err, small)
	// read chunk
	big := pattern(64<<10, 2)
	rep, err = call(testProg, testVers, procSum, ddpArgs(big), nil, 0)
	checkSum(t, rep, err, big)
	// write chunk
	const readLen = 32 << 10
	buf := make([]byte, readLen)
	rep, err = call(testProg, testVers, procRead, u32Args(readLen), [][]byte{buf}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := rpc.NewBodyDecoder(rep.Results); !d.Bool() || d.DDPOpaqueInto(buf) != readLen || !bytes.Equal(buf, pattern(readLen, 3)) {
		t.Fatal("write chunk result wrong")
	}
	// reply chunk
	rep, err = call(testProg, testVers, procBig, u32Args(20000), nil, 20100)
	if err != nil {
		t.Fatal(err)
	}
	if d := rpc.NewBodyDecoder(rep.Results); !bytes.Equal(d.Opaque(1<<20), pattern(20000, 5)) {
		t.Fatal("reply chunk result wrong")
	}
	// long call (and a long reply, in a reply chunk)
	flat := pattern(9000, 9)
	rep, err = call(testProg, testVers, procEchoFlat, rpc.Body{XDR: xdr.AppendOpaque(nil, flat)}, nil, 9100)
	if err != nil {
		t.Fatal(err)
	}
	if d := rpc.NewBodyDecoder(rep.Results); !bytes.Equal(d.Opaque(1<<20), flat) {
		t.Fatal("long call echo wrong")
	}
	// write chunk, NFSv3 READ shape
	var nfsArgs rpc.Body
	nfsArgs.XDR = xdr.AppendOpaque(nil, []byte("go-rpcrdma fh"))
	nfsArgs.XDR = xdr.AppendUint32(nfsArgs.XDR, 0)
	nfsArgs.XDR = xdr.AppendUint32(nfsArgs.XDR, 0)
	nfsArgs.XDR = xdr.AppendUint32(nfsArgs.XDR, tsNFSReadLen)
	nfsBuf := make([]byte, tsNFSReadLen)
	if _, err = call(tsNFSProg, tsNFSVers, tsNFSRead, nfsArgs, [][]byte{nfsBuf}, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(nfsBuf, pattern(tsNFSReadLen, 7)) {
		t.Fatal("NFS READ data not placed")
	}
	cli.Close()
	conn.Close()
	path := c.Stop()
	if d := c.Dropped(); d > 0 {
		t.Skipf("the kernel dropped %d packets (machine too busy); the capture is incomplete", d)
	}

	frames := map[int]tsFrame{}
	var order []int
	for _, row := range capture.Fields(t, path, tsFields...) {
		if row["udp.srcport"] != "" {
			continue // the capture's probes
		}
		fr := tsFrame{f: map[string][]string{}}
		fr.n, _ = strconv.Atoi(row["frame.number"])
		for k, v := range row {
			fr.f[k] = strings.Split(v, ",")
		}
		frames[fr.n] = fr
		order = append(order, fr.n)
	}
	defer func() {
		if t.Failed() {
			for _, n := range order {
				t.Logf("frame %d: %v", n, frames[n].f)
			}
		}
	}()
	checkTsharkLive(t, path, frames, order)
}

// tsCall is an RPC call as tshark decoded it.
type tsCall struct {
	name       string
	prog, proc uint32
	frame      int // where tshark dissected the call
	xid        string
	hdr        int // frame of the call's RPC-over-RDMA header
	reply      int // frame of the reply (rpc.reqframe, "Reply In")
}

func checkTsharkLive(t *testing.T, path string, frames map[int]tsFrame, order []int) {
	want := []tsCall{
		{name: "inline", prog: testProg, proc: procSum},
		{name: "read chunk", prog: testProg, proc: procSum},
		{name: "write chunk", prog: testProg, proc: procRead},
		{name: "reply chunk", prog: testProg, proc: procBig},
		{name: "long call", prog: testProg, proc: procEchoFlat},
		{name: "write chunk (NFS READ)", prog: tsNFSProg, proc: tsNFSRead},
	}

	// One connection; the MPA Request and Reply both ask for CRC.
	var mpa []string
	fpdus := 0
	for _, n := range order {
		fr := frames[n]
		if s := fr.first("tcp.stream"); s != "0" {
			t.Errorf("frame %d: TCP stream %q, want the one connection", n, s)
		}
		mpa = append(mpa, fr.all("iwarp_mpa.crc_flag")...)
		fpdus += len(fr.all("iwarp_mpa.ulpdulength"))
		if v := fr.all("rpcordma.version"); len(v) > 0 && slices.ContainsFunc(v, func(s string) bool { return s != "1" }) {
			t.Errorf("frame %d: RPC-over-RDMA version %q", n, v)
		}
		if len(fr.all("rpcordma.xid")) > 1 || len(slices.Compact(slices.Clone(fr.all("rpc.xid")))) > 1 {
			t.Errorf("frame %d: more than one message; the calls were made one at a time", n)
		}
		// rpcordma.xid equals rpc.xid wherever both are dissected.
		if x := fr.first("rpcordma.xid"); x != "" && fr.first("rpc.xid") != "" && fr.first("rpc.xid") != x {
			t.Errorf("frame %d: rpc.xid %s differs from rpcordma.xid %s", n, fr.first("rpc.xid"), x)
		}
	}
	if !slices.Equal(mpa, []string{"1", "1"}) {
		t.Errorf("MPA frames' CRC flags %q, want Request and Reply with C=1", mpa)
	}

	// Every CRC good.
	crcs := capture.Shownames(t, path, "iwarp_mpa.crc_check")
	if len(crcs) != fpdus || fpdus == 0 {
		t.Errorf("%d CRC verdicts for %d FPDUs", len(crcs), fpdus)
	}
	for _, c := range crcs {
		if !strings.Contains(c.Showname, "(Good CRC32)") {
			t.Errorf("frame %d: %s", c.Frame, c.Showname)
		}
	}

	// No malformed frame, except tshark's false positive on Sends shorter
	// than 16 bytes of payload (notes, quirk 3).
	for _, row := range capture.FieldsFilter(t, path, "_ws.malformed", "frame.number", "iwarp_rdma.opcode", "iwarp_mpa.ulpdulength") {
		ops := strings.Split(row["iwarp_rdma.opcode"], ",")
		lens := strings.Split(row["iwarp_mpa.ulpdulength"], ",")
		short := false
		for i, op := range ops {
			if n, _ := strconv.Atoi(lens[min(i, len(lens)-1)]); (op == "0x03" || op == "0x04") && n < 18+16 {
				short = true
			}
		}
		if !short {
			t.Errorf("frame %s is malformed for tshark: %v", row["frame.number"], row)
		}
	}

	// The calls, in order, each matched to its reply.
	var calls []tsCall
	for _, n := range order {
		fr := frames[n]
		if fr.first("rpc.msgtyp") != "0" {
			continue
		}
		if len(calls) == len(want) {
			t.Errorf("frame %d: unexpected call %v", n, fr.f)
			continue
		}
		c := want[len(calls)]
		c.frame, c.xid = n, fr.first("rpc.xid")
		if got := fr.first("rpc.program"); got != strconv.Itoa(int(c.prog)) {
			t.Errorf("%s: frame %d: program %s, want %d (%#x)", c.name, n, got, c.prog, c.prog)
		}
		if got := fr.first("rpc.procedure"); got != strconv.Itoa(int(c.proc)) {
			t.Errorf("%s: frame %d: procedure %s, want %d", c.name, n, got, c.proc)
		}
		c.reply, _ = strconv.Atoi(fr.first("rpc.reqframe"))
		for _, m := range order {
			if frames[m].first("rpcordma.xid") == c.xid {
				c.hdr = m
				break
			}
		}
		calls = append(calls, c)
	}
	if len(calls) != len(want) {
		t.Fatalf("tshark dissected %d calls, want %d", len(calls), len(want))
	}
	for _, c := range calls {
		checkTsharkCall(t, c, frames, order)
	}
}

// checkTsharkCall checks one call: where its header, its RPC and its
// reply are, and how its chunks moved.
func checkTsharkCall(t *testing.T, c tsCall, frames map[int]tsFrame, order []int) {
	t.Helper()
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s (xid %s, call in frame %d): %s", c.name, c.xid, c.frame, fmt.Sprintf(format, args...))
	}
	hdr, call := frames[c.hdr], frames[c.frame]
	rep, ok := frames[c.reply]
	if c.hdr == 0 || !ok || c.reply <= c.frame {
		errorf("header in frame %d, reply in frame %d: not matched", c.hdr, c.reply)
		return
	}
	// The reply: its RPC-over-RDMA header in the frame tshark links, and
	// its RPC linked back to the call (except where tshark cannot rebuild
	// it: the write chunk of a program it does not know).
	if rep.first("rpcordma.xid") != c.xid {
		errorf("frame %d, the reply tshark links, has rpcordma.xid %q", c.reply, rep.first("rpcordma.xid"))
	}
	if c.name == "write chunk" && rep.first("rpc.xid") == "" {
		t.Logf("%s: tshark 4.0 does not rebuild the reply of an unknown program with write chunks (frame %d)", c.name, c.reply)
	} else if rep.first("rpc.msgtyp") != "1" || rep.first("rpc.xid") != c.xid || rep.first("rpc.repframe") != strconv.Itoa(c.frame) {
		errorf("frame %d: reply RPC msgtyp %q xid %q linked to frame %q", c.reply, rep.first("rpc.msgtyp"), rep.first("rpc.xid"), rep.first("rpc.repframe"))
	}
	// Every RPC-over-RDMA header with this xid: the call's and the reply's.
	var hdrs []int
	for _, n := range order {
		if frames[n].first("rpcordma.xid") == c.xid {
			hdrs = append(hdrs, n)
		}
	}
	if !slices.Equal(hdrs, []int{c.hdr, c.reply}) {
		errorf("RPC-over-RDMA headers with the xid in frames %v, want the call's and the reply's", hdrs)
	}
	lists := func(fr tsFrame) string {
		return fr.first("rpcordma.msg_type") + " " + fr.first("rpcordma.reads_count") + "/" + fr.first("rpcordma.writes_count") + "/" + fr.first("rpcordma.reply_count")
	}
	// tagged sums the payload of tagged FPDUs with opcode op and STag stag
	// in frames from..to.
	tagged := func(op, stag string, from, to int) int {
		sum := 0
		for n := from; n <= to; n++ {
			for _, f := range frames[n].fpdus() {
				if f.opcode == op && f.stag == stag {
					sum += f.ulpdu - tsTaggedHdr
				}
			}
		}
		return sum
	}
	has := func(op string, from, to int) bool {
		for n := from; n <= to; n++ {
			if slices.Contains(frames[n].all("iwarp_rdma.opcode"), op) {
				return true
			}
		}
		return false
	}

	switch c.name {
	case "inline":
		if c.hdr != c.frame || lists(hdr) != "0 0/0/0" || lists(rep) != "0 0/0/0" {
			errorf("want RDMA_MSG without chunks both ways in the call's frame: call %q, reply %q", lists(hdr), lists(rep))
		}
	case "read chunk", "long call":
		// The call is rebuilt where its chunk arrives: in the frame of
		// the last RDMA Read Response, after the Read Request.
		msg, pos := "0", hdr.first("rpcordma.position")
		if c.name == "long call" {
			msg = "1"
			if pos != "0" {
				errorf("long call's read chunk at position %q, want 0", pos)
			}
		} else if pos == "" || pos == "0" {
			errorf("data read chunk at position %q", pos)
		}
		if c.hdr >= c.frame || hdr.first("rpcordma.msg_type") != msg || hdr.first("rpcordma.reads_count") != "1" || hdr.first("rpc.xid") != "" {
			errorf("header in frame %d (%s) with RPC %q, want an earlier type-%s header with one read chunk and no RPC", c.hdr, lists(hdr), hdr.first("rpc.xid"), msg)
		}
		if !slices.Contains(call.all("iwarp_rdma.opcode"), tsOpReadResponse) || call.first("rpcordma.xid") != "" {
			errorf("call dissected in frame %d with opcodes %q, want an RDMA Read Response (0x02) frame", c.frame, call.all("iwarp_rdma.opcode"))
		}
		if !has(tsOpReadRequest, c.hdr+1, c.frame) {
			errorf("no RDMA Read Request between frames %d and %d", c.hdr, c.frame)
		}
		if c.name == "long call" && rep.first("rpcordma.msg_type") != "1" {
			errorf("reply %q, want RDMA_NOMSG (the long reply in a reply chunk)", lists(rep))
		}
	case "write chunk", "write chunk (NFS READ)":
		// RDMA Writes to the chunk's handle, then the reduced RDMA_MSG
		// reply returning the chunk with the length written.
		size := readLenFor(c)
		handle := hdr.first("rpcordma.rdma_handle")
		if c.hdr != c.frame || lists(hdr) != "0 0/1/0" || lists(rep) != "0 0/1/0" {
			errorf("call %q, reply %q: want RDMA_MSG with one write chunk both ways", lists(hdr), lists(rep))
		}
		if rep.first("rpcordma.rdma_handle") != handle || rep.first("rpcordma.rdma_length") != strconv.Itoa(size) {
			errorf("reply returns the chunk %s length %s, want %s length %d", rep.first("rpcordma.rdma_handle"), rep.first("rpcordma.rdma_length"), handle, size)
		}
		if got := tagged(tsOpWrite, handle, c.frame+1, c.reply); got != size {
			errorf("RDMA Writes to %s before the reply carry %d bytes, want %d", handle, got, size)
		}
		if c.name == "write chunk (NFS READ)" {
			if got := rep.first("nfs.data"); got != hex.EncodeToString(pattern(tsNFSReadLen, 7)) {
				errorf("tshark's rebuilt READ reply carries %d bytes of data, not the pattern", len(got)/2)
			}
		}
	case "reply chunk":
		handle := hdr.first("rpcordma.rdma_handle")
		if c.hdr != c.frame || lists(hdr) != "0 0/0/1" || lists(rep) != "1 0/0/1" {
			errorf("call %q, reply %q: want an RDMA_MSG call offering a reply chunk and an RDMA_NOMSG reply", lists(hdr), lists(rep))
		}
		n, _ := strconv.Atoi(rep.first("rpcordma.rdma_length"))
		if rep.first("rpcordma.rdma_handle") != handle || n == 0 {
			errorf("reply returns chunk %s length %d, want %s", rep.first("rpcordma.rdma_handle"), n, handle)
		}
		if got := tagged(tsOpWrite, handle, c.frame+1, c.reply); got != n {
			errorf("RDMA Writes to %s carry %d bytes, the reply chunk says %d", handle, got, n)
		}
	}
}

func readLenFor(c tsCall) int {
	if c.prog == tsNFSProg {
		return tsNFSReadLen
	}
	return 32 << 10
}
