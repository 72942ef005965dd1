package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"testing"
)

// fuzzHeader checks one input as version vers: the rdma_vers word is forced
// to vers, so each target explores one version's layout. Whatever the input,
// nothing panics; what decodes re-encodes to the very bytes it came from
// (XDR is canonical: discriminants are 0 or 1, padding is zero), EncodedLen
// agrees, and decoding the encoding again gives the same header, whether
// into a fresh Header or one that held another.
func fuzzHeader(t *testing.T, b []byte, vers Version, seed []byte) {
	if len(b) >= 8 {
		b = bytes.Clone(b)
		binary.BigEndian.PutUint32(b[4:], uint32(vers))
	}
	var h Header
	n, err := h.Decode(b)
	exercise(&h)
	if err != nil {
		var he *HeaderError
		if !errors.As(err, &he) || n != 0 {
			t.Fatalf("Decode = %d, %v: want 0 and a *HeaderError", n, err)
		}
		return
	}
	if n > len(b) || !h.HasPayload() && n != len(b) {
		t.Fatalf("Decode n = %d of %d bytes (%v)", n, len(b), &h)
	}
	enc := h.Append(nil)
	if !bytes.Equal(enc, b[:n]) {
		t.Fatalf("re-encoding differs:\n in  %x\n out %x", b[:n], enc)
	}
	if h.EncodedLen() != n {
		t.Fatalf("EncodedLen = %d, decoded %d bytes", h.EncodedLen(), n)
	}
	var h2 Header
	if _, err := h2.Decode(seed); err != nil {
		t.Fatal(err)
	}
	if n2, err := h2.Decode(enc); err != nil || n2 != n || canon(&h2) != canon(&h) {
		t.Fatalf("second decode: %d, %v\n got %s\nwant %s", n2, err, canon(&h2), canon(&h))
	}
}

// exercise runs everything that takes a decoded (or half-decoded) header,
// for panics.
func exercise(h *Header) {
	for _, dir := range []Direction{DirUnknown, DirCall, DirReply} {
		for _, lim := range []Limits{{}, {AllowReadReply: true, MaxSegments: 1, MaxChunks: 1, MaxHeaderSize: 16, MaxOptInfo: 1}} {
			if err := h.Validate(dir, lim); err != nil {
				_ = err.Error()
			}
		}
	}
	_ = h.String()
	_ = h.LogValue().Resolve()
	for _, c := range h.Chunks.Reads.Chunks(nil) {
		_ = c.String()
	}
	_ = slog.AnyValue(h.Chunks.Writes).Resolve()
}

func FuzzHeaderV1(f *testing.F) {
	for _, v := range append(append([]headerVector(nil), v1Vectors...), labVectors...) {
		hdr, payload := v.split()
		f.Add(append(hdr, payload...))
	}
	seed, _ := v1Vectors[1].split()
	f.Fuzz(func(t *testing.T, b []byte) { fuzzHeader(t, b, Version1, seed) })
}

func FuzzHeaderV2(f *testing.F) {
	for _, v := range v2Vectors {
		hdr, payload := v.split()
		f.Add(append(hdr, payload...))
	}
	seed, _ := v2Vectors[0].split()
	f.Fuzz(func(t *testing.T, b []byte) { fuzzHeader(t, b, Version2, seed) })
}

func FuzzPrivateData(f *testing.F) {
	for _, v := range privateDataVectors {
		f.Add(unhex(v.hex))
	}
	f.Add(unhex("f6ab0e18 02 01 03 03"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p PrivateData
		if !p.Decode(b) {
			if p != DefaultPrivateData() {
				t.Fatalf("absent, but %+v", p)
			}
			return
		}
		enc := p.Append(nil)
		want := bytes.Clone(b[:PrivateDataLen])
		want[5] &= FlagRemoteInvalidation // reserved bits are dropped
		if !bytes.Equal(enc, want) || p.EncodedLen() != len(enc) {
			t.Fatalf("re-encoding %x of %x", enc, b)
		}
		var p2 PrivateData
		if !p2.Decode(enc) || p2 != p {
			t.Fatalf("second decode %+v, want %+v", p2, p)
		}
		_ = p.String()
	})
}

func FuzzConfig(f *testing.F) {
	f.Add(unhex(configReqHex))
	f.Add(unhex(configReplyHex))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req ConfigReq
		var rep ConfigReply
		n, err := req.Decode(b)
		n2, err2 := rep.Decode(b)
		if (err == nil) != (len(b) >= 12) || (err2 == nil) != (len(b) >= 12) {
			t.Fatalf("Decode(%d bytes) = %v, %v", len(b), err, err2)
		}
		if err != nil {
			return
		}
		if n != 12 || n2 != 12 || !bytes.Equal(req.Append(nil), b[:12]) || !bytes.Equal(rep.Append(nil), b[:12]) {
			t.Fatalf("re-encoding of %x", b)
		}
		var req2 ConfigReq
		if _, err := req2.Decode(req.Append(nil)); err != nil || req2 != req {
			t.Fatalf("second decode %+v", req2)
		}
		_, _ = req.String(), rep.String()
	})
}
