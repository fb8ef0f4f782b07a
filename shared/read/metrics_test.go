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
// the series are those docs/operations.md names.
func TestMetricsCountWhatIsServed(t *testing.T) {
	e := newEnv(t)
	reg := metrics.NewRegistry()
	e.r.Metrics = NewMetrics(reg)
	e.appendN(3, 10)
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
	if n, b := value("strand_read_records_total"), value("strand_read_bytes_total"); n != 30 || b != want+sent {
		t.Fatalf("after the session: %d records, %d bytes counted; want 30, %d", n, b, want+sent)
	}
	if w := value("strand_read_tail_waits_total"); w < 2 {
		t.Fatalf("%d tail waits; the session waited before each of its 2 heartbeats", w)
	}
	e.r.Metrics = nil // nil counts nothing, and does not fail
	e.read(Start{}, Limits{Count: 1})
}
