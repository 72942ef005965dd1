package rpcrdma

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// TestReplyNotMarked: a result too large for inline and the reply chunk,
// which the handler did not mark for direct data placement, is answered
// with ERR_CHUNK although the call offered a write chunk large enough.
// The requester's error and the responder's log both say that the
// server's handler marks a result with rpc.Body.AppendDDPOpaque.
func TestReplyNotMarked(t *testing.T) { forProviders(t, testReplyNotMarked) }

func testReplyNotMarked(t *testing.T, np pairFunc) {
	var logs lockedBuffer
	p := np(t, nil, &Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	// procBig returns plain XDR: nothing for the 16 KiB write chunk.
	_, err := p.call(ctxT(t), procBig, u32Args(6000), [][]byte{make([]byte, 16<<10)}, 0)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != wire.ErrChunk {
		t.Fatalf("err = %v, want ERR_CHUNK", err)
	}
	for _, want := range []string{"write chunks of 16384 bytes", "the server places only the results its handler marks with rpc.Body.AppendDDPOpaque"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ERR_CHUNK error lacks %q: %v", want, err)
		}
	}
	if l := logs.String(); !strings.Contains(l, "1 of the 1 write chunks the call offered went unused: the handler marks a result for one with rpc.Body.AppendDDPOpaque") {
		t.Errorf("responder did not log the unmarked result; log:\n%s", l)
	}
	// A call that offers no write chunk is not told about them.
	_, err = p.call(ctxT(t), procBig, u32Args(6000), nil, 0)
	if err == nil || strings.Contains(err.Error(), "AppendDDPOpaque") {
		t.Errorf("without write chunks: err = %v, want ERR_CHUNK not naming AppendDDPOpaque", err)
	}
}
