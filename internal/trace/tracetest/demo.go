package tracetest

import (
	"bytes"
	"io"
	"net/netip"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// FrameBytes returns the encoding of an MPA Request or Reply.
func FrameBytes(f mpa.Frame) []byte {
	b, err := f.Append(nil)
	if err != nil {
		panic(err)
	}
	return b
}

// FPDU returns the FPDU (without markers) carrying segment s.
func FPDU(crc bool, s *ddp.Segment) []byte { return mpa.AppendFPDU(nil, crc, s.Append(nil)) }

// FPDUs returns the FPDUs carrying the segments, concatenated.
func FPDUs(crc bool, segs []ddp.Segment) []byte {
	var b []byte
	for i := range segs {
		b = append(b, FPDU(crc, &segs[i])...)
	}
	return b
}

// SendSegments splits the untagged message msg of opcode op (a Send
// variant) into DDP segments on QN 0 carrying at most max payload bytes each.
func SendSegments(op ddp.Opcode, msn uint32, msg []byte, max int) []ddp.Segment {
	var segs []ddp.Segment
	for mo := 0; ; {
		end := min(mo+max, len(msg))
		segs = append(segs, ddp.Segment{Header: ddp.Untagged(op, end == len(msg), ddp.QNSend, msn, uint32(mo)), Payload: msg[mo:end]})
		if end == len(msg) {
			return segs
		}
		mo = end
	}
}

// RPCRDMA returns a transport header followed by an RPC message.
func RPCRDMA(h *wire.Header, rpcMsg []byte) []byte { return append(h.Append(nil), rpcMsg...) }

// Call returns an RPC call header with AUTH_NONE credential and verifier
// (or cred, if given) followed by args.
func Call(xid, prog, vers, proc uint32, cred *rpc.OpaqueAuth, args []byte) []byte {
	h := rpc.CallHeader{XID: xid, RPCVers: rpc.RPCVersion, Prog: prog, Vers: vers, Proc: proc}
	if cred != nil {
		h.Cred = *cred
	}
	return append(h.Append(nil), args...)
}

// Reply returns an accepted, successful RPC reply header followed by res.
func Reply(xid uint32, res []byte) []byte {
	h := rpc.ReplyHeader{XID: xid, Stat: rpc.MsgAccepted, AcceptStat: rpc.Success}
	return append(h.Append(nil), res...)
}

// NullCall returns one FPDU carrying a Send (MSN msn) with an RDMA_MSG
// header and an NFSv3 NULL call, both with the given xid.
func NullCall(crc bool, xid, msn uint32) []byte {
	h := &wire.Header{XID: xid, Vers: wire.Version1, Credits: 8, Proc: wire.RDMA_MSG}
	msg := RPCRDMA(h, Call(xid, NFSProg, NFSv3, 0, nil, nil))
	return FPDUs(crc, SendSegments(ddp.OpSend, msn, msg, 1<<16))
}

// The demo's parameters.
const (
	XIDWrite   = 0x4c414201
	XIDRead    = 0x4c414202
	XIDGetattr = 0x4c414203
	XIDV3      = 0x4c414204
	XIDV2      = 0x4c414205
	Credits    = 32

	NFSProg    = 100003
	NFSv3      = 3
	NFSGetattr = 1
	NFSRead    = 6
	NFSWrite   = 7

	ReadChunkHandle  = 0x11110001
	ReadChunkOffset  = 0x1000
	WriteChunkHandle = 0x22220001
	WriteChunkOffset = 0x2000
	ReadResultHandle = 0x33330001
	ReadResultOffset = 0x3000
	ReplyChunkHandle = 0x44440001
	ReplyChunkOffset = 0x4000
	ReadSinkSTag     = 0x55550001
	DataLen          = 64
)

// Demo describes the capture WriteDemo writes.
type Demo struct {
	Client, Server netip.AddrPort
	// Client2 and Server2 are the second connection's addresses.
	Client2, Server2 netip.AddrPort
	// Frames maps each step to the frame holding its last byte.
	Frames map[string]int
	// WritePosition is the read chunk's position in the WRITE call.
	WritePosition uint32
	// Stream0 holds the bytes of each direction of the first connection.
	Stream0 [2][]byte
}

// WriteDemo writes the demo capture to w and describes it. Its steps, in
// order, are the keys of Demo.Frames. The first connection
// (client 10.0.0.1:40001, server 10.0.0.2:20049, MPA Rev 2 with the
// IRD/ORD word and RFC 8797 private data, CRC on) carries:
//
//	request, reply        the MPA handshake
//	write-call            RDMA_MSG NFSv3 WRITE with a read list (the data),
//	                      a write list and a reply chunk
//	read-request          server RDMA Read Request for the read chunk
//	read-response         client RDMA Read Response with the data
//	write-reply           RDMA_MSG reply echoing the chunks, lengths 0
//	read-call             RDMA_MSG NFSv3 READ with a write chunk
//	rdma-write            server RDMA Write of the data into it
//	read-reply            RDMA_MSG reply listing the chunk, result reduced
//	getattr-call-1, -2    NFSv3 GETATTR with AUTH_SYS, one Send split in 3
//	                      DDP segments: two FPDUs in one TCP segment, then
//	                      the last one
//	getattr-reply         Send with Invalidate
//	v3-call               a header with rdma_vers 3
//	err-vers              RDMA_ERROR ERR_VERS low 1 high 2
//	v2-call               Version Two RDMA_MSG NFSv4 NULL call
//	v2-reply              its reply, as a Send with Solicited Event
//	terminate             server Terminate (RFC 5040 layout)
//
// The second connection (client 10.0.0.1:40002, server 10.0.0.2:20050, MPA
// Rev 1, no CRC, no private data) carries:
//
//	request2, reply2      the handshake
//	hello                 a Send whose payload is not RPC-over-RDMA
//	terminate2            server Terminate in the Linux siw layout
func WriteDemo(w io.Writer) (*Demo, error) {
	d := &Demo{
		Client:  netip.MustParseAddrPort("10.0.0.1:40001"),
		Server:  netip.MustParseAddrPort("10.0.0.2:20049"),
		Client2: netip.MustParseAddrPort("10.0.0.1:40002"),
		Server2: netip.MustParseAddrPort("10.0.0.2:20050"),
		Frames:  map[string]int{},
	}
	p := NewPcap(w)
	s := &demoStream{d: d, c: p.Connect(d.Client, d.Server)}
	pd := wire.PrivateData{RemoteInvalidation: true, SendSize: 4096, ReceiveSize: 4096}.Append(nil)
	s.send("request", 0, FrameBytes(mpa.Frame{Kind: mpa.Request, Flags: mpa.FlagCRC | mpa.FlagEnhanced, Rev: 2,
		IRDORD: mpa.IRDORD{IRD: 16, ORD: 16}, PrivateData: pd}))
	s.send("reply", 1, FrameBytes(mpa.Frame{Kind: mpa.Reply, Flags: mpa.FlagCRC | mpa.FlagEnhanced, Rev: 2,
		IRDORD: mpa.IRDORD{IRD: 16, ORD: 8}, PrivateData: pd}))

	fh := xdr.AppendOpaque(nil, bytes.Repeat([]byte{0xfe}, 32))
	data := bytes.Repeat([]byte("0123456789abcdef"), DataLen/16)
	s.write(fh, data)
	s.read(fh, data)
	if err := s.getattr(fh); err != nil {
		return nil, err
	}
	s.versions()
	term := ddp.Segment{Header: ddp.Untagged(ddp.OpTerminate, true, ddp.QNTerminate, 1, 0),
		Terminate: ddp.Terminate{Cause: ddp.CauseRDMAPUnexpectedOpcode, HdrCt: ddp.HdrCtM | ddp.HdrCtD, Layout: ddp.LayoutRFC,
			SegmentLen: 100, DDPHeader: ddp.Untagged(ddp.OpSend, true, ddp.QNSend, 6, 0)}}
	s.send("terminate", 1, FPDU(demoCRC, &term))

	writeSecondDemoConn(d, p.Connect(d.Client2, d.Server2))
	return d, p.Err()
}

// demoCRC is whether the demo's first connection runs with MPA CRC.
const demoCRC = true

// demoStream writes the steps of the demo's first connection.
type demoStream struct {
	d *Demo
	c *Conn
}

// send writes b in direction dir as the step name.
func (s *demoStream) send(name string, dir int, b []byte) {
	s.d.Frames[name] = s.c.Send(dir, b)
	s.d.Stream0[dir] = append(s.d.Stream0[dir], b...)
}

// sendRPC writes msg, an RPC-over-RDMA message, as the step name: one
// Send of opcode op (MSN msn) in direction dir.
func (s *demoStream) sendRPC(name string, dir int, op ddp.Opcode, msn uint32, msg []byte) {
	s.send(name, dir, FPDUs(demoCRC, SendSegments(op, msn, msg, 1<<16)))
}

// write is the NFSv3 WRITE of data to the file fh (RFC 1813 section
// 3.3.7): the call, with a read list (the data), a write list and a
// reply chunk; the server's RDMA Read of the data; the reply, which
// echoes the write chunk with length 0.
func (s *demoStream) write(fh, data []byte) {
	// WRITE3args: fh, offset, count, stable, data; the data travels in a
	// read chunk, so the inline message stops after its length word,
	// which is the chunk's position.
	args := append(bytes.Clone(fh), 0, 0, 0, 0, 0, 0, 0, 0)
	args = xdr.AppendUint32(args, DataLen)
	args = xdr.AppendUint32(args, 2) // FILE_SYNC
	args = xdr.AppendUint32(args, DataLen)
	call := Call(XIDWrite, NFSProg, NFSv3, NFSWrite, nil, args)
	s.d.WritePosition = uint32(len(call))
	h := &wire.Header{XID: XIDWrite, Vers: wire.Version1, Credits: Credits, Proc: wire.RDMA_MSG}
	h.Chunks.Reads = wire.ReadList{{Position: s.d.WritePosition, Segment: wire.Segment{Handle: ReadChunkHandle, Length: DataLen, Offset: ReadChunkOffset}}}
	h.Chunks.Writes = wire.WriteList{{{Handle: WriteChunkHandle, Length: 4096, Offset: WriteChunkOffset}}}
	h.Chunks.Reply = wire.ReplyChunk{Present: true, Chunk: wire.WriteChunk{{Handle: ReplyChunkHandle, Length: 1024, Offset: ReplyChunkOffset}}}
	s.sendRPC("write-call", 0, ddp.OpSend, 1, RPCRDMA(h, call))

	rr := ddp.Segment{Header: ddp.Untagged(ddp.OpRDMAReadRequest, true, ddp.QNReadRequest, 1, 0),
		ReadRequest: ddp.ReadRequest{SinkSTag: ReadSinkSTag, SinkTO: 0, Size: DataLen, SourceSTag: ReadChunkHandle, SourceTO: ReadChunkOffset}}
	s.send("read-request", 1, FPDU(demoCRC, &rr))
	resp := ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAReadResponse, true, ReadSinkSTag, 0), Payload: data}
	s.send("read-response", 0, FPDU(demoCRC, &resp))

	// WRITE3res: status, wcc_data (two absent attributes), count,
	// committed, verifier.
	res := xdr.AppendUint32(nil, 0)
	res = xdr.AppendUint32(res, 0)
	res = xdr.AppendUint32(res, 0)
	res = xdr.AppendUint32(res, DataLen)
	res = xdr.AppendUint32(res, 2)
	res = append(res, "verifier"...)
	h = &wire.Header{XID: XIDWrite, Vers: wire.Version1, Credits: Credits, Proc: wire.RDMA_MSG}
	h.Chunks.Writes = wire.WriteList{{{Handle: WriteChunkHandle, Length: 0, Offset: WriteChunkOffset}}}
	s.sendRPC("write-reply", 1, ddp.OpSend, 1, RPCRDMA(h, Reply(XIDWrite, res)))
}

