package nfs4_test

import (
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// A client reads from a file: it builds a SEQUENCE, PUTFH, READ COMPOUND,
// asks where its READ data goes, and decodes the reply into the result
// values it passes, the READ's data landing in its own buffer.
func Example() {
	args := nfs4.CompoundArgs{MinorVersion: nfs4.MinorVersion, Ops: []nfs4.ArgOp{
		&nfs4.SequenceArgs{SessionID: nfs4.SessionID{1}, SequenceID: 7, SlotID: 0},
		&nfs4.PutFHArgs{FH: nfs4.FileHandle{0xfe, 0xed}},
		&nfs4.ReadArgs{StateID: nfs4.AnonymousStateID, Offset: 0, Count: 4096},
	}}
	var call rpc.Body
	args.Append(&call) // the body of procedure ProcCompound, Program, Version
	io, _ := args.IO()
	fmt.Println(&args, "| offer a write chunk of", io.Count, "bytes for op", io.Index)

	// What the server would answer.
	reply := nfs4.CompoundRes{Ops: []nfs4.ResOp{
		&nfs4.SequenceRes{SessionID: nfs4.SessionID{1}, SequenceID: 7, TargetHighestSlotID: 15},
		&nfs4.PutFHRes{},
		&nfs4.ReadRes{EOF: true, Data: []byte("hello")},
	}}
	var replyBody rpc.Body
	reply.Append(&replyBody)

	buf := make([]byte, 4096)
	seq, read := &nfs4.SequenceRes{}, &nfs4.ReadRes{Buf: buf}
	res := nfs4.CompoundRes{Ops: []nfs4.ResOp{seq, &nfs4.PutFHRes{}, read}}
	d := rpc.NewBodyDecoder(replyBody)
	if err := res.Decode(&d); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(&res)
	fmt.Printf("%q eof=%v, slots up to %d\n", read.Data, read.EOF, seq.TargetHighestSlotID)
	// Output:
	// COMPOUND SEQUENCE PUTFH READ | offer a write chunk of 4096 bytes for op 2
	// NFS4_OK: SEQUENCE NFS4_OK, PUTFH NFS4_OK, READ NFS4_OK
	// "hello" eof=true, slots up to 15
}
