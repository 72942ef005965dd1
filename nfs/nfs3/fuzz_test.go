package nfs3

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// fuzzSeeds adds a random valid encoding of each procedure's arguments or
// results.
func fuzzSeeds(f *testing.F, res bool) {
	rng := rand.New(rand.NewPCG(7, 8))
	for p := range Proc(NumProcs) {
		v := procTypes[p].args()
		if res {
			v = procTypes[p].res()
		}
		fill(rng, reflect.ValueOf(v).Elem())
		_, flat := encode(v)
		f.Add(uint8(p), flat)
	}
}

// fuzzDecode decodes data as proc's arguments or results; what decodes
// must encode back to the same bytes (the codec is canonical).
func fuzzDecode(t *testing.T, proc uint8, data []byte, res bool) {
	p := Proc(proc % NumProcs)
	v := procTypes[p].args()
	if res {
		v = procTypes[p].res()
	}
	if decode(v, rpc.Body{XDR: data}) != nil {
		return
	}
	if _, again := encode(v); !bytes.Equal(again, data) {
		t.Fatalf("%v: %x re-encoded as %x", p, data, again)
	}
}

func FuzzArgs(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, proc uint8, data []byte) { fuzzDecode(t, proc, data, false) })
}

func FuzzResults(f *testing.F) {
	fuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, proc uint8, data []byte) { fuzzDecode(t, proc, data, true) })
}
