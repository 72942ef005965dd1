package ddp

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

// FuzzFPDU feeds a byte stream through the receive path, MPA framing then
// DDP/RDMAP parsing, and checks that nothing panics, that every accepted
// segment encodes back to exactly the ULPDU it came from (the codec is
// lossless), and that decode -> encode -> decode is stable.
func FuzzFPDU(f *testing.F) {
	var all []byte
	for _, v := range segmentVectors {
		if len(v.ulpdu) > 512 {
			continue // large seeds make the fuzzer's minimization crawl
		}
		fp := mpa.AppendFPDU(nil, true, v.ulpdu)
		f.Add(fp, true)
		all = append(all, fp...)
	}
	f.Add(all, true)
	f.Add(all, false)
	f.Fuzz(func(t *testing.T, stream []byte, crc bool) {
		for len(stream) > 0 {
			fp, n, err := mpa.ParseFPDU(stream, crc)
			if err != nil {
				return
			}
			stream = stream[n:]
			s, err := ParseSegment(fp.ULPDU)
			if err != nil {
				continue
			}
			_ = s.Check()
			_ = s.String()
			enc := s.Append(nil)
			if !bytes.Equal(enc, fp.ULPDU) || s.Len() != len(enc) {
				t.Fatalf("%v: re-encoded\n% x\nfrom\n% x", s, enc, fp.ULPDU)
			}
			fp2, _, err := mpa.ParseFPDU(mpa.AppendFPDU(nil, true, s.AppendHeaders(nil), s.Payload), true)
			if err != nil {
				t.Fatalf("re-framed: %v", err)
			}
			s2, err := ParseSegment(fp2.ULPDU)
			if err != nil || !reflect.DeepEqual(s, s2) {
				t.Fatalf("second parse: %v\n%+v\n%+v", err, s, s2)
			}
		}
	})
}
