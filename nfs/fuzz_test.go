package nfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// FuzzServer runs the NFS procedures' handlers on arguments the fuzzer
// derives from valid ones, which carry real handles (the export's root, a
// file, a directory, symbolic links out of the export), as root and as an
// ordinary user. Whatever the arguments, a handler answers with results
// or GARBAGE_ARGS and does not panic, and nothing outside the export
// changes (the server runs as root here, so only its own checks keep it
// in).
func FuzzServer(f *testing.F) {
	base := f.TempDir()
	dir, outside := filepath.Join(base, "export"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(dir, "d"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644)
	os.WriteFile(filepath.Join(dir, "f"), []byte("inside"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "out-abs"))
	os.Symlink("../outside/secret", filepath.Join(dir, "out-rel"))
	s, fsys := exportDir(f, dir)
	key := s.byID[s.exports[0].id].key
	handle := func(name string) nfs3.FileHandle {
		ino := fsys.Root()
		if name != "" {
			var err error
			if ino, err = fsys.Lookup(context.Background(), fsys.Root(), name); err != nil {
				f.Fatal(err)
			}
		}
		return key.handle(nil, ino)
	}
	root, file, sub, link := handle(""), handle("f"), handle("d"), handle("out-abs")
	at := func(d nfs3.FileHandle, name string) nfs3.DirOpArgs { return nfs3.DirOpArgs{Dir: d, Name: name} }
	mode := nfs3.SetAttr{SetMode: true, Mode: 0o777}
	seeds := map[nfs3.Proc][]interface{ Append(*rpc.Body) }{
		nfs3.ProcGetattr:     {&nfs3.FHArgs{FH: root}, &nfs3.FHArgs{FH: link}},
		nfs3.ProcSetattr:     {&nfs3.SetattrArgs{FH: file, Attr: nfs3.SetAttr{SetSize: true, Size: 3}}, &nfs3.SetattrArgs{FH: link, Attr: mode}},
		nfs3.ProcLookup:      {&nfs3.DirOpArgs{Dir: root, Name: ".."}, &nfs3.DirOpArgs{Dir: link, Name: "secret"}},
		nfs3.ProcAccess:      {&nfs3.AccessArgs{FH: file, Access: 0x3f}},
		nfs3.ProcReadlink:    {&nfs3.FHArgs{FH: link}},
		nfs3.ProcRead:        {&nfs3.ReadArgs{FH: file, Count: 64}},
		nfs3.ProcWrite:       {&nfs3.WriteArgs{FH: file, Offset: 2, Count: 3, Stable: nfs3.FileSync, Data: []byte("abc")}},
		nfs3.ProcCreate:      {&nfs3.CreateArgs{Where: at(root, "out-rel"), Mode: nfs3.Unchecked, Attr: nfs3.SetAttr{SetSize: true}}, &nfs3.CreateArgs{Where: at(sub, "n"), Mode: nfs3.Exclusive}},
		nfs3.ProcMkdir:       {&nfs3.MkdirArgs{Where: at(sub, "m"), Attr: mode}},
		nfs3.ProcSymlink:     {&nfs3.SymlinkArgs{Where: at(sub, "s"), Path: "../../outside"}},
		nfs3.ProcMknod:       {&nfs3.MknodArgs{Where: at(sub, "p"), Type: nfs3.TypeFIFO}},
		nfs3.ProcRemove:      {&nfs3.DirOpArgs{Dir: root, Name: "out-abs"}},
		nfs3.ProcRmdir:       {&nfs3.DirOpArgs{Dir: root, Name: "d"}},
		nfs3.ProcRename:      {&nfs3.RenameArgs{From: at(root, "f"), To: at(link, "secret")}, &nfs3.RenameArgs{From: at(sub, ".."), To: at(root, "x")}},
		nfs3.ProcLink:        {&nfs3.LinkArgs{FH: file, Link: at(link, "l")}},
		nfs3.ProcReaddir:     {&nfs3.ReaddirArgs{Dir: root, Count: 4096}},
		nfs3.ProcReaddirplus: {&nfs3.ReaddirplusArgs{Dir: root, DirCount: 4096, MaxCount: 1 << 16}},
		nfs3.ProcFsstat:      {&nfs3.FHArgs{FH: root}},
		nfs3.ProcFsinfo:      {&nfs3.FHArgs{FH: root}},
		nfs3.ProcPathconf:    {&nfs3.FHArgs{FH: root}},
		nfs3.ProcCommit:      {&nfs3.CommitArgs{FH: file}},
	}
	for p, as := range seeds {
		for i, a := range as {
			f.Add(uint8(p), i%2 == 1, appendArgs(a))
		}
	}
	handlers := s.nfsHandlers()
	before := snapshot(f, base, dir)
	f.Fuzz(func(t *testing.T, proc uint8, asUser bool, data []byte) {
		p := nfs3.Proc(proc % uint8(nfs3.NumProcs))
		h := handlers[p]
		if h == nil {
			return // NULL
		}
		var c rpc.Call
		c.AuthSys = &rpc.AuthSysParms{MachineName: "fuzz"}
		if asUser {
			c.AuthSys.UID, c.AuthSys.GID = 1000, 1000
		}
		c.Args = rpc.Body{XDR: data}
		c.Decoder().Reset(c.Args)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := h(ctx, &c)
		switch {
		case errors.Is(err, rpc.ErrGarbageArgs):
		case err != nil:
			t.Fatalf("%v: %v", p, err)
		case res.Len() < 4:
			t.Fatalf("%v: %d bytes of results", p, res.Len())
		}
		if c.AfterReply != nil {
			c.AfterReply(res)
		}
		if after := snapshot(t, base, dir); !maps2Equal(before, after) {
			t.Fatalf("%v changed what is outside the export:\nbefore %v\nafter  %v", p, before, after)
		}
	})
}
