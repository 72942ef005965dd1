package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// canon renders every field of h that Decode sets, so that two headers
// compare equal when they mean the same thing (nil and empty lists alike).
func canon(h *Header) string {
	return fmt.Sprintf("%s|extra=%v|info=%x|pad=%v", h.String(), h.Error.Extra, h.Optional.Info, h.Padding)
}

func TestHeaderGolden(t *testing.T) {
	var dirty Header // reused across vectors, to catch state leaking between decodes
	for _, v := range allVectors() {
		t.Run(v.name, func(t *testing.T) {
			hdr, payload := v.split()
			msg := append(append([]byte(nil), hdr...), payload...)

			// Decode: the header, its length, the payload uncopied.
			var h Header
			n, err := h.Decode(msg)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if n != len(hdr) {
				t.Errorf("Decode n = %d, want %d", n, len(hdr))
			}
			if got, want := canon(&h), canon(&v.want); got != want {
				t.Errorf("Decode:\n got %s\nwant %s", got, want)
			}
			if h.HasPayload() != (len(payload) > 0) && v.want.Proc != RDMA_OPTIONAL {
				t.Errorf("HasPayload = %v with %d payload bytes", h.HasPayload(), len(payload))
			}
			if len(payload) > 0 && &msg[n:][0] != &msg[len(hdr)] {
				t.Error("payload is not a sub-slice of the message")
			}
			if _, err := dirty.Decode(msg); err != nil || canon(&dirty) != canon(&v.want) {
				t.Errorf("Decode into a reused Header: %v\n got %s", err, canon(&dirty))
			}

			// Encode: the same bytes, EncodedLen agreeing, appending kept.
			if got := v.want.Append(nil); !bytes.Equal(got, hdr) {
				t.Errorf("Append:\n got %x\nwant %x", got, hdr)
			}
			if got := v.want.EncodedLen(); got != len(hdr) {
				t.Errorf("EncodedLen = %d, want %d", got, len(hdr))
			}
			if got := v.want.Append([]byte{0xee}); got[0] != 0xee || !bytes.Equal(got[1:], hdr) {
				t.Errorf("Append after a prefix = %x", got)
			}

			// Validate with the direction the message travelled in.
			err = h.Validate(v.dir, Limits{})
			switch {
			case v.rule == 0 && err != nil:
				t.Errorf("Validate: %v", err)
			case v.rule != 0 && !errors.Is(err, v.rule):
				t.Errorf("Validate = %v, want rule %v", err, v.rule)
			}
		})
	}
}

// TestHeaderTruncations: no strict prefix of a header decodes, and a header
// that stands alone does not decode with anything after it.
func TestHeaderTruncations(t *testing.T) {
	for _, v := range allVectors() {
		t.Run(v.name, func(t *testing.T) {
			hdr, _ := v.split()
			for k := range len(hdr) {
				var h Header
				n, err := h.Decode(hdr[:k])
				var he *HeaderError
				if !errors.As(err, &he) {
					t.Fatalf("Decode(%d of %d bytes) = %d, %v; want a *HeaderError", k, len(hdr), n, err)
				}
				var de *xdr.DecodeError
				if !errors.Is(err, RuleMalformed) || !errors.As(err, &de) || !errors.Is(err, xdr.ErrShort) && !errors.Is(err, xdr.ErrCount) {
					t.Errorf("Decode(%d bytes) = %v, want malformed, short", k, err)
				}
			}
			var h Header
			if _, err := h.Decode(hdr); err != nil {
				t.Fatal(err)
			}
			if !h.HasPayload() {
				_, err := h.Decode(append(hdr[:len(hdr):len(hdr)], 0, 0, 0, 0))
				if !errors.Is(err, xdr.ErrTrailing) {
					t.Errorf("Decode with a trailing word = %v, want trailing bytes", err)
				}
			}
		})
	}
}

