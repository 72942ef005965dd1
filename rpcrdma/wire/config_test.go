package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Hand-derived from the XDR of draft-ietf-nfsv4-rpcrdma-01 section 6.2: three
// unsigned words each, in declaration order.
var (
	configReqHex   = "00000400 00001000 00000010" // maxcall 1024, maxreply 4096, maxrdmaread 16
	configReplyHex = "00000800 00001000 00000000" // maxcall 2048, align 4096, maxrdmaread 0
)

func TestConfigGolden(t *testing.T) {
	t.Run("seed004-6.2-config-rdma-req", func(t *testing.T) {
		b := unhex(configReqHex)
		want := ConfigReq{MaxCallSendSize: 1024, MaxReplySendSize: 4096, MaxRDMARead: 16}
		var r ConfigReq
		if n, err := r.Decode(append(b, 0xff)); n != 12 || err != nil || r != want {
			t.Errorf("Decode = %d, %v, %+v", n, err, r)
		}
		if got := want.Append(nil); !bytes.Equal(got, b) || want.EncodedLen() != len(b) {
			t.Errorf("Append = %x, EncodedLen = %d", got, want.EncodedLen())
		}
		for k := range len(b) {
			var r ConfigReq
			if _, err := r.Decode(b[:k]); !errors.Is(err, xdr.ErrShort) || r != (ConfigReq{}) {
				t.Errorf("Decode(%d bytes) = %v, %+v", k, err, r)
			}
		}
		if got := want.String(); got != "maxcall=1024 maxreply=4096 maxrdmaread=16" {
			t.Errorf("String = %q", got)
		}
		if got := logText(want); got != "msg=m v.maxcall=1024 v.maxreply=4096 v.maxrdmaread=16" {
			t.Errorf("LogValue = %q", got)
		}
	})
	t.Run("seed004-6.2-config-rdma-reply", func(t *testing.T) {
		b := unhex(configReplyHex)
		want := ConfigReply{MaxCallSendSize: 2048, Align: 4096}
		var r ConfigReply
		if n, err := r.Decode(b); n != 12 || err != nil || r != want {
			t.Errorf("Decode = %d, %v, %+v", n, err, r)
		}
		if got := want.Append(nil); !bytes.Equal(got, b) || want.EncodedLen() != len(b) {
			t.Errorf("Append = %x, EncodedLen = %d", got, want.EncodedLen())
		}
		for k := range len(b) {
			var r ConfigReply
			_, err := r.Decode(b[:k])
			if !errors.Is(err, xdr.ErrShort) || !strings.HasPrefix(err.Error(), "rpcrdma: malformed config_rdma_reply: ") {
				t.Errorf("Decode(%d bytes) = %v", k, err)
			}
		}
		if got := want.String(); got != "maxcall=2048 align=4096 maxrdmaread=0" {
			t.Errorf("String = %q", got)
		}
		if got := logText(want); got != "msg=m v.maxcall=2048 v.align=4096 v.maxrdmaread=0" {
			t.Errorf("LogValue = %q", got)
		}
	})
	if ConfigProgram != 100417 || ConfigVersion != 1 || ProcConfRDMA != 1 {
		t.Error("program, version or procedure number wrong (RFC 5666 section 12)")
	}
}

func TestConfigRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		req := ConfigReq{r.Uint32(), r.Uint32(), r.Uint32()}
		rep := ConfigReply{r.Uint32(), r.Uint32(), r.Uint32()}
		var req2 ConfigReq
		var rep2 ConfigReply
		if _, err := req2.Decode(req.Append(nil)); err != nil || req2 != req {
			t.Fatalf("req %+v -> %+v, %v", req, req2, err)
		}
		if _, err := rep2.Decode(rep.Append(nil)); err != nil || rep2 != rep {
			t.Fatalf("reply %+v -> %+v, %v", rep, rep2, err)
		}
	}
}
