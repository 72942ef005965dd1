//go:build linux && cgo && verbs

package verbs

import (
	"context"
	"errors"
	"flag"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// flagRemove lets TestDeviceRemoval delete and re-create a device. Only
// TestGuestDeviceRemoval sets it, in a process of its own: the device
// comes back as a new device, which a process that used the old one does
// not see again (librdmacm reads the device list once).
var flagRemove = flag.String("verbs.remove", "", `"rxe0 eth1": TestDeviceRemoval deletes this rxe device and adds it again on this netdev`)

// TestDeviceRemoval: "rdma link delete" with connections up, one with
// receives posted and one idle, ends each with an error that names the
// device's removal (rdma_cm's DEVICE_REMOVAL or the fatal device event,
// whichever comes first; a peer on the same device may hear the other
// side's disconnect first), nothing hangs, and Close gives everything back
// (newProvider's cleanup counts it). The device is added again at once.
func TestDeviceRemoval(t *testing.T) {
	dev, netdev, ok := strings.Cut(*flagRemove, " ")
	if !ok {
		t.Skip(`deletes an RDMA device: run with -verbs.remove "rxe0 eth1" (TestGuestDeviceRemoval does, in the lab guest)`)
	}
	tg := target{}
	for _, x := range targets(t) {
		if x.device == dev {
			tg = x
		}
	}
	if tg.device == "" {
		t.Fatalf("no device %s under test", dev)
	}
	link := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "rdma", args...).CombinedOutput()
		t.Logf("rdma %s: %v %s", strings.Join(args, " "), err, out)
		return err
	}
	p := newProvider(t, tg, Options{})
	cfg := rdmatest.Config{Provider: p, ListenAddr: tg.addr + ":0", Timeout: 30 * time.Second}
	a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	c, d := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	m := rdmatest.Alloc(t, b, 64, rdma.AccessLocalWrite)
	for id := uint64(1); id <= 3; id++ {
		rdmatest.PostRecv(t, b, id, rdmatest.Whole(m))
	}
	readded := false
	add := func() {
		if !readded {
			readded = true
			if err := link("link", "add", dev, "type", "rxe", "netdev", netdev); err != nil {
				t.Errorf("re-create %s: %v", dev, err)
			}
		}
	}
	// The kernel finishes the removal only once every user of the
	// device has let go of it (rdma_rxe cannot disassociate a user
	// context): the command returns after the connections are closed.
	start := time.Now()
	del := exec.Command("rdma", "link", "delete", dev)
	var delOut strings.Builder
	del.Stdout, del.Stderr = &delOut, &delOut
	if err := del.Start(); err != nil {
		t.Fatalf("delete %s: %v", dev, err)
	}
	delDone := make(chan error, 1)
	go func() { delDone <- del.Wait() }()
	conns := []rdma.Conn{a, b, c, d}
	t.Cleanup(func() {
		for _, x := range conns {
			x.Close()
		}
		select {
		case err := <-delDone:
			t.Logf("rdma link delete %s: %v %s", dev, err, delOut.String())
			if err != nil {
				t.Errorf("rdma link delete %s: %v %s", dev, err, delOut.String())
			}
		case <-time.After(cfg.Timeout):
			t.Errorf("rdma link delete %s has not returned %v after the connections closed", dev, cfg.Timeout)
		}
		add()
	})
	removed := func(err error) bool {
		return errors.Is(err, net.ErrClosed) && (strings.Contains(err.Error(), "removed") || strings.Contains(err.Error(), "IBV_EVENT_DEVICE_FATAL"))
	}
	for i, x := range conns {
		select {
		case <-x.Done():
		case <-time.After(cfg.Timeout):
			t.Fatalf("connection %d still up %v after the device's removal", i, cfg.Timeout)
		}
		t.Logf("connection %d ended after %v: %v", i, time.Since(start).Round(time.Millisecond), x.Err())
	}
	// Both ends of each pair are on the device. The kernel tears their
	// identifiers down one by one, destroying the first sends the other a
	// disconnect, and that may arrive before the other's own removal
	// event: one side of each pair names the removal, the other names it
	// or the disconnect.
	for i := 0; i < len(conns); i += 2 {
		e0, e1 := conns[i].Err(), conns[i+1].Err()
		if !(removed(e0) && (removed(e1) || errors.Is(e1, rdma.ErrDisconnected)) ||
			removed(e1) && errors.Is(e0, rdma.ErrDisconnected)) {
			t.Errorf("connections %d and %d: errors %v and %v, want the device's removal named", i, i+1, e0, e1)
		}
	}
	cs, err := rdmatest.Drain(t, cfg, b)
	if len(cs) != 3 || err == nil {
		t.Errorf("receives after removal: %+v, %v; want 3 flushed", cs, err)
	}
	for _, x := range cs {
		if x.Status != rdma.StatusFlushed {
			t.Errorf("receive %d: %v, want flushed", x.ID, x.Status)
		}
	}
}
