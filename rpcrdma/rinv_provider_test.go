package rpcrdma

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
)

// noRInvProvider is loopback saying its regions do not take remote
// invalidation, as the verbs provider does.
type noRInvProvider struct{ *loopback.Network }

func (noRInvProvider) RemoteInvalidation() bool { return false }

// TestNoRemoteInvalidationProvider: a requester over a provider whose
// regions cannot take Send With Invalidate does not invite it, so the
// responder never sends one.
func TestNoRemoteInvalidationProvider(t *testing.T) {
	conn, resp := dialAccept(t, noRInvProvider{loopback.New()}, "", nil, nil)
	defer conn.Close()
	defer resp.Close()
	if conn.Info().RemoteInvalidation || resp.Info().RemoteInvalidation {
		t.Fatalf("remote invalidation in use: requester %+v, responder %+v", conn.Info(), resp.Info())
	}
	conn2, resp2 := dialAccept(t, loopback.New(), "", nil, nil)
	defer conn2.Close()
	defer resp2.Close()
	if !conn2.Info().RemoteInvalidation || !resp2.Info().RemoteInvalidation {
		t.Fatalf("remote invalidation not in use over loopback: requester %+v, responder %+v", conn2.Info(), resp2.Info())
	}
}
