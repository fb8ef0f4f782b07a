package settle_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/settle"
)

// faults fails, once armed, the next AdvanceCursor of one cursor kind or
// the next SettleRef: a crash of a settle step at that write.
type faults struct {
	metastore.Store
	kind  atomic.Int32 // a metastore.CursorKind, or settleRefFault; 0: none
	fired atomic.Bool
}

const settleRefFault = 100

func (f *faults) AdvanceCursor(ctx context.Context, c metastore.ChainID, k metastore.CursorKind, from, to metastore.Cursor) error {
	if f.kind.CompareAndSwap(int32(k), 0) {
		f.fired.Store(true)
		return fmt.Errorf("crash before the %s cursor moves: %w", k, absorbtest.ErrFault)
	}
	return f.Store.AdvanceCursor(ctx, c, k, from, to)
}

func (f *faults) MoveCursors(ctx context.Context, c metastore.ChainID, moves []metastore.CursorMove) error {
	if k := metastore.CursorKind(f.kind.Load()); k != 0 && moving(moves, k) && f.kind.CompareAndSwap(int32(k), 0) {
		f.fired.Store(true)
		return fmt.Errorf("crash before the %s cursor moves: %w", k, absorbtest.ErrFault)
	}
	return f.Store.MoveCursors(ctx, c, moves)
}

func (f *faults) SettleRef(ctx context.Context, c metastore.ChainID, at metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	if f.kind.CompareAndSwap(settleRefFault, 0) {
		f.fired.Store(true)
		return fmt.Errorf("crash before the settle ref: %w", absorbtest.ErrFault)
	}
	return f.Store.SettleRef(ctx, c, at, old, repl)
}

// TestSettleKeptStateMatchesScratch (issue 17): random sequences of
// settle steps on the pass index (small FlushBytes, FlushAge and Fanout,
// idle streams, epoch changes) by settlers that keep the unflushed state
// across steps, with crashes at every head write and at a flush's ref, a
// fresh settler at random points and racing copies (of one settler and
// of several), against a second star fed the same flights and settled by
// steps that rebuild the state from the live runs held at once (the
// settle step before the kept state). After every step the kept state
// equals the state rebuilt from scratch for its head; after every round
// both settled buckets hold the same objects, byte for byte (runs,
// merged runs, packs, per-stream objects), the heads the same cursors,
// every stream the same refs, and every record reads back. The copies
// race for real: every copy plans on the head every other sees (design
// 014, "Every copy plans on one head": a step's cursors move in one
// write; before finishHead and then that write, copies that read a head
// between another's cursor moves, or stepped after a crash between
// them, wrote other runs: with the settle code of a997ee4 and this test,
// 41 of its 200 seeds failed).
func TestSettleKeptStateMatchesScratch(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 8
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { keptStateRun(t, seed, false) })
	}
}

// TestSettleMergeCrashThenStep is TestSettleKeptStateMatchesScratch with
// most steps that merge crashing at their commit (and the copies
// racing): the next step adopts the step's run and merge, or plans on
// the head before it. Before finishHead and the one commit, the step after such a crash planned on the head without
// the merge (a merged run's time is its group's latest, so other streams
// were FlushAge old) and wrote other runs than the world without crashes
// (with the settle code of a997ee4, 73 of its 100 seeds failed).
func TestSettleMergeCrashThenStep(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 4
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { keptStateRun(t, seed, true) })
	}
}

