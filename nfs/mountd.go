package nfs

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"

	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// The MOUNT program (RFC 1813 Appendix I). MNT resolves an export's path,
// or a directory below it, to a file handle; the others are bookkeeping
// for showmount. A client is named by its AUTH_SYS machine name, since
// handlers do not see the peer's address.

func clientName(c *rpc.Call) string {
	if c.AuthSys != nil && c.AuthSys.MachineName != "" {
		return c.AuthSys.MachineName
	}
	return "unknown"
}

func (s *Server) mnt(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var p mount.DirPath
	if err := args(c, &p); err != nil {
		return rpc.Body{}, err
	}
	var r mount.MntRes
	r.Status = func() mount.Stat {
		path := string(p)
		for _, ex := range s.exports {
			rest, ok := strings.CutPrefix(path, ex.Path)
			if !ok || (rest != "" && rest[0] != '/' && ex.Path != "/") {
				continue
			}
			o := op{s: s, ex: ex, cr: ex.cred(c), call: c}
			o.ctx = context.WithValue(ctx, credKey{}, &o.cr)
			ino := ex.FS.Root()
			// fault maps an NFS status to MNT's, logging one that
			// only maps to MNT3ERR_SERVERFAULT, with the FS's error.
			fault := func(st nfs3.Stat, name string, err error) mount.Stat {
				ms := mountStat(st)
				if ms == mount.ErrServerFault || st == nfs3.ErrIO && err != nil && !errors.Is(err, nfs3.ErrIO) {
					if err == nil {
						err = st
					}
					s.logFSError(o.ctx, &o, ino, name, ms.String(), err)
				}
				return ms
			}
			for name := range strings.SplitSeq(rest, "/") {
				if name == "" || name == "." {
					continue
				}
				if name == ".." {
					return mount.ErrAcces
				}
				if _, st := o.dirFor(ino, false); st != nfs3.OK {
					return fault(st, "", nil)
				}
				next, err := ex.FS.Lookup(o.ctx, ino, name)
				if err != nil {
					return fault(StatOf(err), name, err)
				}
				ino = next
			}
			if a, st := o.attr(ino); st != nfs3.OK {
				return fault(st, "", nil)
			} else if a.Type != nfs3.TypeDir {
				return mount.ErrNotDir
			}
			r.FH = ex.key.handle(nil, ino)
			r.Flavors = []rpc.AuthFlavor{rpc.AuthSys}
			s.mounts.add(mount.MountBody{Hostname: clientName(c), Directory: path})
			return mount.OK
		}
		return mount.ErrNoEnt
	}()
	if r.Status == mount.OK {
		s.log.LogAttrs(ctx, slog.LevelInfo, "nfs: mounted", slog.String("path", string(p)), slog.String("client", clientName(c)), slog.Any("uid", callerUID(c)))
	} else {
		s.log.LogAttrs(ctx, slog.LevelInfo, "nfs: mount refused", slog.String("path", string(p)), slog.String("status", r.Status.String()), slog.String("client", clientName(c)), slog.Any("uid", callerUID(c)))
	}
	return rpc.Body{XDR: appendRes(&r)}, nil
}

func appendRes(r interface{ Append(*rpc.Body) }) []byte {
	var b rpc.Body
	r.Append(&b)
	return b.XDR
}

// mountStat maps an NFS status to the MOUNT status knfsd's mountd would
// give.
func mountStat(st nfs3.Stat) mount.Stat {
	switch st {
	case nfs3.ErrPerm, nfs3.ErrNoEnt, nfs3.ErrIO, nfs3.ErrAcces, nfs3.ErrNotDir, nfs3.ErrInval, nfs3.ErrNameTooLong:
		return mount.Stat(st)
	case nfs3.ErrNotSupp:
		return mount.ErrNotSupp
	}
	return mount.ErrServerFault
}

func (s *Server) dump(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	if err := c.Decoder().Done(); err != nil {
		return rpc.Body{}, rpc.ErrGarbageArgs
	}
	r := mount.DumpRes{Mounts: s.mounts.list()}
	return rpc.Body{XDR: appendRes(&r)}, nil
}

func (s *Server) umnt(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	var p mount.DirPath
	if err := args(c, &p); err != nil {
		return rpc.Body{}, err
	}
	s.mounts.remove(clientName(c), string(p))
	return rpc.Body{}, nil
}

func (s *Server) umntall(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	if err := c.Decoder().Done(); err != nil {
		return rpc.Body{}, rpc.ErrGarbageArgs
	}
	s.mounts.remove(clientName(c), "")
	return rpc.Body{}, nil
}

func (s *Server) exportList(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	if err := c.Decoder().Done(); err != nil {
		return rpc.Body{}, rpc.ErrGarbageArgs
	}
	var r mount.ExportRes
	for _, ex := range s.exports {
		r.Exports = append(r.Exports, mount.ExportNode{Dir: ex.Path, Groups: []string{"*"}})
	}
	return rpc.Body{XDR: appendRes(&r)}, nil
}

func (t *mountTable) add(m mount.MountBody) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[mount.MountBody]struct{})
	}
	if len(t.m) < maxMounts {
		t.m[m] = struct{}{}
	}
}

// remove forgets host's mount of dir, or all its mounts if dir is "".
func (t *mountTable) remove(host, dir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for m := range t.m {
		if m.Hostname == host && (dir == "" || m.Directory == dir) {
			delete(t.m, m)
		}
	}
}

func (t *mountTable) list() []mount.MountBody {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := make([]mount.MountBody, 0, len(t.m))
	for m := range t.m {
		l = append(l, m)
	}
	slices.SortFunc(l, func(a, b mount.MountBody) int {
		return strings.Compare(a.Hostname+"\x00"+a.Directory, b.Hostname+"\x00"+b.Directory)
	})
	return l
}
