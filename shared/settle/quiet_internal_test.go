package settle

import "testing"

// TestQuietForBoundaries pins quietFor at its exact boundaries on both
// sides: the records' age against ageMs and 2 ageMs, and the time a warm
// settler has known the settled cursor where it is against ageMs.
func TestQuietForBoundaries(t *testing.T) {
	const age = 1000
	const now = 100_000
	for _, c := range []struct {
		what          string
		newest, since int64
		known         bool
		want          bool
	}{
		{"records 1 ms short of the age", now - age + 1, 0, false, false},
		{"records at the age, new settler", now - age, now, false, true},
		{"records at the age, warm settler just moved", now - age, now, true, true},
		{"records 1 ms short of twice the age, warm", now - 2*age + 1, now, true, true},
		{"records at twice the age, warm, idle 0", now - 2*age, now, true, false},
		{"backfill, warm, idle 1 ms short", now - 100*age, now - age + 1, true, false},
		{"backfill, warm, idle for the age", now - 100*age, now - age, true, true},
		{"backfill, new settler", now - 100*age, now, false, true},
	} {
		if got := quietFor(now, c.newest, c.since, c.known, age); got != c.want {
			t.Errorf("%s: quietFor %t, want %t", c.what, got, c.want)
		}
	}
}
