package xdr

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// item is one XDR item with its encoder and a decoder that checks it.
type item struct {
	name   string
	enc    func([]byte) []byte
	dec    func(*Decoder) any
	want   any
	golden string // hex of the encoding
}

func equal(a, b any) bool {
	if ab, ok := a.([]byte); ok {
		bb, ok := b.([]byte)
		return ok && bytes.Equal(ab, bb)
	}
	return a == b
}

// goldenItems are hand-derived from RFC 4506: big-endian four-byte units,
// zero padding, length words before variable-length data.
var goldenItems = []item{
	{"rfc4506-4.2-uint", func(b []byte) []byte { return AppendUint32(b, 0x01020304) }, func(d *Decoder) any { return d.Uint32() }, uint32(0x01020304), "01020304"},
	{"rfc4506-4.1-int-neg", func(b []byte) []byte { return AppendInt32(b, -2) }, func(d *Decoder) any { return d.Int32() }, int32(-2), "fffffffe"},
	{"rfc4506-4.3-enum", func(b []byte) []byte { return AppendEnum(b, 7) }, func(d *Decoder) any { return d.Enum() }, int32(7), "00000007"},
	{"rfc4506-4.4-true", func(b []byte) []byte { return AppendBool(b, true) }, func(d *Decoder) any { return d.Bool() }, true, "00000001"},
	{"rfc4506-4.4-false", func(b []byte) []byte { return AppendBool(b, false) }, func(d *Decoder) any { return d.Bool() }, false, "00000000"},
	{"rfc4506-4.19-optional", func(b []byte) []byte { return AppendBool(b, true) }, func(d *Decoder) any { return d.Optional() }, true, "00000001"},
	{"rfc4506-4.5-uhyper", func(b []byte) []byte { return AppendUint64(b, 0x0102030405060708) }, func(d *Decoder) any { return d.Uint64() }, uint64(0x0102030405060708), "0102030405060708"},
	{"rfc4506-4.5-hyper-neg", func(b []byte) []byte { return AppendInt64(b, math.MinInt64) }, func(d *Decoder) any { return d.Int64() }, int64(math.MinInt64), "8000000000000000"},
	{"rfc4506-4.9-fixed5", func(b []byte) []byte { return AppendFixedOpaque(b, []byte("hello")) }, func(d *Decoder) any { return d.FixedOpaque(5) }, []byte("hello"), "68656c6c6f000000"},
	{"rfc4506-4.9-fixed4", func(b []byte) []byte { return AppendFixedOpaque(b, []byte("abcd")) }, func(d *Decoder) any { return d.FixedOpaque(4) }, []byte("abcd"), "61626364"},
	{"rfc4506-4.10-opaque3", func(b []byte) []byte { return AppendOpaque(b, []byte{1, 2, 3}) }, func(d *Decoder) any { return d.Opaque(16) }, []byte{1, 2, 3}, "0000000301020300"},
	{"rfc4506-4.10-opaque-empty", func(b []byte) []byte { return AppendOpaque(b, nil) }, func(d *Decoder) any { return d.Opaque(0) }, []byte{}, "00000000"},
	{"rfc4506-4.11-string", func(b []byte) []byte { return AppendString(b, "sillyprog") }, func(d *Decoder) any { return d.Str(255) }, "sillyprog", "0000000973696c6c7970726f67000000"},
	{"rfc4506-4.13-count", func(b []byte) []byte { return AppendUint32(AppendUint32(AppendUint32(b, 2), 9), 10) }, func(d *Decoder) any {
		n := d.Count(8, 4)
		s := 0
		for i := 0; i < n; i++ {
			s += int(d.Uint32())
		}
		return s
	}, 19, "00000002000000090000000a"},
}

func TestGolden(t *testing.T) {
	for _, it := range goldenItems {
		t.Run(it.name, func(t *testing.T) {
			want, err := hex.DecodeString(it.golden)
			if err != nil {
				t.Fatal(err)
			}
			if got := it.enc(nil); !bytes.Equal(got, want) {
				t.Errorf("encode = %x, want %x", got, want)
			}
			// Appending keeps what was there.
			if got := it.enc([]byte{0xaa}); !bytes.Equal(got[1:], want) || got[0] != 0xaa {
				t.Errorf("append after prefix = %x", got)
			}
			d := NewDecoder(want)
			got := it.dec(&d)
			if err := d.Done(); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !equal(got, it.want) {
				t.Errorf("decode = %#v, want %#v", got, it.want)
			}
		})
	}
}

