package mpa

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

// zeros returns n zero bytes in the notation h reads.
func zeros(n int) string { return strings.Repeat("00 ", n) }

// cat decodes the concatenation of hex parts.
func cat(parts ...string) []byte { return h(strings.Join(parts, " ")) }

// Golden startup frames. Names give the source: "s6.N" are worked examples
// computed from RFC 5044 and RFC 6581 and checked with tshark, "lab" bytes
// captured from Linux 6.1 siw and nfsd (docs/linux-interop.md section 1),
// "ibm" the 2008 IBM software iWARP captures, "smb" the Windows SMB-Direct
// capture.
var frameVectors = []struct {
	name string
	wire []byte
	f    Frame
}{
	{
		name: "s6.1_request_rev2_crc",
		wire: cat("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 50 02 00 0c 00 80 00 00 f6 ab 0e 18 01 01 03 03"),
		f:    Frame{Kind: Request, Flags: FlagCRC | FlagEnhanced, Rev: 2, IRDORD: IRDORD{IRD: 128}, PrivateData: h("f6 ab 0e 18 01 01 03 03")},
	},
	{
		name: "s6.2_reply_rev2_crc",
		wire: cat("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 50 02 00 0c 00 00 00 10 f6 ab 0e 18 01 00 03 03"),
		f:    Frame{Kind: Reply, Flags: FlagCRC | FlagEnhanced, Rev: 2, IRDORD: IRDORD{ORD: 16}, PrivateData: h("f6 ab 0e 18 01 00 03 03")},
	},
	{
		name: "lab_request_ird16_ord16",
		wire: cat("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 10 02 00 0c 00 10 00 10 f6 ab 0e 18 01 00 03 03"),
		f:    Frame{Kind: Request, Flags: FlagEnhanced, Rev: 2, IRDORD: IRDORD{IRD: 16, ORD: 16}, PrivateData: h("f6 ab 0e 18 01 00 03 03")},
	},
	{
		name: "lab_reply_ird16_ord16",
		wire: cat("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 10 02 00 0c 00 10 00 10 f6 ab 0e 18 01 00 03 03"),
		f:    Frame{Kind: Reply, Flags: FlagEnhanced, Rev: 2, IRDORD: IRDORD{IRD: 16, ORD: 16}, PrivateData: h("f6 ab 0e 18 01 00 03 03")},
	},
	{
		name: "lab_linux_client_request",
		wire: cat("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 10 02 00 0c 00 80 00 00 f6 ab 0e 18 01 01 03 03"),
		f:    Frame{Kind: Request, Flags: FlagEnhanced, Rev: 2, IRDORD: IRDORD{IRD: 128}, PrivateData: h("f6 ab 0e 18 01 01 03 03")},
	},
	{
		name: "lab_our_reply_to_linux_client",
		wire: cat("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 10 02 00 0c 00 01 00 10 f6 ab 0e 18 01 00 03 03"),
		f:    Frame{Kind: Reply, Flags: FlagEnhanced, Rev: 2, IRDORD: IRDORD{IRD: 1, ORD: 16}, PrivateData: h("f6 ab 0e 18 01 00 03 03")},
	},
	{
		name: "lab_reject_rev1",
		wire: cat("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 20 01 00 00"),
		f:    Frame{Kind: Reply, Flags: FlagReject, Rev: 1, PrivateData: []byte{}},
	},
	{
		name: "lab_reject_ird0",
		wire: cat("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 30 02 00 04 00 00 00 00"),
		f:    Frame{Kind: Reply, Flags: FlagReject | FlagEnhanced, Rev: 2, PrivateData: []byte{}},
	},
	{
		name: "ibm_request_markers_crc",
		wire: cat("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 c0 01 00 07 61 63 74 69 76 65 00"),
		f:    Frame{Kind: Request, Flags: FlagMarker | FlagCRC, Rev: 1, PrivateData: []byte("active\x00")},
	},
	{
		name: "ibm_reply_markers_crc",
		wire: cat("4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 c0 01 00 08 70 61 73 73 69 76 65 00"),
		f:    Frame{Kind: Reply, Flags: FlagMarker | FlagCRC, Rev: 1, PrivateData: []byte("passive\x00")},
	},
	{
		name: "smb_request_rev1_msird",
		wire: cat("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 40 01 00 08 00 00 00 10 00 00 00 00"),
		f:    Frame{Kind: Request, Flags: FlagCRC, Rev: 1, PrivateData: h("00 00 00 10 00 00 00 00")},
	},
	{
		name: "rev2_p2p_rtr",
		wire: cat("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 50 02 00 04 c0 80 c0 10"),
		f:    Frame{Kind: Request, Flags: FlagCRC | FlagEnhanced, Rev: 2, IRDORD: IRDORD{PeerToPeer: true, RTR: RTRSend | RTRWrite | RTRRead, IRD: 128, ORD: 16}, PrivateData: []byte{}},
	},
}

