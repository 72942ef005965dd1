// Package mount is the XDR codec of the MOUNT protocol version 3 (RFC 1813
// Appendix I): the arguments and results of NULL, MNT, DUMP, UMNT, UMNTALL
// and EXPORT. RFC 8267 Section 6 ("Upper-Layer Binding for NFS Auxiliary
// Protocols") keeps MOUNT on TCP, so nothing here is DDP-eligible. It does
// no I/O; the client and the server are in package nfs.
//
// Encoding appends to an rpc.Body; decoding uses rpc.BodyDecoder, aliases
// its buffer for file handles, copies names and paths into strings, and
// bounds every length (MaxPath, MaxName, FHSize) and list by the bytes
// remaining.
package mount

import (
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The MOUNT program and the version this package speaks (RFC 1813
// Appendix I).
const (
	Program = 100005
	Version = 3
)

// Limits of RFC 1813 Appendix I.
const (
	MaxPath = 1024 // MNTPATHLEN
	MaxName = 255  // MNTNAMLEN
	FHSize  = 64   // FHSIZE3
	// MaxFlavors bounds the auth_flavors list of a MNT reply decoded.
	MaxFlavors = 64
)

// Proc is a MOUNT procedure number.
type Proc uint32

// The procedures of RFC 1813 Appendix I.
const (
	ProcNull    Proc = 0
	ProcMnt     Proc = 1
	ProcDump    Proc = 2
	ProcUmnt    Proc = 3
	ProcUmntall Proc = 4
	ProcExport  Proc = 5
)

// String returns the procedure's name in RFC 1813 (MNT, UMNTALL).
func (p Proc) String() string {
	if p <= ProcExport {
		return [...]string{"NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"}[p]
	}
	return "proc(" + strconv.FormatUint(uint64(p), 10) + ")"
}

// Stat is mountstat3 (RFC 1813 Appendix I).
type Stat uint32

// The members of mountstat3.
const (
	OK             Stat = 0
	ErrPerm        Stat = 1
	ErrNoEnt       Stat = 2
	ErrIO          Stat = 5
	ErrAcces       Stat = 13
	ErrNotDir      Stat = 20
	ErrInval       Stat = 22
	ErrNameTooLong Stat = 63
	ErrNotSupp     Stat = 10004
	ErrServerFault Stat = 10006
)

// String returns the status's name in RFC 1813 (MNT3_OK, MNT3ERR_NOENT).
func (s Stat) String() string {
	switch s {
	case OK:
		return "MNT3_OK"
	case ErrPerm:
		return "MNT3ERR_PERM"
	case ErrNoEnt:
		return "MNT3ERR_NOENT"
	case ErrIO:
		return "MNT3ERR_IO"
	case ErrAcces:
		return "MNT3ERR_ACCES"
	case ErrNotDir:
		return "MNT3ERR_NOTDIR"
	case ErrInval:
		return "MNT3ERR_INVAL"
	case ErrNameTooLong:
		return "MNT3ERR_NAMETOOLONG"
	case ErrNotSupp:
		return "MNT3ERR_NOTSUPP"
	case ErrServerFault:
		return "MNT3ERR_SERVERFAULT"
	}
	return "mountstat3(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// Describe says in words what the status means, then gives its name:
// "no such file or directory (MNT3ERR_NOENT)", after the descriptions
// of mountstat3 in RFC 1813 Appendix I.
func (s Stat) Describe() string {
	if w, ok := statWords[s]; ok {
		return w + " (" + s.String() + ")"
	}
	return s.String()
}

var statWords = map[Stat]string{
	OK: "success", ErrPerm: "not owner", ErrNoEnt: "no such file or directory", ErrIO: "I/O error",
	ErrAcces: "permission denied", ErrNotDir: "not a directory", ErrInval: "invalid argument",
	ErrNameTooLong: "file name too long", ErrNotSupp: "operation not supported", ErrServerFault: "a failure on the server",
}

// Error makes a failing status an error for one call.
func (s Stat) Error() string { return "mount: " + s.Describe() }

// DirPath is dirpath (RFC 1813 Appendix I): the argument of MNT and UMNT.
type DirPath string

// Append appends the encoded argument to b.
func (p DirPath) Append(b *rpc.Body) { b.XDR = xdr.AppendString(b.XDR, string(p)) }

// Decode decodes the argument and returns d's sticky error.
func (p *DirPath) Decode(d *rpc.BodyDecoder) error {
	*p = DirPath(d.Str(MaxPath))
	return d.Err()
}

// MntRes is mountres3 (RFC 1813 Appendix I).
type MntRes struct {
	Status  Stat
	FH      []byte           // if OK: fhandle3
	Flavors []rpc.AuthFlavor // if OK: the flavors the server accepts
}

// Append appends the encoded results to b.
func (r *MntRes) Append(b *rpc.Body) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(r.Status))
	if r.Status == OK {
		b.XDR = xdr.AppendOpaque(b.XDR, r.FH)
		b.XDR = xdr.AppendUint32(b.XDR, uint32(len(r.Flavors)))
		for _, f := range r.Flavors {
			b.XDR = xdr.AppendUint32(b.XDR, uint32(f))
		}
	}
}

// Decode decodes the results and returns d's sticky error. FH aliases the
// decoder's buffer.
func (r *MntRes) Decode(d *rpc.BodyDecoder) error {
	r.Status = Stat(d.Uint32())
	r.FH, r.Flavors = nil, nil
	if r.Status == OK {
		r.FH = d.Opaque(FHSize)
		n := d.Count(MaxFlavors, 4)
		if d.Err() == nil {
			r.Flavors = make([]rpc.AuthFlavor, n)
			for i := range r.Flavors {
				r.Flavors[i] = rpc.AuthFlavor(d.Uint32())
			}
		}
	}
	return d.Err()
}

// MountBody is mountbody (RFC 1813 Appendix I): one entry of DUMP's list
// of mounts.
type MountBody struct {
	Hostname  string
	Directory string
}

// DumpRes is mountlist, the results of DUMP (RFC 1813 Appendix I).
type DumpRes struct {
	Mounts []MountBody
}

// Append appends the encoded results to b.
func (r *DumpRes) Append(b *rpc.Body) {
	for _, m := range r.Mounts {
		b.XDR = xdr.AppendBool(b.XDR, true)
		b.XDR = xdr.AppendString(b.XDR, m.Hostname)
		b.XDR = xdr.AppendString(b.XDR, m.Directory)
	}
	b.XDR = xdr.AppendBool(b.XDR, false)
}

// Decode decodes the results and returns d's sticky error. Each entry
// consumes at least 12 bytes, so the list is bounded by the buffer.
func (r *DumpRes) Decode(d *rpc.BodyDecoder) error {
	r.Mounts = r.Mounts[:0]
	for d.Optional() {
		m := MountBody{Hostname: d.Str(MaxName), Directory: d.Str(MaxPath)}
		if d.Err() != nil {
			break
		}
		r.Mounts = append(r.Mounts, m)
	}
	return d.Err()
}

// ExportNode is exportnode (RFC 1813 Appendix I): an exported directory
// and the groups (host names or netgroups) allowed to mount it.
type ExportNode struct {
	Dir    string
	Groups []string
}

// ExportRes is exports, the results of EXPORT (RFC 1813 Appendix I).
type ExportRes struct {
	Exports []ExportNode
}

// Append appends the encoded results to b.
func (r *ExportRes) Append(b *rpc.Body) {
	for _, e := range r.Exports {
		b.XDR = xdr.AppendBool(b.XDR, true)
		b.XDR = xdr.AppendString(b.XDR, e.Dir)
		for _, g := range e.Groups {
			b.XDR = xdr.AppendBool(b.XDR, true)
			b.XDR = xdr.AppendString(b.XDR, g)
		}
		b.XDR = xdr.AppendBool(b.XDR, false)
	}
	b.XDR = xdr.AppendBool(b.XDR, false)
}

// Decode decodes the results and returns d's sticky error. Every list
// element consumes bytes, so the lists are bounded by the buffer.
func (r *ExportRes) Decode(d *rpc.BodyDecoder) error {
	r.Exports = r.Exports[:0]
	for d.Optional() {
		e := ExportNode{Dir: d.Str(MaxPath)}
		for d.Optional() {
			g := d.Str(MaxName)
			if d.Err() != nil {
				break
			}
			e.Groups = append(e.Groups, g)
		}
		if d.Err() != nil {
			break
		}
		r.Exports = append(r.Exports, e)
	}
	return d.Err()
}
