package nfs

import (
	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// ArgLimit says how many bytes of DDP-eligible arguments (RFC 8267
// Section 4.1) a call to this server may carry in read chunks, for
// rpcrdma.Bounds.ArgLimit, so that a responder refuses a larger pull
// before it allocates anything: a WRITE's data up to the server's maximum
// I/O size (FSINFO's wtmax) with its XDR pad, a SYMLINK's target up to
// nfs3.MaxPath; no other NFS or MOUNT procedure has DDP-eligible
// arguments (negative: none). Other programs get 0, no opinion. It is
// safe for concurrent use.
func (s *Server) ArgLimit(prog, vers, proc uint32) int64 {
	switch {
	case prog == nfs3.Program && vers == nfs3.Version && nfs3.Proc(proc) == nfs3.ProcWrite:
		return int64(s.maxIO+3) &^ 3
	case prog == nfs3.Program && vers == nfs3.Version && nfs3.Proc(proc) == nfs3.ProcSymlink:
		return nfs3.MaxPath // a multiple of 4: no pad beyond it
	case prog == nfs3.Program, prog == mount.Program:
		return -1
	}
	return 0
}
