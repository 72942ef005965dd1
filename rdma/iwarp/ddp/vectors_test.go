package ddp

import (
	"encoding/hex"
	"strings"
)

// h decodes hex written with arbitrary white space.
func h(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

// cat decodes the concatenation of hex parts.
func cat(parts ...string) []byte { return h(strings.Join(parts, " ")) }

// zeros returns n zero bytes in the notation h reads.
func zeros(n int) string { return strings.Repeat("00 ", n) }

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func withInv(hd Header, stag uint32) Header { hd.InvalidateSTag = stag; return hd }

// segmentVectors are golden DDP segments (ULPDUs). "s6.N" are worked
// examples computed from RFC 5040, 5041 and 5044 and checked with tshark
// (fpdu holds the whole FPDU there, checked through package mpa), "lab"
// bytes captured from Linux 6.1 siw, nfsd and NFS client
// (docs/linux-interop.md section 5), "ibm" the 2008 IBM software iWARP
// captures.
var segmentVectors = []struct {
	name  string
	ulpdu []byte
	seg   Segment
	str   string
	fpdu  []byte // the FPDU with CRC, when the source gives it
}{
	{
		name:  "s6.3_send",
		ulpdu: cat("41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00", hex.EncodeToString(seq(28))),
		seg:   Segment{Header: Untagged(OpSend, true, 0, 1, 0), Payload: seq(28)},
		str:   "Send L qn=0 msn=1 mo=0 len=28",
		fpdu: cat("00 2e 41 43 00 00 00 00 00 00 00 00 00 00 00 01",
			"00 00 00 00 00 01 02 03 04 05 06 07 08 09 0a 0b",
			"0c 0d 0e 0f 10 11 12 13 14 15 16 17 18 19 1a 1b 9a f0 8f 8c"),
	},
	{
		name:  "s6.4_write",
		ulpdu: cat("c1 40 3a 2b 1c 00 00 00 7f 00 00 00 10 00 68 65 6c 6c 6f 2c 20 69 57 41 52 50 21"),
		seg:   Segment{Header: Tagged(OpRDMAWrite, true, 0x3a2b1c00, 0x7f0000001000), Payload: []byte("hello, iWARP!")},
		str:   "RDMA Write L stag=0x3a2b1c00 to=0x7f0000001000 len=13",
		fpdu: cat("00 1b c1 40 3a 2b 1c 00 00 00 7f 00 00 00 10 00",
			"68 65 6c 6c 6f 2c 20 69 57 41 52 50 21 00 00 00 29 31 7c 54"),
	},
	{
		name: "s6.5_read_request",
		ulpdu: cat("41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00",
			"00 00 a1 01 00 00 00 00 00 00 20 00 00 00 10 00 3a 2b 1c 00 00 00 7f 00 00 00 10 00"),
		seg: Segment{Header: Untagged(OpRDMAReadRequest, true, 1, 1, 0),
			ReadRequest: ReadRequest{SinkSTag: 0xa101, SinkTO: 0x2000, Size: 4096, SourceSTag: 0x3a2b1c00, SourceTO: 0x7f0000001000}},
		str: "RDMA Read Request L qn=1 msn=1 mo=0 sink=0x0000a101@0x2000 size=4096 src=0x3a2b1c00@0x7f0000001000",
		fpdu: cat("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01",
			"00 00 00 00 00 00 a1 01 00 00 00 00 00 00 20 00",
			"00 00 10 00 3a 2b 1c 00 00 00 7f 00 00 00 10 00 b1 77 2c a0"),
	},
	{
		name: "s6.6_terminate_rfc",
		ulpdu: cat("41 47 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 00",
			"12 02 c0 00 00 76 41 43 00 00 00 00 00 00 00 00 00 00 00 05 00 00 00 00"),
		seg: Segment{Header: Untagged(OpTerminate, true, 2, 1, 0),
			Terminate: Terminate{Cause: CauseDDPUntaggedNoBuffer, HdrCt: HdrCtM | HdrCtD, SegmentLen: 118, DDPHeader: Untagged(OpSend, true, 0, 5, 0)}},
		str: "Terminate L qn=2 msn=1 mo=0 DDP untagged buffer error: invalid MSN - no buffer available (1/2/0x02) M|D seglen=118 hdr=[Send L qn=0 msn=5 mo=0]",
		fpdu: cat("00 2a 41 47 00 00 00 00 00 00 00 02 00 00 00 01",
			"00 00 00 00 12 02 c0 00 00 76 41 43 00 00 00 00",
			"00 00 00 00 00 00 00 05 00 00 00 00 a5 00 27 95"),
	},
	{
		name: "s6.6_terminate_siw",
		ulpdu: cat("41 47 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 00",
			"21 02 03 00 00 64 41 43 00 00 00 00 00 00 00 00 00 00 00 05 00 00 00 00"),
		seg: Segment{Header: Untagged(OpTerminate, true, 2, 1, 0),
			Terminate: Terminate{Cause: CauseDDPUntaggedNoBuffer, HdrCt: HdrCtM | HdrCtD, Layout: LayoutSiw, SegmentLen: 100, DDPHeader: Untagged(OpSend, true, 0, 5, 0)}},
		str: "Terminate L qn=2 msn=1 mo=0 DDP untagged buffer error: invalid MSN - no buffer available (1/2/0x02) M|D seglen=100 hdr=[Send L qn=0 msn=5 mo=0] (siw layout)",
		fpdu: cat("00 2a 41 47 00 00 00 00 00 00 00 02 00 00 00 01",
			"00 00 00 00 21 02 03 00 00 64 41 43 00 00 00 00",
			"00 00 00 00 00 00 00 05 00 00 00 00 fb f2 07 32"),
	},
	{
		name:  "s6.7_rtr_write",
		ulpdu: cat("c1 40 00 00 00 01 00 00 00 00 00 00 00 00"),
		seg:   Segment{Header: Tagged(OpRDMAWrite, true, 1, 0), Payload: []byte{}},
		str:   "RDMA Write L stag=0x00000001 to=0x0 len=0",
		fpdu:  cat("00 0e c1 40 00 00 00 01 00 00 00 00 00 00 00 00 eb d3 4c 5f"),
	},
	{
		name:  "s6.7_rtr_read",
		ulpdu: cat("41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00", zeros(16), "00 00 00 01", zeros(8)),
		seg:   Segment{Header: Untagged(OpRDMAReadRequest, true, 1, 1, 0), ReadRequest: ReadRequest{SourceSTag: 1}},
		str:   "RDMA Read Request L qn=1 msn=1 mo=0 sink=0x00000000@0x0 size=0 src=0x00000001@0x0",
		fpdu: cat("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01",
			"00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
			"00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 00 ba 10 e3 c9"),
	},
	{
		name: "lab_nfs_null_call",
		ulpdu: cat("41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00",
			"4c 41 42 01 00 00 00 01 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
			"4c 41 42 01 00 00 00 00 00 00 00 02 00 01 86 a3 00 00 00 03 00 00 00 00", zeros(16)),
		seg: Segment{Header: Untagged(OpSend, true, 0, 1, 0), Payload: cat(
			"4c 41 42 01 00 00 00 01 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
			"4c 41 42 01 00 00 00 00 00 00 00 02 00 01 86 a3 00 00 00 03 00 00 00 00", zeros(16))},
		str: "Send L qn=0 msn=1 mo=0 len=68",
		fpdu: cat("00 56 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00",
			"4c 41 42 01 00 00 00 01 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
			"4c 41 42 01 00 00 00 00 00 00 00 02 00 01 86 a3 00 00 00 03 00 00 00 00", zeros(16), "f1 f6 dd 2b"),
	},
	{
		name: "lab_nfsd_read_request",
		ulpdu: cat("41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00",
			"48 64 06 01 ff 3b df 41 e1 a4 b0 00 00 00 20 00 00 ab cd 01 00 00 00 00 10 00 00 00"),
		seg: Segment{Header: Untagged(OpRDMAReadRequest, true, 1, 1, 0),
			ReadRequest: ReadRequest{SinkSTag: 0x48640601, SinkTO: 0xff3bdf41e1a4b000, Size: 0x2000, SourceSTag: 0xabcd01, SourceTO: 0x10000000}},
		str: "RDMA Read Request L qn=1 msn=1 mo=0 sink=0x48640601@0xff3bdf41e1a4b000 size=8192 src=0x00abcd01@0x10000000",
	},
	{
		name:  "lab_read_response_first",
		ulpdu: cat("81 42 48 64 06 01 ff 3b df 41 e1 a4 b0 00", zeros(4096)),
		seg:   Segment{Header: Tagged(OpRDMAReadResponse, false, 0x48640601, 0xff3bdf41e1a4b000), Payload: make([]byte, 4096)},
		str:   "RDMA Read Response stag=0x48640601 to=0xff3bdf41e1a4b000 len=4096",
	},
	{
		name:  "lab_read_response_last",
		ulpdu: cat("c1 42 48 64 06 01 ff 3b df 41 e1 a4 c0 00", zeros(4096)),
		seg:   Segment{Header: Tagged(OpRDMAReadResponse, true, 0x48640601, 0xff3bdf41e1a4c000), Payload: make([]byte, 4096)},
		str:   "RDMA Read Response L stag=0x48640601 to=0xff3bdf41e1a4c000 len=4096",
	},
	{
		name:  "lab_nfsd_write_first",
		ulpdu: cat("81 40 00 ab cd 02 00 00 00 00 20 00 00 00", zeros(1436)),
		seg:   Segment{Header: Tagged(OpRDMAWrite, false, 0xabcd02, 0x20000000), Payload: make([]byte, 1436)},
		str:   "RDMA Write stag=0x00abcd02 to=0x20000000 len=1436",
	},
	{
		name:  "lab_nfsd_write_last",
		ulpdu: cat("c1 40 00 ab cd 02 00 00 00 00 20 00 1c 0c", zeros(1012)),
		seg:   Segment{Header: Tagged(OpRDMAWrite, true, 0xabcd02, 0x20001c0c), Payload: make([]byte, 1012)},
		str:   "RDMA Write L stag=0x00abcd02 to=0x20001c0c len=1012",
	},
	{
		// The README shows the first 14 bytes; MO 0 and the 4-byte
		// payload are filled in here.
		name:  "lab_nfsd_send_invalidate",
		ulpdu: cat("41 44 00 ab cd 01 00 00 00 00 00 00 00 06 00 00 00 00 4c 41 42 01"),
		seg:   Segment{Header: withInv(Untagged(OpSendInvalidate, true, 0, 6, 0), 0xabcd01), Payload: h("4c 41 42 01")},
		str:   "Send with Invalidate L inv=0x00abcd01 qn=0 msn=6 mo=0 len=4",
	},
	{
		// The README shows the first 26 bytes of siw's Terminate for a
		// 6000-byte Send; the copied header's QN/MSN/MO are filled in.
		name: "lab_siw_terminate_oversize",
		ulpdu: cat("41 47 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 00",
			"21 02 03 00 17 70 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00"),
		seg: Segment{Header: Untagged(OpTerminate, true, 2, 1, 0),
			Terminate: Terminate{Cause: CauseDDPUntaggedNoBuffer, HdrCt: HdrCtM | HdrCtD, Layout: LayoutSiw, SegmentLen: 6000, DDPHeader: Untagged(OpSend, true, 0, 2, 0)}},
		str: "Terminate L qn=2 msn=1 mo=0 DDP untagged buffer error: invalid MSN - no buffer available (1/2/0x02) M|D seglen=6000 hdr=[Send L qn=0 msn=2 mo=0] (siw layout)",
	},
	{
		// siw, Remote Protection error on a Send: M, D and R set, no Read
		// Request header (RFC 5040 section 4.8).
		name: "siw_terminate_r_without_header",
		ulpdu: cat("41 47 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 00",
			"10 00 07 00 00 10 41 44 00 00 12 00 00 00 00 00 00 00 00 03 00 00 00 00"),
		seg: Segment{Header: Untagged(OpTerminate, true, 2, 1, 0),
			Terminate: Terminate{Cause: CauseRDMAPInvalidSTag, HdrCt: HdrCtM | HdrCtD | HdrCtR, Layout: LayoutSiw, SegmentLen: 16,
				DDPHeader: withInv(Untagged(OpSendInvalidate, true, 0, 3, 0), 0x1200), ReadRequestOmitted: true}},
		str: "Terminate L qn=2 msn=1 mo=0 RDMAP remote protection error: invalid STag (0/1/0x00) M|D|R seglen=16 hdr=[Send with Invalidate L inv=0x00001200 qn=0 msn=3 mo=0] (siw layout)",
	},
	{
		// siw's CRC error Terminate: LLP, no headers, "02 02 00 00".
		name:  "siw_terminate_crc",
		ulpdu: cat("41 47 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 00 02 02 00 00"),
		seg:   Segment{Header: Untagged(OpTerminate, true, 2, 1, 0), Terminate: Terminate{Cause: CauseMPACRC, Layout: LayoutSiw}},
		str:   "Terminate L qn=2 msn=1 mo=0 LLP MPA error: MPA CRC error (2/0/0x02) - (siw layout)",
	},
	{
		// RFC layout, RDMAP Remote Protection on a Read Request: D and R,
		// both headers copied (70-byte ULPDU, RFC 5040 section 4.8).
		name: "rfc_terminate_read_request",
		ulpdu: cat("41 47 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 00",
			"01 01 e0 00 00 2e",
			"41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00",
			"00 00 a1 01 00 00 00 00 00 00 20 00 00 00 10 00 3a 2b 1c 00 00 00 7f 00 00 00 10 00"),
		seg: Segment{Header: Untagged(OpTerminate, true, 2, 1, 0),
			Terminate: Terminate{Cause: CauseRDMAPBaseBounds, HdrCt: HdrCtM | HdrCtD | HdrCtR, SegmentLen: 46,
				DDPHeader:   Untagged(OpRDMAReadRequest, true, 1, 1, 0),
				ReadRequest: ReadRequest{SinkSTag: 0xa101, SinkTO: 0x2000, Size: 4096, SourceSTag: 0x3a2b1c00, SourceTO: 0x7f0000001000}}},
		str: "Terminate L qn=2 msn=1 mo=0 RDMAP remote protection error: base or bounds violation (0/1/0x01) M|D|R seglen=46 hdr=[RDMA Read Request L qn=1 msn=1 mo=0] rr=[sink=0x0000a101@0x2000 size=4096 src=0x3a2b1c00@0x7f0000001000]",
	},
	{
		// RFC layout, tagged header copied (DDP tagged invalid STag).
		name: "rfc_terminate_tagged",
		ulpdu: cat("41 47 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 00",
			"11 00 c0 00 00 1b c1 40 3a 2b 1c 00 00 00 7f 00 00 00 10 00"),
		seg: Segment{Header: Untagged(OpTerminate, true, 2, 1, 0),
			Terminate: Terminate{Cause: CauseDDPTaggedInvalidSTag, HdrCt: HdrCtM | HdrCtD, SegmentLen: 27, DDPHeader: Tagged(OpRDMAWrite, true, 0x3a2b1c00, 0x7f0000001000)}},
		str: "Terminate L qn=2 msn=1 mo=0 DDP tagged buffer error: invalid STag (1/1/0x00) M|D seglen=27 hdr=[RDMA Write L stag=0x3a2b1c00 to=0x7f0000001000]",
	},
	{
		name:  "ibm_snd_recv_send",
		ulpdu: cat("41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 04 00 00 01 00 00 00 00 b0 05 08 00 00 00 00"),
		seg:   Segment{Header: Untagged(OpSend, true, 0, 1, 0), Payload: h("00 04 00 00 01 00 00 00 00 b0 05 08 00 00 00 00")},
		str:   "Send L qn=0 msn=1 mo=0 len=16",
	},
	{
		name:  "send_middle_segment",
		ulpdu: cat("01 45 00 00 00 00 00 00 00 00 00 00 00 07 00 00 05 ca 01 02"),
		seg:   Segment{Header: Untagged(OpSendSE, false, 0, 7, 1482), Payload: h("01 02")},
		str:   "Send with SE qn=0 msn=7 mo=1482 len=2",
	},
	{
		name:  "send_se_invalidate",
		ulpdu: cat("41 46 12 34 56 78 00 00 00 00 00 00 00 08 00 00 00 00"),
		seg:   Segment{Header: withInv(Untagged(OpSendSEInvalidate, true, 0, 8, 0), 0x12345678), Payload: []byte{}},
		str:   "Send with SE and Invalidate L inv=0x12345678 qn=0 msn=8 mo=0 len=0",
	},
}
