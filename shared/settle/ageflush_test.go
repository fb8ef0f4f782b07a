package settle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/settle"
)

// TestSettleAgeFlushBounded (issue 17, "The hourly step at 1,000,000
// streams"): when more streams turn FlushAge old at once than
// MaxAgeFlushes, a step flushes MaxAgeFlushes of them, those whose oldest
// entry is in the oldest run first (then by id), and the next steps the
// rest; the flushed cursor waits for the last of a run's; every record
// reads back throughout. Before the bound, the first step flushed them
// all (the hourly age flush at 1,000,000 streams: 41,667 streams and 3.5
// million GETs in one step, past the settle Lambda's timeout).
func TestSettleAgeFlushBounded(t *testing.T) {
	const streams, bound = 10, 3
	e := newEnv(t, streams, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.s.Fanout = -1
	e.s.FlushAge = 100 * time.Millisecond // flights are 10 ms apart
	e.s.MaxAgeFlushes = bound
	all := make([]int, streams)
	for i := range all {
		all[i] = 1
	}
	half := make([]int, streams) // the odd streams again, a run later
	for i := 1; i < streams; i += 2 {
		half[i] = 1
	}
	one := make([]int, streams) // stream 0 only: keeps the steps going
	one[0] = 1
	e.flightsWith(2, all) // the run at 1/0: every stream's oldest entry
	e.absorbAll()
	e.step()
	e.flightsWith(2, half) // the run at 1/2
	e.absorbAll()
	e.step()
	e.flightsWith(12, one) // +40..+150: the run at 1/0 is FlushAge old
	e.absorbAll()
	// Each step now flushes at most `bound` streams by age, by id (all
	// have their oldest entry in the run at 1/0).
	flushed := 0
	for round := 0; flushed < streams; round++ {
		if round > streams/bound+1 {
			t.Fatalf("%d of %d streams flushed after %d steps", flushed, streams, round)
		}
		before := e.head()
		res, err := e.s.Step(t.Context(), chainX)
		if err != nil {
			t.Fatal(err)
		}
		e.checkMixed()
		if res.Flushes > bound {
			t.Fatalf("step %d flushed %d streams by age: at most %d", round, res.Flushes, bound)
		}
		for i := range e.ids {
			want := 0
			if i < flushed+res.Flushes {
				want = 1
			}
			if n := len(e.refs(i)); n != want {
				t.Fatalf("step %d (%d flushed before it, %d by it): stream %d has %d refs, want %d (oldest first, then by id)", round, flushed, res.Flushes, i, n, want)
			}
		}
		flushed += res.Flushes
		if h := e.head(); flushed < streams && h.Flushed != before.Flushed {
			t.Fatalf("step %d: flushed moved %s to %s with %d of %d streams of the run flushed", round, before.Flushed, h.Flushed, flushed, streams)
		}
		e.flightsWith(1, one)
		e.absorbAll()
	}
	if h := e.head(); !cur(1, 0).Less(h.Flushed) {
		t.Fatalf("head %+v: flushed did not pass the run at 1/0", h)
	}
}

// TestSettleKeptStateAgeFlushBounded is TestSettleKeptStateMatchesScratch
// with every step flushing at most one stream by age (both worlds; odd
// seeds crash most steps before their merge's cursor moves): the
// bound's choice depends on the step's inputs only, so the kept state, a
// cold settler, racing copies and the runs-held step decide alike, and
// the settled buckets are the same byte for byte.
func TestSettleKeptStateAgeFlushBounded(t *testing.T) {
	defer settle.SetDefaultMaxAgeFlushes(1)()
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { keptStateRun(t, seed, seed%2 == 1) })
	}
}
