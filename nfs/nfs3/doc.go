// Package nfs3 is the XDR codec of NFS version 3 (RFC 1813): the arguments
// and results of its 22 procedures and the types they share, over package
// rpc's Body so that the data RFC 8267 makes DDP-eligible can travel by
// direct data placement on RPC-over-RDMA and inline on TCP alike. It does
// no I/O; the client and the server are in package nfs.
//
// Tour:
//   - proc.go: Program, Version, Proc and the per-procedure facts a
//     transport needs: which items are DDP-eligible (RFC 8267 Section 4)
//     and how large a reply can be.
//   - stat.go: Stat (nfsstat3) and its Error form.
//   - attr.go: fattr3, post_op_attr, wcc_data, sattr3 and the other shared
//     types of RFC 1813 Section 2.6.
//   - one file per group of procedures: getattr.go (GETATTR, SETATTR,
//     ACCESS), lookup.go (LOOKUP, READLINK), io.go (READ, WRITE, COMMIT),
//     create.go (CREATE, MKDIR, SYMLINK, MKNOD), remove.go (REMOVE, RMDIR,
//     RENAME, LINK), readdir.go (READDIR, READDIRPLUS), fsinfo.go (FSSTAT,
//     FSINFO, PATHCONF).
//
// Every argument and result type has Append(*rpc.Body), which appends its
// encoding (RFC 1813's XDR), and Decode(*rpc.BodyDecoder) error, which
// decodes it without copying: file handles, opaque data and verifiers
// alias the decoder's buffer and stay valid as long as it does; names and
// paths are Go strings and copied. Decode returns the decoder's sticky
// error, and every variable-length item is checked against a maximum
// (FHSize, MaxName, MaxPath, MaxData) and the bytes remaining before
// anything is allocated for it. Decode checks the whole message only when
// the caller then calls the decoder's Done.
//
// The results of a procedure are a union on its status (RFC 1813 Section
// 3.3): a result type holds the fields of both arms, and Append and Decode
// use those of the arm Status selects.
package nfs3