// read is the NFSv3 READ of data from the file fh: the call, with a
// write chunk for the result's data; the server's RDMA Write of the data
// into it; the reply, which lists the chunk.
func (s *demoStream) read(fh, data []byte) {
	// READ3args: fh, offset, count.
	args := append(bytes.Clone(fh), 0, 0, 0, 0, 0, 0, 0, 0)
	args = xdr.AppendUint32(args, DataLen)
	h := &wire.Header{XID: XIDRead, Vers: wire.Version1, Credits: Credits, Proc: wire.RDMA_MSG}
	h.Chunks.Writes = wire.WriteList{{{Handle: ReadResultHandle, Length: DataLen, Offset: ReadResultOffset}}}
	s.sendRPC("read-call", 0, ddp.OpSend, 2, RPCRDMA(h, Call(XIDRead, NFSProg, NFSv3, NFSRead, nil, args)))
	wr := ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, true, ReadResultHandle, ReadResultOffset), Payload: data}
	s.send("rdma-write", 1, FPDU(demoCRC, &wr))
	// READ3res, reduced: status, post_op_attr absent, count, eof, data
	// length (the data is in the write chunk).
	res := xdr.AppendUint32(nil, 0)
	res = xdr.AppendUint32(res, 0)
	res = xdr.AppendUint32(res, DataLen)
	res = xdr.AppendUint32(res, 1)
	res = xdr.AppendUint32(res, DataLen)
	h = &wire.Header{XID: XIDRead, Vers: wire.Version1, Credits: Credits, Proc: wire.RDMA_MSG}
	h.Chunks.Writes = wire.WriteList{{{Handle: ReadResultHandle, Length: DataLen, Offset: ReadResultOffset}}}
	s.sendRPC("read-reply", 1, ddp.OpSend, 2, RPCRDMA(h, Reply(XIDRead, res)))
}

