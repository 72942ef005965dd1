package rpcrdma

import "testing"

func TestBufPool(t *testing.T) {
	for _, tt := range []struct{ n, class, cap int }{
		{1, 0, 4096}, {4096, 0, 4096}, {4097, 1, 8192}, {1 << 20, 8, 1 << 20}, {1<<20 + 1, 9, 2 << 20}, {16 << 20, 12, 16 << 20},
	} {
		if c := poolClass(tt.n); c != tt.class {
			t.Errorf("poolClass(%d) = %d, want %d", tt.n, c, tt.class)
		}
		b := getBuf(tt.n)
		if len(b) != tt.n || cap(b) != tt.cap {
			t.Errorf("getBuf(%d): len %d cap %d, want cap %d", tt.n, len(b), cap(b), tt.cap)
		}
		putBuf(b)
	}
	for _, n := range []int{0, -1, 16<<20 + 1} {
		if poolClass(n) != -1 {
			t.Errorf("poolClass(%d) pooled", n)
		}
	}
	if b := getBuf(16<<20 + 1); len(b) != 16<<20+1 {
		t.Fatal("large buffer")
	}
	putBuf(make([]byte, 5000)) // not from the pool: ignored
	if b := getBuf(5000); cap(b) != 8192 {
		t.Fatalf("foreign buffer entered the pool: cap %d", cap(b))
	}
}
