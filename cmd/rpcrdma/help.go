package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
)

// Help that a person reads: a command's synopsis, two or three examples,
// its own flags in full, and the flags every command shares (how NFS is
// reached, how RPC-over-RDMA is tuned) named once in a line each;
// --help-all prints them all in full.

// flagGroups name the shared flags and the line each group's summary
// starts with, in the order printed. A group is a command's when it has
// the group's first flag: nfs serve's own --export is not the clients'.
var flagGroups = []struct {
	title string
	names []string
	verbs bool // only in a -tags verbs build
}{
	{"NFS connection", []string{"vers", "transport", "nfs-port", "mount-port", "rpcbind-port", "export", "uid", "gid", "timeout"}, false},
	{"RPC-over-RDMA", []string{"rpcrdma-version", "inline", "credits", "crc", "mpa-rev", "no-remote-invalidation",
		"ddp-threshold", "first-send-delay", "provider", "log-level"}, false},
	{"verbs provider", []string{"device", "busy-poll"}, true},
}

// examples are each command's, by FlagSet name.
var examples = map[string][]string{
	"nfs probe": {"rpcrdma nfs probe server", "rpcrdma nfs probe --vers 4.1 --first-send-delay 50ms server"},
	"nfs ls":    {"rpcrdma nfs ls server:/export", "rpcrdma nfs ls -R -h server:/export/photos", "rpcrdma nfs ls --vers 4.1 --json server:/"},
	"nfs cat":   {"rpcrdma nfs cat server:/export/etc/motd", "rpcrdma nfs cat --transport tcp server:2049:/export/notes.txt"},
	"nfs cp": {"rpcrdma nfs cp big.iso server:/export/isos/", "rpcrdma nfs cp -r server:/export/photos ./photos",
		"rpcrdma nfs cp --vers 4.1 report.pdf server:/home/me/"},
	"nfs bench": {"rpcrdma nfs bench server:/export", "rpcrdma nfs bench --rw randread --bs 4k --iodepth 32 --numjobs 4 --runtime 30 server:/export",
		"rpcrdma nfs bench --output-format json --rw rw --rwmixread 70 --file data.bin server:/export > result.json"},
	"nfs serve": {"rpcrdma nfs serve /srv/data", "rpcrdma nfs serve --ro --metrics 127.0.0.1:9100 --secret-file key /srv/data"},
	"serve":     {"rpcrdma serve", "rpcrdma serve --listen 0.0.0.0:20049 --metrics 127.0.0.1:9100"},
	"ping":      {"rpcrdma ping 127.0.0.1:20049", "rpcrdma ping --prog 100003 --vers 3 --first-send-delay 50ms server:20049"},
	"bench":     {"rpcrdma bench", "rpcrdma bench --repeat 5", "rpcrdma bench --connect server:20049 --json"},
}

// usageFor returns fs's Usage: synopsis, examples, own flags in full,
// the shared ones by group.
func usageFor(fs *flag.FlagSet, synopsis string) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: rpcrdma %s\n", synopsis)
		if ex := examples[fs.Name()]; len(ex) > 0 {
			fmt.Fprintln(w, "\nexamples:")
			for _, e := range ex {
				fmt.Fprintf(w, "  %s\n", e)
			}
		}
		shared := map[string]bool{"help-all": true}
		for _, g := range flagGroups {
			if fs.Lookup(g.names[0]) == nil {
				continue
			}
			for _, n := range g.names {
				shared[n] = true
			}
		}
		own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		own.SetOutput(w)
		fs.VisitAll(func(f *flag.Flag) {
			if !shared[f.Name] {
				own.Var(f.Value, f.Name, f.Usage)
			}
		})
		if hasFlags(own) {
			fmt.Fprintln(w, "\nflags:")
			own.PrintDefaults()
		}
		printGroups(w, fs)
		fmt.Fprintln(w, "\n--help-all describes every flag.")
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// printGroups names the shared flags fs has, a line per group.
func printGroups(w io.Writer, fs *flag.FlagSet) {
	first := true
	for _, g := range flagGroups {
		if g.verbs && !verbs.Available || fs.Lookup(g.names[0]) == nil {
			continue
		}
		var names []string
		for _, n := range g.names {
			if fs.Lookup(n) != nil {
				names = append(names, "--"+n)
			}
		}
		if len(names) == 0 {
			continue
		}
		if first {
			fmt.Fprintln(w)
			first = false
		}
		fmt.Fprintf(w, "%s: %s\n", g.title, strings.Join(names, " "))
	}
}

// printAll is --help-all: every flag in full.
func printAll(fs *flag.FlagSet) {
	fmt.Fprintf(fs.Output(), "usage of rpcrdma %s, every flag:\n", fs.Name())
	fs.PrintDefaults()
}
