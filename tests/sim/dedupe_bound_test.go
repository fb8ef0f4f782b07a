package sim

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/strandlog/strand/shared/star"
)

// The star-wide dedupe bound (--dedupe-max-producers, ADR 0041) under the
// simulation's faults: twelve producers, six of them idempotent, on four
// streams, and a bound of two producers for the whole star, so the star
// keeps forgetting idempotent producers (at every new producer, and when
// a successor seeds the tables after a takeover). Every invariant of
// TestSim holds but one, relaxed to exactly what ADR 0041 documents for a
// forgotten producer: a retry of an acknowledged batch whose producer was
// forgotten may be written again. So a record may be read more than once
// only if its batch is an idempotent producer's and was retried, and then
// each copy is the whole batch, contiguous and in order (checkCopies); the
// ack names one copy; every idempotent batch is still acked in the end
// (zero losses). checkDedupeBound adds the bound itself: the star never
// remembers more producers than the bound plus those with a batch not yet
// acked.

const simDedupeBound = 2

// TestSimDedupeBound runs a tenth of the seed budget (seeds 1..n/10, at
// least one) with the tiny bound; -seed replays one.
func TestSimDedupeBound(t *testing.T) {
	seeds := []int64{*seedFlag}
	if *seedFlag == 0 {
		seeds = seeds[:0]
		for i := 1; i <= max(1, *seedsFlag/10); i++ {
			seeds = append(seeds, int64(i))
		}
	}
	// TestSim's summary counts its own seeds only: restore its totals.
	counters := []*atomic.Int64{&totals.steps, &totals.batches, &totals.faults, &totals.takeovers, &totals.zombies,
		&totals.halts, &totals.stalls, &totals.reads, &totals.corrupt, &totals.drains, &totals.retries}
	saved := make([]int64, len(counters))
	for i, c := range counters {
		saved[i] = c.Load()
	}
	defer func() {
		for i, c := range counters {
			c.Store(saved[i])
		}
	}()
	var recs Totals
	recs.Kind = "seeds"
	before, retries := dedupeTotals.copies.Load(), totals.retries.Load()
	forgotBefore := dedupeTotals.forgot.Load()
	for _, seed := range seeds {
		var tl Tally
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed=%d; replay: go test ./tests/sim -run TestSimDedupeBound -seed=%d -steps=%d -v", seed, seed, *stepsFlag)
			synctest.Test(t, func(t *testing.T) { runSimWith(t, seed, *stepsFlag, &tl, 12, simDedupeBound) })
		})
		recs.Add(strconv.FormatInt(seed, 10), tl, !ok)
	}
	t.Logf("SUMMARY sim-dedupe-bound: %s bound=%d producers_forgotten_by_the_bound=%d idempotent_retries=%d batches_written_again=%d",
		&recs, simDedupeBound, dedupeTotals.forgot.Load()-forgotBefore, totals.retries.Load()-retries, dedupeTotals.copies.Load()-before)
}

// dedupeTotals: over the seeds of TestSimDedupeBound.
var dedupeTotals struct{ forgot, copies atomic.Int64 }

// forgotten reports whether bt's copies are tolerated: the star's bound is
// below the idempotent producers, bt is an idempotent producer's, and it
// was retried.
func (s *sim) forgotten(bt *batchRec) bool {
	return s.forgetful && s.prods[bt.prod].idem && bt.retries > 0
}

// checkCopies: every copy of a tolerated batch is the whole batch,
// contiguous and in order (a retry written again, never a part of one).
// copies holds the seqs each record of such a batch was read at. Called
// with s.mu held.
func (s *sim) checkCopies(copies map[string][]uint64) {
	extra := 0
	for key, b := range s.batches {
		if !s.forgotten(b) {
			continue
		}
		first := copies[b.bodies[0]]
		for k, bd := range b.bodies {
			at := copies[bd]
			if len(at) != len(first) {
				s.fatalf("batch %s: record 0 read %d times, record %d %d times: a part of a batch written again", key, len(first), k, len(at))
			}
			for c := range at {
				if at[c] != first[c]+uint64(k) {
					s.fatalf("batch %s copy %d: record %d at seq %d, record 0 at %d: not one contiguous batch", key, c, k, at[c], first[c])
				}
			}
		}
		extra += max(0, len(first)-1)
	}
	s.copies = extra
}

// checkDedupeBound: the leading star remembers at most the bound plus the
// producers with a batch in flight (at most those with a batch not acked
// in the sim's books), and its count is what its tables hold. Called with
// s.mu held.
func (s *sim) checkDedupeBound() {
	if s.node == nil {
		return
	}
	bound := s.w.Opt.DedupeMaxProducers
	if bound == 0 {
		bound = star.DefaultStarMaxProducers
	}
	open := map[int]bool{}
	for _, b := range s.batches {
		if s.prods[b.prod].idem && b.state != acked {
			open[b.prod] = true
		}
	}
	n, _, _, byStar := s.node.Star.Producers()
	if n > bound+len(open) {
		s.fatalf("the star remembers %d producers: bound %d, %d producers with a batch not acked", n, bound, len(open))
	}
	if s.forgot == nil {
		s.forgot = map[int]uint64{}
	}
	s.forgot[s.node.Gen] = byStar
}
