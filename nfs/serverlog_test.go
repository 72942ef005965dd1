package nfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// faultyFS is a LocalFS whose READs fail with a busy text file, and in
// which looking up "elsewhere" fails with EXDEV: errors with no NFS or
// MOUNT status of their own.
type faultyFS struct{ *LocalFS }

func (f faultyFS) ReadAt(ctx context.Context, ino uint64, p []byte, off int64) (int, bool, error) {
	return 0, false, &os.PathError{Op: "read", Path: "busy", Err: syscall.ETXTBSY}
}

func (f faultyFS) Lookup(ctx context.Context, dir uint64, name string) (uint64, error) {
	if name == "elsewhere" {
		return 0, &os.PathError{Op: "openat", Path: name, Err: syscall.EXDEV}
	}
	return f.LocalFS.Lookup(ctx, dir, name)
}

// syncBuffer is a bytes.Buffer a logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestServerLogsAndObserves: an FS error without a status is logged at
// Warn level with the procedure, the file and the FS's error; a failed
// call at Debug level with its procedure and status; MNT at Info level;
// and each NFSv3 call reaches ServerConfig.Observe with its status.
func TestServerLogsAndObserves(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "busy"), []byte("data"), 0o644)
	lfs, err := NewLocalFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lfs.Close()
	var logs syncBuffer
	var mu sync.Mutex
	var done []CallDone
	srv, err := NewServer(ServerConfig{Exports: []Export{{Path: "/export", FS: faultyFS{lfs}}},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Observe: func(c CallDone) {
			mu.Lock()
			done = append(done, c)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := srv.NewRPCServer(true, nil)
	served := make(chan error, 1)
	go func() { served <- rs.ServeListener(l) }()
	defer func() { rs.Close(); <-served }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cred, _ := (&rpc.AuthSysParms{MachineName: "tester", UID: 1000, GID: 1000}).Cred()
	if _, err := MountRoot(ctx, l.Addr().String(), "/export", cred); err != nil {
		t.Fatal(err)
	}
	if _, err := MountRoot(ctx, l.Addr().String(), "/export/elsewhere", cred); !errors.Is(err, mount.ErrServerFault) {
		t.Errorf("MNT across a device: %v, want MNT3ERR_SERVERFAULT", err)
	}

	tr, err := rpc.DialTCP(ctx, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cli := rpc.NewClient(tr)
	defer cli.Close()
	call := func(p nfs3.Proc, args interface{ Append(*rpc.Body) }) nfs3.Stat {
		t.Helper()
		var b rpc.Body
		args.Append(&b)
		rep, err := cli.Call(ctx, &rpc.Request{Prog: nfs3.Program, Vers: nfs3.Version, Proc: uint32(p), Cred: cred, Args: b})
		if err != nil || len(rep.Results.XDR) < 4 {
			t.Fatalf("%v: %v", p, err)
		}
		return nfs3.Stat(binary.BigEndian.Uint32(rep.Results.XDR))
	}
	fi, err := os.Stat(filepath.Join(dir, "busy"))
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	fh := srv.exports[0].key.handle(nil, ino)
	if st := call(nfs3.ProcGetattr, &nfs3.FHArgs{FH: fh}); st != nfs3.OK {
		t.Fatalf("GETATTR: %v", st)
	}
	if st := call(nfs3.ProcRead, &nfs3.ReadArgs{FH: fh, Count: 4}); st != nfs3.ErrIO {
		t.Fatalf("READ of a busy file: %v, want NFS3ERR_IO", st)
	}

	text := logs.String()
	for _, want := range []string{
		`level=WARN msg="nfs: filesystem error" proc=READ status=NFS3ERR_IO export=/export ino=` + strconv.FormatUint(ino, 10) + ` fh=` + hex.EncodeToString(fh) + ` err="read busy: text file busy"`,
		`level=DEBUG msg="nfs: call failed" proc=READ status=NFS3ERR_IO xid=`,
		`level=WARN msg="nfs: filesystem error" proc=MNT status=MNT3ERR_SERVERFAULT export=/export ino=`,
		`name=elsewhere err="openat elsewhere: invalid cross-device link"`,
		`level=INFO msg="nfs: mounted" path=/export client=tester uid=1000`,
		`level=INFO msg="nfs: mount refused" path=/export/elsewhere status=MNT3ERR_SERVERFAULT client=tester uid=1000`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	if strings.Contains(text, "proc=GETATTR") {
		t.Error("a successful GETATTR was logged")
	}
	if t.Failed() {
		t.Logf("log:\n%s", text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(done) != 2 || done[0].Proc != nfs3.ProcGetattr || done[0].Stat != nfs3.OK || done[1].Proc != nfs3.ProcRead || done[1].Stat != nfs3.ErrIO ||
		done[0].Duration <= 0 || done[0].Err != nil {
		t.Errorf("observed %+v, want GETATTR OK and READ NFS3ERR_IO", done)
	}
}
