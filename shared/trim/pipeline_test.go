package trim_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
)

// TestPipelineUnderFaults drives the star, absorb, settle and trim through
// seeded random interleavings with redelivered, reordered and duplicated
// release events, concurrent copies of every component, epoch halts, and
// faults between each write and the next (a timeout after the checkpoint
// CAS, a PutRefs failure, a timeout after a swap). After every action the
// cursors must not have moved backward and must stay ordered (trimmed <=
// settled <= checkpoint); at the end, once everything has caught up, every
// stream reads back exactly as written, the lease is free, and only poison
// is left in the chain buckets.
func TestPipelineUnderFaults(t *testing.T) {
	for seed := range uint64(6) {
		t.Run("", func(t *testing.T) {
			t.Logf("seed %d", seed)
			runPipeline(t, seed, false)
		})
	}
}

// TestPipelineUnderFaultsPassIndex is the same with the pass index (design
// 014): the absorb writes pass indexes and no refs, settle writes the refs
// (SettleRef, whose answer the swap fault loses), trim deletes the pass
// indexes; reads go through refs and then the window, and at the end no
// pass index is left.
func TestPipelineUnderFaultsPassIndex(t *testing.T) {
	for seed := range uint64(6) {
		t.Run("", func(t *testing.T) {
			t.Logf("seed %d", seed)
			runPipeline(t, seed, true)
		})
	}
}

