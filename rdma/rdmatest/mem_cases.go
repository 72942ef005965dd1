package rdmatest

import (
	"errors"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// Terminates a tagged access may end with. For an RDMA Write the RFCs use
// DDP tagged buffer codes, siw uses DDP "invalid STag" for a missing right
// too; for a Read source, RDMAP remote protection codes.
var (
	termInvalidSTag = []rdma.TerminateError{
		{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedInvalidSTag},
		{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeInvalidSTag},
	}
	termBounds = []rdma.TerminateError{
		{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedBaseBounds},
		{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeBaseBounds},
	}
	termNotAssociated = []rdma.TerminateError{
		{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedSTagNotAssociated},
		{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeSTagNotAssociated},
	}
	termWriteRights = []rdma.TerminateError{
		{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeAccessRights},
		{Layer: rdma.LayerDDP, Type: rdma.TypeTaggedBuffer, Code: rdma.CodeTaggedInvalidSTag},
	}
	termReadRights   = rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeAccessRights}
	termReadInvalid  = rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeInvalidSTag}
	termReadBounds   = rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeBaseBounds}
	termCannotInvOp  = rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteOperation, Code: rdma.CodeCannotInvalidate}
	termCannotInvPro = rdma.TerminateError{Layer: rdma.LayerRDMAP, Type: rdma.TypeRemoteProtection, Code: rdma.CodeCannotInvalidate}
)

// badAccess has a post outstanding on both sides, then runs the access
// (id 1) from a to b that b must refuse with one of wants.
func badAccess(t *testing.T, cfg Config, a, b rdma.Conn, wr rdma.WorkRequest, wants ...rdma.TerminateError) {
	t.Helper()
	PostRecv(t, a, 50, rdma.SGE{MR: Alloc(t, a, 8, rdma.AccessLocalWrite), Length: 8})
	PostRecv(t, b, 60, rdma.SGE{MR: Alloc(t, b, 8, rdma.AccessLocalWrite), Length: 8})
	wr.ID = 1
	Post(t, a, wr)
	dc := fatal{detector: b, other: a, wants: wants}.check(t, cfg, 1)
	if len(dc) != 1 {
		t.Fatalf("detector's completions %+v, want the flushed receive", dc)
	}
	Want(t, dc[0], 60, rdma.OpRecv, rdma.StatusFlushed, 0)
}

func write(a rdma.Conn, t *testing.T, n int, stag rdma.STag, to uint64) rdma.WorkRequest {
	return rdma.WorkRequest{Op: rdma.OpWrite, Local: []rdma.SGE{{MR: Alloc(t, a, n, 0), Length: n}}, RemoteSTag: stag, RemoteTO: to}
}

func read(a rdma.Conn, t *testing.T, n int, stag rdma.STag, to uint64) rdma.WorkRequest {
	return rdma.WorkRequest{Op: rdma.OpRead, Local: []rdma.SGE{{MR: Alloc(t, a, n, rdma.AccessLocalWrite), Length: n}}, RemoteSTag: stag, RemoteTO: to}
}

func testWriteBounds(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	dst := Alloc(t, b, 4096, remoteRW)
	badAccess(t, cfg, a, b, write(a, t, 8, dst.STag(), dst.TO()+4092), termBounds...)
}

func testReadBounds(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	src := Alloc(t, b, 4096, remoteRW)
	badAccess(t, cfg, a, b, read(a, t, 16, src.STag(), src.TO()-1), termReadBounds)
}

func testWriteRights(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	dst := Alloc(t, b, 64, rdma.AccessRemoteRead|rdma.AccessLocalWrite)
	badAccess(t, cfg, a, b, write(a, t, 8, dst.STag(), dst.TO()), termWriteRights...)
}

func testReadRights(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	src := Alloc(t, b, 64, rdma.AccessRemoteWrite|rdma.AccessLocalWrite)
	badAccess(t, cfg, a, b, read(a, t, 8, src.STag(), src.TO()), termReadRights)
}

// otherKey returns s with a different key: a stale STag.
func otherKey(s rdma.STag) rdma.STag { return rdma.MakeSTag(s.Index(), s.Key()+1) }

