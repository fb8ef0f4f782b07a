package settle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// Tests of design 014's level 1: runs, packs and flush.

// flightsWith writes n flights, counts[i] records of stream i in each.
func (e *env) flightsWith(n int, counts []int) {
	e.t.Helper()
	for range n {
		if _, err := e.star.Flight(e.t.Context(), e.ids, counts, e.ts, 30, 0); err != nil {
			e.t.Fatal(err)
		}
		e.ts += 10
	}
}

// listed is the settled bucket's keys under prefix.
func (e *env) listed(prefix string) []string {
	e.t.Helper()
	keys, err := e.settled.List(e.t.Context(), prefix)
	if err != nil {
		e.t.Fatal(err)
	}
	return keys
}

func (e *env) runKeys() []string  { return e.listed("index/" + chainX.Star + "/express/runs/") }
func (e *env) packKeys() []string { return e.listed("packs/") }

// step settles one step and checks what every stream reads back, through
// refs, runs and passes.
func (e *env) step() {
	e.t.Helper()
	if _, err := e.s.Step(e.t.Context(), chainX); err != nil {
		e.t.Fatal(err)
	}
	e.checkMixed()
}

// run is the run index at the given cursor.
func (e *env) run(at metastore.Cursor) *format.PassIndex {
	e.t.Helper()
	r, err := (&passindex.Window{Meta: e.mem, Bucket: e.settled}).Run(e.t.Context(), chainX, at)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// recordBytes is the bytes of one of e's records in a pass index entry.
func (e *env) recordBytes() int64 {
	e.t.Helper()
	obj, err := e.settled.Get(e.t.Context(), format.PassIndexKey(chainX.Star, "express", 1, 0), 0, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := format.ParsePassIndex(obj)
	if err != nil {
		e.t.Fatal(err)
	}
	i, ok := p.Find(e.ids[0])
	if !ok {
		e.t.Fatal("stream 0 not in the first pass")
	}
	s := p.Streams[i]
	return s.Bytes / int64(s.LastSeq-s.FirstSeq+1)
}

// TestSettleRunsPackSmallStreams: small streams are packed, not flushed:
// a settle step writes one run and one pack, no ref and no per-stream
// object, leaves the flushed cursor where it was, and every record reads
// back from the runs.
func TestSettleRunsPackSmallStreams(t *testing.T) {
	var counted *metacount.Store
	e := newEnv(t, 5, func(s metastore.Store) metastore.Store { counted = metacount.New(s); return counted })
	e.withIndex()
	e.s.MaxSlotsPerStep = 4
	e.flights(12)
	e.absorbAll() // passes [0,4) [4,8) [8,12)
	before := counted.Snapshot()
	for range 3 {
		e.step()
	}
	if h := e.head(); h.Settled != cur(1, 12) || h.Flushed != cur(1, 0) {
		t.Fatalf("head %+v: want settled 1/12, flushed 1/0", h)
	}
	for i := range e.ids {
		if refs := e.refs(i); len(refs) != 0 {
			t.Fatalf("stream %d: %d refs, want none (packed)", i, len(refs))
		}
	}
	if objs := e.listed("streams/"); len(objs) != 0 {
		t.Fatalf("per-stream objects %v, want none", objs)
	}
	if runs, packs := e.runKeys(), e.packKeys(); len(runs) != 3 || len(packs) != 3 {
		t.Fatalf("runs %v, packs %v: want 3 of each", runs, packs)
	}
	r := e.run(cur(1, 4))
	if r.EndSlot != 8 || len(r.Streams) != len(e.ids) {
		t.Fatalf("run at 1/4: slots %d-%d, %d streams", r.FirstSlot, r.EndSlot, len(r.Streams))
	}
	for _, s := range r.Streams {
		if s.Marker() || len(s.Segments) != 4 || s.Segments[0].Slot != 4 {
			t.Fatalf("run at 1/4: entry %+v: want 4 segments in pack 4", s)
		}
		// Sorted by stream: the entry is one range of its pack.
		for j := 1; j < len(s.Segments); j++ {
			if g, p := s.Segments[j], s.Segments[j-1]; g.Slot != p.Slot || g.Offset != p.Offset+p.Length {
				t.Fatalf("run at 1/4: stream %s's segments %+v not back to back", s.Stream, s.Segments)
			}
		}
	}
	// Per step: GetHead and one commit (MoveCursors); no ref written.
	d := counted.Snapshot().Sub(before)
	if d.Of(metacount.SettleRef) != 0 || d.Of(metacount.MoveCursors) != 3 || d.Writes() != 3 {
		t.Fatalf("metastore calls %v: want 3 MoveCursors and no other write", d.Calls)
	}
}

// TestSettleFlushByBytes: a stream whose bytes in runs reach FlushBytes is
// flushed (its packed entries and the step's parts into a per-stream
// object and one ref, a marker in the step's run); the others stay
// packed, and the flushed cursor stays at the first run they are in.
func TestSettleFlushByBytes(t *testing.T) {
	e := newEnv(t, 3, nil) // stream i: i%3+1 records a flight
	e.withIndex()
	e.s.MaxSlotsPerStep = 4
	e.flights(8)
	e.absorbAll() // passes [0,4) [4,8)
	b := e.recordBytes()
	e.s.FlushBytes = 20 * b // stream 2 has 12 records a step, stream 1 8, stream 0 4
	e.step()
	if n := len(e.refs(2)); n != 0 {
		t.Fatalf("stream 2 flushed after one step (%d refs)", n)
	}
	e.step()
	refs := e.refs(2)
	if len(refs) != 1 || refs[0].FirstSeq != 0 || refs[0].LastSeq != 23 || !refs[0].Locations[0].Settled ||
		!strings.HasPrefix(refs[0].Locations[0].Key, "streams/") {
		t.Fatalf("stream 2 refs %+v: want one settled ref of seqs 0-23", refs)
	}
	for _, i := range []int{0, 1} {
		if n := len(e.refs(i)); n != 0 {
			t.Fatalf("stream %d: %d refs, want none", i, n)
		}
	}
	r := e.run(cur(1, 4))
	i, ok := r.Find(e.ids[2])
	if !ok || !r.Streams[i].Marker() || r.Streams[i].FirstSeq != 0 || r.Streams[i].LastSeq != 23 {
		t.Fatalf("run at 1/4: stream 2 entry %+v, want a marker of 0-23", r.Streams[i])
	}
	if h := e.head(); h.Flushed != cur(1, 0) || h.Settled != cur(1, 8) {
		t.Fatalf("head %+v: want flushed 1/0 (streams 0 and 1 in the run at 1/0), settled 1/8", h)
	}
	// Tail recovery's LastRef: stream 2's packed entry of the run at 1/0
	// (seqs 0-11) is behind the marker, so its last ref is the flush's;
	// stream 1's last part is its packed entry of the run at 1/4.
	w := &passindex.Window{Meta: e.mem, Bucket: e.settled}
	for i, want := range map[int]uint64{1: 15, 2: 23} {
		st := metastore.Stream{ID: e.ids[i].String(), Star: chainX.Star, Class: chainX.Class}
		last, err := w.LastRef(t.Context(), st)
		if err != nil || last.LastSeq != want {
			t.Fatalf("stream %d: LastRef %+v, %v: want last seq %d", i, last, err, want)
		}
		if parts, err := w.StreamRefs(t.Context(), st, 0); err != nil || (i == 2) != (len(parts) == 0) {
			t.Fatalf("stream %d: window parts %+v, %v", i, parts, err)
		}
	}
	// Stream 1 reaches 24 records' worth in the third step; stream 0
	// never does. Stream 2 starts over after its flush.
	e.flights(4)
	e.absorbAll()
	e.step()
	if refs := e.refs(1); len(refs) != 1 || refs[0].LastSeq != 23 {
		t.Fatalf("stream 1 refs %+v: want one of seqs 0-23", refs)
	}
	if n := len(e.refs(2)); n != 1 {
		t.Fatalf("stream 2: %d refs, want still 1", n)
	}
	if h := e.head(); h.Flushed != cur(1, 0) {
		t.Fatalf("head %+v: want flushed 1/0 (stream 0)", h)
	}
}

// TestSettleFlushByAge: a stream whose oldest unflushed run is FlushAge
// older than the step (by record timestamps) is flushed, an idle stream
// too, and the flushed cursor passes the runs that hold nothing unflushed.
func TestSettleFlushByAge(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 4
	e.s.FlushAge = 100 * time.Millisecond // flights are 10 ms apart
	e.flights(8)                          // ts +0..+70: runs at 1/0 (time +30) and 1/4 (+70)
	e.absorbAll()
	e.step()
	e.step()
	idle := []int{0, 1, 1} // stream 0 goes idle
	e.flightsWith(4, idle) // +80..+110
	e.absorbAll()
	e.step() // now +110: the run at 1/0 is 80 ms old
	for i := range e.ids {
		if n := len(e.refs(i)); n != 0 {
			t.Fatalf("stream %d flushed at age 80 ms (%d refs)", i, n)
		}
	}
	e.flightsWith(4, idle) // +120..+150
	e.absorbAll()
	e.step() // now +150: the run at 1/0 is 120 ms old: everything in it is flushed
	for i := range e.ids {
		refs := e.refs(i)
		if want := uint64(len(e.star.Written(e.ids[i]))) - 1; len(refs) != 1 || refs[0].LastSeq != want {
			t.Fatalf("stream %d refs %+v: want one to seq %d", i, refs, want)
		}
	}
	if h := e.head(); h.Flushed != cur(1, 16) || h.Settled != cur(1, 16) {
		t.Fatalf("head %+v: want flushed and settled at 1/16", h)
	}
	e.check()
	// A rerun is a noop; the runs below flushed are trim's.
	if res, err := e.s.Step(t.Context(), chainX); err != nil || res.From != res.To {
		t.Fatalf("step after: %+v, %v", res, err)
	}
}

// failAdvance fails the first AdvanceCursor of cursor kind once armed: a
// crash between a step's PUTs (packs, run index, flushed objects and refs;
// or a merge's) and its head write.
type failAdvance struct {
	metastore.Store
	kind  metastore.CursorKind
	armed atomic.Bool
}

func (f *failAdvance) AdvanceCursor(ctx context.Context, c metastore.ChainID, k metastore.CursorKind, from, to metastore.Cursor) error {
	if k == f.kind && f.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("crash before the %s cursor moves: %w", k, absorbtest.ErrFault)
	}
	return f.Store.AdvanceCursor(ctx, c, k, from, to)
}

func (f *failAdvance) MoveCursors(ctx context.Context, c metastore.ChainID, moves []metastore.CursorMove) error {
	if moving(moves, f.kind) && f.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("crash before the %s cursor moves: %w", f.kind, absorbtest.ErrFault)
	}
	return f.Store.MoveCursors(ctx, c, moves)
}

