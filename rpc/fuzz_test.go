package rpc

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// FuzzCall decodes call headers: whatever decodes re-encodes to the same
// bytes with a matching EncodedLen, and nothing panics.
func FuzzCall(f *testing.F) {
	for _, v := range callVectors {
		h := goldenCall(f, v)
		f.Add(h.Append(nil))
	}
	f.Add(unhex(f, "00000011 00000000 00000003"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h CallHeader
		d := xdr.NewDecoder(b)
		err := h.Decode(&d)
		_ = h.String()
		if errors.Is(err, ErrRPCVersion) && (h.RPCVers == RPCVersion || len(b) < 12) {
			t.Fatalf("ErrRPCVersion with rpcvers %d", h.RPCVers)
		}
		if err != nil {
			return
		}
		enc := h.Append(nil)
		if !bytes.Equal(enc, b[:d.Offset()]) || len(enc) != h.EncodedLen() {
			t.Fatalf("re-encoded %x, decoded from %x", enc, b[:d.Offset()])
		}
		if h.Cred.Flavor == AuthSys {
			if p, err := ParseAuthSys(h.Cred); err == nil {
				if body := p.Append(nil); !bytes.Equal(body, h.Cred.Body) || len(body) != p.EncodedLen() {
					t.Fatalf("AUTH_SYS re-encoded %x, decoded from %x", body, h.Cred.Body)
				}
			}
		}
	})
}

// FuzzReply decodes reply headers like FuzzCall.
func FuzzReply(f *testing.F) {
	for _, v := range replyVectors {
		f.Add(unhex(f, v.hex))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h ReplyHeader
		d := xdr.NewDecoder(b)
		err := h.Decode(&d)
		_ = h.String()
		if err != nil {
			return
		}
		enc := h.Append(nil)
		if !bytes.Equal(enc, b[:d.Offset()]) || len(enc) != h.EncodedLen() {
			t.Fatalf("re-encoded %x, decoded from %x", enc, b[:d.Offset()])
		}
	})
}

// FuzzRecordReader reads records from arbitrary streams: records respect
// the limits, memory stays proportional to the input, and what was read
// writes back to a stream that reads the same.
func FuzzRecordReader(f *testing.F) {
	for _, v := range recordVectors {
		f.Add(unhex(f, v.hex))
	}
	f.Add(unhex(f, "7fffffff"))
	f.Add(unhex(f, "00000000 00000000 80000000"))
	const maxRecord, maxFrags = 4096, 8
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := NewRecordReader(bytes.NewReader(b), maxRecord, maxFrags)
		var records [][]byte
		for {
			rec, err := rd.ReadRecord(nil)
			if cap(rec) > 5*len(b)+2*readChunk { // see growRecord
				t.Fatalf("%d bytes allocated for a %d-byte stream", cap(rec), len(b))
			}
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF &&
					!errors.Is(err, ErrRecordTooLarge) && !errors.Is(err, ErrTooManyFragments) {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
			if len(rec) > maxRecord {
				t.Fatalf("record of %d bytes", len(rec))
			}
			records = append(records, rec)
		}
		var out bytes.Buffer
		w := NewRecordWriter(&out, 7)
		for _, rec := range records {
			w.WriteRecord(&Body{XDR: rec})
		}
		rd = NewRecordReader(&out, maxRecord, 0)
		for i, want := range records {
			if got, err := rd.ReadRecord(nil); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("record %d: %x, %v, want %x", i, got, err, want)
			}
		}
	})
}
