package read

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metrics"
	"github.com/strandlog/strand/tests/promtest"
)

// TestMetricsCountWhatIsServed: Read and a session count the records and
// metered bytes they serve, a session counts each wait at the tail, and
// the segment cache and the read-ahead budget are exported.
func TestMetricsCountWhatIsServed(t *testing.T) {
	e := newEnv(t)
	reg := metrics.NewRegistry()
	e.r.Register(reg)
	e.appendN(3, 10)
	e.absorb() // the reads fetch segments, through the cache
	res := e.read(Start{}, Limits{Count: 25})
	var want uint64
	for _, r := range res.Records {
		want += uint64(format.MeteredSize(r.Record))
	}
	if len(res.Records) != 25 || want == 0 {
		t.Fatalf("read %d records, %d bytes", len(res.Records), want)
	}
	value := func(series string) uint64 { return uint64(promtest.Value(t, reg, series)) }
	if n, b := value("strand_read_records_total"), value("strand_read_bytes_total"); n != 25 || b != want {
		t.Fatalf("after a read of 25 records (%d bytes): %d records, %d bytes counted", want, n, b)
	}
	if w := value("strand_read_tail_waits_total"); w != 0 {
		t.Fatalf("%d tail waits before any session", w)
	}
	fetches := value("strand_read_cache_fetches_total")
	if fetches == 0 || value("strand_read_cache_bytes") == 0 || value("strand_read_cache_hits_total") != 0 {
		t.Fatalf("after a first read of absorbed records: %d fetches, %d bytes cached, %d hits", fetches,
			value("strand_read_cache_bytes"), value("strand_read_cache_hits_total"))
	}
	e.read(Start{}, Limits{Count: 25})
	if h, f := value("strand_read_cache_hits_total"), value("strand_read_cache_fetches_total"); h == 0 || f != fetches {
		t.Fatalf("the same read again: %d hits, %d fetches (was %d)", h, f, fetches)
	}
	if b := value("strand_read_ahead_budget_bytes"); b != DefaultAheadBudget {
		t.Fatalf("read-ahead budget %d, want %d", b, DefaultAheadBudget)
	}
	value("strand_read_ahead_bytes")
	value("strand_read_cache_joined_total")
	value("strand_read_cache_evictions_total")
	if n, b := value("strand_read_records_total"), value("strand_read_bytes_total"); n != 50 || b != 2*want {
		t.Fatalf("after two reads of 25 (%d bytes each): %d records, %d bytes counted", want, n, b)
	}
	want *= 2
	// A session from 25 reads the 5 left, waits at the tail, gets a
	// heartbeat, waits again and is cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	var got, beats int
	var sent uint64
	err := e.r.Session(ctx, e.st, Start{Seq: 25}, SessionOptions{Heartbeat: 10 * time.Millisecond}, func(b Batch) error {
		got += len(b.Records)
		for _, r := range b.Records {
			sent += uint64(format.MeteredSize(r.Record))
		}
		if b.Heartbeat {
			if beats++; beats == 2 {
				cancel()
			}
		}
		return nil
	})
	if err != context.Canceled || got != 5 {
		t.Fatalf("session: %v, %d records", err, got)
	}
	if n, b := value("strand_read_records_total"), value("strand_read_bytes_total"); n != 55 || b != want+sent {
		t.Fatalf("after the session: %d records, %d bytes counted; want 55, %d", n, b, want+sent)
	}
	if w := value("strand_read_tail_waits_total"); w < 2 {
		t.Fatalf("%d tail waits; the session waited before each of its 2 heartbeats", w)
	}
	e.r.Metrics = nil // nil counts nothing, and does not fail
	e.read(Start{}, Limits{Count: 1})
}