func runPipeline(t *testing.T, seed uint64, indexed bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	e := newEnv(t, 5, 0)
	if indexed {
		e.a.Index, e.s.PassIndex, e.tr.PassIndex = e.settled, true, true
		if seed%2 == 1 {
			// Odd seeds read the window through a cache smaller than one
			// pass: every object fetched again on every use, the same
			// outcome.
			e.s.Window = &passindex.Window{Meta: e.mem, Bucket: e.settled, MaxBytes: 1}
			e.tr.Window = &passindex.Window{Meta: e.mem, Bucket: e.settled, MaxBytes: 1}
		}
		// Runs that flush at every step, by bytes, by age (flights are
		// 10 ms apart) or never until the end.
		e.s.FlushBytes = []int64{1, 150, 0}[rng.IntN(3)]
		e.s.FlushAge = []time.Duration{30 * time.Millisecond, 0}[rng.IntN(2)]
	}
	e.a.MaxSlotsPerPass = 1 + rng.IntN(6)
	e.s.MaxSlotsPerStep = 1 + rng.IntN(8)
	e.tr.MaxSlotsPerStep = 1 + rng.IntN(8)
	if rng.IntN(2) == 0 {
		e.s.MergeBelowBytes = 300 // merge, but not forever
	}
	var heads []metastore.Cursor // every released head the star published
	prev := e.head()
	halts := 0
	msgID := 0
	event := func(c metastore.Cursor) events.SQSMessage {
		msgID++
		return events.SQSMessage{MessageId: string(rune('a'+msgID%26)) + "-" + c.String(), Body: string(absorb.NewEvent(chainX, c).Marshal())}
	}
	pick := func() metastore.Cursor {
		if len(heads) == 0 {
			return e.star.Released()
		}
		if rng.IntN(3) == 0 {
			return heads[rng.IntN(len(heads))] // old: reordered or redelivered
		}
		return heads[len(heads)-1]
	}
	parallel := func(n int, fn func(i int) error) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(i); err != nil && !errors.Is(err, absorbtest.ErrFault) {
					t.Errorf("copy %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
	}
	for step := range 250 {
		switch r := rng.IntN(100); {
		case r < 40:
			counts := make([]int, len(e.ids))
			for i := range counts {
				counts[i] = rng.IntN(3)
			}
			counts[rng.IntN(len(counts))]++
			copies := 0
			if rng.IntN(4) == 0 {
				copies = 2 // a straggling third copy: still committed at W=2
			}
			e.flight(counts, copies)
			heads = append(heads, e.star.Released())
		case r < 60:
			var batch events.SQSEvent
			for range 1 + rng.IntN(3) {
				batch.Records = append(batch.Records, event(pick()))
			}
			armed := faultArmed(e)
			resp, err := e.ah.HandleSQS(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.BatchItemFailures) > 0 && !armed {
				// A failed item is fine only when a fault could fire.
				t.Fatalf("step %d: %d failed items with no fault armed", step, len(resp.BatchItemFailures))
			}
		case r < 70:
			heads := []metastore.Cursor{pick(), pick(), pick()}
			parallel(3, func(i int) error { _, err := e.a.Run(ctx, chainX, heads[i]); return err })
		case r < 78:
			parallel(1+rng.IntN(3), func(int) error { _, err := e.s.Run(ctx, chainX); return err })
		case r < 84:
			parallel(1+rng.IntN(2), func(int) error { _, err := e.tr.Run(ctx, chainX); return err })
		case r < 87:
			if err := e.ah.Sweep(ctx); err != nil && !errors.Is(err, absorbtest.ErrFault) {
				t.Fatal(err)
			}
		case r < 95:
			switch rng.IntN(3) {
			case 0:
				e.meta.advanceLost.Store(true)
			case 1:
				e.meta.putFail.Store(true)
			case 2:
				e.meta.swapLost.Store(true)
			}
		default:
			if halts < 2 {
				halts++
				if err := e.star.Halt(ctx, rng.IntN(2)); err != nil {
					t.Fatal(err)
				}
			}
		}
		h := e.head()
		for _, k := range []metastore.CursorKind{metastore.Checkpoint, metastore.Settled, metastore.Trimmed, metastore.Flushed} {
			if h.Cursor(k).Less(prev.Cursor(k)) {
				t.Fatalf("step %d: %s cursor moved back from %s to %s", step, k, prev.Cursor(k), h.Cursor(k))
			}
		}
		if h.Settled.Less(h.Trimmed) || h.Checkpoint.Less(h.Settled) || h.Settled.Less(h.Flushed) {
			t.Fatalf("step %d: cursors out of order: %+v", step, h)
		}
		prev = h
		if step%25 == 0 {
			checkPrefix(t, e)
		}
	}
	e.meta.advanceLost.Store(false)
	e.meta.putFail.Store(false)
	e.meta.swapLost.Store(false)
	e.settleAll()
	if indexed {
		// Flush everything: one more step, at which every run is old.
		e.s.FlushAge = time.Nanosecond
		e.flight([]int{1, 0, 0, 0, 0}, 0)
		if _, err := e.a.Run(ctx, chainX, e.star.Released()); err != nil {
			t.Fatal(err)
		}
		e.settleAll()
		if h := e.head(); h.Flushed != h.Settled {
			t.Fatalf("head %+v: not all flushed", h)
		}
	}
	e.trimAll()
	h := e.head()
	if h.Checkpoint != e.star.Released() || !h.Absorbing.IsZero() || h.Settled != h.Checkpoint || h.Trimmed != h.Settled {
		t.Fatalf("final head %+v, released %s", h, e.star.Released())
	}
	e.check()
	if flights, _ := e.chainObjects(); flights != 0 {
		t.Fatalf("%d flight copies left after trim", flights)
	}
	if keys, err := e.settled.List(ctx, "index/"); err != nil || len(keys) != 0 {
		t.Fatalf("pass indexes or runs left after trim: %v, %v", keys, err)
	}
	if keys, err := e.settled.List(ctx, "packs/"); err != nil || len(keys) != 0 {
		t.Fatalf("packs left after trim: %v, %v", keys, err)
	}
}

func faultArmed(e *env) bool {
	return e.meta.advanceLost.Load() || e.meta.putFail.Load() || e.meta.swapLost.Load()
}

// checkPrefix reads every stream through its refs (transit and settled),
// then its parts in the pass index window when the absorb writes pass
// indexes: what they cover must be an exact prefix of what was written.
func checkPrefix(t *testing.T, e *env) {
	t.Helper()
	h := e.head()
	w := &passindex.Window{Meta: e.mem, Bucket: e.settled}
	for _, id := range e.ids {
		got, err := absorbtest.ReadStream(t.Context(), e.mem, e.set, e.settled, id)
		if err != nil {
			t.Fatalf("read stream %s: %v", id, err)
		}
		if e.a.Index != nil {
			parts, err := w.HeadRefs(t.Context(), chainX, h, id, uint64(len(got)))
			if err != nil {
				t.Fatalf("stream %s: window: %v", id, err)
			}
			for _, p := range parts {
				if p.FirstSeq != uint64(len(got)) {
					t.Fatalf("stream %s: part at %d after %d records", id, p.FirstSeq, len(got))
				}
				recs, err := absorbtest.ReadRef(t.Context(), e.set, e.settled, p)
				if err != nil {
					t.Fatalf("stream %s: %v", id, err)
				}
				got = append(got, recs...)
			}
		}
		want := e.star.Written(id)
		if len(got) > len(want) {
			t.Fatalf("stream %s: %d records read, %d written", id, len(got), len(want))
		}
		if err := absorbtest.Equal(got, want[:len(got)]); err != nil {
			t.Fatalf("stream %s: %v", id, err)
		}
	}
}
