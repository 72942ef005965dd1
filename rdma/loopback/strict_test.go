package loopback_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/loopback"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

func term(l rdma.Layer, typ rdma.ErrorType, code rdma.ErrorCode) rdma.TerminateError {
	return rdma.TerminateError{Layer: l, Type: typ, Code: code}
}

var (
	ddpInvalid    = term(rdma.LayerDDP, rdma.TypeTaggedBuffer, rdma.CodeTaggedInvalidSTag)
	ddpNotAssoc   = term(rdma.LayerDDP, rdma.TypeTaggedBuffer, rdma.CodeTaggedSTagNotAssociated)
	ddpBounds     = term(rdma.LayerDDP, rdma.TypeTaggedBuffer, rdma.CodeTaggedBaseBounds)
	ddpPlacement  = term(rdma.LayerDDP, rdma.TypeLocalCatastrophic, 0)
	rpInvalid     = term(rdma.LayerRDMAP, rdma.TypeRemoteProtection, rdma.CodeInvalidSTag)
	rpNotAssoc    = term(rdma.LayerRDMAP, rdma.TypeRemoteProtection, rdma.CodeSTagNotAssociated)
	rpRights      = term(rdma.LayerRDMAP, rdma.TypeRemoteProtection, rdma.CodeAccessRights)
	rpBounds      = term(rdma.LayerRDMAP, rdma.TypeRemoteProtection, rdma.CodeBaseBounds)
	rpCannotInv   = term(rdma.LayerRDMAP, rdma.TypeRemoteProtection, rdma.CodeCannotInvalidate)
	roCannotInv   = term(rdma.LayerRDMAP, rdma.TypeRemoteOperation, rdma.CodeCannotInvalidate)
	roIRD         = term(rdma.LayerRDMAP, rdma.TypeRemoteOperation, rdma.CodeCatastrophicStream)
	localCatastro = term(rdma.LayerRDMAP, rdma.TypeLocalCatastrophic, rdma.CodeUnspecified)
	noBuffer      = term(rdma.LayerDDP, rdma.TypeUntaggedBuffer, rdma.CodeNoBuffer)
	tooLong       = term(rdma.LayerDDP, rdma.TypeUntaggedBuffer, rdma.CodeMessageTooLong)
)

func config(n *loopback.Network) rdmatest.Config { return rdmatest.Config{Provider: n} }

// outcome drains both sides after a fatal error: the completions of the
// side that caused it (a) and the errors of both.
type outcome struct {
	ac, bc     []rdma.Completion
	aerr, berr error
}

func drainBoth(t *testing.T, cfg rdmatest.Config, a, b rdma.Conn) outcome {
	t.Helper()
	var o outcome
	o.ac, o.aerr = rdmatest.Drain(t, cfg, a)
	o.bc, o.berr = rdmatest.Drain(t, cfg, b)
	return o
}

// wantTerm checks that det sent te and the other side received it.
func (o outcome) wantTerm(t *testing.T, detIsB bool, te rdma.TerminateError) {
	t.Helper()
	det, other := o.berr, o.aerr
	if !detIsB {
		det, other = o.aerr, o.berr
	}
	rdmatest.WantTerminate(t, det, false, te)
	rdmatest.WantTerminate(t, other, true, te)
}

