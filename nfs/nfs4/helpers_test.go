package nfs4

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// codec is what every argument and result type implements.
type codec interface {
	Append(*rpc.Body)
	Decode(*rpc.BodyDecoder) error
}

func encode(v codec) (rpc.Body, []byte) {
	var b rpc.Body
	v.Append(&b)
	return b, b.AppendFlat(nil)
}

func decode(v codec, b rpc.Body) error {
	d := rpc.NewBodyDecoder(b)
	if err := v.Decode(&d); err != nil {
		return err
	}
	return d.Done()
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// attrCodec and setAttrCodec let the tests treat a bare fattr4 as a
// message.
type attrCodec struct{ Attr }

func (a *attrCodec) Append(b *rpc.Body)              { b.XDR = a.Attr.Append(b.XDR) }
func (a *attrCodec) Decode(d *rpc.BodyDecoder) error { return a.Attr.Decode(d) }

type setAttrCodec struct{ SetAttr }

func (a *setAttrCodec) Append(b *rpc.Body)              { b.XDR = a.SetAttr.Append(b.XDR) }
func (a *setAttrCodec) Decode(d *rpc.BodyDecoder) error { return a.SetAttr.Decode(d) }

// checkGolden encodes v, compares with the hex, decodes the hex and
// compares with v; items is the number of DDP-eligible items expected.
func checkGolden(t *testing.T, v codec, hexs string, items int) {
	t.Helper()
	want := mustHex(t, hexs)
	body, flat := encode(v)
	if !bytes.Equal(flat, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", flat, want)
	}
	if len(body.Items) != items {
		t.Fatalf("%d DDP items, want %d", len(body.Items), items)
	}
	got := reflect.New(reflect.TypeOf(v).Elem()).Interface().(codec)
	if err := decode(got, rpc.Body{XDR: want}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("decoded %+v\nwant    %+v", got, v)
	}
	// The same with the DDP items held apart, as an RPC-over-RDMA
	// transport delivers them.
	got = reflect.New(reflect.TypeOf(v).Elem()).Interface().(codec)
	if err := decode(got, body); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("decoded held apart %+v\nwant %+v", got, v)
	}
	checkTruncations(t, func() codec { return reflect.New(reflect.TypeOf(v).Elem()).Interface().(codec) }, want)
}

// checkTruncations: every strict prefix of a valid encoding fails.
func checkTruncations(t *testing.T, mk func() codec, flat []byte) {
	t.Helper()
	for n := range len(flat) {
		if err := decode(mk(), rpc.Body{XDR: flat[:n]}); err == nil {
			t.Fatalf("%T: %d of %d bytes decoded", mk(), n, len(flat))
		}
	}
}

// checkRoundTrip: v's encoding, held apart and flattened, decodes to a
// value that encodes the same, and no strict prefix decodes.
func checkRoundTrip(t *testing.T, v codec, mk func() codec) {
	t.Helper()
	body, flat := encode(v)
	if err := body.Validate(); err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	for _, in := range []rpc.Body{body, {XDR: flat}} {
		got := mk()
		if err := decode(got, in); err != nil {
			t.Fatalf("%T %+v: decoding %x: %v", v, v, flat, err)
		}
		if _, again := encode(got); !bytes.Equal(again, flat) {
			t.Fatalf("%T: re-encoded\n%x\nwant\n%x", v, again, flat)
		}
	}
	checkTruncations(t, mk, flat)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return b
}

