package server

import (
	"testing"
	"time"

	"github.com/strandlog/strand/shared/auth"
)

// TestTakeBytes: the append byte quota's bucket, on a given clock: a burst
// of at least the largest batch (1 MiB) and a second's rate, refilled at
// the rate and never past the burst, each tenant its own; a refusal takes
// nothing and says how long until the bytes are there; a tenant's own
// rate replaces the star's; rate 0 is unlimited.
func TestTakeBytes(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Unix(1_700_000_000, 0)
	q := newQuotas(Limits{AppendBytesPerSecPerTenant: mib / 2, AppendBurstBytesPerTenant: 1})
	rate, burst := q.rateOf(auth.Grant{})
	if rate != mib/2 || burst != mib {
		t.Fatalf("rate %v, burst %v, want the star's rate and the largest batch, 1 MiB", rate, burst)
	}
	take := func(tenant string, n int64, at time.Time) time.Duration {
		return q.takeBytes(tenant, rate, burst, n, at)
	}
	if w := take("a", mib, t0); w != 0 {
		t.Fatalf("the burst: wait %v", w)
	}
	if w := take("a", mib/4, t0); w != 500*time.Millisecond {
		t.Fatalf("past the burst: wait %v, want 500ms", w)
	}
	if w := take("b", mib, t0); w != 0 {
		t.Fatalf("another tenant: wait %v", w)
	}
	if w := take("a", mib/4, t0.Add(500*time.Millisecond)); w != 0 {
		t.Fatalf("after the refill: wait %v", w)
	}
	if w := take("a", 1, t0.Add(500*time.Millisecond)); w <= 0 {
		t.Fatalf("the refilled bytes were taken twice: wait %v", w)
	}
	// A long idle time refills to the burst, not past it.
	if w := take("a", mib+1, t0.Add(time.Hour)); w <= 0 {
		t.Fatalf("past the burst after an hour idle: wait %v", w)
	}
	q.prune(t0.Add(time.Hour))
	if len(q.buckets) != 0 {
		t.Fatalf("full buckets kept: %d", len(q.buckets))
	}
	// A tenant's own rate: its burst follows it.
	own, ownBurst := q.rateOf(auth.Grant{AppendBytesPerSec: 4 * mib})
	if own != 4*mib || ownBurst != 4*mib {
		t.Fatalf("a tenant's own rate %v burst %v, want 4 MiB and 4 MiB", own, ownBurst)
	}
	if r, _ := newQuotas(Limits{}).rateOf(auth.Grant{}); r != 0 || newQuotas(Limits{}).takeBytes("a", 0, mib, 1<<40, t0) != 0 {
		t.Fatalf("unlimited: rate %v, or a wait", r)
	}
}
