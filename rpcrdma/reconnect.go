package rpcrdma

import (
	"context"
	"errors"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// DialClient returns an rpc.Client making calls over RPC-over-RDMA to addr
// through p, which reconnects when its connection fails (rpc.DialClient):
// each connection is dialed as Dial does with cfg, and the calls in flight
// on a lost one are sent again on the next, with their xids. As RFC 8166
// section 4.3 requires, nothing is resent on the connection it was sent
// on: each connection starts again at one credit, and the new one
// registers the calls' memory afresh (the lost one has released it). rc
// may be nil for the defaults; its Dial must be nil, since DialClient
// dials itself. It returns the first dial's error.
//
// To use each connection's Backchannel, or to say something on it before
// anything else, call rpc.DialClient with a Dial that does that with the
// Conn from Dial before returning it.
func DialClient(ctx context.Context, p rdma.Provider, addr string, cfg *Config, rc *rpc.ReconnectConfig) (*rpc.Client, error) {
	var r rpc.ReconnectConfig
	if rc != nil {
		r = *rc
	}
	if r.Dial != nil {
		return nil, errors.New("rpcrdma: DialClient dials itself: ReconnectConfig.Dial must be nil")
	}
	var own Config
	if cfg != nil {
		own = *cfg
	}
	if err := own.validate(); err != nil {
		return nil, err
	}
	r.Dial = func(ctx context.Context) (rpc.Transport, error) {
		c, err := Dial(ctx, p, addr, &own)
		if err != nil {
			return nil, err // not a nil *Conn in an interface
		}
		return c, nil
	}
	return rpc.DialClient(ctx, r)
}