// knownIDs lists the attributes of a mask.
func knownIDs(b Bitmap) []AttrID {
	var ids []AttrID
	for id := range AttrID(len(b) * 32) {
		if b.Has(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// randMask returns a random subset of the attributes of known.
func randMask(rng *rand.Rand, known Bitmap) Bitmap {
	var m Bitmap
	for _, id := range knownIDs(known) {
		if rng.IntN(3) == 0 {
			m = m.With(id)
		}
	}
	return m
}

// fill sets v to random values a decoder accepts: enums within their
// members, statuses half the time OK, lengths within the maxima, unions
// on one of their arms.
func fill(rng *rand.Rand, v reflect.Value) {
	if fillSpecial(rng, v) {
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.SetUint(rng.Uint64() >> (rng.IntN(4) * 16))
	case reflect.Int64:
		v.SetInt(int64(rng.Uint64() >> (rng.IntN(4) * 16)))
	case reflect.String:
		v.SetString(string(randBytes(rng, rng.IntN(40))))
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(randBytes(rng, rng.IntN(OpaqueLimit+1)))
			return
		}
		n := rng.IntN(4)
		if n == 0 {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(rng, v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i))
			}
		}
	case reflect.Pointer:
		if rng.IntN(2) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(rng, v.Elem())
	}
}

func setEnum(rng *rand.Rand, v reflect.Value, vals ...uint64) { v.SetUint(vals[rng.IntN(len(vals))]) }

// fillSpecial fills the types whose valid values fill's default does not
// produce, and reports whether v was one.
func fillSpecial(rng *rand.Rand, v reflect.Value) bool {
	switch v.Type() {
	case reflect.TypeFor[Stat]():
		if rng.IntN(2) == 0 {
			v.SetUint(0)
		} else {
			setEnum(rng, v, uint64(ErrNoEnt), uint64(ErrStale), uint64(ErrBadSession), uint64(ErrDelay), 12345)
		}
	case reflect.TypeFor[FType]():
		setEnum(rng, v, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	case reflect.TypeFor[TimeHow]():
		setEnum(rng, v, 0, 1)
	case reflect.TypeFor[FileHandle]():
		v.SetBytes(randBytes(rng, rng.IntN(FHSize+1)))
	case reflect.TypeFor[Bitmap]():
		n := rng.IntN(4)
		if n == 0 {
			v.SetZero()
			break
		}
		b := make(Bitmap, n)
		for i := range b {
			b[i] = rng.Uint32()
		}
		v.Set(reflect.ValueOf(b))
	case reflect.TypeFor[Attr]():
		for i := 1; i < v.NumField(); i++ {
			fill(rng, v.Field(i))
		}
		v.Field(0).Set(reflect.ValueOf(randMask(rng, AttrKnown())))
	default:
		return fillMore(rng, v)
	}
	return true
}

// fillMore fills the enums of the operations.
func fillMore(rng *rand.Rand, v reflect.Value) bool {
	switch v.Type() {
	case reflect.TypeFor[ChannelDir]():
		setEnum(rng, v, 1, 2, 3)
	case reflect.TypeFor[rpc.AuthFlavor]():
		setEnum(rng, v, 0, 1)
	case reflect.TypeFor[CreateMode]():
		setEnum(rng, v, 0, 1, 2, 3)
	case reflect.TypeFor[ClaimType]():
		setEnum(rng, v, 0, 1, 2, 3, 4, 5, 6)
	case reflect.TypeFor[DelegType]():
		setEnum(rng, v, 0, 1, 2, 3)
	case reflect.TypeFor[WhyNoDeleg]():
		setEnum(rng, v, 0, 1, 2, 3, 4, 5, 6, 7, 8)
	case reflect.TypeFor[StableHow]():
		setEnum(rng, v, 0, 1, 2)
	case reflect.TypeFor[SecinfoStyle]():
		setEnum(rng, v, 0, 1)
	case reflect.TypeFor[GSSService]():
		setEnum(rng, v, 1, 2, 3)
	case reflect.TypeFor[SpaceLimit]():
		v.Set(reflect.ValueOf(SpaceLimit{LimitBy: uint32(1 + rng.IntN(2)), FileSize: rng.Uint64(), NumBlocks: rng.Uint32(), BytesPerBlock: 512}))
	case reflect.TypeFor[SecInfo]():
		v.Set(reflect.ValueOf(SecInfo{Flavor: rpc.AuthFlavor([]uint32{0, 1, 6}[rng.IntN(3)]), OID: randBytes(rng, rng.IntN(12)),
			QOP: rng.Uint32(), Service: GSSService(1 + rng.IntN(3))}))
	default:
		return false
	}
	return true
}
