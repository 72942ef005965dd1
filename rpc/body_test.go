package rpc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// sampleBody encodes uint32 7, DDP opaque "hello", uint32 9, DDP opaque
// "abcd", inline opaque "xy".
func sampleBody() Body {
	var b Body
	b.XDR = xdr.AppendUint32(b.XDR, 7)
	b.AppendDDPOpaque([]byte("hello"))
	b.XDR = xdr.AppendUint32(b.XDR, 9)
	b.AppendDDPOpaque([]byte("abcd"))
	b.XDR = xdr.AppendOpaque(b.XDR, []byte("xy"))
	return b
}

const sampleFlat = "00000007 00000005 68656c6c6f000000 00000009 00000004 61626364 00000002 78790000"

func TestBodyGolden(t *testing.T) {
	b := sampleBody()
	wantXDR := unhex(t, "00000007 00000005 00000009 00000004 00000002 78790000")
	if !bytes.Equal(b.XDR, wantXDR) {
		t.Errorf("XDR = %x, want %x", b.XDR, wantXDR)
	}
	if len(b.Items) != 2 || b.Items[0].Offset != 8 || b.Items[1].Offset != 16 {
		t.Errorf("Items = %+v", b.Items)
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	flat := unhex(t, sampleFlat)
	if got := b.AppendFlat([]byte{0xee}); !bytes.Equal(got[1:], flat) || got[0] != 0xee {
		t.Errorf("AppendFlat = %x\nwant        %x", got, flat)
	}
	if b.Len() != len(flat) {
		t.Errorf("Len = %d, want %d", b.Len(), len(flat))
	}
}

// decodeSample decodes what sampleBody encodes, with the DDP-eligible items
// going into caller buffers.
func decodeSample(t *testing.T, b Body, dst1, dst2 []byte) {
	t.Helper()
	d := NewBodyDecoder(b)
	if v := d.Uint32(); v != 7 {
		t.Errorf("first = %d", v)
	}
	n1 := d.DDPOpaqueInto(dst1)
	if v := d.Uint32(); v != 9 {
		t.Errorf("third = %d", v)
	}
	p := d.DDPOpaque(16)
	xy := d.DDPOpaque(2) // inline either way
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
	if string(dst1[:n1]) != "hello" || string(p) != "abcd" || string(xy) != "xy" {
		t.Errorf("decoded %q %q %q", dst1[:n1], p, xy)
	}
	_ = dst2
}

func TestBodyDecoderBothForms(t *testing.T) {
	held := sampleBody()
	flat := Body{XDR: held.AppendFlat(nil)}
	for _, b := range []Body{held, flat} {
		decodeSample(t, b, make([]byte, 8), nil)
	}

	// Data already in the caller's buffer is not copied onto itself; data
	// elsewhere is copied in.
	dst := make([]byte, 8)
	copy(dst, "hello")
	placed := sampleBody()
	placed.Items[0].Data = dst[:5]
	d := NewBodyDecoder(placed)
	d.Uint32()
	if n := d.DDPOpaqueInto(dst); n != 5 || &placed.Items[0].Data[0] != &dst[0] {
		t.Errorf("placed: n = %d", n)
	}
	d.Reset(held)
	d.Uint32()
	if n := d.DDPOpaqueInto(dst); n != 5 || string(dst[:5]) != "hello" {
		t.Errorf("copied: %q", dst[:n])
	}

	// Empty items and an empty destination.
	var e Body
	e.AppendDDPOpaque(nil)
	d.Reset(e)
	if n := d.DDPOpaqueInto(nil); n != 0 || d.Done() != nil {
		t.Errorf("empty item: n = %d, err = %v", n, d.Err())
	}
	if e.Len() != 4 || !bytes.Equal(e.AppendFlat(nil), make([]byte, 4)) {
		t.Errorf("empty item flattens to %x", e.AppendFlat(nil))
	}
}

func TestBodyRejects(t *testing.T) {
	good := sampleBody()
	mutate := func(f func(b *Body)) Body {
		b := Body{XDR: bytes.Clone(good.XDR), Items: append([]DDPItem(nil), good.Items...)}
		f(&b)
		return b
	}
	invalid := map[string]Body{
		"misaligned":     mutate(func(b *Body) { b.Items[0].Offset = 6 }),
		"first-at-0":     mutate(func(b *Body) { b.Items[0].Offset = 0 }),
		"out-of-order":   mutate(func(b *Body) { b.Items[0], b.Items[1] = b.Items[1], b.Items[0] }),
		"same-offset":    mutate(func(b *Body) { b.Items[1].Offset = b.Items[0].Offset }),
		"beyond-xdr":     mutate(func(b *Body) { b.Items[1].Offset = len(b.XDR) + 4 }),
		"length-differs": mutate(func(b *Body) { b.Items[0].Data = []byte("hell") }),
	}
	for name, b := range invalid {
		if err := b.Validate(); !errors.Is(err, ErrDDPItem) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}

	decode := func(b Body, max int) error {
		d := NewBodyDecoder(b)
		d.Uint32()
		d.DDPOpaque(max)
		d.Uint32()
		d.DDPOpaque(max)
		d.DDPOpaque(max)
		return d.Done()
	}
	tests := map[string]struct {
		b    Body
		max  int
		want error
	}{
		"length-differs": {invalid["length-differs"], 16, ErrDDPItem},
		"too-long":       {good, 4, xdr.ErrTooLong},
		"negative-max":   {good, -1, xdr.ErrTooLong},
		"item-unread":    {mutate(func(b *Body) { b.Items = append(b.Items, DDPItem{Offset: 64}) }), 16, ErrDDPItem},
		"item-past-end":  {mutate(func(b *Body) { b.XDR = b.XDR[:4]; b.Items = b.Items[:1] }), 16, xdr.ErrShort},
	}
	for name, tt := range tests {
		if err := decode(tt.b, tt.max); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tt.want)
		}
	}

	// Inline data over an item's position.
	skipped := Body{XDR: xdr.AppendOpaque(nil, []byte("abcdefgh")), Items: []DDPItem{{Offset: 8, Data: []byte("x")}}}
	d := NewBodyDecoder(skipped)
	if d.DDPOpaque(8); !errors.Is(d.Err(), ErrDDPItem) {
		t.Errorf("item skipped: err = %v", d.Err())
	}

	// An item where an RPC header lies.
	b := mutate(func(b *Body) {})
	if _, err := b.tail(8); !errors.Is(err, ErrDDPItem) {
		t.Errorf("tail over an item: %v", err)
	}
	b = mutate(func(b *Body) {})
	tl, err := b.tail(4)
	if err != nil || tl.Items[0].Offset != 4 || tl.Validate() != nil {
		t.Errorf("tail(4) = %+v, %v", tl, err)
	}
	if err := (&Body{Items: []DDPItem{{Offset: 4}}}).Validate(); err == nil || err.Error() != "rpc: bad DDP item 0 at offset 4: out of order or outside the XDR stream" {
		t.Errorf("message: %v", err)
	}
}