// getattr is the NFSv3 GETATTR of fh with AUTH_SYS, its call one Send
// split over three DDP segments (the first two FPDUs in one TCP segment),
// its reply a Send with Invalidate.
func (s *demoStream) getattr(fh []byte) error {
	sys := rpc.AuthSysParms{Stamp: 1, MachineName: "client", UID: 1000, GID: 1000, GIDs: []uint32{1000, 10}}
	cred, err := sys.Cred()
	if err != nil {
		return err
	}
	h := &wire.Header{XID: XIDGetattr, Vers: wire.Version1, Credits: Credits, Proc: wire.RDMA_MSG}
	msg := RPCRDMA(h, Call(XIDGetattr, NFSProg, NFSv3, NFSGetattr, &cred, fh))
	segs := SendSegments(ddp.OpSend, 3, msg, (len(msg)/3+4)&^3)
	if len(segs) != 3 {
		panic("tracetest: GETATTR not split in 3")
	}
	s.send("getattr-call-1", 0, FPDUs(demoCRC, segs[:2]))
	s.send("getattr-call-2", 0, FPDUs(demoCRC, segs[2:]))
	// GETATTR3res: status, fattr3 (84 bytes, a regular file).
	res := xdr.AppendUint32(nil, 0)
	res = xdr.AppendUint32(res, 1)
	res = append(res, make([]byte, 80)...)
	h = &wire.Header{XID: XIDGetattr, Vers: wire.Version1, Credits: Credits, Proc: wire.RDMA_MSG}
	segs = SendSegments(ddp.OpSendInvalidate, 3, RPCRDMA(h, Reply(XIDGetattr, res)), 1<<16)
	segs[0].InvalidateSTag = ReadChunkHandle
	s.send("getattr-reply", 1, FPDUs(demoCRC, segs))
	return nil
}

