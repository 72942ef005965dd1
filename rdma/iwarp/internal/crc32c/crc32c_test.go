package crc32c

import (
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestGolden: RFC 3720 appendix B.4 test vectors (iSCSI's CRC32c, the
// one MPA uses), and hash/crc32's own check value.
func TestGolden(t *testing.T) {
	inc, dec := make([]byte, 32), make([]byte, 32)
	for i := range inc {
		inc[i], dec[i] = byte(i), byte(31-i)
	}
	ones := make([]byte, 32)
	for i := range ones {
		ones[i] = 0xff
	}
	for _, tc := range []struct {
		name string
		p    []byte
		want uint32
	}{
		{"32 zeros", make([]byte, 32), 0x8a9136aa},
		{"32 ones", ones, 0x62a8ab43},
		{"incrementing", inc, 0x46dd794e},
		{"decrementing", dec, 0x113fdb5c},
		{"123456789", []byte("123456789"), 0xe3069283},
	} {
		if got := Checksum(tc.p); got != tc.want {
			t.Errorf("%s: %#08x, want %#08x", tc.name, got, tc.want)
		}
	}
}

// TestAgainstStdlib compares with hash/crc32 for every length to 3 KiB
// and at every alignment, and over longer random inputs, from random
// states: what the folding handles, what it leaves over, and both.
func TestAgainstStdlib(t *testing.T) {
	if !canFold {
		t.Log("no AVX-512 VPCLMULQDQ here: only hash/crc32 runs")
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20+64)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	check := func(crc uint32, p []byte) {
		t.Helper()
		if got, want := Update(crc, p), crc32.Update(crc, table, p); got != want {
			t.Fatalf("Update(%#08x, %d bytes at %p) = %#08x, want %#08x", crc, len(p), &p, got, want)
		}
	}
	for n := 0; n <= 3<<10; n++ {
		check(r.Uint32(), buf[n%64:n%64+n])
	}
	for range 200 {
		n := r.IntN(1 << 20)
		off := r.IntN(64)
		check(r.Uint32(), buf[off:off+n])
	}
	check(0, buf[:1<<20])
}

// TestIncremental: Update over pieces equals Checksum of the whole.
func TestIncremental(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := make([]byte, 100000)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	want := crc32.Checksum(p, table)
	for range 50 {
		crc, rest := uint32(0), p
		for len(rest) > 0 {
			n := min(len(rest), r.IntN(9000))
			crc, rest = Update(crc, rest[:n]), rest[n:]
		}
		if crc != want {
			t.Fatalf("pieces gave %#08x, want %#08x", crc, want)
		}
	}
}

// TestConstants computes the folding constants in fold_amd64.s again.
func TestConstants(t *testing.T) {
	xnmod := func(n int) uint32 {
		const p = 0x1edc6f41 // CRC32c, normal form, x^32 implied
		r := uint32(1)
		for range n {
			carry := r & 0x80000000
			r <<= 1
			if carry != 0 {
				r ^= p
			}
		}
		return r
	}
	k := func(n int) uint64 { return uint64(bits.Reverse32(xnmod(n))) << 1 }
	for _, c := range []struct {
		n    int
		want uint64
	}{
		{2080, 0xdcb17aa4}, {2016, 0xb9e02b86},
		{544, 0x740eef02}, {480, 0x9e4addf8},
		{416, 0x1c291d04}, {352, 0x1d82c63da},
		{288, 0x1384aa63a}, {224, 0xba4fc28e},
		{160, 0xf20c0dfe}, {96, 0x14cd00bd6},
	} {
		if got := k(c.n); got != c.want {
			t.Errorf("x^%d: %#x, the assembly has %#x", c.n, got, c.want)
		}
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), []byte("123456789"))
	f.Add(uint32(0xffffffff), make([]byte, 4096))
	f.Add(uint32(7), make([]byte, 1300))
	f.Fuzz(func(t *testing.T, crc uint32, p []byte) {
		if got, want := Update(crc, p), crc32.Update(crc, table, p); got != want {
			t.Fatalf("Update(%#08x, %d bytes) = %#08x, want %#08x", crc, len(p), got, want)
		}
	})
}

func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{512, 1024, 4096, 65536, 1 << 20} {
		p := make([]byte, n)
		b.Run(sizeName(n)+"/crc32c", func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				Update(0, p)
			}
		})
		b.Run(sizeName(n)+"/hash-crc32", func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Update(0, table, p)
			}
		})
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return string(rune('0'+n>>20)) + "MiB"
	case n >= 1<<10:
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
