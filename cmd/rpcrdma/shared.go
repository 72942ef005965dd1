package main

import (
	"context"
	"log/slog"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
)

// defaultSharedRecvs is the depth of the servers' shared receive pool:
// a credit for each of the rpcrdma.DefaultMaxConns connections a
// Listener keeps, and room for 128 of them to reach 32 credits.
const defaultSharedRecvs = rpcrdma.DefaultMaxConns + 128*32

const sharedRecvsUsage = `receives in the one pool every connection receives from, where the provider has shared receive queues (the software iWARP and verbs): a connection is granted 1 credit when accepted and more while its calls keep them busy, and an idle one holds no receive of its own; the pool registers this many times --inline bytes, touched as messages arrive, and a connection beyond what it can grant a credit is refused. 0: each connection posts --credits+2 receives of its own and as many send buffers (2 x (credits+2) x --inline bytes registered per connection)`

// listen is rpcrdma.Listen for serve and nfs serve: with the shared
// receive pool of --shared-receives where the provider has shared
// receive queues. A provider that has them but cannot make one here
// (a verbs build with several devices and no --device, say) is logged
// and served without the pool.
func (f *transportFlags) listen(ctx context.Context, p rdma.Provider, addr string, cfg *rpcrdma.Config, log *slog.Logger) (*rpcrdma.Listener, error) {
	if _, ok := p.(rdma.SharedRecvProvider); !ok || f.sharedRecvs == 0 {
		return rpcrdma.Listen(ctx, p, addr, cfg)
	}
	shared := *cfg
	shared.Bounds.SharedReceives = f.sharedRecvs
	l, err := rpcrdma.Listen(ctx, p, addr, &shared)
	if err == nil {
		return l, nil
	}
	l, err2 := rpcrdma.Listen(ctx, p, addr, cfg)
	if err2 != nil {
		return nil, err2
	}
	log.Warn("serving without a shared receive pool: each connection posts receives of its own", "err", err)
	return l, nil
}