// versions is a Version 3 header, answered with ERR_VERS, then a
// Version Two call and its reply, a Send with Solicited Event.
func (s *demoStream) versions() {
	h := &wire.Header{XID: XIDV3, Vers: 3, Credits: Credits, Proc: wire.RDMA_MSG}
	s.sendRPC("v3-call", 0, ddp.OpSend, 4, RPCRDMA(h, Call(XIDV3, NFSProg, NFSv3, 0, nil, nil)))
	h = &wire.Header{XID: XIDV3, Vers: wire.Version1, Credits: Credits, Proc: wire.RDMA_ERROR, Error: wire.ErrorBody{Code: wire.ErrVers, Low: 1, High: 2}}
	s.sendRPC("err-vers", 1, ddp.OpSend, 4, h.Append(nil))

	h = &wire.Header{XID: XIDV2, Vers: wire.Version2, Credits: Credits, Proc: wire.RDMA_MSG}
	s.sendRPC("v2-call", 0, ddp.OpSend, 5, RPCRDMA(h, Call(XIDV2, NFSProg, 4, 0, nil, nil)))
	s.sendRPC("v2-reply", 1, ddp.OpSendSE, 5, RPCRDMA(h, Reply(XIDV2, nil)))
}

// writeSecondDemoConn writes the demo's second connection on c: an MPA
// Rev 1 handshake without CRC or private data, a Send that is not
// RPC-over-RDMA, and a Terminate in the Linux siw layout.
func writeSecondDemoConn(d *Demo, c *Conn) {
	d.Frames["request2"] = c.Send(0, FrameBytes(mpa.Frame{Kind: mpa.Request, Rev: 1}))
	d.Frames["reply2"] = c.Send(1, FrameBytes(mpa.Frame{Kind: mpa.Reply, Rev: 1}))
	hello := ddp.Segment{Header: ddp.Untagged(ddp.OpSend, true, ddp.QNSend, 1, 0), Payload: []byte("hello, iWARP")}
	d.Frames["hello"] = c.Send(0, FPDU(false, &hello))
	term2 := ddp.Segment{Header: ddp.Untagged(ddp.OpTerminate, true, ddp.QNTerminate, 1, 0),
		Terminate: ddp.Terminate{Cause: ddp.CauseDDPUntaggedInvalidMSN, HdrCt: ddp.HdrCtM | ddp.HdrCtD, Layout: ddp.LayoutSiw,
			SegmentLen: 12, DDPHeader: hello.Header}}
	d.Frames["terminate2"] = c.Send(1, FPDU(false, &term2))
}