func testWriteInvalidSTag(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	dst := Alloc(t, b, 64, remoteRW)
	badAccess(t, cfg, a, b, write(a, t, 8, otherKey(dst.STag()), dst.TO()), termInvalidSTag...)
}

func testReadInvalidSTag(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	src := Alloc(t, b, 64, remoteRW)
	badAccess(t, cfg, a, b, read(a, t, 8, otherKey(src.STag()), src.TO()), termReadInvalid)
}

func testReleasedSTag(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	dst, err := b.Register(make([]byte, 64), remoteRW)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	stag, to := dst.STag(), dst.TO()
	if err := dst.Release(); err != nil || dst.Valid() {
		t.Fatalf("release: %v, valid %v", err, dst.Valid())
	}
	if err := dst.Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if _, err := dst.Reregister(remoteRW); err == nil {
		t.Fatalf("reregister after release succeeded")
	}
	badAccess(t, cfg, a, b, write(a, t, 8, stag, to), termInvalidSTag...)
}

// testForeignSTag uses an STag of another connection, which must not reach
// that connection's memory nor disturb it.
func testForeignSTag(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	a2, b2 := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	other := Alloc(t, b2, 64, remoteRW)
	badAccess(t, cfg, a, b, write(a, t, 8, other.STag(), other.TO()), append(termNotAssociated, termInvalidSTag...)...)
	wantZero(t, "other connection's region", other.Bytes())
	if a2.Err() != nil || b2.Err() != nil {
		t.Fatalf("other connection ended: %v, %v", a2.Err(), b2.Err())
	}
	notify(t, cfg, a2, b2, 1)
}

func testLocalInvalidate(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	dst := Alloc(t, b, 64, remoteRW)
	note := Alloc(t, b, 8, rdma.AccessLocalWrite)
	PostRecv(t, b, 5, Whole(note))
	Post(t, a, write(a, t, 8, dst.STag(), dst.TO()))
	// A Write's completion says only that its source may be reused; the
	// Send after it arrives once the Write is placed (RFC 5040 section
	// 5.5), so b knows it may invalidate without refusing that Write.
	Post(t, a, rdma.WorkRequest{ID: 2, Op: rdma.OpSend})
	cs := WaitN(t, cfg, a, 2)
	Want(t, cs[0], 0, rdma.OpWrite, rdma.StatusSuccess, 8)
	Want(t, WaitN(t, cfg, b, 1)[0], 5, rdma.OpRecv, rdma.StatusSuccess, 0)
	for i := 0; i < 2; i++ { // invalidating twice is harmless
		if err := dst.Invalidate(); err != nil || dst.Valid() {
			t.Fatalf("invalidate: %v, valid %v", err, dst.Valid())
		}
	}
	badAccess(t, cfg, a, b, write(a, t, 8, dst.STag(), dst.TO()), termInvalidSTag...)
}

// testRemoteInvalidate: a Send with Invalidate invalidates the named STag
// of the receiver, says so in the receive completion, and a later access
// with it fails.
func testRemoteInvalidate(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	skipNoRemoteInvalidation(t, b)
	dst := Alloc(t, b, 64, rdma.AccessRemoteWrite)
	note := Alloc(t, b, 8, rdma.AccessLocalWrite)
	PostRecv(t, b, 5, Whole(note))
	Post(t, a, write(a, t, 8, dst.STag(), dst.TO()))
	Post(t, a, rdma.WorkRequest{ID: 2, Op: rdma.OpSendInvalidate, InvalidateSTag: dst.STag()})
	cs := WaitN(t, cfg, a, 2)
	Want(t, cs[0], 0, rdma.OpWrite, rdma.StatusSuccess, 8)
	Want(t, cs[1], 2, rdma.OpSendInvalidate, rdma.StatusSuccess, 0)
	got := WaitN(t, cfg, b, 1)[0]
	Want(t, got, 5, rdma.OpRecv, rdma.StatusSuccess, 0)
	if !got.Invalidated || got.InvalidatedSTag != dst.STag() || got.Solicited {
		t.Fatalf("receive completion %+v, want invalidated %v", got, dst.STag())
	}
	if dst.Valid() {
		t.Fatalf("%v still valid after remote invalidation", dst.STag())
	}
	badAccess(t, cfg, a, b, write(a, t, 8, dst.STag(), dst.TO()), termInvalidSTag...)
}

