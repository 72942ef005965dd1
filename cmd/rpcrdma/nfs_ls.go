package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/go-rpcrdma/rpcrdma/nfs"
)

// lsOptions are nfs ls's own flags, as ls(1) names them.
type lsOptions struct {
	recursive, human, json bool
}

// lsEntry is one file of a listing; the JSON keys are a stable interface.
type lsEntry struct {
	Path   string    `json:"path"`
	Name   string    `json:"name"`
	Type   string    `json:"type"` // file, dir, symlink, block, char, socket, fifo
	Mode   string    `json:"mode"` // as ls -l: -rw-r--r--
	Perm   uint32    `json:"perm"` // the mode's bits, 0o7777
	Nlink  uint32    `json:"nlink"`
	Owner  string    `json:"owner"` // the uid (NFSv3), or the owner string (NFSv4)
	Group  string    `json:"group"`
	Size   uint64    `json:"size"`
	Mtime  time.Time `json:"mtime"`
	Target string    `json:"target,omitempty"` // a symbolic link's
}

// lsMaxDepth bounds -R, against a server whose directories never end.
const lsMaxDepth = 64

func nfsLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o lsOptions
	rf, err := remoteFileCmd(ctx, "ls", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&o.recursive, "R", false, "list subdirectories too, as ls -lR")
		fs.BoolVar(&o.human, "h", false, "sizes as ls -lh: 4.0K, 2.9M")
		fs.BoolVar(&o.json, "json", false, "one JSON array of the entries, with link targets")
	})
	if err != nil {
		return err
	}
	defer rf.close()
	l := &lister{ctx: rf.ctx, fsys: rf.fsys, o: o, w: stdout, now: time.Now()}
	if !rf.info.IsDir() {
		e := l.entry(rf.h, path.Base(rf.full), rf.full, rf.info)
		l.print("", []lsEntry{e}, false)
		return l.finish()
	}
	if err := l.dir(rf.h, rf.full, rf.info, nil); err != nil {
		return err
	}
	return l.finish()
}

// lister lists directories, as text or into all for --json.
type lister struct {
	ctx  context.Context
	fsys nfs.Files
	o    lsOptions
	w    io.Writer
	now  time.Time
	all  []lsEntry
	dirs int // listed so far, for the blank line between them
}

// entry makes the listing entry of the file h.
func (l *lister) entry(h nfs.Handle, name, p string, a nfs.FileInfo) lsEntry {
	e := lsEntry{Path: p, Name: name, Type: typeName(a), Mode: modeString(a), Perm: a.Perm, Nlink: a.Nlink,
		Owner: a.Owner, Group: a.Group, Size: a.Size, Mtime: a.Mtime.UTC()}
	if a.IsLink() && h != nil {
		if t, err := l.fsys.ReadLink(l.ctx, h); err == nil {
			e.Target = t
		}
	}
	return e
}

// dir lists the directory fh at p (from the server's root), and with -R the directories in it;
// above holds its ancestors' file IDs, to refuse a directory inside
// itself.
func (l *lister) dir(h nfs.Handle, p string, a nfs.FileInfo, above []uint64) error {
	if len(above) > lsMaxDepth {
		return fmt.Errorf("%s: more than %d levels of directories", p, lsMaxDepth)
	}
	for _, id := range above {
		if id == a.FileID {
			return fmt.Errorf("%s: the server lists a directory inside itself", p)
		}
	}
	ents, err := l.fsys.List(l.ctx, h)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	var list []lsEntry
	var subdirs []nfs.DirEntry
	for _, e := range ents {
		list = append(list, l.entry(e.Handle, e.Name, path.Join(p, e.Name), e.Info))
		if e.Info.IsDir() && l.o.recursive && !strings.Contains(e.Name, "/") && e.Name != "." && e.Name != ".." {
			subdirs = append(subdirs, e)
		}
	}
	l.print(p, list, l.o.recursive)
	for _, e := range subdirs {
		if err := l.dir(e.Handle, path.Join(p, e.Name), e.Info, append(above, a.FileID)); err != nil {
			return err
		}
	}
	return nil
}

// print writes one directory's entries as ls -l does, under a "DIR:"
// header when several directories are listed.
func (l *lister) print(dir string, list []lsEntry, header bool) {
	if l.o.json {
		l.all = append(l.all, list...)
		return
	}
	if header {
		if l.dirs > 0 {
			fmt.Fprintln(l.w)
		}
		fmt.Fprintf(l.w, "%s:\n", printable(dir))
	}
	l.dirs++
	tw := tabwriter.NewWriter(l.w, 0, 0, 1, ' ', 0)
	for _, e := range list {
		size := strconv.FormatUint(e.Size, 10)
		if l.o.human {
			size = humanLS(e.Size)
		}
		name := printable(e.Name)
		if e.Target != "" {
			name += " -> " + printable(e.Target)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Mode, rightAlign(strconv.Itoa(int(e.Nlink)), 3), printable(e.Owner), printable(e.Group),
			rightAlign(size, 8), lsTime(e.Mtime, l.now), name)
	}
	tw.Flush()
}

func (l *lister) finish() error {
	if !l.o.json {
		return nil
	}
	if l.all == nil {
		l.all = []lsEntry{}
	}
	enc := json.NewEncoder(l.w)
	enc.SetIndent("", "  ")
	return enc.Encode(l.all)
}

// rightAlign pads s on the left to width w (tabwriter aligns left).
func rightAlign(s string, w int) string {
	if len(s) >= w {
		return s
	}
	return strings.Repeat(" ", w-len(s)) + s
}

// lsTime formats a modification time as ls -l does: month, day and time
// within six months of now, month, day and year otherwise.
func lsTime(t, now time.Time) string {
	if d := now.Sub(t); d > 182*24*time.Hour || d < -time.Hour {
		return t.Format("Jan _2  2006")
	}
	return t.Format("Jan _2 15:04")
}

// humanLS formats a size as ls -h does: powers of 1024, one decimal below
// 10, rounded up.
func humanLS(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10)
	}
	v := float64(n)
	i := 0
	for v >= 1024 && i < 6 {
		v /= 1024
		i++
	}
	unit := "KMGTPE"[i-1 : i]
	if v < 10 && math.Ceil(v*10) < 100 {
		return fmt.Sprintf("%.1f%s", math.Ceil(v*10)/10, unit)
	}
	return fmt.Sprintf("%.0f%s", math.Ceil(v), unit)
}

// printable returns s, or s quoted as Go quotes it if it holds a
// character that is not printable, so that a name a server sends cannot
// drive the terminal.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// typeName names a file type for --json.
func typeName(a nfs.FileInfo) string {
	switch {
	case a.IsRegular():
		return "file"
	case a.IsDir():
		return "dir"
	case a.IsLink():
		return "symlink"
	case a.Type&fs.ModeCharDevice != 0:
		return "char"
	case a.Type&fs.ModeDevice != 0:
		return "block"
	case a.Type&fs.ModeSocket != 0:
		return "socket"
	case a.Type&fs.ModeNamedPipe != 0:
		return "fifo"
	}
	return "other"
}
