package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// guestEnv is set in the environment of a test binary that RunTestBinary
// runs in the guest.
const guestEnv = "RPCRDMA_LAB_GUEST"

// InGuest reports whether the calling test binary runs inside the lab
// guest, started by RunTestBinary. A test meant for the guest only (one
// that opens rxe0, say) skips when it is false.
func InGuest() bool { return os.Getenv(guestEnv) == "1" }

// Share returns the host directory that the guest sees, read-only, at
// /share (lab/30-boot-vm.sh shares $WORK/share unless SHARE says
// otherwise). It skips t unless the VM runs and mounted the share.
func Share(t testing.TB) string {
	t.Helper()
	Require(t)
	work := Work()
	dir, err := os.ReadFile(filepath.Join(work, "share-dir"))
	console, _ := os.ReadFile(filepath.Join(work, "console.log"))
	if err != nil || !strings.Contains(string(console), "LAB-SHARE") {
		t.Skipf("Linux lab VM in WORK=%s runs without its 9p share (no share-dir, or no LAB-SHARE on the console); reboot it with lab/90-stop-vm.sh and lab/30-boot-vm.sh", work)
	}
	return strings.TrimSpace(string(dir))
}

// RunTestBinary builds the tests of pkg on the host with go test -c and the
// build tags tags, puts the binary in the share under a name of its own,
// runs it in the guest from /share with args (for example "-test.v",
// "-test.run", "TestX") and returns its output (stdout and stderr). It
// skips t as Share does, and fails t with the output if the build or the
// run fails, or if the run takes longer than BinaryTimeout (or than t's
// deadline allows).
//
// pkg is an import path, or a directory relative to the calling test's
// package directory ("." for the caller's own package). The binary is
// built with CGO_ENABLED=1 when tags hold "verbs" (the provider over
// libibverbs; host and guest are both Debian 12, so it finds the same C
// library there), and as a static CGO_ENABLED=0 binary otherwise.
//
// In the guest the binary runs as root with its working directory /tmp
// and RPCRDMA_LAB_GUEST=1 in its environment (see InGuest); the package's
// source directory, testdata included, is not there. The binary is
// removed when t ends. Calls hold the command channel for the whole run
// (see Run), so they run one at a time.
func RunTestBinary(t testing.TB, pkg string, tags []string, args ...string) (output string) {
	t.Helper()
	bin := build(t, pkg, tags, true)

	limit := BinaryTimeout
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			// Leave time to report, and for the cleanups.
			limit = min(limit, time.Until(dl)-30*time.Second)
		}
	}
	if limit < 10*time.Second {
		t.Fatalf("RunTestBinary %s: only %v left before the test's deadline", pkg, limit)
	}
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	// The guest's timeout(1) kills the binary; the channel waits a little
	// longer so that the exit status (124 after SIGTERM) comes back.
	cmd := fmt.Sprintf("cd /tmp && %s=1 timeout %d /share/%s %s",
		guestEnv, int(limit.Seconds()), filepath.Base(bin), strings.Join(q, " "))
	start := time.Now()
	out, rc := Run(t, cmd, limit+20*time.Second)
	if rc != 0 {
		t.Fatalf("RunTestBinary: %s in the guest: exit status %d after %v (124: killed at %v)\n%s",
			filepath.Base(bin), rc, time.Since(start).Round(time.Millisecond), limit.Round(time.Second), out)
	}
	t.Logf("ran %s in the guest in %v", filepath.Base(bin), time.Since(start).Round(time.Millisecond))
	return out
}

// BuildBinary builds the command pkg (an import path, or a directory
// relative to the calling test's package directory) on the host with go
// build and the build tags tags, puts it in the share under a name of its
// own, and returns the path at which the guest runs it (/share/NAME). It
// is built as RunTestBinary builds a test binary: with CGO_ENABLED=1 when
// tags hold "verbs", static otherwise. It skips t as Share does and fails
// t if the build fails. The binary is removed when t ends; stop what runs
// it in the guest before then.
func BuildBinary(t testing.TB, pkg string, tags []string) (guestPath string) {
	t.Helper()
	return "/share/" + filepath.Base(build(t, pkg, tags, false))
}

// build builds pkg with tags into the share (its tests with go test -c
// when test is true) and returns the host path of the binary, which is
// removed when t ends.
func build(t testing.TB, pkg string, tags []string, test bool) string {
	t.Helper()
	share := Share(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building %s for the guest: no go command: %v", pkg, err)
	}
	base := path.Base(filepath.ToSlash(pkg))
	if base == "." || base == "/" {
		wd, _ := os.Getwd()
		base = filepath.Base(wd)
	}
	suffix := ".test"
	if !test {
		suffix = ".bin"
	}
	f, err := os.CreateTemp(share, base+"-*"+suffix)
	if err != nil {
		t.Fatalf("building %s for the guest: %v", pkg, err)
	}
	f.Close()
	bin := f.Name()
	t.Cleanup(func() { os.Remove(bin) })

	cgo := "0"
	if slices.Contains(tags, "verbs") {
		cgo = "1"
		if why := verbsBuildMissing(); why != "" {
			t.Skipf("building %s with the verbs provider for the guest: %s", pkg, why)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"build"}
	if test {
		args = []string{"test", "-c"}
	}
	args = append(args, "-o", bin, "-tags", strings.Join(tags, ","), pkg)
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building for the guest: %s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatalf("building %s for the guest: %v", pkg, err)
	}
	t.Logf("built %s (tags %q, CGO_ENABLED=%s) in %v", bin, tags, cgo, time.Since(start).Round(time.Millisecond))
	return bin
}

// verbsBuildMissing says what the host lacks to build the verbs provider
// (cgo over rdma-core's libibverbs and librdmacm), or "".
func verbsBuildMissing() string {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return fmt.Sprintf("no C compiler (%s) on the host", cc)
	}
	for _, h := range []string{"/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h"} {
		if _, err := os.Stat(h); err != nil {
			return "rdma-core's headers are not on the host (" + h + "; apt-get install libibverbs-dev librdmacm-dev)"
		}
	}
	return ""
}

// shellQuote quotes s for sh(1) as one word.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=./,:", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