func TestDecodePrefix(t *testing.T) {
	// A Version Three header: the prefix still decodes.
	b := unhex("0badcafe 00000003 00000011 00000000 deadbeef")
	p, err := DecodePrefix(b)
	if err != nil || p != (Prefix{XID: 0x0badcafe, Vers: 3, Credits: 17}) {
		t.Errorf("DecodePrefix = %v, %v", p, err)
	}
	if got := p.String(); got != "xid=0xbadcafe vers=3 credits=17" {
		t.Errorf("String = %q", got)
	}
	for k := range PrefixLen {
		if _, err := DecodePrefix(b[:k]); !errors.Is(err, xdr.ErrShort) || !errors.Is(err, RuleMalformed) {
			t.Errorf("DecodePrefix(%d bytes) = %v", k, err)
		}
	}
	var h Header
	h.Decode(b)
	if h.Prefix() != p {
		t.Errorf("Header.Prefix = %v, want %v", h.Prefix(), p)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
		rule Rule
		code ErrorCode
		kind error // the xdr kind, for RuleMalformed
		msg  string
	}{
		{"version-3", "00000001 00000003 00000010", RuleVersion, ErrVers, nil,
			"rpcrdma: unsupported version 3"},
		{"version-0-with-body", "00000001 00000000 00000010 00000000 00000000 00000000 00000000", RuleVersion, ErrVers, nil,
			"rpcrdma: unsupported version 0"},
		{"v1-proc-optional", "00000001 00000001 00000010 00000005 00000007 00000000", RuleProc, ErrChunk, nil,
			"rpcrdma: unknown procedure 5 in version 1"},
		{"v2-proc-6", "00000001 00000002 00000010 00000006", RuleProc, ErrBadHeader, nil,
			"rpcrdma: unknown procedure 6 in version 2"},
		{"v2-error-code-4", "00000001 00000002 00000010 00000004 00000004", RuleErrorCode, ErrBadHeader, nil,
			"rpcrdma: unknown error code 4 in version 2"},
		{"no-proc", "00000001 00000001 00000010", RuleMalformed, ErrChunk, xdr.ErrShort,
			"rpcrdma: malformed version 1 header: xdr: short buffer at offset 12 (need 4 bytes, have 0)"},
		{"read-discriminant-2", "00000001 00000001 00000010 00000000 00000002", RuleMalformed, ErrChunk, xdr.ErrBool,
			"rpcrdma: malformed version 1 RDMA_MSG header: xdr: boolean not 0 or 1 at offset 16 (value 2)"},
		{"reply-discriminant-2", "00000001 00000001 00000010 00000001 00000000 00000000 00000002", RuleMalformed, ErrChunk, xdr.ErrBool, ""},
		{"write-count-huge", "00000001 00000001 00000010 00000000 00000000 00000001 40000000 00000000", RuleMalformed, ErrChunk, xdr.ErrTooLong, ""},
		{"write-count-beyond-bytes", "00000001 00000001 00000010 00000000 00000000 00000001 00000002 00000001 00000002 00000003 00000004 00000000 00000000",
			RuleMalformed, ErrChunk, xdr.ErrCount,
			"rpcrdma: malformed version 1 RDMA_MSG header: xdr: count exceeds remaining bytes at offset 24 (2 > 1)"},
		{"reply-count-huge", "00000001 00000001 00000010 00000001 00000000 00000000 00000001 ffffffff", RuleMalformed, ErrChunk, xdr.ErrTooLong, ""},
		{"optinfo-beyond-bytes", "00000001 00000002 00000010 00000005 00000007 00000009 00000000", RuleMalformed, ErrBadHeader, xdr.ErrShort, ""},
		{"optinfo-nonzero-pad", "00000001 00000002 00000010 00000005 00000007 00000001 41420000", RuleMalformed, ErrBadHeader, xdr.ErrPad, ""},
		{"err-vers-short", "00000001 00000001 00000010 00000004 00000001 00000001", RuleMalformed, ErrChunk, xdr.ErrShort, ""},
		{"v1-err-extra-short", "00000001 00000001 00000010 00000004 00000009 00000001", RuleMalformed, ErrChunk, xdr.ErrShort, ""},
		{"v2-err-code-missing", "00000001 00000002 00000010 00000004", RuleMalformed, ErrBadHeader, xdr.ErrShort, ""},
		{"nomsg-trailing", "00000001 00000001 00000010 00000001 00000000 00000000 00000000 00000000", RuleMalformed, ErrChunk, xdr.ErrTrailing, ""},
		{"v2-msgp-trailing", "00000001 00000002 00000010 00000002 00000000 00000000", RuleMalformed, ErrBadHeader, xdr.ErrTrailing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Header
			n, err := h.Decode(unhex(tc.hex))
			var he *HeaderError
			if !errors.As(err, &he) {
				t.Fatalf("Decode = %d, %v; want a *HeaderError", n, err)
			}
			if n != 0 || he.Rule != tc.rule || he.Code != tc.code || !errors.Is(err, tc.rule) || !he.PerMessage() {
				t.Errorf("Decode = %d, %#v", n, he)
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("Decode = %v, want kind %v", err, tc.kind)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("Error() =\n %q\nwant\n %q", err.Error(), tc.msg)
			}
			if h.Prefix() != (Prefix{XID: 1, Vers: Version(unhex(tc.hex)[7]), Credits: 16}) {
				t.Errorf("prefix not kept: %v", h.Prefix())
			}
		})
	}
}

