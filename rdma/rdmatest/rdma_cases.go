package rdmatest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

const (
	remoteRW  = rdma.AccessRemoteRead | rdma.AccessRemoteWrite
	bigSize   = 1 << 20
	smallNote = 8
)

// notify sends a zero-length Send from a to b and waits for both
// completions: after it, everything a posted earlier has been placed at b.
func notify(t *testing.T, cfg Config, a, b rdma.Conn, id uint64) {
	t.Helper()
	PostRecv(t, b, id, rdma.SGE{MR: Alloc(t, b, smallNote, rdma.AccessLocalWrite), Length: smallNote})
	Post(t, a, rdma.WorkRequest{ID: id, Op: rdma.OpSend})
	Want(t, WaitN(t, cfg, a, 1)[0], id, rdma.OpSend, rdma.StatusSuccess, 0)
	Want(t, WaitN(t, cfg, b, 1)[0], id, rdma.OpRecv, rdma.StatusSuccess, 0)
}

// testWriteReadSizes writes and reads back every interesting size, at odd
// offsets into the regions, including sizes larger than an iWARP MULPDU.
func testWriteReadSizes(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	for i, size := range []int{0, 1, 13, 4096, 4097, 9000, 65536 + 3, bigSize} {
		const off, tail, sinkOff = 7, 5, 3
		seed := byte(i + 1)
		dst := Alloc(t, b, off+size+tail, remoteRW)
		src := Alloc(t, a, size, 0)
		fill(src.Bytes(), seed)
		Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: []rdma.SGE{Whole(src)},
			RemoteSTag: dst.STag(), RemoteTO: dst.TO() + off})
		Want(t, WaitN(t, cfg, a, 1)[0], 1, rdma.OpWrite, rdma.StatusSuccess, size)
		notify(t, cfg, a, b, 2)
		what := fmt.Sprintf("%d-byte write", size)
		wantZero(t, what+": before the offset", dst.Bytes()[:off])
		wantBytes(t, what, dst.Bytes()[off:off+size], src.Bytes())
		wantZero(t, what+": after the end", dst.Bytes()[off+size:])

		sink := Alloc(t, a, sinkOff+size+tail, rdma.AccessLocalWrite)
		Post(t, a, rdma.WorkRequest{ID: 3, Op: rdma.OpRead, Local: []rdma.SGE{{MR: sink, Offset: sinkOff, Length: size}},
			RemoteSTag: dst.STag(), RemoteTO: dst.TO() + off})
		Want(t, WaitN(t, cfg, a, 1)[0], 3, rdma.OpRead, rdma.StatusSuccess, size)
		what = fmt.Sprintf("%d-byte read", size)
		wantZero(t, what+": before the offset", sink.Bytes()[:sinkOff])
		wantBytes(t, what, sink.Bytes()[sinkOff:sinkOff+size], src.Bytes())
		wantZero(t, what+": after the end", sink.Bytes()[sinkOff+size:])
	}
}

// testWriteReadScatterGather gathers a Write from several SGEs, some in the
// same MR, and scatters a Read into several.
func testWriteReadScatterGather(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	s1, s2 := Alloc(t, a, 9000, 0), Alloc(t, a, 300, 0)
	fill(s1.Bytes(), 3)
	fill(s2.Bytes(), 4)
	local := []rdma.SGE{{MR: s1, Offset: 1, Length: 8191}, {MR: s2, Offset: 0, Length: 300}, {MR: s1, Offset: 8500, Length: 13}, {MR: s2, Length: 0}}
	var want []byte
	for _, e := range local {
		want = append(want, e.MR.Bytes()[e.Offset:e.Offset+e.Length]...)
	}
	dst := Alloc(t, b, 100+len(want), remoteRW)
	Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: local, RemoteSTag: dst.STag(), RemoteTO: dst.TO() + 100})
	Want(t, WaitN(t, cfg, a, 1)[0], 1, rdma.OpWrite, rdma.StatusSuccess, len(want))
	notify(t, cfg, a, b, 2)
	wantBytes(t, "gathered write", dst.Bytes()[100:], want)

	k1, k2 := Alloc(t, a, 9000, rdma.AccessLocalWrite), Alloc(t, a, 16, rdma.AccessLocalWrite)
	sinks := []rdma.SGE{{MR: k1, Offset: 17, Length: 4000}, {MR: k2, Offset: 2, Length: 1}, {MR: k1, Offset: 4020, Length: len(want) - 4001}}
	if a.Limits().MaxReadSGE >= len(sinks) {
		Post(t, a, rdma.WorkRequest{ID: 3, Op: rdma.OpRead, Local: sinks, RemoteSTag: dst.STag(), RemoteTO: dst.TO() + 100})
		Want(t, WaitN(t, cfg, a, 1)[0], 3, rdma.OpRead, rdma.StatusSuccess, len(want))
	} else { // one Read per sink (Linux siw takes one SGE)
		to := dst.TO() + 100
		for i, e := range sinks {
			Post(t, a, rdma.WorkRequest{ID: uint64(3 + i), Op: rdma.OpRead, Local: []rdma.SGE{e}, RemoteSTag: dst.STag(), RemoteTO: to})
			Want(t, WaitN(t, cfg, a, 1)[0], uint64(3+i), rdma.OpRead, rdma.StatusSuccess, e.Length)
			to += uint64(e.Length)
		}
	}
	var got []byte
	for _, e := range sinks {
		got = append(got, e.MR.Bytes()[e.Offset:e.Offset+e.Length]...)
	}
	wantBytes(t, "scattered read", got, want)
}