// TestBodyRandom builds random bodies mixing words, inline opaques and
// held-apart opaques, and checks that both the held-apart and the
// flattened form decode to the same values.
func TestBodyRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		var b, inline Body
		var want [][]byte
		for range r.IntN(10) {
			p := randBytes(r, 40)
			switch r.IntN(3) {
			case 0:
				b.XDR = xdr.AppendUint32(b.XDR, uint32(len(p)))
				inline.XDR = xdr.AppendUint32(inline.XDR, uint32(len(p)))
				want = append(want, nil)
			case 1:
				b.XDR = xdr.AppendOpaque(b.XDR, p)
				inline.XDR = xdr.AppendOpaque(inline.XDR, p)
				want = append(want, p)
			case 2:
				b.AppendDDPOpaque(p)
				inline.XDR = xdr.AppendOpaque(inline.XDR, p)
				want = append(want, p)
			}
		}
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		if flat := b.AppendFlat(nil); !bytes.Equal(flat, inline.XDR) || len(flat) != b.Len() {
			t.Fatalf("flat %x, want %x", flat, inline.XDR)
		}
		for _, body := range []Body{b, inline} {
			d := NewBodyDecoder(body)
			for i, w := range want {
				if w == nil {
					d.Uint32()
					continue
				}
				if got := d.DDPOpaque(40); !bytes.Equal(got, w) {
					t.Fatalf("item %d = %x, want %x (%v)", i, got, w, d.Err())
				}
			}
			if err := d.Done(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestBodyUnplaced decodes results whose places the transport did not know
// (RPC-over-RDMA write chunks): each goes to the next DDP-eligible opaque.
func TestBodyUnplaced(t *testing.T) {
	var b Body
	b.XDR = xdr.AppendUint32(b.XDR, 7)
	b.XDR = xdr.AppendUint32(b.XDR, 5) // length word of a result placed apart
	b.XDR = xdr.AppendUint32(b.XDR, 9)
	b.XDR = xdr.AppendOpaque(b.XDR, []byte("xy")) // a later DDP-eligible result sent inline
	hello := []byte("hello")
	b.Items = []DDPItem{{Offset: Unplaced, Data: hello}}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	d := NewBodyDecoder(b)
	d.Uint32()
	p := d.DDPOpaque(16)
	d.Uint32()
	xy := d.DDPOpaque(16)
	if err := d.Done(); err != nil || &p[0] != &hello[0] || string(xy) != "xy" {
		t.Fatalf("decoded %q %q, %v", p, xy, err)
	}

	// The length word must agree with the placed data.
	b.Items[0].Data = []byte("hell")
	d = NewBodyDecoder(b)
	d.Uint32()
	if d.DDPOpaque(16); !errors.Is(d.Err(), ErrDDPItem) {
		t.Fatalf("mismatched length: %v", d.Err())
	}

	// Placed items come first.
	bad := Body{XDR: b.XDR, Items: []DDPItem{{Offset: Unplaced, Data: hello}, {Offset: 8, Data: hello}}}
	if err := bad.Validate(); !errors.Is(err, ErrDDPItem) {
		t.Fatalf("placed after unplaced: %v", err)
	}
}

// TestBodyPadding decodes RDMA_MSGP padding (RFC 5666 section 3.9): opaques
// of at least Thresh bytes have their data aligned to Align, measured from
// Base bytes before the stream; shorter ones are not padded.
func TestBodyPadding(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 40)
	var b Body
	b.XDR = xdr.AppendOpaque(b.XDR, []byte("hi")) // short: no padding
	b.XDR = xdr.AppendUint32(b.XDR, uint32(len(big)))
	// Data would start at Base+12 = 40; align 32 puts it at 64: 24 bytes
	// of padding.
	b.XDR = append(b.XDR, make([]byte, 24)...)
	b.XDR = xdr.AppendFixedOpaque(b.XDR, big)
	b.XDR = xdr.AppendString(b.XDR, "tail")
	b.Padding = Padding{Align: 32, Thresh: 16, Base: 28}
	d := NewBodyDecoder(b)
	if got := d.DDPOpaque(8); string(got) != "hi" {
		t.Fatalf("short opaque %q (%v)", got, d.Err())
	}
	if got := d.Opaque(64); !bytes.Equal(got, big) {
		t.Fatalf("padded opaque %x (%v)", got, d.Err())
	}
	if s := d.Str(8); s != "tail" || d.Done() != nil {
		t.Fatalf("tail %q (%v)", s, d.Err())
	}
	// Through tail(), as the server hands arguments over: Base follows.
	whole := Body{XDR: append(make([]byte, 8), b.XDR...), Padding: Padding{Align: 32, Thresh: 16, Base: 20}}
	args, err := whole.tail(8)
	if err != nil || args.Padding.Base != 28 {
		t.Fatalf("tail: %+v %v", args.Padding, err)
	}
	// Without padding information the same bytes do not decode.
	d = NewBodyDecoder(Body{XDR: b.XDR})
	d.Opaque(8)
	if got := d.Opaque(64); bytes.Equal(got, big) {
		t.Fatal("decoded padded data without padding information")
	}
}