func TestTruncations(t *testing.T) {
	for _, it := range goldenItems {
		full, _ := hex.DecodeString(it.golden)
		for n := 0; n < len(full); n++ {
			d := NewDecoder(full[:n])
			it.dec(&d)
			err := d.Err()
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrCount) {
				t.Errorf("%s: prefix of %d bytes: err = %v, want short", it.name, n, err)
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		dec     func(*Decoder)
		kind    error
		off     int
		message string
	}{
		{"bool-2", "00000002", func(d *Decoder) { d.Bool() }, ErrBool, 0, "xdr: boolean not 0 or 1 at offset 0 (value 2)"},
		{"optional-big", "00000000ffffffff", func(d *Decoder) { d.Uint32(); d.Optional() }, ErrBool, 4, ""},
		{"opaque-too-long", "00000005", func(d *Decoder) { d.Opaque(4) }, ErrTooLong, 0, "xdr: length exceeds maximum at offset 0 (5 > 4)"},
		{"opaque-short", "0000000561626364", func(d *Decoder) { d.Opaque(8) }, ErrShort, 0, "xdr: short buffer at offset 0 (need 8 bytes, have 4)"},
		{"opaque-huge", "ffffffff", func(d *Decoder) { d.Opaque(math.MaxInt32) }, ErrTooLong, 0, ""},
		{"opaque-bad-pad", "000000036162630a", func(d *Decoder) { d.Opaque(8) }, ErrPad, 4, ""},
		{"fixed-bad-pad", "6100ff00", func(d *Decoder) { d.FixedOpaque(1) }, ErrPad, 0, ""},
		{"fixed-negative", "00000000", func(d *Decoder) { d.FixedOpaque(-1) }, ErrShort, 0, ""},
		{"count-max", "00000009", func(d *Decoder) { d.Count(8, 4) }, ErrTooLong, 0, ""},
		{"count-remaining", "00000003000000010000000200000003"[:24], func(d *Decoder) { d.Count(8, 4) }, ErrCount, 0, "xdr: count exceeds remaining bytes at offset 0 (3 > 2)"},
		{"count-huge-elems", "00000001" + strings.Repeat("00", 15), func(d *Decoder) { d.Count(8, 16) }, ErrCount, 0, ""},
		{"trailing", "0000000100", func(d *Decoder) { d.Uint32() }, ErrTrailing, 4, "xdr: trailing bytes at offset 4 (1 bytes)"},
		{"need", "0000", func(d *Decoder) { d.Need(8) }, ErrShort, 0, ""},
		{"need-negative", "0000", func(d *Decoder) { d.Need(-1) }, ErrShort, 0, ""},
		{"skip", "00000000", func(d *Decoder) { d.Skip(2); d.Skip(3) }, ErrShort, 2, ""},
		{"hyper-short", "00000000000000", func(d *Decoder) { d.Uint64() }, ErrShort, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := hex.DecodeString(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			d := NewDecoder(in)
			tt.dec(&d)
			err = d.Done()
			if !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want kind %v", err, tt.kind)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset != tt.off {
				t.Fatalf("err = %#v, want offset %d", err, tt.off)
			}
			// The cursor stays at the start of the failing item; for
			// padding that is the opaque's length word, before the data
			// the error points at.
			wantCur := tt.off
			switch tt.name {
			case "opaque-bad-pad":
				wantCur = 0
			case "trailing":
				wantCur = 4
			}
			if d.Offset() != wantCur {
				t.Errorf("cursor at %d after failure, want %d", d.Offset(), wantCur)
			}
			if tt.message != "" && err.Error() != tt.message {
				t.Errorf("message %q, want %q", err.Error(), tt.message)
			}
		})
	}
}

func TestSticky(t *testing.T) {
	d := NewDecoder([]byte{0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 5})
	if d.Bool() {
		t.Fatal("bad bool decoded as true")
	}
	first := d.Err()
	if first == nil {
		t.Fatal("no error")
	}
	// Everything after returns zero values and leaves the first error.
	if d.Uint32() != 0 || d.Uint64() != 0 || d.Opaque(10) != nil || d.FixedOpaque(1) != nil ||
		d.Str(10) != "" || d.Count(10, 4) != 0 || d.Need(0) || d.Rest() != nil || d.Bool() {
		t.Fatal("decoder returned data after an error")
	}
	d.Fail(ErrTooLong)
	if d.Err() != first || d.Done() != first {
		t.Fatalf("error changed to %v", d.Err())
	}
	d.Reset([]byte{0, 0, 0, 1})
	if d.Err() != nil || !d.Bool() || d.Done() != nil {
		t.Fatal("Reset did not clear the decoder")
	}
}