// keptStateRun is one seed of TestSettleKeptStateMatchesScratch;
// mergeCrashes: most steps crash before their merge's cursor moves.
func keptStateRun(t *testing.T, seed uint64, mergeCrashes bool) {
	rng := rand.New(rand.NewPCG(seed, 17))
	const streams = 7
	var fa *faults
	kept := newEnv(t, streams, func(s metastore.Store) metastore.Store { fa = &faults{Store: s}; return fa })
	scratch := newEnv(t, streams, nil)
	kept.withIndex()
	kept.keptFlush(kept.s)
	scratch.withIndex()
	scratch.s.SetScratch(true)
	var recBytes int64 // one record's bytes in an entry
	slots := 1 + rng.IntN(4)
	flushRecs := int64(2 + rng.IntN(12))
	age := time.Duration(20+rng.IntN(100)) * time.Millisecond // flights are 10 ms apart
	fanout := 2 + rng.IntN(3)
	config := func(s *settle.Settler, b int64) {
		s.MaxSlotsPerStep, s.FlushBytes, s.FlushAge, s.Fanout = slots, flushRecs*b, age, fanout
	}
	// fresh is a new settler of the kept world (a cold Lambda).
	fresh := func() *settle.Settler {
		s := &settle.Settler{Meta: kept.s.Meta, Sets: kept.s.Sets, Settled: kept.settled, PassIndex: true}
		kept.keptFlush(s)
		config(s, recBytes)
		return s
	}
	t.Logf("seed %d: %d slots a step, flush at %d records or %s, fanout %d", seed, slots, flushRecs, age, fanout)
	halted := false
	checked := 0
	steps := map[bool]int{} // steps that rebuilt the state (true) or kept it
	for round := range 16 {
		counts := make([]int, streams)
		for i := range counts {
			if rng.IntN(3) > 0 {
				counts[i] = rng.IntN(4) // 0: idle this round
			}
		}
		if round == 0 {
			counts[0] = 1 + rng.IntN(3) // recordBytes reads stream 0's first entry
		}
		n := 1 + rng.IntN(6)
		for _, e := range []*env{kept, scratch} {
			e.flightsWith(n, counts)
			if round == 4 && !halted {
				if err := e.star.Halt(t.Context(), 0); err != nil {
					t.Fatal(err)
				}
				e.flights(2)
			}
			e.absorbAll()
		}
		halted = halted || round == 4
		if round == 0 {
			recBytes = kept.recordBytes()
			config(kept.s, recBytes)
			config(scratch.s, recBytes)
		}
		copies := []*settle.Settler{kept.s}
		for step := 0; kept.head().Settled != kept.head().Checkpoint; step++ {
			if step > 200 {
				t.Fatalf("round %d: settle does not reach the checkpoint: %+v", round, kept.head())
			}
			x := rng.IntN(10)
			if mergeCrashes && x > 2 && x < 7 {
				x = 1
			}
			switch {
			case x == 0: // a cold settler takes over
				kept.s = fresh()
				copies = append(copies, kept.s)
			case x == 1: // a crash at one of the step's writes
				kinds := []int32{int32(metastore.Settled), int32(metastore.Flushed), int32(metastore.Merged), settleRefFault}
				fa.fired.Store(false)
				crash := kinds[rng.IntN(len(kinds))]
				if mergeCrashes {
					crash = int32(metastore.Merged)
				}
				fa.kind.Store(crash)
				_, err := kept.s.Step(t.Context(), chainX)
				fa.kind.Store(0)
				if fa.fired.Load() != (err != nil) || (err != nil && !errors.Is(err, absorbtest.ErrFault)) {
					t.Fatalf("round %d: crashing step: fired %v, %v", round, fa.fired.Load(), err)
				}
				continue
			case x == 2: // copies racing: the settler itself twice and a cold one
				errs := make([]error, 3)
				var wg sync.WaitGroup
				for i, s := range []*settle.Settler{kept.s, kept.s, fresh()} {
					wg.Go(func() { _, errs[i] = s.Step(context.Background(), chainX) })
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatalf("round %d: racing copies: %v", round, err)
				}
				continue
			}
			res, err := kept.s.Step(t.Context(), chainX)
			if err != nil {
				t.Fatalf("round %d step %d: %v", round, step, err)
			}
			if res.Slots > 0 {
				steps[res.StateBuilt]++
			}
			for _, s := range copies {
				ok, err := s.CheckState(t.Context(), chainX)
				if err != nil {
					t.Fatalf("round %d step %d: %v", round, step, err)
				}
				if ok {
					checked++
				}
			}
		}
		// A step with nothing to settle finishes the head the round's last
		// step left unfinished if it crashed (its settler keeps its state).
		if _, err := kept.s.Step(t.Context(), chainX); err != nil {
			t.Fatalf("round %d: finishing step: %v", round, err)
		}
		for scratch.head().Settled != scratch.head().Checkpoint {
			if _, err := scratch.s.Step(t.Context(), chainX); err != nil {
				t.Fatalf("round %d: scratch step: %v", round, err)
			}
		}
		sameWorlds(t, round, kept, scratch)
		kept.checkMixed()
	}
	t.Logf("seed %d: %d steps on the kept state, %d rebuilt it; %d states checked; %d packs, %d merged runs, %d flushed objects",
		seed, steps[false], steps[true], checked, len(kept.packKeys()), len(kept.mergedKeys()), len(kept.listed("streams/")))
	if checked == 0 || steps[false] == 0 {
		t.Fatal("no step used a kept state")
	}
}

// sameWorlds fails t unless a and b's settled buckets hold the same
// objects with the same bytes, their heads the same cursors and their
// streams the same refs. A stream's settled object no ref points at is
// left out: a copy that lost a race may put one again after the winner
// merged it away and deleted it (the garbage probe's to remove).
func sameWorlds(t *testing.T, round int, a, b *env) {
	t.Helper()
	ctx := t.Context()
	ka, kb := a.referenced(a.listed("")), b.referenced(b.listed(""))
	if !slices.Equal(ka, kb) {
		t.Fatalf("round %d: settled buckets differ:\n kept    %v\n scratch %v", round, ka, kb)
	}
	for _, k := range ka {
		x, err := a.settled.Get(ctx, k, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		y, err := b.settled.Get(ctx, k, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if string(x) != string(y) {
			px, _ := format.ParsePassIndex(x)
			py, _ := format.ParsePassIndex(y)
			t.Logf("%s in the first world: %+v", k, px)
			t.Logf("%s in the second world: %+v", k, py)
			t.Fatalf("round %d: %s differs (%d and %d bytes)", round, k, len(x), len(y))
		}
	}
	ha, hb := a.head(), b.head()
	if ha.Settled != hb.Settled || ha.Flushed != hb.Flushed || ha.Merged != hb.Merged || ha.Checkpoint != hb.Checkpoint {
		t.Fatalf("round %d: heads differ: kept %+v, scratch %+v", round, ha, hb)
	}
	for i := range a.ids {
		ra, rb := a.refs(i), b.refs(i)
		if len(ra) != len(rb) {
			t.Fatalf("round %d: stream %d: %d refs, scratch %d", round, i, len(ra), len(rb))
		}
		for j := range ra {
			if ra[j].FirstSeq != rb[j].FirstSeq || ra[j].LastSeq != rb[j].LastSeq || !slices.Equal(ra[j].Locations, rb[j].Locations) {
				t.Fatalf("round %d: stream %d ref %d: %+v, scratch %+v", round, i, j, ra[j], rb[j])
			}
		}
	}
}

// referenced is keys without the streams' settled objects no ref of e
// points at.
func (e *env) referenced(keys []string) []string {
	live := map[string]bool{}
	for i := range e.ids {
		for _, r := range e.refs(i) {
			for _, l := range r.Locations {
				live[l.Key] = live[l.Key] || l.Settled
			}
		}
	}
	return slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, "streams/") && !live[k] })
}