// testRemoteInvalidateRefused: a Send with Invalidate naming an STag the
// receiver does not have ends the connection; the receive completes with
// StatusRemoteInvalidRequest.
func testRemoteInvalidateRefused(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	skipNoRemoteInvalidation(t, b)
	dst := Alloc(t, b, 64, rdma.AccessRemoteWrite)
	PostRecv(t, b, 5, rdma.SGE{MR: Alloc(t, b, 8, rdma.AccessLocalWrite), Length: 8})
	PostRecv(t, b, 6, rdma.SGE{MR: Alloc(t, b, 8, rdma.AccessLocalWrite), Length: 8})
	Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSendInvalidate, InvalidateSTag: otherKey(dst.STag())})
	dc := fatal{detector: b, other: a, wants: []rdma.TerminateError{termCannotInvOp, termCannotInvPro}}.check(t, cfg, 1)
	if len(dc) != 2 {
		t.Fatalf("receiver completions %+v", dc)
	}
	Want(t, dc[0], 5, rdma.OpRecv, rdma.StatusRemoteInvalidRequest, 0)
	Want(t, dc[1], 6, rdma.OpRecv, rdma.StatusFlushed, 0)
	if !dst.Valid() {
		t.Fatalf("%v invalidated by a Send naming %v", dst.STag(), otherKey(dst.STag()))
	}
}

func skipNoRemoteInvalidation(t *testing.T, c rdma.Conn) {
	t.Helper()
	if !c.Limits().RemoteInvalidation {
		t.Skip("the provider's regions do not take remote invalidation (Limits.RemoteInvalidation)")
	}
}

// testRemoteInvalidateUnsupported: on a connection whose regions do not
// take remote invalidation, a Send with Invalidate naming one either ends
// the connection on both sides (rxe moves the queue pair to the error
// state) or is delivered, and then the STag may be dead (siw revokes it).
// Either way nothing hangs, and the outcome is one of the two.
func testRemoteInvalidateUnsupported(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	if b.Limits().RemoteInvalidation {
		t.Skip("the provider's regions take remote invalidation")
	}
	dst := Alloc(t, b, 64, rdma.AccessRemoteWrite)
	PostRecv(t, b, 5, rdma.SGE{MR: Alloc(t, b, 8, rdma.AccessLocalWrite), Length: 8})
	PostRecv(t, b, 6, rdma.SGE{MR: Alloc(t, b, 8, rdma.AccessLocalWrite), Length: 8})
	Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpSendInvalidate, InvalidateSTag: dst.STag()})
	ctx := Context(t, cfg)
	var cs [1]rdma.Completion
	if _, err := b.Wait(ctx, cs[:1]); err != nil {
		t.Fatalf("receiver: %v", err)
	}
	got := cs[0]
	if got.ID != 5 {
		t.Fatalf("first receive completion %+v", got)
	}
	if got.Status == rdma.StatusSuccess {
		t.Logf("delivered: %+v; region valid %v", got, dst.Valid())
		Want(t, WaitN(t, cfg, a, 1)[0], 1, rdma.OpSendInvalidate, rdma.StatusSuccess, 0)
		return
	}
	t.Logf("connection ended: receive %v", got.Status)
	if _, err := Drain(t, cfg, b); err == nil {
		t.Fatalf("receiver did not end")
	}
	if _, err := Drain(t, cfg, a); err == nil {
		t.Fatalf("sender did not end")
	}
}

