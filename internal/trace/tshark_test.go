package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/capture"
	"github.com/go-rpcrdma/rpcrdma/internal/trace/tracetest"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// tshark as an independent decoder (docs/tshark.md): for
// every frame where both decode a layer, the fields must agree. tshark 4.0
// decodes RPC-over-RDMA only for Version One in Send (opcode 3) and Send
// with Invalidate (4); Version Two, Sends with Solicited Event and headers
// that we could not decode either are its blind spots.

// tsharkFields are the fields compared, all from tshark -G fields.
var tsharkFields = []string{
	"frame.number",
	"iwarp_mpa.rev", "iwarp_mpa.crc_flag", "iwarp_mpa.marker_flag", "iwarp_mpa.pdlength",
	"iwarp_mpa.ulpdulength", "iwarp_rdma.opcode",
	"rpcordma.xid", "rpcordma.version", "rpcordma.flow_control", "rpcordma.msg_type",
	"rpcordma.reads_count", "rpcordma.writes_count", "rpcordma.reply_count",
	"rpcordma.position", "rpcordma.segment_count",
	"rpcordma.rdma_handle", "rpcordma.rdma_length", "rpcordma.rdma_offset",
	"rpcordma.errcode", "rpcordma.vers_low", "rpcordma.vers_high",
	"rpc.xid", "rpc.msgtyp", "rpc.program", "rpc.procedure",
}

// tsharkFrames runs tshark with the options docs/tshark.md explains
// (capture.Fields) and returns, per frame, each field's values (several
// when a frame holds several FPDUs).
func tsharkFrames(t *testing.T, path string) map[int]map[string][]string {
	t.Helper()
	frames := map[int]map[string][]string{}
	for _, row := range capture.Fields(t, path, tsharkFields...) {
		n, err := strconv.Atoi(row["frame.number"])
		if err != nil {
			t.Fatalf("tshark frame number %q", row["frame.number"])
		}
		m := map[string][]string{}
		for _, f := range tsharkFields[1:] {
			if v, ok := row[f]; ok {
				m[f] = strings.Split(v, ",")
			}
		}
		frames[n] = m
	}
	return frames
}

func num(v any) uint64 {
	f, _ := v.(float64)
	return uint64(f)
}

// tsharkVisible reports whether tshark 4.0 decodes the RPC-over-RDMA
// header of one of our JSON events.
func tsharkVisible(j map[string]any) bool {
	op, _ := jget(j, "rdmap.opcode")
	proc, hasProc := jget(j, "rpcrdma.proc")
	vers, _ := jget(j, "rpcrdma.vers")
	return hasProc && proc != nil && num(vers) == 1 && (op == "Send" || op == "Send with Invalidate")
}

// compareTshark compares our JSON events with tshark's fields frame by
// frame and returns the number of RPC-over-RDMA headers and RPC headers
// compared.
func compareTshark(t *testing.T, path string, d *decoded) (headers, rpcs int) {
	t.Helper()
	ts := tsharkFrames(t, path)
	frames := map[int][]map[string]any{}
	for _, j := range d.json {
		f := int(num(j["frame"]))
		frames[f] = append(frames[f], j)
	}
	var laterCalls []map[string]any // calls whose RPC tshark rebuilds elsewhere
	for _, f := range slices.Sorted(func(yield func(int) bool) {
		for f := range ts {
			if !yield(f) {
				return
			}
		}
	}) {
		theirs := ts[f]
		want := map[string][]string{}
		add := func(k string, v any) {
			switch v := v.(type) {
			case string:
				want[k] = append(want[k], v)
			case int:
				want[k] = append(want[k], strconv.Itoa(v))
			default:
				want[k] = append(want[k], strconv.FormatUint(num(v), 10))
			}
		}
		hex32 := func(v any) string { return fmt.Sprintf("0x%08x", num(v)) }
		var ourRPC []map[string]any
		for _, j := range frames[f] {
			switch j["kind"] {
			case "mpa-frame":
				m := j["mpa"].(map[string]any)
				add("iwarp_mpa.rev", m["rev"])
				add("iwarp_mpa.crc_flag", map[bool]string{true: "1", false: "0"}[m["crc_flag"].(bool)])
				add("iwarp_mpa.marker_flag", map[bool]string{true: "1", false: "0"}[m["marker_flag"].(bool)])
				add("iwarp_mpa.pdlength", m["pd_length"])
			case "fpdu":
				op, _ := jget(j, "rdmap.opcode")
				add("iwarp_mpa.ulpdulength", j["mpa"].(map[string]any)["ulpdu_length"])
				add("iwarp_rdma.opcode", fmt.Sprintf("0x%02x", opcodeNumber(t, op.(string))))
			}
			if !tsharkVisible(j) {
				continue
			}
			headers++
			r := j["rpcrdma"].(map[string]any)
			add("rpcordma.xid", hex32(r["xid"]))
			add("rpcordma.version", r["vers"])
			add("rpcordma.flow_control", r["credits"])
			add("rpcordma.msg_type", procNumber(t, r["proc"].(string)))
			tracetest.HeaderFields(r, add,
				func(v any) any { return hex32(v) },
				func(v any) any { return fmt.Sprintf("0x%016x", num(v)) })
			if _, ok := j["rpc"]; ok {
				if reads, _ := r["reads"].([]any); len(reads) > 0 {
					laterCalls = append(laterCalls, j)
				} else {
					ourRPC = append(ourRPC, j)
				}
			}
		}
		for _, k := range tsharkFields[1:] {
			if strings.HasPrefix(k, "rpc.") {
				continue
			}
			if got, w := theirs[k], want[k]; !slices.Equal(got, w) {
				t.Errorf("frame %d: %s: tshark %q, ours %q", f, k, got, w)
			}
		}
		// RPC headers: tshark may show more in a frame (messages it
		// rebuilt from chunks); each of ours must be among them.
		for _, j := range ourRPC {
			rpcs++
			if !tsharkHasRPC(theirs, j) {
				t.Errorf("frame %d: our RPC %v is not among tshark's xids %q", f, j["rpc"], theirs["rpc.xid"])
			}
		}
	}
	// A call with read chunks is dissected by tshark in the frame of the
	// RDMA Read Response that completes it.
	for _, j := range laterCalls {
		rpcs++
		found := false
		for f, theirs := range ts {
			found = found || (f > int(num(j["frame"])) && tsharkHasRPC(theirs, j))
		}
		if !found {
			t.Errorf("frame %d: tshark never dissects our call %v", int(num(j["frame"])), j["rpc"])
		}
	}
	return headers, rpcs
}

