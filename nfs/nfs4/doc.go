// Package nfs4 is the XDR codec of NFS version 4.1 (RFC 8881, whose XDR
// is RFC 5662): COMPOUND and CB_COMPOUND with the operations a client
// needs to run a session and work on files, their arguments and results
// both ways (a client encodes what a server decodes, and back), over
// package rpc's Body so that the data RFC 8267 makes DDP-eligible can
// travel by direct data placement on RPC-over-RDMA and inline on TCP
// alike. It does no I/O.
//
// Tour:
//   - compound.go: Op, the ArgOp and ResOp interfaces every operation's
//     arguments and results implement, CompoundArgs and CompoundRes, and
//     UnknownOpError.
//   - io.go: READ, WRITE and COMMIT, and the facts a transport needs:
//     which items are DDP-eligible (RFC 8267 Section 5.1; Op.DDPArg,
//     Op.DDPResult) and a COMPOUND's one READ or WRITE (CompoundArgs.IO);
//     replysize.go: how large its reply can be (CompoundArgs.ReplySize).
//   - stat.go: Stat (nfsstat4), its words and its Error form.
//   - types.go: the program numbers, the limits a decoder enforces, and
//     the shared types: FileHandle, StateID, Verifier, SessionID, Bitmap,
//     Time, ChangeInfo.
//   - attr.go: fattr4 as Attr (what GETATTR and READDIR return) and
//     SetAttr (what SETATTR, CREATE and OPEN set).
//   - session.go: EXCHANGE_ID, CREATE_SESSION, DESTROY_SESSION,
//     DESTROY_CLIENTID, BIND_CONN_TO_SESSION, SEQUENCE, RECLAIM_COMPLETE.
//   - fh.go: PUTROOTFH, PUTFH, GETFH, SAVEFH, RESTOREFH, LOOKUP, LOOKUPP,
//     GETATTR, ACCESS, SETATTR, SECINFO_NO_NAME.
//   - dir.go: READDIR, READLINK, CREATE, REMOVE, RENAME, LINK.
//   - open.go: OPEN, CLOSE, DELEGRETURN, TEST_STATEID, FREE_STATEID.
//   - callback.go: CB_COMPOUND with CB_SEQUENCE, CB_RECALL,
//     CB_RECALL_ANY, CB_GETATTR, CB_RECALL_SLOT.
//
// A client builds a COMPOUND from operation values and decodes the reply
// into the result values it expects:
//
//	args := nfs4.CompoundArgs{MinorVersion: nfs4.MinorVersion, Ops: []nfs4.ArgOp{
//		&nfs4.SequenceArgs{SessionID: sid, SequenceID: seq, SlotID: slot},
//		&nfs4.PutFHArgs{FH: fh},
//		&nfs4.ReadArgs{StateID: stateid, Offset: off, Count: uint32(len(buf))},
//	}}
//	var call rpc.Body
//	args.Append(&call) // then call procedure ProcCompound of Program, Version
//	...
//	seqRes, readRes := &nfs4.SequenceRes{}, &nfs4.ReadRes{Buf: buf}
//	res := nfs4.CompoundRes{Ops: []nfs4.ResOp{seqRes, &nfs4.PutFHRes{}, readRes}}
//	d := rpc.NewBodyDecoder(reply)
//	if err := res.Decode(&d); err != nil { ... }
//	if res.Status != nfs4.OK { ... } // the last of res.Ops failed with it
//
// Every argument and result type has Append(*rpc.Body) and
// Decode(*rpc.BodyDecoder) error; a COMPOUND writes each operation's
// number before its arguments or results. Decode does not copy: file
// handles, opaque data and owners alias the decoder's buffer and stay
// valid as long as it does; names, strings and bitmaps are copied. Decode
// returns the decoder's sticky error, and every variable-length item is
// checked against a maximum (FHSize, MaxName, MaxPath, MaxData, MaxOps,
// MaxBitmapWords, OpaqueLimit and the others in types.go) and against the
// bytes remaining before anything is allocated for it. Decode checks the
// whole message only when the caller then calls the decoder's Done.
//
// The results of an operation are a union on its status (RFC 8881
// Section 16.2): a result type holds the fields of the arm the status
// selects, and Append and Decode use those. Other unions (open_claim4,
// createhow4, open_delegation4, createtype4) are a discriminant field
// with the fields of every arm, each documented with the arms that use
// it.
//
// XDR gives no length to an operation, so a COMPOUND holding one this
// codec does not decode (LOCK, LAYOUTGET, ...) fails with an
// *UnknownOpError naming it. Likewise an attribute this codec does not
// know in a fattr4 fails the decode when a known attribute follows it,
// and is skipped when none does (see Attr). State protection other than
// SP4_NONE and RPCSEC_GSS callback security are not decoded either.
package nfs4
