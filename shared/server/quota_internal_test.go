package server

import (
	"testing"
	"time"
)

// TestTakeBytes: the append byte quota's bucket, on a given clock: a burst
// of at least the largest batch (1 MiB) and a second's rate, refilled at
// the rate and never past the burst, each tenant its own; a refusal takes
// nothing and says how long until the bytes are there; rate 0 is
// unlimited.
func TestTakeBytes(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Unix(1_700_000_000, 0)
	q := newQuotas(Limits{AppendBytesPerSecPerTenant: mib / 2, AppendBurstBytesPerTenant: 1})
	if q.burst != mib {
		t.Fatalf("burst %v, want the largest batch, 1 MiB", q.burst)
	}
	if w := q.takeBytes("a", mib, t0); w != 0 {
		t.Fatalf("the burst: wait %v", w)
	}
	if w := q.takeBytes("a", mib/4, t0); w != 500*time.Millisecond {
		t.Fatalf("past the burst: wait %v, want 500ms", w)
	}
	if w := q.takeBytes("b", mib, t0); w != 0 {
		t.Fatalf("another tenant: wait %v", w)
	}
	if w := q.takeBytes("a", mib/4, t0.Add(500*time.Millisecond)); w != 0 {
		t.Fatalf("after the refill: wait %v", w)
	}
	if w := q.takeBytes("a", 1, t0.Add(500*time.Millisecond)); w <= 0 {
		t.Fatalf("the refilled bytes were taken twice: wait %v", w)
	}
	// A long idle time refills to the burst, not past it.
	if w := q.takeBytes("a", mib+1, t0.Add(time.Hour)); w <= 0 {
		t.Fatalf("past the burst after an hour idle: wait %v", w)
	}
	q.prune(t0.Add(time.Hour))
	if len(q.buckets) != 0 {
		t.Fatalf("full buckets kept: %d", len(q.buckets))
	}
	if w := newQuotas(Limits{}).takeBytes("a", 1<<40, t0); w != 0 {
		t.Fatalf("unlimited: wait %v", w)
	}
}
