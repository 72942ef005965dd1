package nfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// TestLinuxMountsOurs: the lab guest's kernel NFS client mounts our
// Server with vers=3,proto=rdma (MOUNT over TCP through another forward),
// copies a 64 MiB file in and out, untars a tree of a thousand files with
// directories, symbolic and hard links, lists it (READDIRPLUS in reply
// chunks), renames and removes it, and unmounts; the guest's kernel log
// stays clean.
func TestLinuxMountsOurs(t *testing.T) {
	lab.Require(t)
	lab.Lock(t, "peer") // PeerMountAddr and PeerAddr, where the guest mounts from
	mark := lab.DmesgMark(t)
	defer lab.CheckDmesg(t, mark)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dir := t.TempDir()
	fsys, err := NewLocalFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	secret := []byte("a secret the restarted server shares")
	srv, err := NewServer(ServerConfig{Secret: secret, Exports: []Export{{Path: "/export", FS: fsys}}})
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", lab.PeerMountAddr)
	if err != nil {
		t.Fatalf("listening for the guest's MOUNT calls: %v", err)
	}
	tcp := srv.NewRPCServer(true, nil)
	go tcp.ServeListener(ml)
	defer tcp.Close()
	p, err := iwarp.New(iwarp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []*rpcrdma.Conn
	keep := func(c *rpcrdma.Conn, s rpcrdma.ConnState) {
		if s == rpcrdma.StateEstablished {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}
	// serveRDMA serves s's NFS on lab.PeerAddr until the function it
	// returns stops it, closing the connections.
	serveRDMA := func(s *Server) func() {
		l, err := rpcrdma.Listen(ctx, p, lab.PeerAddr, &rpcrdma.Config{ConnState: keep})
		if err != nil {
			t.Fatalf("listening where the guest's NFS/RDMA client connects: %v", err)
		}
		rs := s.NewRPCServer(false, nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			rpcrdma.Serve(ctx, l, rs)
		}()
		return func() { l.Close(); <-done; rs.Close() }
	}
	stop := serveRDMA(srv)
	defer func() { stop() }()

	run := func(cmd string, timeout time.Duration) string {
		t.Helper()
		start := time.Now()
		out, rc := lab.Run(t, cmd, timeout+30*time.Second)
		t.Logf("guest (%v): %s\n%s", time.Since(start).Round(time.Millisecond), cmd, out)
		if rc != 0 {
			t.Fatalf("guest command failed (rc %d)", rc)
		}
		return out
	}
	// A mount a failed run left behind is lazily detached first.
	run("umount -f -l /mnt/ours 2>/dev/null; mkdir -p /mnt/ours && timeout 60 mount -t nfs -o vers=3,proto=rdma,port=20049,mountport=20048,mountproto=tcp,nolock,noacl,soft,timeo=600,retrans=2 10.0.2.100:/export /mnt/ours", 60*time.Second)
	defer lab.Run(t, "umount -f -l /mnt/ours 2>/dev/null; rm -rf /tmp/big /tmp/big2 /tmp/tree /tmp/tree.tar", lab.CmdTimeout)

	// 64 MiB in and out.
	out := run("dd if=/dev/urandom of=/tmp/big bs=1M count=64 2>/dev/null && timeout 400 cp /tmp/big /mnt/ours/big && sha256sum /tmp/big", 400*time.Second)
	if sum := sum0(t, dir, "big"); !strings.HasPrefix(out, sum) {
		t.Fatalf("the server holds a file with sha256 %s; the guest wrote %s", sum, out)
	}
	run("echo 3 > /proc/sys/vm/drop_caches; timeout 400 cp /mnt/ours/big /tmp/big2 && cmp /tmp/big /tmp/big2 && rm /tmp/big2 /mnt/ours/big", 400*time.Second)

	// The server restarts (same secret, a new FS and write verifier) in
	// the middle of a copy: Linux reconnects, sends its unstable WRITEs
	// again when COMMIT shows the new verifier, and the copy completes.
	copied := make(chan string, 1)
	go func() {
		out, _ := lab.Run(t, "timeout 400 cp /tmp/big /mnt/ours/again && sha256sum /mnt/ours/again; echo rc=$?", 430*time.Second)
		copied <- out
	}()
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if fi, err := os.Stat(filepath.Join(dir, "again")); err == nil && fi.Size() >= 16<<20 {
			break
		}
	}
	fi, _ := os.Stat(filepath.Join(dir, "again"))
	stop()
	fsys2, err := NewLocalFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys2.Close()
	srv2, err := NewServer(ServerConfig{Secret: secret, Exports: []Export{{Path: "/export", FS: fsys2}}})
	if err != nil {
		t.Fatal(err)
	}
	stop = serveRDMA(srv2)
	t.Logf("restarted the server with %v bytes of the copy written", fi.Size())
	if out := <-copied; !strings.Contains(out, sum0(t, dir, "again")) || !strings.Contains(out, "rc=0") {
		t.Fatalf("copy across a restart: the guest says %q", out)
	}
	if !strings.HasPrefix(out, sum0(t, dir, "again")) {
		t.Fatalf("copy across a restart: the server holds other data than the guest wrote")
	}
	run("rm /tmp/big /mnt/ours/again", 60*time.Second)

	// A tree of 1020 file names (20 directories of 50 files, a symbolic
	// link and a hard link each), untarred, listed, renamed, removed.
	run("rm -rf /tmp/tree && mkdir /tmp/tree && cd /tmp/tree && for d in $(seq 20); do mkdir d$d; for f in $(seq 50); do echo $d-$f > d$d/f$f; done; ln -s f1 d$d/link; ln d$d/f2 d$d/hard; done; cd /tmp && tar cf tree.tar tree", 120*time.Second)
	run("cd /mnt/ours && timeout 400 tar xf /tmp/tree.tar", 400*time.Second)
	var files, links, hard int
	filepath.Walk(filepath.Join(dir, "tree"), func(p string, fi os.FileInfo, err error) error {
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if tg, _ := os.Readlink(p); tg == "f1" {
				links++
			}
		case fi.Mode().IsRegular():
			files++
			if filepath.Base(p) == "hard" && fi.Sys() != nil {
				if st, _ := os.Stat(filepath.Join(filepath.Dir(p), "f2")); os.SameFile(st, fi) {
					hard++
				}
			}
		}
		return nil
	})
	if files != 1020 || links != 20 || hard != 20 {
		t.Fatalf("untarred on the server: %d files, %d symbolic links to f1, %d hard links; want 1020, 20, 20", files, links, hard)
	}
	out = run("ls -lR /mnt/ours/tree | grep -c ' f[0-9]*$'; cat /mnt/ours/tree/d7/link", 120*time.Second)
	// 1000 files, and 20 symbolic links ("link -> f1").
	if !strings.HasPrefix(out, "1020\n7-1") {
		t.Errorf("ls -lR and a read through a symbolic link: %q", out)
	}
	run("mv /mnt/ours/tree /mnt/ours/tree2 && rm -rf /mnt/ours/tree2 && ls -A /mnt/ours | wc -l && umount /mnt/ours", 300*time.Second)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left on the server: %v", ents)
	}
	var replyChunks, writeChunks, readChunks uint64
	mu.Lock()
	for _, c := range conns {
		st := c.Stats()
		replyChunks += st.ReplyChunks
		writeChunks += st.WriteChunks
		readChunks += st.ReadChunks
	}
	mu.Unlock()
	t.Logf("responder chunks: %d read, %d write, %d reply", readChunks, writeChunks, replyChunks)
	if replyChunks == 0 || writeChunks == 0 || readChunks == 0 {
		t.Errorf("Linux's client used %d read, %d write, %d reply chunks; want some of each", readChunks, writeChunks, replyChunks)
	}
}

// sum0 returns the SHA-256 of dir/name, in hex.
func sum0(t *testing.T, dir, name string) string {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil))
}