func TestFail(t *testing.T) {
	custom := errors.New("enum out of range")
	d := NewDecoder([]byte{0, 0, 0, 9, 0, 0, 0, 0})
	if v := d.Enum(); v != 9 {
		t.Fatal(v)
	}
	d.Fail(custom)
	var de *DecodeError
	if !errors.Is(d.Err(), custom) || !errors.As(d.Err(), &de) || de.Offset != 4 {
		t.Fatalf("err = %v", d.Err())
	}
	if d.Err().Error() != "xdr: enum out of range at offset 4" {
		t.Fatalf("message %q", d.Err().Error())
	}
}

func TestCursor(t *testing.T) {
	d := NewDecoder(AppendOpaque(AppendUint32(nil, 1), []byte("abcde")))
	if d.Len() != 16 || d.Offset() != 0 {
		t.Fatal(d.Len(), d.Offset())
	}
	d.Uint32()
	if !bytes.Equal(d.Rest(), []byte{0, 0, 0, 5, 'a', 'b', 'c', 'd', 'e', 0, 0, 0}) {
		t.Fatalf("rest %x", d.Rest())
	}
	p := d.Opaque(5)
	if string(p) != "abcde" || cap(p) != 5 {
		t.Fatalf("opaque %q cap %d: must alias the buffer and not expose the pad", p, cap(p))
	}
	if d.Len() != 0 || d.Done() != nil {
		t.Fatal("not at end")
	}
	var zero Decoder
	if zero.Len() != 0 || zero.Done() != nil {
		t.Fatal("zero decoder not empty")
	}
}

func TestSizes(t *testing.T) {
	for n, want := range []int{0, 3, 2, 1, 0, 3} {
		if Pad(n) != want {
			t.Errorf("Pad(%d) = %d", n, Pad(n))
		}
		if RoundUp(n) != n+want || OpaqueLen(n) != 4+n+want {
			t.Errorf("RoundUp/OpaqueLen(%d) wrong", n)
		}
		if got := len(AppendPad(nil, n)); got != want {
			t.Errorf("AppendPad(%d) wrote %d", n, got)
		}
		if got := len(AppendOpaque(nil, make([]byte, n))); got != OpaqueLen(n) {
			t.Errorf("OpaqueLen(%d) = %d, encoding is %d", n, OpaqueLen(n), got)
		}
	}
}

func TestReserve(t *testing.T) {
	b := AppendUint32(nil, 0xdeadbeef)
	b, at := Reserve(b)
	b = AppendString(b, "xyz")
	PutUint32(b, at, uint32(len(b)-at-4))
	if hex.EncodeToString(b) != "deadbeef"+"00000008"+"0000000378797a00" {
		t.Fatalf("%x", b)
	}
}

// genItem appends a random item to b and returns a checker that decodes it.
func genItem(r *rand.Rand, b []byte) ([]byte, func(*Decoder) bool) {
	switch r.IntN(8) {
	case 0:
		v := r.Uint32()
		return AppendUint32(b, v), func(d *Decoder) bool { return d.Uint32() == v }
	case 1:
		v := int32(r.Uint32())
		return AppendInt32(b, v), func(d *Decoder) bool { return d.Int32() == v }
	case 2:
		v := r.IntN(2) == 1
		return AppendBool(b, v), func(d *Decoder) bool { return d.Bool() == v }
	case 3:
		v := r.Uint64()
		return AppendUint64(b, v), func(d *Decoder) bool { return d.Uint64() == v }
	case 4:
		v := int64(r.Uint64())
		return AppendInt64(b, v), func(d *Decoder) bool { return d.Int64() == v }
	case 5:
		p := randBytes(r, r.IntN(40))
		return AppendFixedOpaque(b, p), func(d *Decoder) bool { return bytes.Equal(d.FixedOpaque(len(p)), p) }
	case 6:
		p := randBytes(r, r.IntN(40))
		return AppendOpaque(b, p), func(d *Decoder) bool { return bytes.Equal(d.Opaque(len(p)), p) }
	default:
		s := string(randBytes(r, r.IntN(40)))
		return AppendString(b, s), func(d *Decoder) bool { return d.Str(64) == s }
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

func TestRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		var b []byte
		var checks []func(*Decoder) bool
		for n := r.IntN(12); n >= 0; n-- {
			var c func(*Decoder) bool
			b, c = genItem(r, b)
			checks = append(checks, c)
		}
		if len(b)%4 != 0 {
			t.Fatalf("encoding of %d bytes is not a multiple of 4", len(b))
		}
		d := NewDecoder(b)
		for i, c := range checks {
			if !c(&d) {
				t.Fatalf("iteration %d item %d: mismatch (err %v)", iter, i, d.Err())
			}
		}
		if err := d.Done(); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
	}
}

