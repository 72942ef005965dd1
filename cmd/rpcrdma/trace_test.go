package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/internal/trace/tracetest"
)

// writeTraceDemo writes the trace package's synthesized RPC-over-RDMA
// conversation to a file.
func writeTraceDemo(t *testing.T) (*tracetest.Demo, string) {
	t.Helper()
	var buf bytes.Buffer
	demo, err := tracetest.WriteDemo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "demo.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return demo, path
}

func runTrace(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = cmdTrace(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestTraceText(t *testing.T) {
	demo, path := writeTraceDemo(t)
	out, errOut, err := runTrace(t, path)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 22 {
		t.Errorf("%d lines, want 22:\n%s", len(lines), out)
	}
	byFrame := map[int]string{}
	for _, l := range lines {
		var f int
		fmt.Sscanf(l, "%d ", &f)
		byFrame[f] = l
	}
	for step, want := range map[string][]string{
		"request": {"s0 i>r MPA Request rev 2 C|S ird=16 ord=16 pd=8", "| rpcrdma-pd v1 rinv=true send=4096 recv=4096"},
		"write-call": {"s0 i>r FPDU len=210", "| Send L qn=0 msn=1 mo=0 len=192 |",
			"xid=0x4c414201 vers=1 credits=32 RDMA_MSG reads=[pos=96 0x11110001:64@0x1000] writes=[[0x22220001:4096@0x2000]] reply=[0x44440001:1024@0x4000]",
			"| call xid=0x4c414201 prog=100003 vers=3 proc=7"},
		"read-request":   {"s0 r>i", "RDMA Read Request L qn=1 msn=1 mo=0 sink=0x55550001@0x0 size=64 src=0x11110001@0x1000"},
		"getattr-call-2": {"message len=140 frags=3", "cred=AUTH_SYS"},
		"err-vers":       {"RDMA_ERROR ERR_VERS low=1 high=2"},
		"v2-reply":       {"Send with SE", "vers=2", "reply xid=0x4c414205 MSG_ACCEPTED SUCCESS"},
		"v3-call":        {"| error: rpcrdma: unsupported version 3"},
		"terminate2":     {"s1 r>i", "(siw layout)"},
	} {
		l := byFrame[demo.Frames[step]]
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("%s: line %q lacks %q", step, l, w)
			}
		}
	}
	if want := "27 frames, 2 TCP connections (2 iWARP), 22 messages, 1 with errors; 0 gaps (0 bytes)"; !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("summary %q, want it to contain %q", errOut, want)
	}
}

func TestTraceJSON(t *testing.T) {
	demo, path := writeTraceDemo(t)
	out, errOut, err := runTrace(t, "--json", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var writeCall, errVers map[string]any
	n := 0
	for l := range strings.Lines(out) {
		n++
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, l)
		}
		for _, k := range []string{"frame", "stream", "dir", "kind", "mpa", "ddp", "rdmap"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", n, k, l)
			}
		}
		switch int(m["frame"].(float64)) {
		case demo.Frames["write-call"]:
			writeCall = m
		case demo.Frames["err-vers"]:
			errVers = m
		}
	}
	if n != 22 {
		t.Errorf("%d JSON lines, want 22", n)
	}
	if writeCall == nil || errVers == nil {
		t.Fatalf("missing events:\n%s", out)
	}
	r := writeCall["rpcrdma"].(map[string]any)
	reads := r["reads"].([]any)[0].(map[string]any)
	writes := r["writes"].([]any)[0].([]any)[0].(map[string]any)
	reply := r["reply"].([]any)[0].(map[string]any)
	call := writeCall["rpc"].(map[string]any)
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"xid", r["xid"], float64(tracetest.XIDWrite)},
		{"vers", r["vers"], 1.0},
		{"credits", r["credits"], float64(tracetest.Credits)},
		{"proc", r["proc"], "RDMA_MSG"},
		{"reads position", reads["position"], float64(demo.WritePosition)},
		{"reads handle", reads["handle"], float64(tracetest.ReadChunkHandle)},
		{"reads length", reads["length"], float64(tracetest.DataLen)},
		{"reads offset", reads["offset"], float64(tracetest.ReadChunkOffset)},
		{"writes handle", writes["handle"], float64(tracetest.WriteChunkHandle)},
		{"writes offset", writes["offset"], float64(tracetest.WriteChunkOffset)},
		{"reply handle", reply["handle"], float64(tracetest.ReplyChunkHandle)},
		{"reply length", reply["length"], 1024.0},
		{"rpc xid", call["xid"], float64(tracetest.XIDWrite)},
		{"rpc msg_type", call["msg_type"], "CALL"},
		{"rpc prog", call["prog"], float64(tracetest.NFSProg)},
		{"rpc vers", call["vers"], float64(tracetest.NFSv3)},
		{"rpc proc", call["proc"], float64(tracetest.NFSWrite)},
		{"ddp msn", writeCall["ddp"].(map[string]any)["msn"], 1.0},
		{"rdmap opcode", writeCall["rdmap"].(map[string]any)["opcode"], "Send"},
		{"mpa crc_ok", writeCall["mpa"].(map[string]any)["crc_ok"], true},
		{"err code", errVers["rpcrdma"].(map[string]any)["err"].(map[string]any)["code"], "ERR_VERS"},
		{"err high", errVers["rpcrdma"].(map[string]any)["err"].(map[string]any)["high"], 2.0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if !strings.Contains(out, `"dir":"i>r"`) {
		t.Errorf("directions are escaped: %s", out[:200])
	}
}

