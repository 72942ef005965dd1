package nfs

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

var restartMinutes = flag.Float64("restart-minutes", 1.5,
	"TestLinuxRestarts: how long the guest's workload runs, in minutes, while the server restarts five times (issue #33 asks for at least 5)")

// restartAsked reports whether -restart-minutes was given.
func restartAsked() bool {
	asked := false
	flag.Visit(func(f *flag.Flag) { asked = asked || f.Name == "restart-minutes" })
	return asked
}

// restarts is how many times TestLinuxRestarts stops and starts the server.
const restarts = 5

// restartDrain bounds a graceful stop: the calls in flight must have
// finished and been answered within it.
const restartDrain = 30 * time.Second

// TestLinuxRestarts: the lab guest's kernel NFS client, on a hard NFSv3
// mount over RDMA, runs two copies of testdata/restart-workload.sh (files
// written from random bytes, renamed, read back with the caches dropped
// and their SHA-256 compared, removed; a journal file appended to;
// directories made and removed) for -restart-minutes while our server is
// stopped gracefully (in-flight calls finish and are answered) and
// started again with the same secret five times at even intervals. The
// workload must see no error and every byte must check; each stop must
// drain within 30 s, and the client must come back to each new server.
// Subtests:
//
//   - siw: our Server on the host (the iwarp provider), the guest's client
//     over siw0 through the lab's forwards, as in TestLinuxMountsOurs;
//     rpc.Server.Shutdown stops it;
//   - rxe: `rpcrdma nfs serve --provider verbs --device rxe0 --secret-file`,
//     built on the host with -tags verbs and run in the guest, the guest's
//     client over rxe0 (RoCE v2); testdata/restart-server.sh ends it with
//     SIGTERM and runs it again.
//
// It skips without the lab VM.
func TestLinuxRestarts(t *testing.T) {
	if lab.InGuest() {
		t.Skip("runs from the host")
	}
	if !restartAsked() {
		// Minutes of lab time, more than go test's default 10-minute
		// bound leaves the rest of the package: run on request, as
		// .ci/run does.
		t.Skip("a long lab test: run it with -restart-minutes N (go test ./nfs -run TestLinuxRestarts -timeout 30m -restart-minutes 1.5)")
	}
	lab.Require(t)
	d := time.Duration(*restartMinutes * float64(time.Minute))
	if d < 10*time.Second || d > time.Hour {
		t.Fatalf("-restart-minutes %v: want between 1/6 and 60", *restartMinutes)
	}
	mark := lab.DmesgMark(t)
	defer lab.CheckDmesg(t, mark)
	t.Run("siw", func(t *testing.T) {
		lab.Lock(t, "peer") // PeerMountAddr and PeerAddr, where the guest mounts from
		srv := hostRestartServer(t)
		restartWorkload(t, "siw", d, srv,
			"vers=3,proto=rdma,port=20049,mountport=20048,mountproto=tcp,nolock,noacl,hard,timeo=600,retrans=2 "+lab.GuestPeerIP+":/export", "")
	})
	t.Run("rxe", func(t *testing.T) {
		srv := guestRestartServer(t)
		restartWorkload(t, "rxe", d, srv,
			"vers=3,proto=rdma,port="+restartRDMAPort+",mountport="+restartTCPPort+",mountproto=tcp,nolock,noacl,hard,timeo=600,retrans=2 "+lab.GuestRxeIP+":/export",
			"rxe0")
	})
}

// restartServer is a server that TestLinuxRestarts stops and starts again.
type restartServer struct {
	// start starts the server's first incarnation.
	start func(t *testing.T)
	// restart stops the server gracefully and starts it again restarts
	// times, evenly over d from its call (the first after
	// d/(restarts+1)), each time once the client has come back to the
	// running server (within restartReach); then, d after its call, it
	// creates the guest's file stop, which tells the workers to end. It
	// fails t if a stop did not drain the calls in flight within
	// restartDrain, or the client did not come back.
	restart func(t *testing.T, d time.Duration, stop string)
	// stop stops the last incarnation, when t ends.
	stop func(t *testing.T)
}

// restartReach bounds the wait for the client to connect to a restarted
// server: Linux's RPC-over-RDMA client backs off between attempts to
// reconnect, up to 30 s (RPCRDMA_MAX_REEST_TO in net/sunrpc/xprtrdma/
// xprt_rdma.h).
const restartReach = 2 * time.Minute

// restartWorkers is how many copies of the workload run side by side, so
// that a stop finds calls in flight more often.
const restartWorkers = 2

