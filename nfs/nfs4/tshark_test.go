package nfs4

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pcapWriter writes ONC RPC messages over TCP (RFC 5531 Section 11,
// record marking) between a client port and the NFS port 2049 to a
// classic pcap file, for an independent decoder to read.
type pcapWriter struct {
	buf      bytes.Buffer
	seq      [2]uint32 // next sequence number: client to server, server to client
	frames   int
	cli, srv uint16
}

func newPcap() *pcapWriter {
	w := &pcapWriter{cli: 871, srv: 2049, seq: [2]uint32{1000, 5000}}
	// magic, version 2.4, zone, sigfigs, snaplen, LINKTYPE_ETHERNET
	for _, v := range []any{uint32(0xa1b2c3d4), uint16(2), uint16(4), int32(0), uint32(0), uint32(1 << 18), uint32(1)} {
		binary.Write(&w.buf, binary.LittleEndian, v)
	}
	return w
}

// record adds one RPC message, fromServer saying its direction.
func (w *pcapWriter) record(fromServer bool, msg []byte) {
	dir, sport, dport := 0, w.cli, w.srv
	src, dst := []byte{127, 0, 0, 1}, []byte{127, 0, 0, 2}
	if fromServer {
		dir, sport, dport = 1, w.srv, w.cli
		src, dst = dst, src
	}
	payload := binary.BigEndian.AppendUint32(nil, 1<<31|uint32(len(msg)))
	payload = append(payload, msg...)
	var f []byte
	f = append(f, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00) // Ethernet
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+len(payload)))
	ip = append(append(ip, src...), dst...)
	var sum uint32
	for i := 0; i < len(ip); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	f = append(f, ip...)
	tcp := binary.BigEndian.AppendUint16(nil, sport)
	tcp = binary.BigEndian.AppendUint16(tcp, dport)
	tcp = binary.BigEndian.AppendUint32(tcp, w.seq[dir])
	tcp = binary.BigEndian.AppendUint32(tcp, w.seq[1-dir])
	tcp = append(tcp, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0) // header length 20, PSH|ACK, window; no checksum
	f = append(append(f, tcp...), payload...)
	w.seq[dir] += uint32(len(payload))
	w.frames++
	for _, v := range []uint32{uint32(1700000000 + w.frames), 0, uint32(len(f)), uint32(len(f))} {
		binary.Write(&w.buf, binary.LittleEndian, v)
	}
	w.buf.Write(f)
}

// call and reply wrap a COMPOUND's arguments or results in an RPC call
// or accepted reply with AUTH_NONE (RFC 5531 Section 9).
func rpcCall(xid, prog, vers uint32, args []byte) []byte {
	var b []byte
	for _, v := range []uint32{xid, 0, 2, prog, vers, ProcCompound, 0, 0, 0, 0} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return append(b, args...)
}

func rpcReply(xid uint32, res []byte) []byte {
	var b []byte
	for _, v := range []uint32{xid, 1, 0, 0, 0, 0} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return append(b, res...)
}