// TestTraceForcedPort: a capture without the MPA handshake decodes only
// with --port, and --crc checks the CRCs.
func TestTraceForcedPort(t *testing.T) {
	var buf bytes.Buffer
	p := tracetest.NewPcap(&buf)
	c := p.Accept(netip.MustParseAddrPort("10.1.0.1:5000"), netip.MustParseAddrPort("10.1.0.2:6000"))
	c.Send(0, tracetest.NullCall(true, 0x77, 1))
	path := filepath.Join(t.TempDir(), "late.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runTrace(t, path); err != nil || out != "" {
		t.Errorf("without --port: %q, %v", out, err)
	}
	out, _, err := runTrace(t, "--json", "--port", "6000", "--crc", path)
	if err != nil || !strings.Contains(out, `"crc_ok":true`) || !strings.Contains(out, `"xid":119`) {
		t.Errorf("with --port 6000 --crc: %q, %v", out, err)
	}
	out, _, err = runTrace(t, "--port", "1,6000", path)
	if err != nil || strings.Count(out, "\n") != 1 || strings.Contains(out, "error") {
		t.Errorf("with --port 1,6000: %q, %v", out, err)
	}
}

func TestTraceHelp(t *testing.T) {
	_, errOut, err := runTrace(t, "--help")
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	for _, want := range []string{"usage: rpcrdma trace [flags] FILE", "-json", "-port", "-crc", "rpcrdma {xid, vers, credits, proc", "reads [{position, handle, length, offset}]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("--help lacks %q:\n%s", want, errOut)
		}
	}
}

func TestTraceErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pcap")
	_, _, err := runTrace(t, missing)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	notCapture := filepath.Join(dir, "notes.txt")
	os.WriteFile(notCapture, []byte("these are not the packets you are looking for"), 0o600)
	if _, _, err := runTrace(t, notCapture); err == nil || !strings.Contains(err.Error(), "not pcap or pcapng") || strings.Contains(err.Error(), "\n") {
		t.Errorf("not a capture: %v", err)
	}
	_, path := writeTraceDemo(t)
	b, _ := os.ReadFile(path)
	cut := filepath.Join(dir, "cut.pcap")
	os.WriteFile(cut, b[:len(b)-7], 0o600)
	out, _, err := runTrace(t, cut)
	if err == nil || !strings.Contains(err.Error(), "frame 27: record cut short") || strings.Count(out, "\n") < 20 {
		t.Errorf("cut capture: %v, %d lines", err, strings.Count(out, "\n"))
	}
	for _, args := range [][]string{{}, {"a", "b"}, {"--port", "x", path}, {"--port", "70000", path}} {
		if _, _, err := runTrace(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
