package nfs3

import (
	"math"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// TestTimeOfClamps: time.Time to nfstime3 (RFC 1813 Section 2.6) for golden
// values, nanoseconds kept, and the times nfstime3 cannot hold (before
// 1970, the zero time.Time, after 2106) clamped to its first and last.
func TestTimeOfClamps(t *testing.T) {
	last := Time{Seconds: math.MaxUint32, Nseconds: 999999999}
	tests := []struct {
		name string
		in   time.Time
		want Time
	}{
		{"epoch", time.Unix(0, 0), Time{}},
		{"golden", time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC), Time{Seconds: 1704164645, Nseconds: 6}},
		{"other zone", time.Date(2024, 1, 2, 4, 4, 5, 6, time.FixedZone("CET", 3600)), Time{Seconds: 1704164645, Nseconds: 6}},
		{"nanoseconds", time.Unix(1, 999999999), Time{Seconds: 1, Nseconds: 999999999}},
		{"zero time.Time", time.Time{}, Time{}},
		{"a second before 1970", time.Unix(-1, 500000000), Time{}},
		{"1900", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), Time{}},
		{"last", time.Unix(math.MaxUint32, 999999999), last},
		{"after the last", time.Unix(math.MaxUint32+1, 0), last},
	}
	for _, tc := range tests {
		if got := TimeOf(tc.in); got != tc.want {
			t.Errorf("%s: TimeOf(%v) = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
	}
	// Back to the same instant, and to the wire as two words.
	in := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	if back := TimeOf(in).Time(); !back.Equal(in) {
		t.Errorf("TimeOf(%v).Time() = %v", in, back)
	}
	want := xdr.AppendUint32(xdr.AppendUint32(nil, 1704164645), 6)
	if got := TimeOf(in).append(nil); string(got) != string(want) {
		t.Errorf("encoded % x, want % x", got, want)
	}
}