// TestCheckOrder checks which Terminate each tagged access gets when
// several checks fail: siw's order is index, key and validity, PD, rights,
// bounds (docs/linux-interop.md section 2).
func TestCheckOrder(t *testing.T) {
	type regions struct{ own, foreign, ownRO, ownWO, foreignRO rdma.MR }
	cases := []struct {
		name        string
		stag        func(r regions) (rdma.STag, uint64)
		length      int
		write, read rdma.TerminateError
	}{
		{"unknown index", func(r regions) (rdma.STag, uint64) { return rdma.MakeSTag(0xfffffe, 1), 0 }, 8, ddpInvalid, rpInvalid},
		{"foreign with wrong key", func(r regions) (rdma.STag, uint64) {
			s := r.foreign.STag()
			return rdma.MakeSTag(s.Index(), s.Key()^0x80), r.foreign.TO()
		}, 8, ddpInvalid, rpInvalid},
		{"foreign invalidated", func(r regions) (rdma.STag, uint64) {
			r.foreign.Invalidate()
			return r.foreign.STag(), r.foreign.TO()
		}, 8, ddpInvalid, rpInvalid},
		{"foreign without rights out of bounds", func(r regions) (rdma.STag, uint64) {
			return r.foreignRO.STag(), r.foreignRO.TO() + 1000
		}, 8, ddpNotAssoc, rpNotAssoc},
		{"own without rights out of bounds", func(r regions) (rdma.STag, uint64) {
			return r.ownRO.STag(), r.ownRO.TO() + 1000
		}, 8, rpRights, rpBounds}, // the read-only region grants Read
		{"own out of bounds", func(r regions) (rdma.STag, uint64) { return r.own.STag(), r.own.TO() + 60 }, 8, ddpBounds, rpBounds},
		{"own below base", func(r regions) (rdma.STag, uint64) { return r.own.STag(), r.own.TO() - 1 }, 1, ddpBounds, rpBounds},
		{"own TO wraps", func(r regions) (rdma.STag, uint64) { return r.own.STag(), ^uint64(0) - 3 }, 8, ddpBounds, rpBounds},
		{"own at the end", func(r regions) (rdma.STag, uint64) { return r.own.STag(), r.own.TO() + 64 }, 1, ddpBounds, rpBounds},
		{"write-only read", func(r regions) (rdma.STag, uint64) { return r.ownWO.STag(), r.ownWO.TO() }, 8, rdma.TerminateError{}, rpRights},
	}
	for _, c := range cases {
		for _, op := range []rdma.Op{rdma.OpWrite, rdma.OpRead} {
			want := c.write
			if op == rdma.OpRead {
				want = c.read
			}
			if want == (rdma.TerminateError{}) {
				continue
			}
			t.Run(c.name+"/"+op.String(), func(t *testing.T) {
				rdmatest.CheckGoroutines(t)
				n := loopback.New()
				cfg := config(n)
				a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
				_, b2 := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
				rw := rdma.AccessRemoteRead | rdma.AccessRemoteWrite
				r := regions{
					own:       rdmatest.Alloc(t, b, 64, rw),
					foreign:   rdmatest.Alloc(t, b2, 64, rw),
					ownRO:     rdmatest.Alloc(t, b, 64, rdma.AccessRemoteRead),
					ownWO:     rdmatest.Alloc(t, b, 64, rdma.AccessRemoteWrite),
					foreignRO: rdmatest.Alloc(t, b2, 64, rdma.AccessRemoteRead),
				}
				stag, to := c.stag(r)
				local := rdmatest.Alloc(t, a, c.length, rdma.AccessLocalWrite)
				rdmatest.Post(t, a, rdma.WorkRequest{ID: 1, Op: op, Local: []rdma.SGE{rdmatest.Whole(local)}, RemoteSTag: stag, RemoteTO: to})
				o := drainBoth(t, cfg, a, b)
				o.wantTerm(t, true, want)
				rdmatest.Want(t, o.ac[0], 1, op, rdma.StatusRemoteAccess, 0)
				for _, m := range []rdma.MR{r.own, r.ownRO, r.ownWO} {
					for i, v := range m.Bytes() {
						if v != 0 {
							t.Fatalf("byte %d of %v written", i, m.STag())
						}
					}
				}
			})
		}
	}
}