// restartWorkload runs the workload on the guest's hard mount of srv
// (mount options and source opts) for d while srv restarts, and checks
// its outcome. If device is set, every connection to the server must be
// on that guest RDMA device. name keeps the guest's paths apart from the
// other subtests'.
func restartWorkload(t *testing.T, name string, d time.Duration, srv restartServer, opts, device string) {
	script := shareScript(t, "restart-workload.sh")
	mnt, dir := "/mnt/restart-"+name, "/tmp/restart-"+name
	run := func(cmd string, timeout time.Duration) string {
		t.Helper()
		start := time.Now()
		out, rc := lab.Run(t, cmd, timeout+30*time.Second)
		t.Logf("guest (%v): %s\n%s", time.Since(start).Round(time.Millisecond), cmd, out)
		if rc != 0 {
			t.Fatalf("guest command failed (exit status %d)", rc)
		}
		return out
	}
	srv.start(t)
	// Cleanups run last in, first out: the workload is killed and the
	// mount forced off (umount -f fails the calls a hard mount would
	// retry for ever) before the server's last stop.
	defer srv.stop(t)
	defer func() {
		out, _ := lab.Run(t, fmt.Sprintf("kill -9 $(cat %[1]s/*.pid) 2>/dev/null; umount -f -l %[2]s 2>/dev/null; tail -n 5 %[1]s/*.log; rm -rf %[1]s", dir, mnt), lab.CmdTimeout)
		if t.Failed() {
			t.Logf("the workers' last lines:\n%s", out)
		}
	}()
	// A mount a failed run left behind is forced off first.
	run(fmt.Sprintf("umount -f -l %[1]s 2>/dev/null; rm -rf %[2]s && mkdir -p %[1]s %[2]s && timeout 90 mount -t nfs -o %[3]s %[1]s", mnt, dir, opts), 90*time.Second)
	onDevice := func() {
		if device == "" {
			return
		}
		out := run("rdma res show cm_id | grep -E ':"+restartRDMAPort+"( |$)'", 30*time.Second)
		for line := range strings.Lines(out) {
			if !strings.Contains(line, "link "+device+"/") {
				t.Errorf("a connection to the server is not on %s: %s", device, line)
			}
		}
	}
	onDevice()

	// Worker w works in mnt/w and dir/w and logs to dir/w.log. Each runs
	// in the background, in a session of its own, with the command
	// channel (fd 3) closed, until the file dir/stop appears: the
	// restarts are timed outside the guest's shell, and other tests may
	// hold the channel for minutes (lab.RunTestBinary), so the workers are
	// told to end rather than timed. Their own bound is a backstop.
	run(fmt.Sprintf("cd %[1]s && for w in $(seq %[5]d); do (setsid sh %[2]s %[3]s/$w %[1]s/$w %[4]d %[1]s/stop >$w.log 2>&1 </dev/null 3>&- & echo $! >$w.pid); done",
		dir, script, mnt, int((d+30*time.Minute).Seconds()), restartWorkers), 30*time.Second)
	began := time.Now()
	srv.restart(t, d, dir+"/stop")
	checkWorkers(t, dir, time.Since(began))
	onDevice()
	if out := run("ls -A "+mnt+" | wc -l && timeout 60 umount "+mnt, 60*time.Second); out != "0\n" {
		t.Errorf("the workers left %s entries on the mount", strings.TrimSpace(out))
	}
}

