package wire

import (
	"encoding/hex"
	"strings"
)

// headerVector is one transport header on the wire, with what it decodes to.
// hex is the whole Send: the header, then, after a '|', the RPC message if
// one follows.
type headerVector struct {
	name string
	hex  string
	want Header
	// dir is the direction the message travels in, for Validate; rule is
	// what Validate reports with default Limits (0: the header is valid).
	dir  Direction
	rule Rule
}

// unhex decodes hex written in words, ignoring spaces, newlines and '|'.
func unhex(s string) []byte {
	s = strings.NewReplacer(" ", "", "\n", "", "\t", "", "|", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// rpcCall is the start of an RPC call message (RFC 5531): xid, CALL, rpcvers
// 2, and program 100003 version 3 procedure 0, AUTH_NONE twice. It stands for
// the payload after the hand-built RDMA_MSG vectors.
const rpcCall = "1a2b3c4d 00000000 00000002 000186a3 00000003 00000000 00000000 00000000 00000000 00000000"

// v1Vectors are hand-derived from the Version One XDR (RFC 5666 section 4.3,
// draft-ietf-nfsv4-rpcrdma-01 section 4.2): every optional pointer and
// linked-list link is one discriminant word, segments are handle, length and
// a two-word offset.
var v1Vectors = []headerVector{
	{
		name: "seed004-4.2-rdma-msg-no-chunks",
		hex: "1a2b3c4d 00000001 00000080 00000000" + // xid, vers 1, credits 128, RDMA_MSG
			"00000000 00000000 00000000" + // no reads, no writes, no reply chunk
			"|" + rpcCall,
		want: Header{XID: 0x1a2b3c4d, Vers: 1, Credits: 128, Proc: RDMA_MSG},
		dir:  DirCall,
	},
	{
		name: "seed004-4.2-rdma-msg-read-list",
		hex: "00000002 00000001 00000020 00000000" +
			"00000001 00000070 00000011 00001000 00000000 00001000" + // pos 112, first segment
			"00000001 00000070 00000012 00001000 00000001 00002000" + // pos 112, second segment, 64-bit offset
			"00000001 000000c8 00000013 00000064 00000000 00003000" + // pos 200, a second chunk
			"00000000" + // end of read list
			"00000000 00000000" +
			"|" + rpcCall,
		want: Header{XID: 2, Vers: 1, Credits: 32, Proc: RDMA_MSG, Chunks: ChunkLists{Reads: ReadList{
			{Position: 112, Segment: Segment{Handle: 0x11, Length: 4096, Offset: 0x1000}},
			{Position: 112, Segment: Segment{Handle: 0x12, Length: 4096, Offset: 0x1_0000_2000}},
			{Position: 200, Segment: Segment{Handle: 0x13, Length: 100, Offset: 0x3000}},
		}}},
		dir: DirCall,
	},
	{
		name: "seed004-4.2-rdma-msg-write-list",
		hex: "00000003 00000001 00000020 00000000" +
			"00000000" + // no reads
			"00000001 00000002" + // write chunk 0, two segments
			"00000021 00001000 00000000 40000000" +
			"00000022 00000800 00000000 40001000" +
			"00000001 00000001" + // write chunk 1, one segment
			"00000023 00000200 ffffffff fffff000" +
			"00000000" + // end of write list
			"00000000" + // no reply chunk
			"|" + rpcCall,
		want: Header{XID: 3, Vers: 1, Credits: 32, Proc: RDMA_MSG, Chunks: ChunkLists{Writes: WriteList{
			{{Handle: 0x21, Length: 4096, Offset: 0x40000000}, {Handle: 0x22, Length: 2048, Offset: 0x40001000}},
			{{Handle: 0x23, Length: 512, Offset: 0xffff_ffff_ffff_f000}},
		}}},
		dir: DirCall,
	},
	{
		name: "seed004-5.1-rdma-nomsg-position-zero",
		hex: "00000005 00000001 00000001 00000001" + // RDMA_NOMSG: a long call
			"00000001 00000000 00000031 00001000 00000000 00000000" + // position zero: the call itself
			"00000001 00000000 00000032 00000388 00000000 00001000" +
			"00000000" +
			"00000000" + // no writes
			"00000001 00000001 00000033 00002000 00002000 00000000", // a reply chunk for a long reply
		want: Header{XID: 5, Vers: 1, Credits: 1, Proc: RDMA_NOMSG, Chunks: ChunkLists{
			Reads: ReadList{
				{Position: 0, Segment: Segment{Handle: 0x31, Length: 4096, Offset: 0}},
				{Position: 0, Segment: Segment{Handle: 0x32, Length: 904, Offset: 0x1000}},
			},
			Reply: ReplyChunk{Present: true, Chunk: WriteChunk{{Handle: 0x33, Length: 8192, Offset: 0x2000_0000_0000}}},
		}},
		dir: DirCall,
	},
	{
		name: "seed004-5.2-rdma-nomsg-reply-chunk",
		hex: "00000004 00000001 00000040 00000001" + // RDMA_NOMSG: a long reply, written
			"00000000 00000000" +
			"00000001 00000001 00000021 000001c4 00000000 30000000",
		want: Header{XID: 4, Vers: 1, Credits: 64, Proc: RDMA_NOMSG, Chunks: ChunkLists{
			Reply: ReplyChunk{Present: true, Chunk: WriteChunk{{Handle: 0x21, Length: 452, Offset: 0x30000000}}},
		}},
		dir: DirReply,
	},
	{
		name: "seed004-4.2-rdma-msgp",
		hex: "00000006 00000001 00000020 00000002" +
			"00001000 00000400" + // rdma_align 4096, rdma_thresh 1024: before the lists
			"00000000 00000000 00000000" +
			"|" + rpcCall,
		want: Header{XID: 6, Vers: 1, Credits: 32, Proc: RDMA_MSGP, Padding: Padding{Align: 4096, Thresh: 1024}},
		dir:  DirCall,
	},
	{
		name: "seed004-3.8-rdma-done",
		hex:  "00000007 00000001 00000020 00000003", // 16 bytes, no body
		want: Header{XID: 7, Vers: 1, Credits: 32, Proc: RDMA_DONE},
	},
	{
		name: "seed004-5.3-rdma-error-err-vers",
		hex:  "00000008 00000001 00000040 00000004 00000001 00000001 00000001",
		want: Header{XID: 8, Vers: 1, Credits: 64, Proc: RDMA_ERROR, Error: ErrorBody{Code: ErrVers, Low: 1, High: 1}},
		dir:  DirReply,
	},
	{
		name: "seed004-5.3-rdma-error-err-chunk",
		hex:  "00000009 00000001 00000040 00000004 00000002",
		want: Header{XID: 9, Vers: 1, Credits: 64, Proc: RDMA_ERROR, Error: ErrorBody{Code: ErrChunk}},
		dir:  DirReply,
	},
	{
		// The default arm of rpc_rdma_error (see ErrorBody.Extra).
		name: "seed004-4.2-rdma-error-default-extra",
		hex: "0000000a 00000001 00000040 00000004 00000007" +
			"00000001 00000002 00000003 00000004 00000005 00000006 00000007 00000008",
		want: Header{XID: 10, Vers: 1, Credits: 64, Proc: RDMA_ERROR, Error: ErrorBody{Code: 7, Extra: [8]uint32{1, 2, 3, 4, 5, 6, 7, 8}}},
		dir:  DirReply,
	},
}

// v2Vectors are hand-derived from the Version Two XDR of
// draft-cel-nfsv4-rpcrdma-version-two-00 section 4.2.
var v2Vectors = []headerVector{
	{
		name: "seed000-4.2-v2-rdma-msg-chunk-lists",
		hex: "00000101 00000002 00000010 00000000" +
			"00000001 00000068 00000041 00002000 00000000 50000000 00000000" + // one read segment
			"00000001 00000001 00000042 00004000 00000000 60000000 00000000" + // one write chunk
			"00000001 00000001 00000043 00001000 00000000 70000000" + // reply chunk
			"|" + rpcCall,
		want: Header{XID: 0x101, Vers: 2, Credits: 16, Proc: RDMA_MSG, Chunks: ChunkLists{
			Reads:  ReadList{{Position: 0x68, Segment: Segment{Handle: 0x41, Length: 8192, Offset: 0x50000000}}},
			Writes: WriteList{{{Handle: 0x42, Length: 16384, Offset: 0x60000000}}},
			Reply:  ReplyChunk{Present: true, Chunk: WriteChunk{{Handle: 0x43, Length: 4096, Offset: 0x70000000}}},
		}},
		dir: DirCall,
	},
	{
		name: "seed000-4.2-v2-rdma-nomsg",
		hex: "00000102 00000002 00000010 00000001" +
			"00000001 00000000 00000044 00002000 00000000 00000000 00000000" +
			"00000000 00000000",
		want: Header{XID: 0x102, Vers: 2, Credits: 16, Proc: RDMA_NOMSG, Chunks: ChunkLists{
			Reads: ReadList{{Position: 0, Segment: Segment{Handle: 0x44, Length: 8192}}},
		}},
		dir: DirCall,
	},
	{
		name: "seed000-4.2-v2-rdma-msgp-reserved",
		hex:  "00000103 00000002 00000010 00000002", // void body
		want: Header{XID: 0x103, Vers: 2, Credits: 16, Proc: RDMA_MSGP},
		rule: RuleReserved,
	},
	{
		name: "seed000-4.2-v2-rdma-done-reserved",
		hex:  "00000104 00000002 00000010 00000003",
		want: Header{XID: 0x104, Vers: 2, Credits: 16, Proc: RDMA_DONE},
		rule: RuleReserved,
	},
	{
		name: "seed000-4.2-v2-rdma-err-vers",
		hex:  "00000105 00000002 00000010 00000004 00000001 00000001 00000002",
		want: Header{XID: 0x105, Vers: 2, Credits: 16, Proc: RDMA_ERROR, Error: ErrorBody{Code: ErrVers, Low: 1, High: 2}},
		dir:  DirReply,
	},
	{
		name: "seed000-4.2-v2-rdma-err-bad-header",
		hex:  "00000106 00000002 00000010 00000004 00000002",
		want: Header{XID: 0x106, Vers: 2, Credits: 16, Proc: RDMA_ERROR, Error: ErrorBody{Code: ErrBadHeader}},
		dir:  DirReply,
	},
	{
		name: "seed000-3.1-v2-rdma-err-inval-option",
		hex:  "00000107 00000002 00000010 00000004 00000003",
		want: Header{XID: 0x107, Vers: 2, Credits: 16, Proc: RDMA_ERROR, Error: ErrorBody{Code: ErrInvalOption}},
		dir:  DirReply,
	},
	{
		name: "seed000-4.2-v2-rdma-optional-payload",
		hex: "00000108 00000002 00000010 00000005" +
			"00000007 00000005 68656c6c 6f000000" + // opttype 7, optinfo "hello" and padding
			"|" + rpcCall,
		want: Header{XID: 0x108, Vers: 2, Credits: 16, Proc: RDMA_OPTIONAL, Optional: Optional{Type: 7, Info: []byte("hello")}},
		dir:  DirCall,
	},
	{
		name: "seed000-4.2-v2-rdma-optional-empty",
		hex:  "00000109 00000002 00000010 00000005 00000009 00000000",
		want: Header{XID: 0x109, Vers: 2, Credits: 16, Proc: RDMA_OPTIONAL, Optional: Optional{Type: 9, Info: []byte{}}},
	},
}

// labVectors are RPC-over-RDMA messages captured between Linux 6.1 (knfsd
// and the NFS client over siw) and a test peer of ours (docs/linux-interop.md
// section 5), the MPA, DDP and CRC framing removed.
var labVectors = []headerVector{
	{
		name: "lab-full-probe-nfsv3-null-call",
		hex: "4c414201 00000001 00000020 00000000 00000000 00000000 00000000" +
			"|4c414201 00000000 00000002 000186a3 00000003 00000000 00000000 00000000 00000000 00000000",
		want: Header{XID: 0x4c414201, Vers: 1, Credits: 32, Proc: RDMA_MSG},
		dir:  DirCall,
	},
	{
		name: "lab-full-knfsd-nfsv3-null-reply",
		hex: "4c414201 00000001 00000040 00000000 00000000 00000000 00000000" +
			"|4c414201 00000001 00000000 00000000 00000000 00000000",
		want: Header{XID: 0x4c414201, Vers: 1, Credits: 64, Proc: RDMA_MSG},
		dir:  DirReply,
	},
	{
		name: "lab-full-probe-write-read-chunk-call",
		hex: "4c414206 00000001 00000020 00000000" +
			"00000001 00000070 00abcd01 00002000 00000000 10000000 00000000" +
			"00000000 00000000" +
			"|4c414206 00000000 00000002 000186a3 00000003 00000007 00000001 0000001c" +
			"6b0248bf 00000005 70726f62 65000000 00000000 00000000 00000000 00000000" +
			"00000000 00000014 01000101 00000000 66a62b61 a9010000 00000000 00000000" +
			"00000000 00002000 00000002 00002000",
		want: Header{XID: 0x4c414206, Vers: 1, Credits: 32, Proc: RDMA_MSG, Chunks: ChunkLists{
			Reads: ReadList{{Position: 0x70, Segment: Segment{Handle: 0xabcd01, Length: 0x2000, Offset: 0x10000000}}},
		}},
		dir: DirCall,
	},
	{
		name: "lab-full-knfsd-write-reply",
		hex: "4c414206 00000001 00000040 00000000 00000000 00000000 00000000" +
			"|4c414206 00000001 00000000 00000000 00000000 00000000 00000000 00000001" +
			"00000001 000001a4 00000001 00000000 00000000 00000000 00000000 00002000" +
			"00000000 00002000 00000000 00000000 00000000 00000000 00000000 000001a9" +
			"6b0248bf 22cf2200 6b0248bf 247a6100 6b0248bf 247a6100 00002000 00000002" +
			"662c4f89 1012d4f9",
		want: Header{XID: 0x4c414206, Vers: 1, Credits: 64, Proc: RDMA_MSG},
		dir:  DirReply,
	},
	{
		name: "lab-full-probe-read-write-chunk-call",
		hex: "4c414207 00000001 00000020 00000000" +
			"00000000" +
			"00000001 00000001 00abcd02 00002000 00000000 20000000 00000000" +
			"00000000" +
			"|4c414207 00000000 00000002 000186a3 00000003 00000006 00000001 0000001c" +
			"6b0248bf 00000005 70726f62 65000000 00000000 00000000 00000000 00000000" +
			"00000000 00000014 01000101 00000000 66a62b61 a9010000 00000000 00000000" +
			"00000000 00002000",
		want: Header{XID: 0x4c414207, Vers: 1, Credits: 32, Proc: RDMA_MSG, Chunks: ChunkLists{
			Writes: WriteList{{{Handle: 0xabcd02, Length: 0x2000, Offset: 0x20000000}}},
		}},
		dir: DirCall,
	},
	{
		// knfsd echoes the write list with the bytes it wrote.
		name: "lab-full-knfsd-read-write-list-reply",
		hex: "4c414207 00000001 00000040 00000000" +
			"00000000" +
			"00000001 00000001 00abcd02 00002000 00000000 20000000 00000000" +
			"00000000" +
			"|4c414207 00000001 00000000 00000000 00000000 00000000 00000000 00000001" +
			"00000001 000001a4 00000001 00000000 00000000 00000000 00000000 00002000" +
			"00000000 00002000 00000000 00000000 00000000 00000000 00000000 000001a9" +
			"6b0248bf 24f47300 6b0248bf 247a6100 6b0248bf 247a6100 00002000 00000001" +
			"00002000",
		want: Header{XID: 0x4c414207, Vers: 1, Credits: 64, Proc: RDMA_MSG, Chunks: ChunkLists{
			Writes: WriteList{{{Handle: 0xabcd02, Length: 0x2000, Offset: 0x20000000}}},
		}},
		dir: DirReply,
	},
	{
		name: "lab-full-probe-readdirplus-reply-chunk-call",
		hex: "4c414208 00000001 00000020 00000000" +
			"00000000 00000000" +
			"00000001 00000001 00abcd03 00010000 00000000 30000000" +
			"|4c414208 00000000 00000002 000186a3 00000003 00000011 00000001 0000001c" +
			"6b0248bf 00000005 70726f62 65000000 00000000 00000000 00000000 00000000" +
			"00000000 00000008 01000100 00000000 00000000 00000000 00000000 00000000" +
			"00000000 00001000 00010000",
		want: Header{XID: 0x4c414208, Vers: 1, Credits: 32, Proc: RDMA_MSG, Chunks: ChunkLists{
			Reply: ReplyChunk{Present: true, Chunk: WriteChunk{{Handle: 0xabcd03, Length: 0x10000, Offset: 0x30000000}}},
		}},
		dir: DirCall,
	},
	{
		// knfsd wrote the reply into the reply chunk (124 + 320 + 8 bytes)
		// and reports 452 in an RDMA_NOMSG header.
		name: "lab-full-knfsd-readdirplus-nomsg-reply",
		hex: "4c414208 00000001 00000040 00000001" +
			"00000000 00000000" +
			"00000001 00000001 00abcd03 000001c4 00000000 30000000",
		want: Header{XID: 0x4c414208, Vers: 1, Credits: 64, Proc: RDMA_NOMSG, Chunks: ChunkLists{
			Reply: ReplyChunk{Present: true, Chunk: WriteChunk{{Handle: 0xabcd03, Length: 452, Offset: 0x30000000}}},
		}},
		dir: DirReply,
	},
	{
		name: "lab-client-linux-nfsv4-null-call",
		hex: "df5403eb 00000001 00000080 00000000 00000000 00000000 00000000" +
			"|df5403eb 00000000 00000002 000186a3 00000004 00000000 00000000 00000000 00000000 00000000",
		want: Header{XID: 0xdf5403eb, Vers: 1, Credits: 128, Proc: RDMA_MSG},
		dir:  DirCall,
	},
	{
		name: "lab-client-linux-nfsv4-setclientid-call",
		hex: "e05403eb 00000001 00000080 00000000 00000000 00000000 00000000" +
			"|e05403eb 00000000 00000002 000186a3 00000004 00000001 00000001 0000001c" +
			"00000000 00000005 67756573 74000000 00000000 00000000 00000000 00000000" +
			"00000000 00000000 00000000 00000001 00000023 18ea3a92 53767136 0000001e" +
			"4c696e75 78204e46 5376342e 30206775 6573742f 31302e30 2e322e31 30300000" +
			"40000000 00000003 74637000 0000000f 31302e30 2e322e31 352e3134 382e3900" +
			"00000001",
		want: Header{XID: 0xe05403eb, Vers: 1, Credits: 128, Proc: RDMA_MSG},
		dir:  DirCall,
	},
	{
		name: "lab-client-probe-proc-unavail-reply",
		hex: "e05403eb 00000001 00000020 00000000 00000000 00000000 00000000" +
			"|e05403eb 00000001 00000000 00000000 00000000 00000003",
		want: Header{XID: 0xe05403eb, Vers: 1, Credits: 32, Proc: RDMA_MSG},
		dir:  DirReply,
	},
}

// split returns the vector's header bytes and payload bytes.
func (v headerVector) split() (hdr, payload []byte) {
	h, p, _ := strings.Cut(v.hex, "|")
	return unhex(h), unhex(p)
}

func allVectors() []headerVector {
	var vs []headerVector
	vs = append(vs, v1Vectors...)
	vs = append(vs, v2Vectors...)
	return append(vs, labVectors...)
}