// TestTerminateDetail: the error names the message, the STag and the
// bounds.
func TestTerminateDetail(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	cfg := config(loopback.New())
	a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	dst := rdmatest.Alloc(t, b, 8192, rdma.AccessRemoteWrite)
	src := rdmatest.Alloc(t, a, 8192, 0)
	rdmatest.Post(t, a, rdma.WorkRequest{Op: rdma.OpWrite, Local: []rdma.SGE{rdmatest.Whole(src)}, RemoteSTag: dst.STag(), RemoteTO: dst.TO() + 4096})
	o := drainBoth(t, cfg, a, b)
	want := fmt.Sprintf("rdma: connection terminated: DDP tagged buffer: base or bounds violation (1/1/0x01): "+
		"remote write to stag %v TO %#x: offset 4096 length 8192 beyond region length 8192", dst.STag(), dst.TO()+4096)
	if o.berr.Error() != want {
		t.Fatalf("detector's error\n%s\nwant\n%s", o.berr, want)
	}
	if !strings.HasPrefix(o.aerr.Error(), "rdma: connection terminated by peer: DDP tagged buffer") || !strings.HasSuffix(o.aerr.Error(), "beyond region length 8192") {
		t.Fatalf("peer's error %s", o.aerr)
	}
}

// TestExactStatuses checks the statuses loopback gives the work request a
// peer refused, which the suite lets a provider report as success.
func TestExactStatuses(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, a, b rdma.Conn) rdma.WorkRequest
		want  rdma.TerminateError
		st    rdma.Status
		recv  rdma.Status // of b's receive 1, if posted
	}{
		{"no receive", func(t *testing.T, a, b rdma.Conn) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpSend}
		}, noBuffer, rdma.StatusRNR, 0},
		{"receive too small", func(t *testing.T, a, b rdma.Conn) rdma.WorkRequest {
			rdmatest.PostRecv(t, b, 1, rdma.SGE{MR: rdmatest.Alloc(t, b, 4, rdma.AccessLocalWrite), Length: 4})
			return rdma.WorkRequest{Op: rdma.OpSend, Local: []rdma.SGE{{MR: rdmatest.Alloc(t, a, 5, 0), Length: 5}}}
		}, tooLong, rdma.StatusRemoteOperation, rdma.StatusLocalLength},
		{"receive buffer invalidated after posting", func(t *testing.T, a, b rdma.Conn) rdma.WorkRequest {
			m := rdmatest.Alloc(t, b, 4, rdma.AccessLocalWrite)
			rdmatest.PostRecv(t, b, 1, rdmatest.Whole(m))
			m.Invalidate()
			return rdma.WorkRequest{Op: rdma.OpSend}
		}, ddpPlacement, rdma.StatusRemoteOperation, rdma.StatusLocalProtection},
		{"invalidate a foreign STag", func(t *testing.T, a, b rdma.Conn) rdma.WorkRequest {
			rdmatest.PostRecv(t, b, 1)
			return rdma.WorkRequest{Op: rdma.OpSendSEInvalidate, InvalidateSTag: rdmatest.Alloc(t, a, 4, rdma.AccessRemoteWrite).STag()}
		}, rpCannotInv, rdma.StatusRemoteAccess, rdma.StatusRemoteInvalidRequest},
		{"invalidate an STag never exposed", func(t *testing.T, a, b rdma.Conn) rdma.WorkRequest {
			rdmatest.PostRecv(t, b, 1)
			return rdma.WorkRequest{Op: rdma.OpSendInvalidate, InvalidateSTag: rdmatest.Alloc(t, b, 4, rdma.AccessLocalWrite).STag()}
		}, rpCannotInv, rdma.StatusRemoteAccess, rdma.StatusRemoteInvalidRequest},
		{"invalidate an unknown STag", func(t *testing.T, a, b rdma.Conn) rdma.WorkRequest {
			rdmatest.PostRecv(t, b, 1)
			return rdma.WorkRequest{Op: rdma.OpSendInvalidate, InvalidateSTag: rdma.MakeSTag(0xfffffe, 0)}
		}, roCannotInv, rdma.StatusRemoteOperation, rdma.StatusRemoteInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rdmatest.CheckGoroutines(t)
			cfg := config(loopback.New())
			a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
			wr := c.setup(t, a, b)
			wr.ID = 9
			rdmatest.Post(t, a, wr)
			o := drainBoth(t, cfg, a, b)
			o.wantTerm(t, true, c.want)
			rdmatest.Want(t, o.ac[0], 9, wr.Op, c.st, 0)
			if c.recv != 0 {
				rdmatest.Want(t, o.bc[0], 1, rdma.OpRecv, c.recv, 0)
			}
		})
	}
}