// moving reports whether moves move cursor kind k.
func moving(moves []metastore.CursorMove, k metastore.CursorKind) bool {
	for _, m := range moves {
		if m.Kind == k && m.From != m.To {
			return true
		}
	}
	return false
}

// TestSettleRunCrashBeforeCAS: a step that wrote its packs, run and
// flushes but not the head is redone by the next step from the run it
// finds (adopted, not rewritten: the same run and packs), even when the
// checkpoint moved meanwhile (the run's end, not the new checkpoint, ends
// the step).
func TestSettleRunCrashBeforeCAS(t *testing.T) {
	var fa *failAdvance
	e := newEnv(t, 4, func(s metastore.Store) metastore.Store {
		fa = &failAdvance{Store: s, kind: metastore.Settled}
		return fa
	})
	e.withIndex()
	e.s.MaxSlotsPerStep = 4
	e.flights(4)
	e.absorbAll()
	b := e.recordBytes()
	e.s.FlushBytes = 8 * b // stream 1 (2 a flight) and 2 (3) flush, 0 and 3 (1) pack
	fa.armed.Store(true)
	if _, err := e.s.Step(t.Context(), chainX); !errors.Is(err, absorbtest.ErrFault) {
		t.Fatalf("crashing step: %v", err)
	}
	if h := e.head(); h.Settled != cur(1, 0) {
		t.Fatalf("head %+v after a crash", h)
	}
	runObj, err := e.settled.Get(t.Context(), format.RunIndexKey(chainX.Star, "express", 1, 0), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	packs := e.packKeys()
	e.checkMixed()
	// The checkpoint moves on; the next step still ends where the run does.
	e.flights(4)
	e.absorbAll()
	e.s.MaxSlotsPerStep = 8
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil || res.To != cur(1, 4) || res.Packs != 0 || res.Flushes != 2 {
		t.Fatalf("step after the crash: %+v, %v: want the run's 1/4, no pack written, its 2 flushes", res, err)
	}
	again, err := e.settled.Get(t.Context(), format.RunIndexKey(chainX.Star, "express", 1, 0), 0, -1)
	if err != nil || string(again) != string(runObj) || !slices.Equal(e.packKeys(), packs) {
		t.Fatalf("run or packs rewritten: %v", err)
	}
	e.checkMixed()
	for _, i := range []int{1, 2} {
		if n := len(e.refs(i)); n != 1 {
			t.Fatalf("stream %d: %d refs, want 1", i, n)
		}
	}
	e.step()
	if h := e.head(); h.Settled != cur(1, 8) {
		t.Fatalf("head %+v", h)
	}
}

// TestSettleRunsRacingCopies: copies of settle racing over steps that
// pack, flush by bytes and by age (an epoch boundary among them) agree: no
// foreign object, every record reads back from refs and runs, and flushed
// never passes settled.
func TestSettleRunsRacingCopies(t *testing.T) {
	e := newEnv(t, 6, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 3
	e.flights(2)
	e.absorbAll()
	e.s.FlushBytes = 10 * e.recordBytes()
	e.s.FlushAge = 60 * time.Millisecond
	for round := range 4 {
		e.flightsWith(5, []int{1, 0, 3, 1, 0, 2})
		if round == 2 {
			if err := e.star.Halt(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
			e.flights(2)
		}
		e.absorbAll()
		e.settleRacing(t, round, 6)
		e.checkMixed()
	}
	if h := e.head(); !h.Flushed.Less(h.Settled) && h.Flushed != h.Settled {
		t.Fatalf("head %+v", h)
	}
	var flushed int
	for i := range e.ids {
		flushed += len(e.refs(i))
	}
	if flushed == 0 || len(e.packKeys()) == 0 {
		t.Fatalf("%d refs, %d packs: the test flushed or packed nothing", flushed, len(e.packKeys()))
	}
}

// countGets counts the GETs of a bucket.
type countGets struct {
	objstore.Bucket
	n atomic.Int64
}

func (c *countGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.n.Add(1)
	return c.Bucket.Get(ctx, key, off, n)
}

// TestSettlePackOrder: packs sorted by stream let a flush read a stream's
// entry of a run in one GET; packs in slot order (PackBufferBytes < 0,
// what a step too large to hold uses) interleave the streams, cost a GET
// per segment, and read back the same records. Both read one by one
// (coalesce-false); coalesced (the default), the step reads the 3
// streams' pieces of a pack in one GET whatever the order.
func TestSettlePackOrder(t *testing.T) {
	for _, c := range []struct{ sorted, coalesce bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		sorted := c.sorted
		t.Run(fmt.Sprintf("sorted-%t/coalesce-%t", sorted, c.coalesce), func(t *testing.T) {
			e := newEnv(t, 3, nil)
			e.withIndex()
			gets := &countGets{Bucket: e.settled}
			e.s.Settled = gets
			e.s.SetCoalesce(c.coalesce)
			e.s.MaxSlotsPerStep = 4
			if !sorted {
				e.s.PackBufferBytes = -1
			}
			e.flights(8)
			e.absorbAll()
			e.step()
			e.step() // two runs, each entry 4 segments
			r := e.run(cur(1, 0))
			i, _ := r.Find(e.ids[0])
			g := r.Streams[i].Segments
			if together := g[1].Offset == g[0].Offset+g[0].Length; together != sorted {
				t.Fatalf("segments %+v: back to back %t, want %t", g, together, sorted)
			}
			e.flights(1)
			e.absorbAll()
			e.s.FlushAge = time.Nanosecond // flush everything
			before := gets.n.Load()
			e.step()
			// Per stream: one GET per run (sorted) or per segment; the run
			// walk is cached (the settler wrote the runs); plus the step's
			// own: its run looked up (absent) and its pass index.
			want := int64(3*2 + 2)
			switch {
			case c.coalesce:
				want = 2 + 2
			case !sorted:
				want = 3*2*4 + 2
			}
			if got := gets.n.Load() - before; got != want {
				t.Fatalf("%d settled GETs to flush 3 streams of 2 runs, want %d", got, want)
			}
			e.check()
		})
	}
}
