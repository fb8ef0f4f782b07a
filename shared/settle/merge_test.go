package settle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/trim"
)

// Tests of design 014's level 2: merged runs.

func (e *env) mergedKeys() []string { return e.listed("index/" + chainX.Star + "/express/merged/") }
func (e *env) mergedPackKeys() []string {
	return e.listed("packs/" + chainX.Star + "/express/merged/")
}

// merged is the merged run at the given cursor.
func (e *env) merged(at metastore.Cursor) *format.PassIndex {
	e.t.Helper()
	r, err := (&passindex.Window{Meta: e.mem, Bucket: e.settled}).MergedRun(e.t.Context(), chainX, at)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// checkEveryBoundary reads every stream from every seq and every record
// timestamp past its refs through a fresh window of the head (runs,
// merged or not, and passes): the first part holds the seq asked for (by
// seq) or the first record at or after the timestamp (by timestamp), and
// the parts read back contiguous and exact to the end.
func (e *env) checkEveryBoundary() {
	e.t.Helper()
	ctx := e.t.Context()
	h := e.head()
	w := &passindex.Window{Meta: e.mem, Bucket: e.settled}
	for _, id := range e.ids {
		refs, err := e.mem.QueryRefs(ctx, id.String(), 0, 1000)
		if err != nil {
			e.t.Fatal(err)
		}
		next := uint64(0)
		if len(refs) > 0 {
			next = refs[len(refs)-1].LastSeq + 1
		}
		written := e.star.Written(id)
		read := func(parts []metastore.Ref) []format.Record {
			var got []format.Record
			for i, p := range parts {
				if i > 0 && p.FirstSeq != parts[i-1].LastSeq+1 {
					e.t.Fatalf("stream %s: part at %d after %d", id, p.FirstSeq, parts[i-1].LastSeq)
				}
				recs, err := absorbtest.ReadRef(ctx, e.set, e.settled, p)
				if err != nil {
					e.t.Fatal(err)
				}
				got = append(got, recs...)
			}
			return got
		}
		for seq := next; seq < uint64(len(written)); seq++ {
			parts, err := w.HeadRefs(ctx, chainX, h, id, seq)
			if err != nil {
				e.t.Fatal(err)
			}
			if len(parts) == 0 || parts[0].FirstSeq > seq || parts[0].LastSeq < seq {
				e.t.Fatalf("stream %s from seq %d: parts %+v", id, seq, parts)
			}
			if err := absorbtest.Equal(read(parts), written[parts[0].FirstSeq:]); err != nil {
				e.t.Fatalf("stream %s from seq %d: %v", id, seq, err)
			}
			ts := written[seq].TimestampMs
			first := uint64(slices.IndexFunc(written, func(r format.Record) bool { return r.TimestampMs >= ts }))
			if first < next {
				continue // behind a ref: the refs' timestamp search finds it
			}
			parts, err = w.HeadRefsAt(ctx, chainX, h, id, ts)
			if err != nil {
				e.t.Fatal(err)
			}
			if len(parts) == 0 || parts[0].FirstSeq > first || parts[0].LastSeq < first {
				e.t.Fatalf("stream %s from ts %d (first seq %d): parts %+v", id, ts, first, parts)
			}
		}
	}
}

// TestSettleMergeRuns: with a Fanout of 3, every third step merges the
// three level-1 runs from max(flushed, merged) into one merged run: per
// stream one packed entry with one segment in one pack (a stream flushed
// inside the group keeps its marker, then its later entry), the merged
// cursor at the group's end; every record reads back from every seq and
// timestamp at every step; a flush reads a stream's merged entry in one
// GET; trim deletes merged runs and packs, and the level-1 runs they
// superseded, once flushed passes them.
func TestSettleMergeRuns(t *testing.T) {
	defer settle.SetMergeChunk(250)() // many ranged GETs a pack: the read ahead at work
	e := newEnv(t, 4, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.s.Fanout = 3
	e.a.MaxSlotsPerPass = 2
	counts := []int{1, 1, 4, 1}
	e.flightsWith(2, counts)
	e.absorbAll()
	// Stream 2 (8 records a step) flushes by bytes at steps 1, 3 and 5;
	// the others (2 a step) never in 7 steps.
	e.s.FlushBytes = 15 * e.recordBytes()
	var merges int
	for step := range 7 {
		if step > 0 {
			e.flightsWith(2, counts)
			e.absorbAll()
		}
		res, err := e.s.Step(t.Context(), chainX)
		if err != nil {
			t.Fatal(err)
		}
		merges += res.Merges
		e.checkMixed()
		e.checkEveryBoundary()
	}
	h := e.head()
	if merges != 2 || h.Merged != cur(1, 12) || h.Settled != cur(1, 14) || h.Flushed != cur(1, 0) {
		t.Fatalf("%d merges, head %+v: want 2, merged 1/12, settled 1/14, flushed 1/0", merges, h)
	}
	if got := e.mergedKeys(); len(got) != 2 {
		t.Fatalf("merged runs %v", got)
	}
	m := e.merged(cur(1, 0))
	if m.FirstSlot != 0 || m.EndSlot != 6 || !m.Merged {
		t.Fatalf("merged run at 1/0: %d-%d", m.FirstSlot, m.EndSlot)
	}
	for _, id := range e.ids {
		ents := m.FindAll(id)
		last := ents[len(ents)-1]
		if last.Marker() || len(last.Segments) != 1 || last.Segments[0].Count != uint32(last.LastSeq-last.FirstSeq+1) {
			t.Fatalf("stream %s: merged entries %+v: want one packed entry with one segment", id, ents)
		}
	}
	// Stream 2 flushed by bytes at step 1 of the group at 1/0: a marker,
	// then its entry with later seqs (step 2); in the group at 1/6 its
	// last word is the flush of step 5: a marker alone.
	if ents := m.FindAll(e.ids[2]); len(ents) != 2 || !ents[0].Marker() || ents[1].FirstSeq != ents[0].LastSeq+1 {
		t.Fatalf("stream 2: merged entries %+v: want a marker then an entry", ents)
	}
	if ents := e.merged(cur(1, 6)).FindAll(e.ids[2]); len(ents) != 1 || !ents[0].Marker() {
		t.Fatalf("stream 2: entries of the merged run at 1/6 %+v: want a marker", ents)
	}
	// Flush everything: a stream's merged entry is one GET (read one by
	// one: coalesced, the 4 streams' pieces of a run are one GET,
	// TestSettlePackOrder).
	gets := &countGets{Bucket: e.settled}
	e.s.Settled = gets
	e.s.SetCoalesce(false)
	defer e.s.SetCoalesce(true)
	e.s.FlushAge = time.Nanosecond
	e.flights(2)
	e.absorbAll()
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	// Streams 0, 1 and 3: one GET per live run (2 merged, 1 level-1);
	// stream 2: its entry of the level-1 run and its previous object (the
	// settler's window reads through the bucket it started with).
	if want := int64(3*3 + 2); gets.n.Load() != want || res.Flushes != 4 {
		t.Fatalf("flush of 4 streams from 2 merged runs and a run: %d GETs, %d flushes; want %d, 4", gets.n.Load(), res.Flushes, want)
	}
	e.s.Settled = e.settled
	e.checkMixed()
	e.check()
	h = e.head()
	if h.Flushed != h.Settled {
		t.Fatalf("head %+v: want flushed at settled", h)
	}
	tr := &trim.Trimmer{Meta: e.mem, Sets: absorb.Sets{Express: e.set}, Settled: e.settled, PassIndex: true}
	if _, err := tr.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if runs, merged, packs := e.runKeys(), e.mergedKeys(), e.packKeys(); len(runs)+len(merged)+len(packs) != 0 {
		t.Fatalf("after trim: runs %v, merged %v, packs %v", runs, merged, packs)
	}
	e.check()
}

// TestSettleMergeKeepsSupersededRuns: trim keeps a merged run's level-1
// runs until flushed passes them, and a walk from a flushed cursor that a
// stale copy moved inside a merged range (from a level-1 walk) reads the
// level-1 runs there, then goes on.
func TestSettleMergeKeepsSupersededRuns(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.s.Fanout = 3
	e.a.MaxSlotsPerPass = 2
	for range 4 {
		e.flights(2)
		e.absorbAll()
		e.step()
	}
	h := e.head()
	if h.Merged != cur(1, 6) || h.Flushed != cur(1, 0) {
		t.Fatalf("head %+v", h)
	}
	tr := &trim.Trimmer{Meta: e.mem, Sets: absorb.Sets{Express: e.set}, Settled: e.settled, PassIndex: true}
	if _, err := tr.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if n := len(e.runKeys()); n != 4 {
		t.Fatalf("%d level-1 runs after trim, want all 4 (flushed is 1/0)", n)
	}
	// A stale copy's flushed, inside [0, 6).
	if err := e.mem.AdvanceCursor(t.Context(), chainX, metastore.Flushed, cur(1, 0), cur(1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if runs, merged := e.runKeys(), e.mergedKeys(); len(runs) != 3 || len(merged) != 0 {
		t.Fatalf("after trim below 1/2: runs %v, merged %v: want 3 and none", runs, merged)
	}
	// Streams whose records below 1/2 are not behind refs read a hole (the
	// cursor was moved by hand); what matters is the walk: from 1/2 it
	// reads level-1 runs to 1/6 and on.
	runs, err := (&passindex.Window{Meta: e.mem, Bucket: e.settled}).HeadRuns(t.Context(), chainX, e.head())
	if err != nil || len(runs) != 3 || runs[0].FirstSlot != 2 || runs[0].Merged || runs[2].EndSlot != 8 {
		t.Fatalf("walk from 1/2: %d runs, %v", len(runs), err)
	}
}

// TestSettleMergeCrashBeforeCAS: a step whose merge wrote its packs and
// merged run but whose commit (one write of all its cursors) did not
// land leaves the head of the step before; the next step adopts its run
// and its merge (same bytes, no pack written), and reads are right in
// between.
func TestSettleMergeCrashBeforeCAS(t *testing.T) {
	var fa *failAdvance // a crash between a merge's PUTs (packs, merged run) and its head write
	e := newEnv(t, 3, func(s metastore.Store) metastore.Store {
		fa = &failAdvance{Store: s, kind: metastore.Merged}
		return fa
	})
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.s.Fanout = 3
	e.a.MaxSlotsPerPass = 2
	for range 2 {
		e.flights(2)
		e.absorbAll()
		e.step()
	}
	e.flights(2)
	e.absorbAll()
	fa.armed.Store(true)
	if _, err := e.s.Step(t.Context(), chainX); !errors.Is(err, absorbtest.ErrFault) {
		t.Fatalf("crashing merge: %v", err)
	}
	if h := e.head(); !h.Merged.IsZero() || h.Settled != cur(1, 4) {
		t.Fatalf("head %+v after the crash: want the step before's", h)
	}
	obj, err := e.settled.Get(t.Context(), format.MergedRunKey(chainX.Star, "express", 1, 0), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	packs := e.mergedPackKeys()
	e.checkMixed()
	// A fresh settler (a cold copy) adopts it.
	s2 := &settle.Settler{Meta: e.s.Meta, Sets: e.s.Sets, Settled: e.settled, PassIndex: true, MaxSlotsPerStep: 2, Fanout: 3}
	e.flights(2)
	e.absorbAll()
	res, err := s2.Step(t.Context(), chainX)
	if err != nil || res.Merges != 1 || res.MergedStreams != 0 || res.To != cur(1, 6) || res.Packs != 0 {
		t.Fatalf("step after the crash: %+v, %v: want the run and the merge adopted", res, err)
	}
	again, err := e.settled.Get(t.Context(), format.MergedRunKey(chainX.Star, "express", 1, 0), 0, -1)
	if err != nil || string(again) != string(obj) || !slices.Equal(e.mergedPackKeys(), packs) {
		t.Fatalf("merged run or packs rewritten: %v", err)
	}
	if h := e.head(); h.Merged != cur(1, 6) {
		t.Fatalf("head %+v", h)
	}
	e.checkMixed()
	e.checkEveryBoundary()
}

// TestSettleMergeRacingCopies: cold settle copies (each its own window)
// racing over steps that pack, flush by bytes and by age and merge (an
// epoch boundary among them) agree: no foreign object, every record reads
// back from every boundary, merged never passes settled.
func TestSettleMergeRacingCopies(t *testing.T) {
	defer settle.SetMergeChunk(250)()
	defer settle.SetMergeIndexChunk(3)() // inputs read 3 entries at a time
	e := newEnv(t, 6, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.a.MaxSlotsPerPass = 2
	e.flights(2)
	e.absorbAll()
	flushBytes := 10 * e.recordBytes()
	var merges atomic.Int64
	for round := range 6 {
		e.flightsWith(5, []int{1, 0, 3, 1, 0, 2})
		if round == 3 {
			if err := e.star.Halt(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
			e.flights(2)
		}
		e.absorbAll()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			s := &settle.Settler{Meta: e.s.Meta, Sets: e.s.Sets, Settled: e.settled, PassIndex: true, MaxSlotsPerStep: 2,
				Fanout: 2, FlushBytes: flushBytes, FlushAge: 150 * time.Millisecond}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					res, err := s.Step(context.Background(), chainX)
					merges.Add(int64(res.Merges))
					if err != nil || res.From == res.To {
						errs[i] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d copy %d: %v", round, i, err)
			}
		}
		h := e.head()
		if h.Settled.Less(h.Merged) || h.Settled.Less(h.Flushed) {
			t.Fatalf("round %d: head %+v", round, h)
		}
		e.checkMixed()
		e.checkEveryBoundary()
	}
	if merges.Load() == 0 || len(e.mergedKeys()) == 0 {
		t.Fatal("the test merged nothing")
	}
}

// listCount counts a bucket's GETs and LISTs, and fails LISTs when told
// (a role without the List grant).
type listCount struct {
	objstore.Bucket
	gets, lists         atomic.Int64 // whole GETs, LISTs
	headers             atomic.Int64 // ranged GETs (the cold load reads each header first)
	inFlight, maxFlight atomic.Int64
	failList            bool
}

func (l *listCount) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if n >= 0 {
		l.headers.Add(1)
		return l.Bucket.Get(ctx, key, off, n)
	}
	l.gets.Add(1)
	now := l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	for m := l.maxFlight.Load(); now > m && !l.maxFlight.CompareAndSwap(m, now); m = l.maxFlight.Load() {
	}
	time.Sleep(2 * time.Millisecond) // a GET's latency, so that parallel ones overlap
	return l.Bucket.Get(ctx, key, off, n)
}

func (l *listCount) List(ctx context.Context, prefix string) ([]string, error) {
	l.lists.Add(1)
	if l.failList {
		return nil, fmt.Errorf("list %s: access denied", prefix)
	}
	return l.Bucket.List(ctx, prefix)
}

// TestWindowColdLoad: a cold window with Parallel loads the runs, merged
// runs and passes of the head's window by LIST and parallel GETs (one GET
// per live index object, nothing fetched twice), and answers as a walk
// one GET at a time does; without the List grant it walks.
func TestWindowColdLoad(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.s.Fanout = 2
	e.a.MaxSlotsPerPass = 2
	for range 5 {
		e.flights(2)
		e.absorbAll()
		e.step()
	}
	e.flights(4)
	e.absorbAll() // two passes past settled
	h := e.head()
	if h.Merged.IsZero() {
		t.Fatalf("head %+v: nothing merged", h)
	}
	seq := &passindex.Window{Meta: e.mem, Bucket: e.settled}
	runs, err := seq.HeadRuns(t.Context(), chainX, h)
	if err != nil {
		t.Fatal(err)
	}
	passes, err := seq.Passes(t.Context(), chainX, h.Settled, h.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, failList := range []bool{false, true} {
		lc := &listCount{Bucket: e.settled, failList: failList}
		w := &passindex.Window{Meta: e.mem, Bucket: lc, Parallel: 4}
		for _, id := range e.ids {
			want, err := seq.HeadRefs(t.Context(), chainX, h, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := w.HeadRefs(t.Context(), chainX, h, id, 0)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("list fails %t: stream %s: cold parallel window %+v, %v; want %+v", failList, id, got, err, want)
			}
		}
		// Lists: merged runs, runs, the passes' epoch (once each: later
		// walks are warm).
		if n := int64(len(runs) + len(passes)); lc.gets.Load() != n || lc.lists.Load() != 3 {
			t.Fatalf("list fails %t: %d GETs and %d LISTs for %d runs and %d passes: want a GET each and 3 LISTs",
				failList, lc.gets.Load(), lc.lists.Load(), len(runs), len(passes))
		}
		// The load reads each listed object's header first (its size);
		// the walk one at a time reads none.
		want := int64(len(runs) + len(passes))
		if failList {
			want = 0
		}
		if lc.headers.Load() != want {
			t.Fatalf("list fails %t: %d header GETs, want %d", failList, lc.headers.Load(), want)
		}
		if parallel := lc.maxFlight.Load() > 1; parallel == failList {
			t.Fatalf("list fails %t: at most %d GETs in flight", failList, lc.maxFlight.Load())
		}
	}
}

// TestWindowWarmReload: a window loaded once (its first walk's LIST)
// that then meets a burst of passes written since (a reader catching up
// after a backlog) loads them by LIST and parallel GETs once it has
// missed passindex.MissesBeforeReload in a row, instead of one GET at a
// time; the answer is the walk's. Before the reload a warm window
// fetched every new pass in sequence (at most one GET in flight).
func TestWindowWarmReload(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.a.MaxSlotsPerPass = 1
	e.flights(2)
	e.absorbAll()
	lc := &listCount{Bucket: e.settled}
	w := &passindex.Window{Meta: e.mem, Bucket: lc, Parallel: 4}
	h := e.head()
	if _, err := w.Passes(t.Context(), chainX, h.Settled, h.Checkpoint); err != nil {
		t.Fatal(err)
	}
	e.flights(12) // a burst: 12 passes of one slot
	e.absorbAll()
	h = e.head()
	lc.lists.Store(0)
	lc.gets.Store(0)
	lc.maxFlight.Store(0)
	got, err := w.Passes(t.Context(), chainX, h.Settled, h.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&passindex.Window{Meta: e.mem, Bucket: e.settled}).Passes(t.Context(), chainX, h.Settled, h.Checkpoint)
	if err != nil || len(got) != len(want) || len(got) < 14 {
		t.Fatalf("%d passes, %v; want %d (at least 14)", len(got), err, len(want))
	}
	for i := range got {
		if got[i].FirstSlot != want[i].FirstSlot || got[i].EndSlot != want[i].EndSlot {
			t.Fatalf("pass %d: %d-%d, want %d-%d", i, got[i].FirstSlot, got[i].EndSlot, want[i].FirstSlot, want[i].EndSlot)
		}
	}
	if lc.lists.Load() != 1 || lc.maxFlight.Load() < 2 || lc.gets.Load() != 12 {
		t.Fatalf("second walk: %d LISTs, %d GETs, at most %d in flight: want 1 LIST, a GET per new pass (12), several in flight",
			lc.lists.Load(), lc.gets.Load(), lc.maxFlight.Load())
	}
}

// TestSettleMergeAcrossEpochs: after an epoch ends (a takeover), merging
// goes on in the next epoch: the group starts at the first level-1 run at
// or after max(flushed, merged), not at the cut where merged stopped.
// Regression test: the group was taken from merged's epoch, so nothing
// merged again until flushed passed the old epoch (up to FlushAge).
func TestSettleMergeAcrossEpochs(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.s.Fanout = 2
	e.a.MaxSlotsPerPass = 2
	for range 2 {
		e.flights(2)
		e.absorbAll()
		e.step()
	}
	if h := e.head(); h.Merged != cur(1, 4) {
		t.Fatalf("head %+v: want merged 1/4", h)
	}
	if err := e.star.Halt(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.flights(2)
		e.absorbAll()
		if _, err := e.s.Run(t.Context(), chainX); err != nil {
			t.Fatal(err)
		}
		e.checkMixed()
		e.checkEveryBoundary()
	}
	h := e.head()
	if h.Merged.Epoch != 2 || h.Merged.Slot < 4 {
		t.Fatalf("head %+v: want merged in epoch 2", h)
	}
	if m := e.merged(cur(2, 0)); m.Epoch != 2 || m.FirstSlot != 0 {
		t.Fatalf("merged run at 2/0: %d/%d", m.Epoch, m.FirstSlot)
	}
}

// TestSettleMergeKeepsProducerMarks (issue 30, "Exactly-once across
// merges"): a merged entry's producer marks are TrimMarks of its
// group's entries' marks, concatenated in seq order: the newest batches
// of each producer (more than MaxMarksPerProducer here, so the bound
// applies), never fewer. A merge that dropped them let a retry after a
// takeover be appended twice; before this test only the simulation saw
// it (in 35 of 100 seeds: mutant settle-merge-drops-marks).
func TestSettleMergeKeepsProducerMarks(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.star.Producers = map[format.StreamID]format.ProducerID{e.ids[0]: {1}, e.ids[1]: {2}}
	e.a.MaxSlotsPerPass = 1
	e.s.MaxSlotsPerStep, e.s.Fanout, e.s.FlushBytes, e.s.FlushAge = 3, 4, 1<<30, time.Hour
	for range 4 {
		e.flights(3)
		e.absorbAll()
		e.step()
	}
	if h := e.head(); h.Merged != cur(1, 12) {
		t.Fatalf("head %+v: want the four runs merged", h)
	}
	merged, err := (&passindex.Window{Meta: e.mem, Bucket: e.settled}).MergedRun(t.Context(), chainX, cur(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range e.ids {
		var marks []metastore.ProducerMark
		for r := range 4 {
			for _, x := range e.run(cur(1, uint64(3*r))).FindAll(id) {
				for _, m := range x.Marks {
					marks = append(marks, metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
				}
			}
		}
		want := metastore.TrimMarks(marks)
		var got []metastore.ProducerMark
		for _, x := range merged.FindAll(id) {
			for _, m := range x.Marks {
				got = append(got, metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
			}
		}
		if i < 2 && (len(marks) != 12 || len(want) != metastore.MaxMarksPerProducer) {
			t.Fatalf("stream %d: %d marks in the runs, %d kept: want 12 and the bound", i, len(marks), len(want))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("stream %d: merged marks\n got  %+v\n want %+v", i, got, want)
		}
	}
}
