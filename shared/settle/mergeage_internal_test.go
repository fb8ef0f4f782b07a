package settle

import (
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

// TestMergeableSpansAtMostMaxObjectSpan pins the merge rule's span bound
// at its boundary on both sides: a group whose last record is exactly
// MaxObjectSpan after the previous object's first merges into it, one a
// millisecond later does not (retention drops whole objects: issue 30).
// The size rules are unchanged.
func TestMergeableSpansAtMostMaxObjectSpan(t *testing.T) {
	prev := metastore.Ref{FirstSeq: 0, LastSeq: 9, FirstTsMs: 1_000, LastTsMs: 2_000, Bytes: 100,
		Locations: []metastore.Location{{Settled: true, Key: "k"}}}
	group := func(lastTs int64) []metastore.Ref {
		return []metastore.Ref{{FirstSeq: 10, LastSeq: 19, FirstTsMs: 2_000, LastTsMs: lastTs, Bytes: 100}}
	}
	for _, tc := range []struct {
		age    time.Duration
		lastTs int64
		want   bool
	}{
		{time.Minute, 1_000 + 60_000, true},
		{time.Minute, 1_000 + 60_001, false},
		{0, 1_000 + time.Hour.Milliseconds(), true}, // the default span, 1 h
		{0, 1_000 + time.Hour.Milliseconds() + 1, false},
		{-1, 1_000 + 1000*time.Hour.Milliseconds(), true}, // no bound
	} {
		s := &Settler{MaxObjectSpan: tc.age}
		if got := s.mergeable(prev, group(tc.lastTs), DefaultMaxObjectBytes); got != tc.want {
			t.Errorf("MaxObjectSpan %s, group ending %d ms after the object's first record: mergeable %t, want %t", tc.age, tc.lastTs-prev.FirstTsMs, got, tc.want)
		}
	}
	if DefaultFlushAge != time.Hour || DefaultMaxObjectSpan != time.Hour {
		t.Fatalf("DefaultFlushAge %s, DefaultMaxObjectSpan %s: docs/api.md's retention promise is stated for 1 h each", DefaultFlushAge, DefaultMaxObjectSpan)
	}
	// Too big to merge, whatever the age.
	big := prev
	big.Bytes = DefaultMergeBelowBytes
	if (&Settler{}).mergeable(big, group(2_000), DefaultMaxObjectBytes) {
		t.Fatal("an object of MergeBelowBytes merged")
	}
}
