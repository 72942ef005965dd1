package rpcrdma

import (
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rpcrdma/wire"
)

// TestStatsTable: every counter reaches the snapshot under its own field
// and name, Add sums every counter, and Counters names each once.
func TestStatsTable(t *testing.T) {
	var c Conn
	for i := range numStats {
		c.stats.add(i, uint64(i)+1)
	}
	c.stats.countError(wire.ErrChunk, true)
	c.stats.countError(wire.ErrVers, false)
	for r := range NumReasons {
		c.stats.reasons[r].Add(uint64(r) + 100)
	}
	s := c.Stats()
	for i, e := range statTable {
		if e.name == "" || e.field == nil {
			t.Fatalf("counter %d has no entry in statTable", i)
		}
		if got := *e.field(&s); got != uint64(i)+1 {
			t.Errorf("%s = %d in the snapshot, want %d", e.name, got, i+1)
		}
	}
	var drops uint64
	for r := range NumReasons {
		if r.IsDrop() {
			drops += uint64(r) + 100
		}
	}
	if s.Dropped != drops {
		t.Errorf("Dropped = %d, want the sum of the drop reasons, %d", s.Dropped, drops)
	}

	before := s.Counters()
	seen := map[string]bool{}
	for _, ct := range before {
		if seen[ct.Name] {
			t.Errorf("counter name %q twice", ct.Name)
		}
		seen[ct.Name] = true
	}
	for _, name := range []string{"calls_sent", "errors_sent_ERR_CHUNK", "errors_received_ERR_VERS", "dropped_credit_overrun", "rejected_chunk"} {
		if !seen[name] {
			t.Errorf("no counter %q", name)
		}
	}
	s.Add(&s)
	for i, ct := range s.Counters() {
		if ct.Value != 2*before[i].Value {
			t.Errorf("%s = %d after adding the snapshot to itself, want %d", ct.Name, ct.Value, 2*before[i].Value)
		}
	}
}

// TestReasonNames: each reason has a distinct stable name.
func TestReasonNames(t *testing.T) {
	seen := map[string]Reason{}
	for r := range NumReasons {
		n := r.String()
		if n == "" || n == "unknown" {
			t.Errorf("reason %d has no name", r)
		}
		if o, ok := seen[n]; ok {
			t.Errorf("reasons %d and %d are both %q", o, r, n)
		}
		seen[n] = r
	}
	if NumReasons.String() != "unknown" {
		t.Errorf("NumReasons.String() = %q", NumReasons.String())
	}
}
