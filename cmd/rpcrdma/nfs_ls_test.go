package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma/verbs"
)

// TestNFSLs: nfs ls looks like ls -l: names left-aligned after the date,
// link targets, -R with a header per directory, -h sizes, --json, and a
// name that would drive the terminal printed quoted.
func TestNFSLs(t *testing.T) {
	s := startNFSServe(t)
	os.MkdirAll(filepath.Join(s.dir, "d", "e"), 0o755)
	os.WriteFile(filepath.Join(s.dir, "d", "big"), make([]byte, 3<<20), 0o644)
	os.WriteFile(filepath.Join(s.dir, "a"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(s.dir, "bad\x1b[2Jname"), nil, 0o644)
	os.Symlink("d/big", filepath.Join(s.dir, "l"))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(s.dir, "a"), old, old)

	out, errOut, code := s.nfsRun(t, "ls", "127.0.0.1:/export")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	for _, re := range []string{
		`(?m)^-rw------- +1 \d+ \d+ +1 Jan  2  2020 a$`,
		`(?m)^lrwxrwxrwx +1 \d+ \d+ +5 \w{3} [ \d]\d \d\d:\d\d l -> d/big$`,
		`(?m)^drwxr-xr-x +\d+ \d+ \d+ +\d+ .* d$`,
		`(?m)^-rw-r--r-- .* "bad\\x1b\[2Jname"$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("ls lacks %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("ls printed an escape sequence from a file name")
	}
	// A file named with a trailing slash is not a directory, as for
	// ls(1) and cat(1).
	for _, cmd := range []string{"ls", "cat"} {
		if _, errOut, code := s.nfsRun(t, cmd, "127.0.0.1:/export/a/"); code != 1 || !strings.Contains(errOut, "/export/a/: not a directory") {
			t.Errorf("%s of a file with a trailing slash: exit %d, %q; want 1 and not a directory", cmd, code, errOut)
		}
	}
	if _, errOut, code := s.nfsRun(t, "ls", "127.0.0.1:/export/d/"); code != 0 {
		t.Errorf("ls of a directory with a trailing slash: exit %d %s", code, errOut)
	}
	out, _, _ = s.nfsRun(t, "ls", "-R", "-h", "127.0.0.1:/export")
	if !regexp.MustCompile(`(?s)^/export:\n.*\n\n/export/d:\n.* 3\.0M .* big\n.*\n\n/export/d/e:\n$`).MatchString(out) {
		t.Errorf("ls -R -h:\n%s", out)
	}
	out, _, _ = s.nfsRun(t, "ls", "--json", "127.0.0.1:/export/l")
	var ents []lsEntry
	if err := json.Unmarshal([]byte(out), &ents); err != nil || len(ents) != 1 || ents[0].Target != "d/big" || ents[0].Type != "symlink" || ents[0].Path != "/export/l" {
		t.Errorf("ls --json: %v %+v\n%s", err, ents, out)
	}
}

func TestHumanLS(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 1023: "1023", 1024: "1.0K", 1025: "1.1K", 3 << 20: "3.0M", 100 << 20: "100M", 10<<30 + 1: "11G"} {
		if got := humanLS(n); got != want {
			t.Errorf("humanLS(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestShortHelp: a subcommand's help is short, with examples and its own
// flags; the shared ones are named once, verbs ones only in verbs
// builds; --help-all describes them all.
func TestShortHelp(t *testing.T) {
	for _, sub := range [][]string{{"nfs", "cp"}, {"nfs", "ls"}, {"nfs", "bench"}, {"nfs", "probe"}} {
		_, errOut, code := rpcrdmaCmd(t, 10*time.Second, append(sub, "--help")...)
		lines := strings.Count(errOut, "\n")
		if code != 0 || !strings.Contains(errOut, "examples:\n  rpcrdma "+strings.Join(sub, " ")) || !strings.Contains(errOut, "RPC-over-RDMA: --") ||
			strings.Contains(errOut, "\n  -inline") || (len(sub) == 2 && sub[1] != "bench" && lines > 25) {
			t.Errorf("%v --help: exit %d, %d lines\n%s", sub, code, lines, errOut)
		}
		if !verbs.Available && strings.Contains(errOut, "busy-poll") {
			t.Errorf("%v --help names verbs flags in a build without verbs", sub)
		}
		if !strings.Contains(errOut, "\nNFS connection: --vers --transport --nfs-port --mount-port --rpcbind-port --export") || strings.Contains(errOut, "\n  -rpcbind-port") {
			t.Errorf("%v --help does not summarise --rpcbind-port with the NFS connection's flags:\n%s", sub, errOut)
		}
		_, errOut, code = rpcrdmaCmd(t, 10*time.Second, append(sub, "--help-all")...)
		if code != 0 || !strings.Contains(errOut, "\n  -inline int") || !strings.Contains(errOut, "\n  -timeout") && sub[0] == "nfs" {
			t.Errorf("%v --help-all: exit %d\n%s", sub, code, errOut)
		}
	}
	// nfs serve's --export is the path it serves as, its own flag, not
	// the clients' connection flag of that name.
	_, errOut, _ := rpcrdmaCmd(t, 10*time.Second, "nfs", "serve", "--help")
	if strings.Contains(errOut, "NFS connection:") || !strings.Contains(errOut, "\n  -export string") {
		t.Errorf("nfs serve --help:\n%s", errOut)
	}
}
