package read

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/star"
)

// TestReadHonoursRetention (issue 30): records past a stream's retention
// are unreadable at once, whatever trim has deleted yet: a read that
// starts below the cutoff, by seq, timestamp or tail offset, starts at the
// first record at or after it, and a session too. Pinned at the boundary
// on both sides: a record whose timestamp is the cutoff is served, one a
// millisecond older is not. Record n has timestamp 1000+n; seqs 0-99 are
// absorbed (refs or the pass index window), 100-149 only in the star's
// flight index. A config command that keeps the records forever makes
// them readable again (the acknowledged command state, not the metadata).
// Before, reads served every record until trim deleted it.
func TestReadHonoursRetention(t *testing.T) {
	bothIndexes(t, func(t *testing.T, e *env) {
		e.appendN(10, 10)
		e.absorb()
		e.appendN(5, 10)
		e.st.RetentionMs = 1000
		for _, first := range []uint64{50, 51, 120, 150} {
			// now - retention = 1000 + first: record first is exactly at
			// the cutoff, record first-1 a millisecond past it.
			e.r.Clock = clock.NewManual(time.UnixMilli(2000 + int64(first)))
			for _, start := range []Start{{}, {Seq: first - 1}, {Kind: FromTimestamp, TsMs: 900}, {Kind: FromTailOffset, TailOffset: 1000}} {
				res := e.read(start, Limits{Count: 5})
				check(t, res.Records, first, min(5, max(150-int(first), 0)))
			}
			check(t, e.read(Start{Seq: first + 1}, Limits{Count: 2}).Records, first+1, min(2, max(149-int(first), 0)))
		}
		// A session from seq 0 starts at the cutoff.
		e.r.Clock = clock.NewManual(time.UnixMilli(2000 + 42))
		var got []uint64
		err := e.r.Session(context.Background(), e.st, Start{}, SessionOptions{NoTail: true}, func(b Batch) error {
			for _, r := range b.Records {
				got = append(got, r.Seq)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 150-42 || got[0] != 42 {
			t.Fatalf("session read %d records from %v, want 42..149", len(got), got[:min(len(got), 1)])
		}
		// Keep forever: all readable again.
		forever := int64(0)
		if _, _, err := e.star.Reconfigure(context.Background(), e.id, star.ConfigPatch{RetentionMs: &forever}); err != nil {
			t.Fatal(err)
		}
		res := e.read(Start{}, Limits{Count: 3})
		if len(res.Records) != 3 || res.Records[0].Seq != 0 {
			t.Fatalf("after keep forever: read %s", seqs(res.Records))
		}
	})
}

func seqs(recs []star.SeqRecord) string {
	out := ""
	for _, r := range recs {
		out += fmt.Sprintf(" %d", r.Seq)
	}
	return out
}
