package rpcrdma

import (
	"context"
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// The Connection Configuration Protocol (RFC 5666 section 6; program
// 100417 version 1, procedure CONF_RDMA). Every responder Conn serves it
// itself, below the rpc.Server, because the answer describes the
// connection: the largest inline call this responder accepts (its receive
// buffer size) and the RDMA Reads it lets the requester have outstanding
// against it (its IRD). It does not pad (RDMA_MSGP), so it recommends no
// alignment (0).

// configReply answers a CONF_RDMA call m on responder c, or reports false
// if m is not a call to program 100417. Unknown versions and procedures of
// the program get PROG_MISMATCH and PROC_UNAVAIL as RFC 5531 says.
func (r *responder) configReply(m *rpc.Msg) (*rpc.Msg, bool) {
	var ch rpc.CallHeader
	d := xdr.NewDecoder(m.XDR)
	if err := ch.Decode(&d); err != nil || ch.Prog != wire.ConfigProgram {
		return nil, false
	}
	rh := rpc.ReplyHeader{XID: ch.XID, Stat: rpc.MsgAccepted, AcceptStat: rpc.Success}
	var res []byte
	switch {
	case ch.Vers != wire.ConfigVersion:
		rh.AcceptStat, rh.Low, rh.High = rpc.ProgMismatch, wire.ConfigVersion, wire.ConfigVersion
	case ch.Proc == 0: // NULL
	case ch.Proc == wire.ProcConfRDMA:
		var req wire.ConfigReq
		if _, err := req.Decode(d.Rest()); err != nil {
			rh.AcceptStat = rpc.GarbageArgs
			break
		}
		res = wire.ConfigReply{
			MaxCallSendSize: uint32(r.c.recvSize),
			MaxRDMARead:     uint32(r.c.rc.Limits().IRD),
		}.Append(nil)
	default:
		rh.AcceptStat = rpc.ProcUnavail
	}
	out := rh.Append(nil)
	return &rpc.Msg{Body: rpc.Body{XDR: append(out, res...)}}, true
}

// QueryConfig calls CONF_RDMA through cli, offering req, and returns the
// responder's configuration (RFC 5666 section 6.2). Errors are cli.Call's.
func QueryConfig(ctx context.Context, cli *rpc.Client, req wire.ConfigReq) (wire.ConfigReply, error) {
	rep, err := cli.Call(ctx, &rpc.Request{
		Prog: wire.ConfigProgram, Vers: wire.ConfigVersion, Proc: wire.ProcConfRDMA,
		Args: rpc.Body{XDR: req.Append(nil)},
	})
	if err != nil {
		return wire.ConfigReply{}, err
	}
	var cr wire.ConfigReply
	if _, err := cr.Decode(rep.Results.XDR); err != nil {
		return wire.ConfigReply{}, fmt.Errorf("rpcrdma: CONF_RDMA reply: %w", err)
	}
	return cr, nil
}