// testReregister: re-registration keeps the index, rotates the key, and the
// old STag no longer works.
func testReregister(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	dst := Alloc(t, b, 64, rdma.AccessRemoteRead)
	old := dst.STag()
	if err := dst.Invalidate(); err != nil {
		t.Fatalf("invalidate: %v", err)
	}
	stag, err := dst.Reregister(rdma.AccessRemoteWrite)
	if err != nil {
		t.Fatalf("reregister: %v", err)
	}
	if stag == old || (stag.Index() != old.Index() && !cfg.RekeyAnyIndex) || stag != dst.STag() || !dst.Valid() || dst.Access() != rdma.AccessRemoteWrite {
		t.Fatalf("reregistered %v as %v (MR reports %v valid %v access %v)", old, stag, dst.STag(), dst.Valid(), dst.Access())
	}
	Post(t, a, write(a, t, 8, stag, dst.TO()))
	Want(t, WaitN(t, cfg, a, 1)[0], 0, rdma.OpWrite, rdma.StatusSuccess, 8)
	notify(t, cfg, a, b, 2)
	badAccess(t, cfg, a, b, write(a, t, 8, old, dst.TO()), termInvalidSTag...)
}

// testLocalChecks: bad local SGEs and arguments are refused at post time
// with ErrInvalid, and the connection survives.
func testLocalChecks(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	noWrite := Alloc(t, a, 16, 0)
	ok := Alloc(t, a, 16, rdma.AccessLocalWrite)
	foreign := Alloc(t, b, 16, rdma.AccessLocalWrite)
	dead := Alloc(t, a, 16, rdma.AccessLocalWrite)
	if err := dead.Invalidate(); err != nil {
		t.Fatalf("invalidate: %v", err)
	}
	gone, err := a.Alloc(16, rdma.AccessLocalWrite)
	if err != nil {
		t.Fatalf("alloc: %v", err)
	}
	gone.Release()
	tooMany := make([]rdma.SGE, a.Limits().MaxSGE+1)
	for i := range tooMany {
		tooMany[i] = rdma.SGE{MR: ok, Length: 1}
	}
	target := Alloc(t, b, 64, remoteRW)
	for _, c := range []struct {
		what string
		recv bool
		wr   rdma.WorkRequest
	}{
		{"receive without local write", true, rdma.WorkRequest{Local: []rdma.SGE{Whole(noWrite)}}},
		{"receive beyond the region", true, rdma.WorkRequest{Local: []rdma.SGE{{MR: ok, Offset: 10, Length: 7}}}},
		{"receive at a negative offset", true, rdma.WorkRequest{Local: []rdma.SGE{{MR: ok, Offset: -1, Length: 1}}}},
		{"receive into another connection's MR", true, rdma.WorkRequest{Local: []rdma.SGE{Whole(foreign)}}},
		{"receive into an invalidated MR", true, rdma.WorkRequest{Local: []rdma.SGE{Whole(dead)}}},
		{"receive into a released MR", true, rdma.WorkRequest{Local: []rdma.SGE{{MR: gone, Length: 16}}}},
		{"receive without an MR", true, rdma.WorkRequest{Local: []rdma.SGE{{Length: 1}}}},
		{"too many SGEs", false, rdma.WorkRequest{Op: rdma.OpSend, Local: tooMany}},
		{"send beyond the region", false, rdma.WorkRequest{Op: rdma.OpSend, Local: []rdma.SGE{{MR: ok, Length: 17}}}},
		{"send from an invalidated MR", false, rdma.WorkRequest{Op: rdma.OpSend, Local: []rdma.SGE{Whole(dead)}}},
		{"write from another connection's MR", false, rdma.WorkRequest{Op: rdma.OpWrite, Local: []rdma.SGE{Whole(foreign)}, RemoteSTag: target.STag(), RemoteTO: target.TO()}},
		{"read into a region without local write", false, rdma.WorkRequest{Op: rdma.OpRead, Local: []rdma.SGE{Whole(noWrite)}, RemoteSTag: target.STag(), RemoteTO: target.TO()}},
		{"op zero", false, rdma.WorkRequest{}},
		{"op Receive on the send queue", false, rdma.WorkRequest{Op: rdma.OpRecv}},
		{"unknown op", false, rdma.WorkRequest{Op: rdma.Op(200)}},
	} {
		var err error
		if c.recv {
			err = a.PostRecv(1, c.wr.Local)
		} else {
			err = a.PostSend(&c.wr)
		}
		if !errors.Is(err, rdma.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.what, err)
		}
	}
	if _, err := a.Alloc(-1, 0); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("alloc -1 bytes: %v", err)
	}
	if _, err := a.Alloc(1, 0x80); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("alloc with unknown access: %v", err)
	}
	if _, err := a.Register(make([]byte, 1), 0x80); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("register with unknown access: %v", err)
	}
	if _, err := ok.Reregister(0x80); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("reregister with unknown access: %v", err)
	}
	if a.Err() != nil {
		t.Fatalf("connection ended: %v", a.Err())
	}
	notify(t, cfg, a, b, 7)
}