// testWriteThenSend: a Send posted after a Write is delivered after the
// Write's data is placed, round after round (RFC 5040 section 5.5).
func testWriteThenSend(t *testing.T, cfg Config) {
	const size = 64 << 10
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	src := Alloc(t, a, size, 0)
	dst := Alloc(t, b, size, rdma.AccessRemoteWrite)
	ack := Alloc(t, a, smallNote, rdma.AccessLocalWrite)
	note := Alloc(t, b, smallNote, rdma.AccessLocalWrite)
	for round := 0; round < 10; round++ {
		id := uint64(round * 10)
		PostRecv(t, b, id, Whole(note))
		PostRecv(t, a, id+1, Whole(ack))
		fill(src.Bytes(), byte(round))
		Post(t, a, rdma.WorkRequest{ID: id + 2, Op: rdma.OpWrite, Local: []rdma.SGE{Whole(src)}, RemoteSTag: dst.STag(), RemoteTO: dst.TO()})
		Post(t, a, rdma.WorkRequest{ID: id + 3, Op: rdma.OpSend})
		Want(t, WaitN(t, cfg, b, 1)[0], id, rdma.OpRecv, rdma.StatusSuccess, 0)
		wantBytes(t, fmt.Sprintf("round %d", round), dst.Bytes(), src.Bytes())
		Post(t, b, rdma.WorkRequest{ID: id + 4, Op: rdma.OpSend})
		// The send queue's completions keep their order; the receive's
		// may come anywhere among them.
		cs := WaitN(t, cfg, a, 3)
		sq := slices.DeleteFunc(slices.Clone(cs), func(c rdma.Completion) bool { return c.Op == rdma.OpRecv })
		if len(sq) != 2 {
			t.Fatalf("completions %+v", cs)
		}
		Want(t, sq[0], id+2, rdma.OpWrite, rdma.StatusSuccess, size)
		Want(t, sq[1], id+3, rdma.OpSend, rdma.StatusSuccess, 0)
		Want(t, WaitN(t, cfg, b, 1)[0], id+4, rdma.OpSend, rdma.StatusSuccess, 0)
		if i := slices.IndexFunc(cs, func(c rdma.Completion) bool { return c.Op == rdma.OpRecv }); cs[i].ID != id+1 || cs[i].Status != rdma.StatusSuccess {
			t.Fatalf("ack completion %+v", cs[i])
		}
	}
}

// testZeroLengthUnchecked: zero-length Writes and Reads are not checked
// against any STag (RFC 5041 section 7.1).
func testZeroLengthUnchecked(t *testing.T, cfg Config) {
	a, b := Pair(t, cfg, rdma.ConnConfig{}, rdma.ConnConfig{})
	bogus := rdma.MakeSTag(1, 1)
	Post(t, a, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, RemoteSTag: bogus, RemoteTO: 1 << 60})
	Post(t, a, rdma.WorkRequest{ID: 2, Op: rdma.OpRead, RemoteSTag: bogus})
	cs := WaitN(t, cfg, a, 2)
	Want(t, cs[0], 1, rdma.OpWrite, rdma.StatusSuccess, 0)
	Want(t, cs[1], 2, rdma.OpRead, rdma.StatusSuccess, 0)
	notify(t, cfg, a, b, 3)
}
