package iwarp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

// fuzzSTag stands, in fuzz inputs, for the STag of the harness's region.
const fuzzSTag = 0xa5a5a5a5

// FuzzReceive feeds arbitrary bytes to an established connection, as a
// peer's FPDU stream: nothing may panic, and the connection must end in
// bounded time once the stream does.
func FuzzReceive(f *testing.F) {
	for _, crc := range []bool{false, true} {
		var b []byte
		add := func(seg ddp.Segment) { b = mpa.AppendFPDU(b, crc, seg.Append(nil)) }
		add(ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, true, rtrSTag, 0)})
		add(ddp.Segment{Header: ddp.Untagged(ddp.OpSend, false, 0, 1, 0), Payload: []byte("hello, ")})
		add(ddp.Segment{Header: ddp.Untagged(ddp.OpSend, true, 0, 1, 7), Payload: []byte("world")})
		add(ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, true, fuzzSTag, 1<<32), Payload: []byte("data")})
		add(ddp.Segment{Header: ddp.Untagged(ddp.OpRDMAReadRequest, true, 1, 1, 0),
			ReadRequest: ddp.ReadRequest{SinkSTag: 9, Size: 16, SourceSTag: fuzzSTag, SourceTO: 1 << 32}})
		inv := ddp.Untagged(ddp.OpSendSEInvalidate, true, 0, 2, 0)
		inv.InvalidateSTag = fuzzSTag
		add(ddp.Segment{Header: inv})
		add(ddp.Segment{Header: ddp.Untagged(ddp.OpTerminate, true, 2, 1, 0), Terminate: ddp.Terminate{Cause: ddp.CauseMPACRC}})
		f.Add(crc, b)
	}
	f.Fuzz(func(t *testing.T, crc bool, stream []byte) {
		p, err := New(Options{FirstSendDelay: -1, HandshakeTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ours, theirs := net.Pipe()
		defer theirs.Close()
		go io.Copy(io.Discard, theirs)
		cr := &countReader{r: ours}
		c := newConn(p, connParams{nc: ours, raw: ours, cr: cr, br: newRxBuf(cr, readBufSize),
			mulpdu: 1000, s: settings{sq: 4, rq: 4, ird: 2, ord: 2}, crc: crc})
		m, err := c.Alloc(64, rdma.AccessRemoteWrite|rdma.AccessRemoteRead|rdma.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		// The region's TO is index<<32; put its STag where the input says.
		var tag [4]byte
		binary.BigEndian.PutUint32(tag[:], uint32(m.STag()))
		stream = bytes.ReplaceAll(stream, []byte{0xa5, 0xa5, 0xa5, 0xa5}, tag[:])
		binary.BigEndian.PutUint32(tag[:], m.STag().Index())
		stream = bytes.ReplaceAll(stream, []byte{0, 0, 0, 1, 0, 0, 0, 0}, append(tag[:], 0, 0, 0, 0))
		for i := range 3 {
			if err := c.PostRecv(uint64(i), []rdma.SGE{{MR: m, Offset: 16 * i, Length: 16}}); err != nil {
				t.Fatal(err)
			}
		}
		c.start()
		theirs.SetWriteDeadline(time.Now().Add(time.Second))
		theirs.Write(stream)
		theirs.Close()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("connection did not end after the stream did")
		}
		c.Close()
		if p.Registered() != 0 {
			t.Fatalf("regions left registered")
		}
	})
}
