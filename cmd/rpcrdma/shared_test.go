package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeSharedReceives checks that serve receives from a shared pool
// by default, granting a connection a few credits at first, and that
// --shared-receives 0 gives every connection --credits of its own.
func TestServeSharedReceives(t *testing.T) {
	grantRE := regexp.MustCompile(`credits granted: ([0-9]+)`)
	for _, tc := range []struct {
		flags    []string
		log      string
		min, max int
	}{
		{nil, "shared_receives=" + strconv.Itoa(defaultSharedRecvs), 1, 32},
		{[]string{"--shared-receives", "0"}, "shared_receives=0", 128, 128},
		{[]string{"--shared-receives", "64", "--credits", "8"}, "shared_receives=64", 1, 8},
	} {
		s := startServe(t, tc.flags...)
		if !strings.Contains(s.logText(), tc.log) {
			t.Errorf("serve %v: its start line lacks %q:\n%s", tc.flags, tc.log, s.logText())
		}
		out, errOut, code := rpcrdmaCmd(t, 20*time.Second, "ping", "--count", "2", "--interval", "1ms", s.addr)
		if code != 0 {
			t.Fatalf("ping serve %v: exit %d\n%s\n%s", tc.flags, code, out, errOut)
		}
		m := grantRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("ping serve %v: no credits granted in its output:\n%s", tc.flags, out)
		}
		if n, _ := strconv.Atoi(m[1]); n < tc.min || n > tc.max {
			t.Errorf("serve %v granted %d credits, want %d to %d", tc.flags, n, tc.min, tc.max)
		}
	}
	if _, errOut, code := rpcrdmaCmd(t, 10*time.Second, "serve", "--shared-receives", "-1"); code != 2 || !strings.Contains(errOut, "--shared-receives -1") {
		t.Errorf("serve --shared-receives -1: exit %d, want 2 and the flag named\n%s", code, errOut)
	}
}