// testQueueDepth: posting beyond a queue depth is refused with
// ErrQueueFull until completions have been polled.
func testQueueDepth(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{SendQueueDepth: 4}, rdma.ConnConfig{RecvQueueDepth: 4})
	sq, rq := a.Limits().SendQueueDepth, b.Limits().RecvQueueDepth
	dst := Alloc(t, b, 8*rq, rdma.AccessLocalWrite)
	for i := 0; i < rq; i++ {
		PostRecv(t, b, uint64(i), rdma.SGE{MR: dst, Offset: 8 * i, Length: 8})
	}
	if err := b.PostRecv(99, []rdma.SGE{{MR: dst, Length: 8}}); !errors.Is(err, rdma.ErrQueueFull) {
		t.Fatalf("receive beyond depth %d: %v, want ErrQueueFull", rq, err)
	}
	for i := 0; i < sq; i++ {
		Post(t, a, rdma.WorkRequest{ID: uint64(i), Op: rdma.OpWrite, RemoteSTag: rdma.MakeSTag(1, 1)})
	}
	if err := a.PostSend(&rdma.WorkRequest{ID: 99, Op: rdma.OpSend}); !errors.Is(err, rdma.ErrQueueFull) {
		t.Fatalf("send beyond depth %d: %v, want ErrQueueFull", sq, err)
	}
	WaitN(t, cfg, a, sq)
	Post(t, a, rdma.WorkRequest{ID: 100, Op: rdma.OpSend})
	Want(t, WaitN(t, cfg, a, 1)[0], 100, rdma.OpSend, rdma.StatusSuccess, 0)
	Want(t, WaitN(t, cfg, b, 1)[0], 0, rdma.OpRecv, rdma.StatusSuccess, 0)
	PostRecv(t, b, 4, rdma.SGE{MR: dst, Length: 8})
}

// testORD: no more than ORD Reads may be outstanding.
func testORD(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{ORD: 2}, rdma.ConnConfig{IRD: 2})
	ord := a.Limits().ORD
	if ord != 2 || b.Limits().IRD != 2 {
		t.Fatalf("ORD %d, peer IRD %d, want 2 and 2", ord, b.Limits().IRD)
	}
	src := Alloc(t, b, 64, rdma.AccessRemoteRead)
	for i := 0; i < ord; i++ {
		Post(t, a, read(a, t, 64, src.STag(), src.TO()))
	}
	if err := a.PostSend(ptr(read(a, t, 64, src.STag(), src.TO()))); !errors.Is(err, rdma.ErrQueueFull) {
		t.Fatalf("read beyond ORD %d: %v, want ErrQueueFull", ord, err)
	}
	Post(t, a, rdma.WorkRequest{ID: 9, Op: rdma.OpWrite, RemoteSTag: rdma.MakeSTag(1, 1)}) // not limited by ORD
	cs := WaitN(t, cfg, a, ord+1)
	for i := 0; i < ord; i++ {
		Want(t, cs[i], 0, rdma.OpRead, rdma.StatusSuccess, 64)
	}
	Post(t, a, read(a, t, 64, src.STag(), src.TO()))
	Want(t, WaitN(t, cfg, a, 1)[0], 0, rdma.OpRead, rdma.StatusSuccess, 64)
}

func ptr[T any](v T) *T { return &v }