// randHeader returns a random header that Decode accepts (though Validate
// may not).
func randHeader(r *rand.Rand) Header {
	h := Header{XID: r.Uint32(), Vers: Version(1 + r.IntN(2)), Credits: r.Uint32()}
	if h.Vers == Version2 {
		h.Proc = Proc(r.IntN(int(RDMA_OPTIONAL) + 1))
	} else {
		h.Proc = Proc(r.IntN(int(RDMA_ERROR) + 1))
	}
	seg := func() Segment {
		return Segment{Handle: r.Uint32(), Length: r.Uint32(), Offset: r.Uint64()}
	}
	chunk := func() WriteChunk {
		c := make(WriteChunk, r.IntN(4))
		for i := range c {
			c[i] = seg()
		}
		return c
	}
	switch {
	case h.Proc == RDMA_MSG, h.Proc == RDMA_NOMSG, h.Proc == RDMA_MSGP && h.Vers == Version1:
		for range r.IntN(5) {
			h.Chunks.Reads = append(h.Chunks.Reads, ReadSegment{Position: r.Uint32(), Segment: seg()})
		}
		for range r.IntN(4) {
			h.Chunks.Writes = append(h.Chunks.Writes, chunk())
		}
		if r.IntN(2) == 0 {
			h.Chunks.Reply = ReplyChunk{Present: true, Chunk: chunk()}
		}
		if h.Proc == RDMA_MSGP {
			h.Padding = Padding{Align: r.Uint32(), Thresh: r.Uint32()}
		}
	case h.Proc == RDMA_ERROR:
		h.Error.Code = ErrorCode(1 + r.IntN(3))
		if h.Vers == Version1 && r.IntN(4) == 0 {
			h.Error.Code = ErrorCode(3 + r.Uint32N(1000))
		}
		switch {
		case h.Error.Code == ErrVers:
			h.Error.Low, h.Error.High = Version(r.Uint32()), Version(r.Uint32())
		case h.Vers == Version1 && h.Error.Code != ErrChunk:
			for i := range h.Error.Extra {
				h.Error.Extra[i] = r.Uint32()
			}
		}
	case h.Proc == RDMA_OPTIONAL:
		h.Optional.Type = r.Uint32()
		h.Optional.Info = make([]byte, r.IntN(14))
		for i := range h.Optional.Info {
			h.Optional.Info[i] = byte(r.Uint32())
		}
	}
	return h
}

func TestRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var got Header
	for i := range 5000 {
		h := randHeader(r)
		b := h.Append([]byte{1, 2, 3})[3:]
		if len(b) != h.EncodedLen() {
			t.Fatalf("%d: Append wrote %d bytes, EncodedLen = %d (%v)", i, len(b), h.EncodedLen(), &h)
		}
		payload := []byte{0xca, 0xfe, 0xf0, 0x0d}
		if h.HasPayload() {
			b = append(b, payload...)
		}
		n, err := got.Decode(b)
		if err != nil {
			t.Fatalf("%d: Decode(%v): %v", i, &h, err)
		}
		if n != h.EncodedLen() || canon(&got) != canon(&h) {
			t.Fatalf("%d: round trip n=%d\n got %s\nwant %s", i, n, canon(&got), canon(&h))
		}
		if h.HasPayload() && !bytes.Equal(b[n:], payload) {
			t.Fatalf("%d: payload %x", i, b[n:])
		}
		_ = got.Validate(DirUnknown, Limits{})
	}
}

func TestPayloadDirection(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want Direction
	}{
		{"4c414201 00000000 00000002", DirCall},
		{"4c414201 00000001 00000000", DirReply},
		{"4c414201 00000001", DirReply},
		{"4c414201 00000002", DirUnknown},
		{"4c414201 000000", DirUnknown},
		{"", DirUnknown},
	} {
		if got := PayloadDirection(unhex(tc.hex)); got != tc.want {
			t.Errorf("PayloadDirection(%s) = %v, want %v", tc.hex, got, tc.want)
		}
	}
	for _, v := range labVectors {
		_, payload := v.split()
		if len(payload) > 0 && PayloadDirection(payload) != v.dir {
			t.Errorf("%s: PayloadDirection = %v, want %v", v.name, PayloadDirection(payload), v.dir)
		}
	}
}