// Golden FPDUs without markers: the whole FPDU, its ULPDU and CRC setting.
var fpduVectors = []struct {
	name string
	wire []byte
	crc  bool
}{
	{"s6.3_send_28", cat("00 2e 41 43 00 00 00 00 00 00 00 00 00 00 00 01",
		"00 00 00 00 00 01 02 03 04 05 06 07 08 09 0a 0b",
		"0c 0d 0e 0f 10 11 12 13 14 15 16 17 18 19 1a 1b",
		"9a f0 8f 8c"), true},
	{"s6.3_send_28_nocrc", cat("00 2e 41 43 00 00 00 00 00 00 00 00 00 00 00 01",
		"00 00 00 00 00 01 02 03 04 05 06 07 08 09 0a 0b",
		"0c 0d 0e 0f 10 11 12 13 14 15 16 17 18 19 1a 1b",
		"00 00 00 00"), false},
	{"s6.4_write_pad3", cat("00 1b c1 40 3a 2b 1c 00 00 00 7f 00 00 00 10 00",
		"68 65 6c 6c 6f 2c 20 69 57 41 52 50 21 00 00 00 29 31 7c 54"), true},
	{"s6.5_read_request", cat("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01",
		"00 00 00 00 00 00 a1 01 00 00 00 00 00 00 20 00",
		"00 00 10 00 3a 2b 1c 00 00 00 7f 00 00 00 10 00",
		"b1 77 2c a0"), true},
	{"s6.6_terminate_rfc", cat("00 2a 41 47 00 00 00 00 00 00 00 02 00 00 00 01",
		"00 00 00 00 12 02 c0 00 00 76 41 43 00 00 00 00",
		"00 00 00 00 00 00 00 05 00 00 00 00 a5 00 27 95"), true},
	{"s6.6_terminate_siw", cat("00 2a 41 47 00 00 00 00 00 00 00 02 00 00 00 01",
		"00 00 00 00 21 02 03 00 00 64 41 43 00 00 00 00",
		"00 00 00 00 00 00 00 05 00 00 00 00 fb f2 07 32"), true},
	{"s6.7_rtr_write", cat("00 0e c1 40 00 00 00 01 00 00 00 00 00 00 00 00 eb d3 4c 5f"), true},
	{"s6.7_rtr_read", cat("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01",
		"00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
		"00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 00",
		"ba 10 e3 c9"), true},
	{"lab_nfs_null_call_crc", cat("00 56 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00",
		"4c 41 42 01 00 00 00 01 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
		"4c 41 42 01 00 00 00 00 00 00 00 02 00 01 86 a3 00 00 00 03 00 00 00 00",
		zeros(16), "f1 f6 dd 2b"), true},
	{"lab_nfs_null_reply_crc", cat("00 46 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00",
		"4c 41 42 01 00 00 00 01 00 00 00 40 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
		"4c 41 42 01 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
		"bd 47 c6 9c"), true},
	{"lab_nfs_null_call_nocrc", cat("00 56 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00",
		"4c 41 42 01 00 00 00 01 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
		"4c 41 42 01 00 00 00 00 00 00 00 02 00 01 86 a3 00 00 00 03 00 00 00 00",
		zeros(16), "00 00 00 00"), false},
}

// Golden FPDUs with markers: the stream offset of the first byte (relative
// to the first marker) and the raw bytes.
var markerVectors = []struct {
	name  string
	pos   uint32
	wire  []byte
	ulpdu []byte
}{
	{
		// RFC 5044 figure 5: a marker at
		// the start of the stream, then a Send with MSN 1 and 24 zero bytes.
		name:  "s6.8_rfc5044_fig5",
		pos:   0,
		wire:  cat("00 00 00 00 00 2a 41 43", zeros(8), "00 00 00 01", zeros(4), zeros(24), "52 23 99 83"),
		ulpdu: cat("41 43", zeros(8), "00 00 00 01", zeros(4), zeros(24)),
	},
	{
		// RFC 5044 figure 6: MSN 2, a marker 20 bytes into the
		// FPDU (FPDUPTR 0x14), covered by the CRC.
		name:  "s6.8_rfc5044_fig6",
		pos:   MarkerInterval - 20,
		wire:  cat("00 2a 41 43", zeros(8), "00 00 00 02", zeros(4), "00 00 00 14", zeros(24), "84 92 58 98"),
		ulpdu: cat("41 43", zeros(8), "00 00 00 02", zeros(4), zeros(24)),
	},
	{
		// IBM 2008 capture snd_recv_crc_mrkr, frame 7: first FPDU after
		// the Reply, a leading marker, CRC on.
		name:  "ibm_snd_recv_crc_mrkr_frame7",
		pos:   0,
		wire:  cat("00 00 00 00 00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 04 00 00 01 00 00 00 00 b0 05 08 00 00 00 00 5e 87 89 d7"),
		ulpdu: cat("41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 04 00 00 01 00 00 00 00 b0 05 08 00 00 00 00"),
	},
}
