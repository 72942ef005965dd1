package nfs

import (
	"bytes"
	"context"
	"encoding/hex"
	"hash/crc32"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/capture"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// TestTsharkNFS runs NFSv3 calls over the software iWARP on loopback,
// captures them live, and checks that tshark, an independent decoder,
// reads them as NFS (docs/tshark.md): each call matched to its reply with
// the right procedure, the file handles it carries, WRITE data rebuilt
// from the call's read chunk, READ data from the reply's write chunk
// (RFC 8267 Section 4), and READDIRPLUS's results from the reply chunk.
// It skips without tshark and dumpcap or the privilege to capture on lo.
func TestTsharkNFS(t *testing.T) {
	e := newEnv(t, "iwarp")
	_, port, err := net.SplitHostPort(e.rdmaAddr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	cp := capture.Start(t, p)
	c := e.mount(t, "/export")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := c.Null(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Getattr(ctx, c.Root()); err != nil {
		t.Fatal(err)
	}
	fh, err := c.Create(ctx, c.Root(), "data", nfs3.Unchecked, nfs3.SetAttr{})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 20000) // well over the DDP threshold: read and write chunks
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	if _, _, _, err := c.Write(ctx, fh, data, 0, nfs3.FileSync); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(data))
	if n, _, err := c.Read(ctx, fh, buf, 0); err != nil || n != len(data) || !bytes.Equal(buf, data) {
		t.Fatalf("READ: %d bytes, %v", n, err)
	}
	for i := range 3 {
		if _, err := c.Mkdir(ctx, c.Root(), "dir"+strconv.Itoa(i), nfs3.SetAttr{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ReadDirPlus(ctx, c.Root()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	path := cp.Stop()
	if d := cp.Dropped(); d > 0 {
		t.Skipf("the kernel dropped %d packets (machine too busy); the capture is incomplete", d)
	}

	type frame map[string][]string
	var frames []frame
	for _, row := range capture.Fields(t, path, "frame.number", "udp.srcport",
		"rpcordma.xid", "rpcordma.reads_count", "rpcordma.writes_count", "rpcordma.reply_count",
		"rpc.xid", "rpc.msgtyp", "rpc.program", "rpc.version", "nfs.procedure_v3",
		"nfs.fh.length", "nfs.fh.hash", "nfs.data", "nfs.name", "nfs.readdirplus.entry.name", "nfs.status") {
		if row["udp.srcport"] != "" {
			continue // the capture's probes
		}
		f := frame{}
		for k, v := range row {
			f[k] = strings.Split(v, ",")
		}
		frames = append(frames, f)
	}
	first := func(f frame, k string) string {
		if v := f[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	defer func() {
		if t.Failed() {
			for _, f := range frames {
				if d := f["nfs.data"]; len(d) > 0 {
					f["nfs.data"] = []string{strconv.Itoa(len(d[0])/2) + " bytes"}
				}
				t.Logf("%v", f)
			}
		}
	}()

	// What tshark made of each NFS call, by xid.
	type call struct {
		proc        string
		call, reply frame
		chunks      string // reads/writes/reply of the call's RPC-over-RDMA header
	}
	calls := map[string]*call{}
	byProc := map[string]*call{}
	for _, f := range frames {
		if first(f, "rpc.program") == "100003" && first(f, "rpc.msgtyp") == "0" {
			cl := &call{proc: first(f, "nfs.procedure_v3"), call: f}
			calls[first(f, "rpc.xid")] = cl
			if byProc[cl.proc] == nil {
				byProc[cl.proc] = cl
			}
		}
	}
	for _, f := range frames {
		x := first(f, "rpcordma.xid")
		if cl := calls[x]; cl != nil && cl.chunks == "" {
			cl.chunks = first(f, "rpcordma.reads_count") + "/" + first(f, "rpcordma.writes_count") + "/" + first(f, "rpcordma.reply_count")
		}
		if cl := calls[first(f, "rpc.xid")]; cl != nil && first(f, "rpc.msgtyp") == "1" {
			cl.reply = f
		}
	}
	hash := func(h nfs3.FileHandle) string { return "0x" + strconv.FormatUint(uint64(crc32.ChecksumIEEE(h)), 16) }
	hasHash := func(f frame, h nfs3.FileHandle) bool {
		want := hash(h)
		return slices.ContainsFunc(f["nfs.fh.hash"], func(s string) bool {
			return strings.EqualFold(strings.TrimLeft(s[2:], "0"), strings.TrimLeft(want[2:], "0"))
		})
	}
	for _, want := range []struct {
		name, proc, chunks string
		fh                 nfs3.FileHandle
	}{
		{"NULL", "0", "0/0/0", nil},
		{"GETATTR", "1", "0/0/0", c.Root()},
		{"WRITE", "7", "1/0/0", fh},
		{"READ", "6", "0/1/0", fh},
		{"READDIRPLUS", "17", "0/0/1", c.Root()},
	} {
		cl := byProc[want.proc]
		if cl == nil {
			t.Errorf("%s: no call of NFSv3 procedure %s decoded", want.name, want.proc)
			continue
		}
		if cl.reply == nil {
			t.Errorf("%s: tshark matched no reply to the call", want.name)
			continue
		}
		if cl.chunks != want.chunks {
			t.Errorf("%s: call's read/write/reply chunks %q, want %q", want.name, cl.chunks, want.chunks)
		}
		if want.fh != nil && !hasHash(cl.call, want.fh) {
			t.Errorf("%s: call carries file handles %v, want hash %s", want.name, cl.call["nfs.fh.hash"], hash(want.fh))
		}
		if st := first(cl.reply, "nfs.status"); want.proc != "0" && st != "0" {
			t.Errorf("%s: reply status %q, want NFS3_OK", want.name, st)
		}
	}
	hexData := hex.EncodeToString(data)
	if cl := byProc["7"]; cl != nil && first(cl.call, "nfs.data") != hexData {
		t.Errorf("WRITE: tshark's nfs.data in the call is not the data sent in the read chunk (%d hex digits)", len(first(cl.call, "nfs.data")))
	}
	if cl := byProc["6"]; cl != nil && cl.reply != nil && first(cl.reply, "nfs.data") != hexData {
		t.Errorf("READ: tshark's nfs.data in the reply is not the data placed by the write chunk (%d hex digits)", len(first(cl.reply, "nfs.data")))
	}
	if cl := byProc["17"]; cl != nil && cl.reply != nil {
		for _, name := range []string{"data", "dir0", "dir1", "dir2"} {
			if !slices.Contains(cl.reply["nfs.readdirplus.entry.name"], name) {
				t.Errorf("READDIRPLUS: reply rebuilt from the reply chunk names %v, missing %q", cl.reply["nfs.readdirplus.entry.name"], name)
			}
		}
	}
}