// tsharkHasRPC reports whether tshark's frame shows the RPC header of our
// JSON event: same xid and msg_type, and for a call the same program and
// procedure.
func tsharkHasRPC(theirs map[string][]string, j map[string]any) bool {
	r := j["rpc"].(map[string]any)
	xid := fmt.Sprintf("0x%08x", num(r["xid"]))
	for i, x := range theirs["rpc.xid"] {
		if x != xid || i >= len(theirs["rpc.msgtyp"]) {
			continue
		}
		mt := map[string]string{"CALL": "0", "REPLY": "1"}[r["msg_type"].(string)]
		if theirs["rpc.msgtyp"][i] != mt {
			continue
		}
		if mt == "1" {
			return true
		}
		if i < len(theirs["rpc.program"]) && i < len(theirs["rpc.procedure"]) &&
			theirs["rpc.program"][i] == strconv.FormatUint(num(r["prog"]), 10) &&
			theirs["rpc.procedure"][i] == strconv.FormatUint(num(r["proc"]), 10) {
			return true
		}
	}
	return false
}

func opcodeNumber(t *testing.T, name string) int {
	for op := range 16 {
		if ddp.Opcode(op).String() == name {
			return op
		}
	}
	t.Fatalf("unknown opcode %q", name)
	return 0
}

func procNumber(t *testing.T, token string) int {
	for p := range 6 {
		if wire.Proc(p).String() == token {
			return p
		}
	}
	t.Fatalf("unknown proc %q", token)
	return 0
}

// TestTsharkDemo: tshark agrees with us on the synthesized conversation.
func TestTsharkDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("tshark comparison skipped in -short mode")
	}
	_, capture := writeDemo(t)
	path := filepath.Join(t.TempDir(), "demo.pcap")
	if err := os.WriteFile(path, capture, 0o600); err != nil {
		t.Fatal(err)
	}
	d := decodeBytes(t, capture, Options{})
	headers, rpcs := compareTshark(t, path, d)
	// write-call, write-reply, read-call, read-reply, getattr-call,
	// getattr-reply, err-vers; the RPC of all but err-vers.
	if headers != 7 || rpcs != 6 {
		t.Errorf("compared %d RPC-over-RDMA headers and %d RPC headers, want 7 and 6", headers, rpcs)
	}
}

// TestTsharkLab: tshark agrees with us on the Linux siw RPC-over-RDMA
// captures of the lab.
func TestTsharkLab(t *testing.T) {
	if testing.Short() {
		t.Skip("tshark comparison skipped in -short mode")
	}
	files, _ := filepath.Glob(filepath.Join(labCaptures, "*.pcap"))
	if len(files) == 0 {
		t.Skipf("no captures in %s", labCaptures)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			headers, rpcs := compareTshark(t, path, decodeBytes(t, b, Options{}))
			if headers == 0 || rpcs == 0 {
				t.Errorf("compared %d RPC-over-RDMA headers and %d RPC headers", headers, rpcs)
			}
			t.Logf("%d RPC-over-RDMA headers and %d RPC headers agree with tshark", headers, rpcs)
		})
	}
}