func TestDecodeAllocs(t *testing.T) {
	b := AppendUint32(nil, 1)
	b = AppendOpaque(b, []byte("payload"))
	b = AppendUint64(b, 9)
	b = AppendBool(b, true)
	allocs := testing.AllocsPerRun(100, func() {
		var d Decoder
		d.Reset(b)
		d.Uint32()
		d.Opaque(64)
		d.Uint64()
		d.Bool()
		if d.Done() != nil {
			t.Fatal(d.Err())
		}
	})
	if allocs != 0 {
		t.Fatalf("decoding allocates %v times", allocs)
	}
	buf := make([]byte, 0, 64)
	allocs = testing.AllocsPerRun(100, func() {
		e := AppendUint32(buf[:0], 1)
		e = AppendOpaque(e, []byte("payload"))
		_ = AppendString(e, "x")
	})
	if allocs != 0 {
		t.Fatalf("encoding into a sized buffer allocates %v times", allocs)
	}
}

// FuzzDecoder decodes arbitrary input with an arbitrary program of item
// types, re-encodes what it decoded, and requires the re-encoding to equal
// the bytes consumed: XDR as this package accepts it (zero padding, 0/1
// booleans) is canonical, so decode then encode must be the identity.
func FuzzDecoder(f *testing.F) {
	for _, it := range goldenItems {
		b, _ := hex.DecodeString(it.golden)
		f.Add(b, []byte{0, 1, 2, 3, 4, 5, 6, 7})
	}
	f.Add([]byte{0, 0, 0, 3, 'a', 'b', 'c', 0}, []byte{6})
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2}, []byte{8, 0, 0})
	f.Fuzz(func(t *testing.T, data, prog []byte) {
		d := NewDecoder(data)
		var out []byte
		for _, op := range prog {
			if d.Err() != nil {
				break
			}
			before := d.Offset()
			switch op % 9 {
			case 0:
				out = AppendUint32(out, d.Uint32())
			case 1:
				out = AppendInt32(out, d.Int32())
			case 2:
				v := d.Bool()
				if d.Err() == nil {
					out = AppendBool(out, v)
				}
			case 3:
				out = AppendUint64(out, d.Uint64())
			case 4:
				out = AppendInt64(out, d.Int64())
			case 5:
				n := int(op >> 4)
				p := d.FixedOpaque(n)
				if d.Err() == nil {
					out = AppendFixedOpaque(out, p)
				}
			case 6:
				p := d.Opaque(int(op) * 4)
				if d.Err() == nil {
					out = AppendOpaque(out, p)
				}
			case 7:
				s := d.Str(1 << 16)
				if d.Err() == nil {
					out = AppendString(out, s)
				}
			case 8:
				n := d.Count(64, 4)
				if d.Err() == nil {
					out = AppendUint32(out, uint32(n))
				}
			}
			if d.Err() != nil {
				if d.Offset() != before {
					t.Fatalf("cursor moved from %d to %d on a failed item", before, d.Offset())
				}
				var de *DecodeError
				if !errors.As(d.Err(), &de) || de.Offset < before || de.Offset > len(data) {
					t.Fatalf("bad error %v", d.Err())
				}
				if d.Err().Error() == "" {
					t.Fatal("empty error message")
				}
				break
			}
			if d.Offset()-before != len(out)-before {
				t.Fatalf("consumed %d bytes, re-encoded %d", d.Offset()-before, len(out)-before)
			}
		}
		if !bytes.Equal(out[:min(len(out), d.Offset())], data[:d.Offset()]) {
			t.Fatalf("re-encoding %x differs from consumed input %x", out, data[:d.Offset()])
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	payload := make([]byte, 1024)
	buf := AppendUint32(nil, 7)
	buf = AppendOpaque(buf, payload)
	buf = AppendUint64(buf, 1)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var d Decoder
	for b.Loop() {
		d.Reset(buf)
		d.Uint32()
		d.Opaque(4096)
		d.Uint64()
		if d.Done() != nil {
			b.Fatal(d.Err())
		}
	}
}