// TestTshark writes the golden COMPOUNDs and CB_COMPOUND, each as an RPC
// call and its reply over TCP, to a pcap and checks that tshark, an
// independent decoder, reads the operations and statuses this codec
// meant. It skips without tshark (found as $TSHARK or in PATH).
func TestTshark(t *testing.T) {
	tshark := os.Getenv("TSHARK")
	if tshark == "" {
		var err error
		if tshark, err = exec.LookPath("tshark"); err != nil {
			t.Skip("no tshark")
		}
	}
	w := newPcap()
	exArgs := mustHex(t, "00000000 00000001 00000001 0000002a 0102030405060708 00000006 636c69656e740000"+
		" 00010000 00000000 00000001 0000000a 6b65726e656c2e6f72670000 00000005 4c696e7578000000 0000000000000000 00000000")
	exRes := mustHex(t, "00000000 00000000 00000001 0000002a 00000000 1122334455667788 00000001 80010000"+
		" 00000000 0000000000000000 00000003 73727600 00000003 73727600 00000000")
	_, flatArgs := encode(&CompoundArgs{MinorVersion: 1, Ops: []ArgOp{&ExchangeIDArgs{Verifier: Verifier{1, 2, 3, 4, 5, 6, 7, 8},
		OwnerID: []byte("client"), Flags: ExchgIDFlagUseNonPNFS, ImplID: &ImplID{Domain: "kernel.org", Name: "Linux"}}}})
	if !bytes.Equal(flatArgs, exArgs) {
		t.Fatal("the EXCHANGE_ID vector differs from TestExchangeIDGolden's")
	}
	w.record(false, rpcCall(1, Program, Version, exArgs))
	w.record(true, rpcReply(1, exRes))
	_, readArgsHex, _, readResHex := goldenRead()
	w.record(false, rpcCall(2, Program, Version, mustHex(t, readArgsHex)))
	w.record(true, rpcReply(2, mustHex(t, readResHex)))
	_, getattrRes := encode(&CompoundRes{Ops: []ResOp{&PutRootFHRes{}, &GetFHRes{FH: gfh}, &GetattrRes{Attr: goldenAttr}}})
	_, getattrArgs := encode(&CompoundArgs{MinorVersion: 1, Ops: []ArgOp{&PutRootFHArgs{}, &GetFHArgs{},
		&GetattrArgs{AttrRequest: goldenAttr.Mask}}})
	w.record(false, rpcCall(3, Program, Version, getattrArgs))
	w.record(true, rpcReply(3, getattrRes))
	_, cbArgsHex, _, cbResHex := goldenCB()
	w.record(true, rpcCall(4, CBProgram, CBVersion, mustHex(t, cbArgsHex)))
	w.record(false, rpcReply(4, mustHex(t, cbResHex)))

	path := filepath.Join(t.TempDir(), "nfs4.pcap")
	if err := os.WriteFile(path, w.buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tshark, "-n", "-r", path, "-d", "tcp.port==2049,rpc", "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		// EXCHANGE_ID and its reply
		"Opcode: EXCHANGE_ID (42)", "verifier: 0x0102030405060708", "flags: 0x00010000, EXCHGID4_FLAG_USE_NON_PNFS",
		"eia_state_protect: SP4_NONE (0)", "(nii_domain): kernel.org", "(nii_name): Linux",
		"clientid: 0x1122334455667788", "flags: 0x80010000, EXCHGID4_FLAG_CONFIRMED_R, EXCHGID4_FLAG_USE_NON_PNFS",
		// SEQUENCE, PUTFH, READ and the reply
		"Ops(3): SEQUENCE, PUTFH, READ", "sessionid: a00000000000000000000000000000af", "FileHandle: 0102030405060708",
		"offset: 4096", "count: 4096", "target high slot id: 63", "eof: 1",
		// GETATTR of the golden fattr4
		"Ops(3): PUTROOTFH, GETFH, GETATTR", "Attr mask[0]: 0x0010011a (Type, Change, Size, FSID, FileId)",
		"Attr mask[1]: 0x0020001a (Mode, NumLinks, Owner, Time_Modify)", "ftype4: NF4REG (1)", "changeid: 4660",
		"size: 5", "fsid4.major: 1", "fsid4.minor: 2", "fileid: 42", "mode: 0644", "numlinks: 1",
		"fattr4_owner: root", "seconds: 1700000000", "nseconds: 5",
		// CB_SEQUENCE, CB_RECALL
		"CB Procedure: CB_COMPOUND (1)", "Opcode: CB_SEQUENCE (11)", "referring calls (count: 1)", "seqid: 0x00000005",
		"slot id: 2", "Opcode: CB_RECALL (4)", "StateID Other: c000000000000000000000cb",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("tshark does not show %q", want)
		}
	}
	if n := strings.Count(text, "Status: NFS4_OK (0)"); n != 2+4+4+3 { // each reply: its status and each operation's
		t.Errorf("tshark shows %d NFS4_OK statuses, want 13", n)
	}
	if strings.Contains(text, "Malformed") || strings.Contains(text, "Expert Info (Error") {
		t.Errorf("tshark finds a malformed packet:\n%s", text)
	}
	if t.Failed() {
		t.Logf("tshark -V:\n%s", text)
	}
}