// shareScript copies testdata/name into the lab's share under a name of its
// own, removed when t ends, and returns its path in the guest.
func shareScript(t *testing.T, name string) string {
	share := lab.Share(t)
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(share, strings.TrimSuffix(name, ".sh")+"-*.sh")
	if err != nil {
		t.Fatalf("copying %s into the lab's share: %v", name, err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		t.Fatalf("copying %s into the lab's share: %v", name, err)
	}
	return "/share/" + filepath.Base(f.Name())
}

var okLine = regexp.MustCompile(`(?m)^ok `)

// checkWorkers waits (bounded) for the workers in the guest's dir to
// end, having been told to, and fails t unless each ended well. ran is
// how long they have run.
func checkWorkers(t *testing.T, dir string, ran time.Duration) {
	// A round that began just before the stop may move a MiB, slowly
	// under TCG.
	const grace = 5 * time.Minute
	deadline := time.Now().Add(grace)
	var rcs []string
	for ; time.Now().Before(deadline); time.Sleep(5 * time.Second) {
		out, _ := lab.Run(t, fmt.Sprintf("cd %s && for w in $(seq %d); do cat $w/rc 2>/dev/null; done", dir, restartWorkers), lab.CmdTimeout)
		if rcs = strings.Fields(out); len(rcs) == restartWorkers {
			break
		}
	}
	for w := 1; w <= restartWorkers; w++ {
		out, _ := lab.Run(t, fmt.Sprintf("cat %s/%d.log", dir, w), lab.CmdTimeout)
		t.Logf("worker %d ran %v: %d rounds; its last lines:\n%s", w, ran.Round(time.Second), len(okLine.FindAllStringIndex(out, -1)), lastLines(out, 4))
		switch {
		case len(rcs) < restartWorkers:
			t.Errorf("worker %d: the workers did not all end within %v of being told to (exit statuses %q); its last lines:\n%s", w, grace, rcs, lastLines(out, 20))
		case !regexp.MustCompile(`(?m)^done: \d+ rounds`).MatchString(out) || strings.Contains(out, "FAIL"):
			t.Errorf("worker %d failed across the server's restarts:\n%s", w, lastLines(out, 20))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// hostRestartServer returns our Server on the host, as TestLinuxMountsOurs
// runs it: NFS over RPC-over-RDMA on the iwarp provider where the guest's
// client connects (lab.PeerAddr), MOUNT over TCP (lab.PeerMountAddr), for
// a directory of t's. Each incarnation has a new LocalFS (so a new write
// verifier), provider and listeners, and the same secret; it stops with
// rpc.Server.Shutdown, as nfs serve does.
func hostRestartServer(t *testing.T) restartServer {
	h := &hostRestarts{dir: t.TempDir(), secret: []byte("a secret the restarted servers share")}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.ctx = ctx
	return restartServer{
		start: func(t *testing.T) { h.start(t) },
		restart: func(t *testing.T, d time.Duration, stop string) {
			began := time.Now()
			for h.k < restarts {
				// The client must have come back to each server
				// before the next restart; the first it has mounted.
				h.reached(t)
				time.Sleep(time.Until(began.Add(d * time.Duration(h.k+1) / (restarts + 1))))
				h.stop(t)
				// Long enough for the client to find nobody listening.
				time.Sleep(2 * time.Second)
				h.k++
				h.start(t)
				t.Logf("restart %d done, %v in", h.k, time.Since(began).Round(time.Second))
			}
			h.reached(t)
			time.Sleep(time.Until(began.Add(d)))
			if out, rc := lab.Run(t, "touch "+stop, lab.CmdTimeout); rc != 0 {
				t.Fatalf("touch %s in the guest: exit status %d: %s", stop, rc, out)
			}
		},
		stop: func(t *testing.T) { h.stop(t) },
	}
}

// hostRestarts is hostRestartServer's state: incarnation k's server.
type hostRestarts struct {
	ctx    context.Context
	dir    string
	secret []byte
	k      int

	fsys     *LocalFS
	p        *iwarp.Provider
	l        *rpcrdma.Listener
	nfsRPC   *rpc.Server
	mountRPC *rpc.Server
	served   chan error // each server's end: the MOUNT server's and the RDMA accept loop's

	mu     sync.Mutex
	conns  []*rpcrdma.Conn // incarnation k's
	failed []string        // calls answered other than NFS3_OK, or not at all
}

func (h *hostRestarts) observe(c CallDone) {
	// LOOKUP of a name not yet created is every cp's first call.
	if c.Err == nil && (c.Stat == nfs3.OK || c.Proc == nfs3.ProcLookup && c.Stat == nfs3.ErrNoEnt) {
		return
	}
	h.mu.Lock()
	h.failed = append(h.failed, fmt.Sprintf("%v: %v %v", c.Proc, c.Stat, c.Err))
	h.mu.Unlock()
}

// start starts incarnation h.k.
func (h *hostRestarts) start(t *testing.T) {
	var err error
	if h.fsys, err = NewLocalFS(h.dir); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{Secret: h.secret, Exports: []Export{{Path: "/export", FS: h.fsys}}, Observe: h.observe})
	if err != nil {
		t.Fatal(err)
	}
	h.served = make(chan error, 2)
	ml, err := net.Listen("tcp", lab.PeerMountAddr)
	if err != nil {
		t.Fatalf("server %d: listening for the guest's MOUNT calls: %v", h.k, err)
	}
	h.mountRPC = srv.NewRPCServer(true, nil)
	go func(rs *rpc.Server) { h.served <- rs.ServeListener(ml) }(h.mountRPC)
	if h.p, err = iwarp.New(iwarp.Options{}); err != nil {
		t.Fatal(err)
	}
	cfg := &rpcrdma.Config{}
	cfg.Bounds.ArgLimit = srv.ArgLimit
	if h.l, err = rpcrdma.Listen(h.ctx, h.p, lab.PeerAddr, cfg); err != nil {
		t.Fatalf("server %d: listening where the guest's NFS/RDMA client connects: %v", h.k, err)
	}
	h.nfsRPC = srv.NewRPCServer(false, nil)
	h.mu.Lock()
	h.conns = nil
	h.mu.Unlock()
	// The connections are served one by one, as nfs serve does, so that
	// stop can see their calls in flight.
	go func(l *rpcrdma.Listener, rs *rpc.Server) {
		for {
			c, err := l.Accept(h.ctx)
			if err != nil {
				h.served <- err
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			go func() {
				rs.Serve(c)
				c.Close()
			}()
		}
	}(h.l, h.nfsRPC)
}

// pending returns the calls incarnation h.k has received and not yet
// answered.
func (h *hostRestarts) pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.conns {
		n += c.Stats().CallsPending
	}
	return n
}

// reached waits until incarnation h.k has answered a call.
func (h *hostRestarts) reached(t *testing.T) {
	for deadline := time.Now().Add(restartReach); h.nfsRPC.Stats().Calls == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("server %d: the guest's client sent no call within %v of its start", h.k, restartReach)
		}
	}
}

// stop stops incarnation h.k as nfs serve does on SIGTERM: it closes the
// listeners, then Shutdown lets the calls in flight finish and answers
// them. It waits (for at most 10 s) for a moment when calls are in
// flight, so that the drain has something to do.
func (h *hostRestarts) stop(t *testing.T) {
	inFlight := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if inFlight = h.pending(); inFlight > 0 {
			break
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), restartDrain)
	defer scancel()
	began := time.Now()
	h.l.Close()
	for _, rs := range []*rpc.Server{h.nfsRPC, h.mountRPC} {
		if err := rs.Shutdown(sctx); err != nil {
			t.Errorf("server %d: the calls in flight did not finish within %v of Shutdown: %v", h.k, restartDrain, err)
			rs.Close()
		}
	}
	// MOUNT's serving and the RDMA accepting end in either order.
	e1, e2 := <-h.served, <-h.served
	if errors.Is(e2, rpc.ErrServerClosed) {
		e1, e2 = e2, e1
	}
	if !errors.Is(e1, rpc.ErrServerClosed) {
		t.Errorf("server %d: MOUNT's serving ended with %v, want %v", h.k, e1, rpc.ErrServerClosed)
	}
	if !errors.Is(e2, net.ErrClosed) {
		t.Errorf("server %d: accepting RDMA connections ended with %v, want %v", h.k, e2, net.ErrClosed)
	}
	h.fsys.Close()
	st := h.nfsRPC.Stats()
	t.Logf("server %d stopped in %v with %d calls in flight: %d calls answered, %d dropped while stopping, %d replies not sent",
		h.k, time.Since(began).Round(time.Millisecond), inFlight, st.Calls, st.Dropped, st.SendErrors)
	if n := h.pending(); n != 0 {
		t.Errorf("server %d: %d calls still unanswered once stopped", h.k, n)
	}
	if st.SendErrors != 0 {
		t.Errorf("server %d: %d replies not sent", h.k, st.SendErrors)
	}
	if n := h.p.Registered(); n != 0 {
		t.Errorf("server %d: %d memory regions still registered once stopped", h.k, n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.failed) > 0 {
		t.Errorf("server %d: %d calls answered with an error, or not at all; the first: %v", h.k, len(h.failed), h.failed[:min(len(h.failed), 10)])
		h.failed = nil
	}
}

// The guest's ports for guestRestartServer: not knfsd's (2049, 20048,
// 20049) nor those of other lab tests (20050, 20051, 12051).
const (
	restartRDMAPort = "20052"
	restartTCPPort  = "12052"
)

// guestRestartServer returns `rpcrdma nfs serve` built on the host with
// -tags verbs and run in the guest: the verbs provider on rxe0
// (lab.GuestRxeIP), MOUNT and NFS over TCP beside it, handles keyed by a
// --secret-file that survives restarts. On SIGTERM the command lets the
// calls in flight finish (--shutdown-timeout) and logs "stopped";
// testdata/restart-server.sh restarts it.
func guestRestartServer(t *testing.T) restartServer {
	bin := lab.BuildBinary(t, "../cmd/rpcrdma", []string{"verbs"})
	driver := shareScript(t, "restart-server.sh")
	dir := "/tmp/restart-srv-rxe"
	// The server runs from a copy in the guest's tmpfs: the workers drop
	// the page cache, and reading the binary again from the share at
	// each start took half a minute under TCG.
	serve := fmt.Sprintf("%[1]s/rpcrdma nfs serve --provider verbs --device rxe0 --rdma %[2]s:%[3]s --tcp %[2]s:%[4]s --secret-file key --shutdown-timeout %[5]v --export /export export",
		dir, lab.GuestRxeIP, restartRDMAPort, restartTCPPort, restartDrain)
	run := func(t *testing.T, cmd string, timeout time.Duration) string {
		t.Helper()
		out, rc := lab.Run(t, cmd, timeout+30*time.Second)
		if rc != 0 {
			t.Fatalf("guest command failed (exit status %d): %s\n%s", rc, cmd, out)
		}
		return out
	}
	running := false
	t.Cleanup(func() {
		if running {
			out, _ := lab.Run(t, fmt.Sprintf("kill -9 $(cat %[1]s/pid) 2>/dev/null; tail -c 20000 %[1]s/server.log", dir), lab.CmdTimeout)
			t.Logf("the server's log (its last 20000 bytes):\n%s", out)
		}
		lab.Run(t, "rm -rf "+dir, lab.CmdTimeout)
	})
	start := func(t *testing.T) {
		// The server runs in a session of its own with the command
		// channel (fd 3) closed, appending to its log.
		run(t, fmt.Sprintf("rm -rf %[1]s && mkdir -p %[1]s/export && cp %[3]s %[1]s/rpcrdma && cd %[1]s && (setsid %[2]s >>server.log 2>&1 </dev/null 3>&- & echo $! >pid) && "+
			"for i in $(seq 600); do grep -q 'nfs: serving' server.log && break; kill -0 $(cat pid) || break; sleep 0.1; done; "+
			"cat server.log; grep -q 'nfs: serving' server.log", dir, serve, bin), 90*time.Second)
		running = true
	}
	restart := func(t *testing.T, d time.Duration, stop string) {
		// The restarts are timed in the guest: other tests may hold the
		// command channel for minutes.
		run(t, fmt.Sprintf("cd %[1]s && (setsid sh %[2]s %[1]s %[3]d %[4]d %[5]d %[6]s %[7]s >restarts.log 2>&1 </dev/null 3>&- &)",
			dir, driver, int(d.Seconds()), restarts, int(restartDrain.Seconds()), stop, serve), 30*time.Second)
		// Each restart may wait restartReach for the client, then
		// restartDrain and 30 s for the stop, and 60 s for the start.
		bound := d + restarts*(restartReach+restartDrain+90*time.Second)
		deadline := time.Now().Add(bound)
		rc := ""
		for ; rc == "" && time.Now().Before(deadline); time.Sleep(5 * time.Second) {
			out, _ := lab.Run(t, "cat "+dir+"/rc 2>/dev/null", lab.CmdTimeout)
			rc = strings.TrimSpace(out)
		}
		out := run(t, "cat "+dir+"/restarts.log", lab.CmdTimeout)
		t.Logf("the restarts in the guest:\n%s", out)
		if rc != "0" {
			t.Fatalf("restarting the server in the guest failed (exit status %q; none: not done within %v)", rc, bound)
		}
	}
	stop := func(t *testing.T) {
		began := time.Now()
		out := run(t, fmt.Sprintf("cd %s && kill $(cat pid) && for i in $(seq 600); do kill -0 $(cat pid) 2>/dev/null || break; sleep 0.1; done; "+
			"kill -0 $(cat pid) 2>/dev/null && echo still running; grep -c msg=stopped server.log; grep -E 'level=(WARN|ERROR)' server.log | tail -n 5",
			dir), restartDrain+60*time.Second)
		running = strings.Contains(out, "still running")
		t.Logf("the last server stopped in %v", time.Since(began).Round(time.Millisecond))
		if running || !strings.HasPrefix(out, fmt.Sprint(restarts+1, "\n")) || strings.Contains(out, "level=") {
			t.Errorf("SIGTERM did not stop the last server cleanly (the stops so far, then the warnings and errors logged):\n%s", out)
		}
	}
	return restartServer{start: start, restart: restart, stop: stop}
}
