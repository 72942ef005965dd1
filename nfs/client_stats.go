package nfs

import (
	"encoding/binary"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

// ClientStats counts what a Client has done since it was made.
type ClientStats struct {
	// Calls are the NFS calls made, by procedure (indexed by nfs3.Proc),
	// whatever their outcome; a call the rpc layer sent again on a new
	// connection counts once.
	Calls [nfs3.NumProcs]uint64
	// Failed are the calls that got no NFS status: the transport or the
	// RPC layer failed them (a broken connection, a context that ended,
	// an *rpc.RejectError or *rpc.AcceptError, an RPC-over-RDMA
	// ERR_CHUNK).
	Failed uint64
	// Errors are the calls the server answered with a status other than
	// NFS3_OK, by status. Nil when there were none.
	Errors map[nfs3.Stat]uint64
	// BytesRead are the file bytes READ replies returned; BytesWritten
	// those WRITE replies said the server took (their count).
	BytesRead, BytesWritten uint64
	// Retransmits are the calls the Client's rpc.Client sent again on a
	// new connection after losing one (rpc.ClientStats.Retransmits;
	// RPC().Stats() has the rest of the rpc layer's counts).
	Retransmits uint64
}

// Total returns the calls made, all procedures together.
func (s *ClientStats) Total() uint64 {
	var n uint64
	for _, c := range s.Calls {
		n += c
	}
	return n
}

// Stats returns the Client's counts so far. It may be called while calls
// are in progress; the counts of a call in progress may be partly in.
func (c *Client) Stats() ClientStats {
	s := ClientStats{
		Failed:       c.stats.failed.Load(),
		BytesRead:    c.stats.read.Load(),
		BytesWritten: c.stats.written.Load(),
		Retransmits:  c.rc.Stats().Retransmits,
	}
	for i := range s.Calls {
		s.Calls[i] = c.stats.calls[i].Load()
	}
	c.stats.mu.Lock()
	if len(c.stats.errors) > 0 {
		s.Errors = maps.Clone(c.stats.errors)
	}
	c.stats.mu.Unlock()
	return s
}

// clientCounters are a Client's counts, updated by its calls.
type clientCounters struct {
	calls         [nfs3.NumProcs]atomic.Uint64
	failed        atomic.Uint64
	read, written atomic.Uint64

	mu     sync.Mutex
	errors map[nfs3.Stat]uint64 // guarded by mu; calls that fail are few
}

// called counts a call to p that returned err, or results whose XDR
// starts with the nfsstat3 every NFSv3 result starts with (RFC 1813,
// Section 3.3); NULL has none.
func (s *clientCounters) called(p nfs3.Proc, results []byte, err error) {
	if int(p) < len(s.calls) {
		s.calls[p].Add(1)
	}
	switch {
	case err != nil:
		s.failed.Add(1)
	case len(results) >= 4:
		st := nfs3.Stat(binary.BigEndian.Uint32(results))
		if st == nfs3.OK {
			return
		}
		s.mu.Lock()
		if s.errors == nil {
			s.errors = make(map[nfs3.Stat]uint64)
		}
		s.errors[st]++
		s.mu.Unlock()
	}
}