// TestDecodeAllocs: once a Header's lists have grown, decoding, validating
// and encoding allocate nothing.
func TestDecodeAllocs(t *testing.T) {
	var msgs [][]byte
	var dirs []Direction
	for _, v := range allVectors() {
		hdr, payload := v.split()
		msgs = append(msgs, append(hdr, payload...))
		dirs = append(dirs, v.dir)
	}
	var h Header
	out := make([]byte, 0, 1024)
	run := func() {
		for i, m := range msgs {
			if _, err := h.Decode(m); err != nil {
				panic(err)
			}
			if h.Vers == Version1 {
				if err := h.Validate(dirs[i], Limits{}); err != nil {
					panic(err)
				}
			}
			out = h.Append(out[:0])
		}
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("%v allocations per pass over %d headers, want 0", n, len(msgs))
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"lab-full-probe-write-read-chunk-call", "lab-full-knfsd-read-write-list-reply", "seed004-4.2-rdma-msg-read-list"} {
		var msg []byte
		for _, v := range allVectors() {
			if v.name == name {
				hdr, payload := v.split()
				msg = append(hdr, payload...)
			}
		}
		b.Run(name, func(b *testing.B) {
			var h Header
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Decode(msg); err != nil {
					b.Fatal(err)
				}
				if err := h.Validate(DirUnknown, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppend(b *testing.B) {
	h := labVectors[2].want
	out := make([]byte, 0, 256)
	b.SetBytes(int64(h.EncodedLen()))
	b.ReportAllocs()
	for b.Loop() {
		out = h.Append(out[:0])
	}
}

// TestPartsGolden: each part of the chunk lists encodes as
// draft-ietf-nfsv4-rpcrdma-01 section 4.2 lays it out, with EncodedLen
// agreeing. (Decoding them is covered through the headers above, which is the
// only way they arrive.)
func TestPartsGolden(t *testing.T) {
	s := Segment{Handle: 0xabcd01, Length: 0x2000, Offset: 0x1_1000_0000}
	for _, tc := range []struct {
		name string
		enc  interface {
			Append([]byte) []byte
			EncodedLen() int
		}
		hex string
	}{
		{"seed004-4.2-xdr-rdma-segment", s, "00abcd01 00002000 00000001 10000000"},
		{"seed004-4.2-xdr-read-chunk", ReadSegment{Position: 0x70, Segment: s}, "00000070 00abcd01 00002000 00000001 10000000"},
		{"seed004-4.2-xdr-read-list-empty", ReadList(nil), "00000000"},
		{"seed004-4.2-xdr-read-list", ReadList{{Position: 4, Segment: s}, {Position: 8, Segment: s}},
			"00000001 00000004 00abcd01 00002000 00000001 10000000 00000001 00000008 00abcd01 00002000 00000001 10000000 00000000"},
		{"seed004-4.2-xdr-write-chunk", WriteChunk{s}, "00000001 00abcd01 00002000 00000001 10000000"},
		{"seed004-4.2-xdr-write-chunk-empty", WriteChunk{}, "00000000"},
		{"seed004-4.2-xdr-write-list", WriteList{{s}, {}}, "00000001 00000001 00abcd01 00002000 00000001 10000000 00000001 00000000 00000000"},
		{"seed004-4.2-rdma-reply-absent", ReplyChunk{Chunk: WriteChunk{s}}, "00000000"},
		{"seed004-4.2-rdma-reply-present", ReplyChunk{Present: true, Chunk: WriteChunk{s}}, "00000001 00000001 00abcd01 00002000 00000001 10000000"},
		{"seed004-4.2-rpc-rdma-header", &ChunkLists{Writes: WriteList{{s}}}, "00000000 00000001 00000001 00abcd01 00002000 00000001 10000000 00000000 00000000"},
	} {
		want := unhex(tc.hex)
		if got := tc.enc.Append(nil); !bytes.Equal(got, want) {
			t.Errorf("%s: Append = %x, want %x", tc.name, got, want)
		}
		if got := tc.enc.EncodedLen(); got != len(want) {
			t.Errorf("%s: EncodedLen = %d, want %d", tc.name, got, len(want))
		}
	}
}

// TestAppendAnyHeader: Append and EncodedLen agree even for headers no
// version defines (unknown versions take Version One's layout, unknown
// procs have no body).
func TestAppendAnyHeader(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		h := randHeader(r)
		h.Vers = Version(r.IntN(4))
		h.Proc = Proc(r.IntN(8))
		h.Padding = Padding{Align: 1, Thresh: 2}
		h.Optional = Optional{Type: 3, Info: []byte("xyz")}
		h.Error.Code = ErrorCode(r.IntN(5))
		if b := h.Append(nil); len(b) != h.EncodedLen() {
			t.Fatalf("%v: Append wrote %d bytes, EncodedLen = %d", &h, len(b), h.EncodedLen())
		}
		_ = h.String()
	}
}
