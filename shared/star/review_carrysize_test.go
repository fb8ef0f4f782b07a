package star

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Invariant (docs/operations.md, "Memory"): "a flight is at most the
// target flight size (one oversized batch, at most 1 MiB, may exceed
// it)", which bounds a star's memory in flight and in the flight index.
// Carried tables (ADR 0062) are rendered into the flight outside the
// cut's byte count (pool.cut counts records; carryTables adds up to
// 40 KiB per stream of the flight), so a flight holding many streams
// whose tables are full is many times the target: here 100 streams, each
// opened with 1,024 recovered marks, append one small record each and
// their first flights after the open carry 100 x 40 KiB.
//
// KNOWN GAP (review, session 10): it fails (a 64 KiB-target flight of
// 4,108,280 bytes). Fixing it needs a decision (count carried bytes against
// the cut's target and defer tables past it, which changes the cadence
// proof of CarryEvery), so it is gated by STRAND_KNOWN_GAPS=1.
func TestReviewCarriedTablesKeepFlightsNearTheTarget(t *testing.T) {
	if os.Getenv("STRAND_KNOWN_GAPS") != "1" {
		t.Skip("known gap: carried tables are not counted against the flight size (set STRAND_KNOWN_GAPS=1)")
	}
	ctx := context.Background()
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) {
		c.Standard.FlushDeadline = 200 * time.Millisecond // one flight for every stream's append
	})
	h.start()
	const streams, producers = 100, metastore.MaxRefProducerMarks / metastore.MaxMarksPerProducer
	now := time.Now().UnixMilli()
	for s := range streams {
		var ps []ProducerState
		seq := uint64(0)
		for p := range producers {
			var id format.ProducerID
			id[0], id[1], id[15] = byte(p>>8), byte(p), 1
			st := ProducerState{ID: id, LastMs: now}
			for b := range metastore.MaxMarksPerProducer {
				st.Batches = append(st.Batches, BatchMark{BatchSeq: uint64(b), FirstSeq: seq, LastSeq: seq})
				seq++
			}
			ps = append(ps, st)
		}
		if err := h.star.Open(StreamInfo{ID: sid(100 + s), Class: metastore.Standard, Next: seq, Producers: ps}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.star.Append(ctx, sid(100+s), recs(1, nil2), AppendOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	target := 64 << 10
	largest, carriers := 0, 0
	for slot := uint64(0); ; slot++ {
		obj, err := h.mems[0].Get(ctx, format.SlotKey("star-0", 1, slot), 0, -1)
		if err != nil {
			break
		}
		f, err := format.ParseFlight(obj)
		if err != nil {
			t.Fatalf("slot %d: %v", slot, err)
		}
		carriers += len(f.Carried)
		largest = max(largest, len(obj))
	}
	if carriers != streams {
		t.Fatalf("%d carried tables, want one per stream (%d)", carriers, streams)
	}
	if largest > target+1<<20 {
		t.Fatalf("the largest flight is %d bytes: over the %d-byte target plus one oversized batch (1 MiB)", largest, target)
	}
}
