package loopback_test

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

func TestConformance(t *testing.T) {
	n := loopback.New()
	rdmatest.TestProvider(t, rdmatest.Config{Provider: n})
	if r := n.Registered(); r != 0 {
		t.Errorf("%d memory regions still registered after the suite", r)
	}
}