// TestIRDOverrun: a requester that ignores the negotiated ORD overruns the
// responder's IRD, which ends the connection.
func TestIRDOverrun(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	cfg := config(loopback.New())
	a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{ORD: 1}, rdma.ConnConfig{IRD: 1})
	if a.Limits().ORD != 1 || b.Limits().IRD != 1 {
		t.Fatalf("limits %+v %+v", a.Limits(), b.Limits())
	}
	if err := a.(*loopback.Conn).SetFaults(loopback.Faults{ORD: 3}); err != nil {
		t.Fatal(err)
	}
	// Hold b's Read Responses back so that the requests pile up.
	if err := b.(*loopback.Conn).SetFaults(loopback.Faults{Delay: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	src := rdmatest.Alloc(t, b, 8, rdma.AccessRemoteRead)
	sink := rdmatest.Alloc(t, a, 8, rdma.AccessLocalWrite)
	for id := uint64(1); id <= 2; id++ {
		rdmatest.Post(t, a, rdma.WorkRequest{ID: id, Op: rdma.OpRead, Local: []rdma.SGE{rdmatest.Whole(sink)}, RemoteSTag: src.STag(), RemoteTO: src.TO()})
	}
	o := drainBoth(t, cfg, a, b)
	o.wantTerm(t, true, roIRD)
	rdmatest.Want(t, o.ac[0], 1, rdma.OpRead, rdma.StatusFlushed, 0)
	rdmatest.Want(t, o.ac[1], 2, rdma.OpRead, rdma.StatusRemoteOperation, 0)
}

// TestPrepareSends: work posted by the responder's Prepare runs once the
// initiator is established, into the receive its Prepare posted.
func TestPrepareSends(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	cfg := config(loopback.New())
	a, b := rdmatest.Pair(t, cfg,
		rdma.ConnConfig{Prepare: func(c rdma.Conn) error { return c.PostRecv(1, nil) }},
		rdma.ConnConfig{Prepare: func(c rdma.Conn) error { return c.PostSend(&rdma.WorkRequest{ID: 2, Op: rdma.OpSendSE}) }})
	got := rdmatest.WaitN(t, cfg, a, 1)[0]
	rdmatest.Want(t, got, 1, rdma.OpRecv, rdma.StatusSuccess, 0)
	if !got.Solicited {
		t.Fatalf("completion %+v, want solicited", got)
	}
	rdmatest.Want(t, rdmatest.WaitN(t, cfg, b, 1)[0], 2, rdma.OpSendSE, rdma.StatusSuccess, 0)
}

func TestRegisteredCount(t *testing.T) {
	rdmatest.CheckGoroutines(t)
	n := loopback.New()
	cfg := config(n)
	a, b := rdmatest.Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	m, err := a.Register(make([]byte, 8), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(8, 0); err != nil {
		t.Fatal(err)
	}
	if got := n.Registered(); got != 2 {
		t.Fatalf("Registered %d, want 2", got)
	}
	m.Release()
	if got := n.Registered(); got != 1 {
		t.Fatalf("Registered after Release %d, want 1", got)
	}
	b.Close() // releases b's region
	if got := n.Registered(); got != 0 {
		t.Fatalf("Registered after Close %d, want 0", got)
	}
	if err := a.Close(); err != nil || !errors.Is(a.Err(), rdma.ErrDisconnected) {
		t.Fatalf("close: %v, Err %v", err, a.Err())
	}
}
