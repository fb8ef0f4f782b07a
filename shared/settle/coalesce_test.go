package settle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// TestPlanSpans: ranges in, spans out. Neighbours in one object within
// the gap join one span while it stays within the span limit; a piece
// alone, a piece past the piece limit and another object's pieces are
// not coalesced; duplicates count once; and the pieces of the spans
// taken fit the bytes bound, the spans that save the most GETs per byte
// held first.
func TestPlanSpans(t *testing.T) {
	lim := coalesceLimits{piece: 100, gap: 50, span: 1000, bytes: 1 << 20}
	p := func(key string, off, n int64) piece { return piece{key: key, off: off, n: n} }
	type sp struct {
		key    string
		off, n int64
		pieces int
	}
	for _, c := range []struct {
		name   string
		lim    coalesceLimits
		pieces []piece
		want   []sp
	}{
		{name: "none"},
		{name: "one piece alone", pieces: []piece{p("a", 0, 10)}},
		{name: "gap at the limit", pieces: []piece{p("a", 60, 10), p("a", 0, 10)}, want: []sp{{"a", 0, 70, 2}}},
		{name: "gap past the limit", pieces: []piece{p("a", 0, 10), p("a", 61, 10)}},
		{name: "back to back", pieces: []piece{p("a", 10, 10), p("a", 20, 10), p("a", 0, 10)}, want: []sp{{"a", 0, 30, 3}}},
		{name: "objects apart", pieces: []piece{p("a", 0, 10), p("b", 10, 10), p("b", 30, 10), p("c", 0, 10)}, want: []sp{{"b", 10, 30, 2}}},
		{name: "duplicates once", pieces: []piece{p("a", 0, 10), p("a", 0, 10)}},
		{name: "duplicates once, with a neighbour", pieces: []piece{p("a", 0, 10), p("a", 0, 10), p("a", 20, 10)}, want: []sp{{"a", 0, 30, 2}}},
		{name: "large pieces alone", pieces: []piece{p("a", 0, 10), p("a", 10, 101), p("a", 111, 10)}},
		{name: "large piece between", pieces: []piece{p("a", 0, 10), p("a", 20, 101), p("a", 121, 10), p("a", 131, 10)}, want: []sp{{"a", 121, 20, 2}}},
		{name: "empty pieces ignored", pieces: []piece{p("a", 0, 0), p("a", 10, 10)}},
		{
			name: "span limit splits",
			// 10 pieces of 100 every 100 bytes: 1,000 bytes a span.
			pieces: func() (ps []piece) {
				for i := range 25 {
					ps = append(ps, p("a", int64(100*i), 100))
				}
				return ps
			}(),
			want: []sp{{"a", 0, 1000, 10}, {"a", 1000, 1000, 10}, {"a", 2000, 500, 5}},
		},
		{
			name: "bytes bound, best first",
			lim:  coalesceLimits{piece: 100, gap: 50, span: 1000, bytes: 100},
			// a: 2 pieces of 50 (1 GET saved for 100 bytes); b: 3 pieces
			// of 20 (2 for 60); c: 2 of 30 (1 for 60): b is taken, then
			// neither a (160) nor c (120) fits; d: 2 of 10 (1 for 20)
			// does.
			pieces: []piece{p("a", 0, 50), p("a", 50, 50), p("b", 0, 20), p("b", 20, 20), p("b", 40, 20),
				p("c", 0, 30), p("c", 40, 30), p("d", 0, 10), p("d", 60, 10)},
			want: []sp{{"b", 0, 60, 3}, {"d", 0, 70, 2}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := lim
			if c.lim != (coalesceLimits{}) {
				l = c.lim
			}
			var got []sp
			var held int64
			for _, s := range planSpans(c.pieces, l) {
				got = append(got, sp{s.key, s.off, s.n, len(s.pieces)})
				held += s.held()
				for _, q := range s.pieces {
					if q.key != s.key || q.off < s.off || q.off+q.n > s.off+s.n {
						t.Fatalf("span %+v: piece %+v outside it", s, q)
					}
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("spans %+v, want %+v", got, c.want)
			}
			if held > l.bytes {
				t.Fatalf("%d bytes of pieces held, bound %d", held, l.bytes)
			}
		})
	}
}

// ageFlushWorld is a small BenchmarkHourlyStep: runs level-1 runs of
// `streams` streams (one record each, packs in stream order) in a
// memory bucket, and the age flush of 1 in 24 of the streams (every
// live run holds each), ready to run (flush).
type ageFlushWorld struct {
	bucket  *countBucket
	meta    metastore.Store
	s       *Settler
	c       metastore.ChainID
	cs      *chainState
	ids     []format.StreamID
	partsOf [][]metastore.Ref
	pieces  int
}

func newAgeFlushWorld(t *testing.T, streams, hours, minutes int) *ageFlushWorld {
	t.Helper()
	const slots = 4
	fixture := objstore.NewMem("settled")
	runs := hours + minutes
	cs := newChainState(stateKey{flushed: metastore.Cursor{Epoch: 1}, merged: metastore.Cursor{Epoch: 1, Slot: uint64(hours * slots)}, settled: metastore.Cursor{Epoch: 1, Slot: uint64(runs * slots)}})
	c, _, _ := mergeFixture(t, fixture, streams, runs, slots, 0, func(i, r int) int { return 8 + (i+r)%5 }, nil, cs.fold)
	w := &ageFlushWorld{bucket: &countBucket{Bucket: fixture}, c: c, cs: cs}
	for i := 0; i < streams; i += 24 {
		var id format.StreamID
		binary.BigEndian.PutUint64(id[:], uint64(i)*0x9E3779B97F4A7C15)
		binary.BigEndian.PutUint64(id[8:], uint64(i))
		w.ids = append(w.ids, id)
	}
	w.meta = hourlyMeta(t, c, hours*slots, runs*slots)
	w.s = &Settler{Meta: w.meta, Settled: w.bucket, PassIndex: true, Fanout: minutes, FlushAge: 24 * time.Hour}
	w.s.window = &passindex.Window{Meta: w.meta, Bucket: w.bucket, MaxBytes: 1 << 30}
	w.s.windowOnce.Do(func() {})
	entries, err := w.s.unflushedRefs(t.Context(), c, cs, w.ids)
	if err != nil {
		t.Fatal(err)
	}
	w.partsOf = make([][]metastore.Ref, len(w.ids))
	for i, id := range w.ids {
		if w.partsOf[i] = entries[id]; len(w.partsOf[i]) != runs {
			t.Fatalf("stream %s: %d entries, want %d", id, len(w.partsOf[i]), runs)
		}
	}
	w.pieces = len(settledPieces(w.partsOf))
	return w
}

// flush runs the flushes of the world's streams (as runStep does) and
// returns the settled bucket's GETs in them.
func (w *ageFlushWorld) flush(t *testing.T, coalesce bool) (int64, Result, error) {
	t.Helper()
	w.s.noCoalesce = !coalesce
	var res Result
	before := w.bucket.gets.Load()
	err := w.s.flushStreams(t.Context(), chain.Set{}, w.c, w.cs.key.settled, w.ids, w.partsOf, &res)
	return w.bucket.gets.Load() - before, res, err
}

// state is every object of the settled bucket and every flushed
// stream's refs.
func (w *ageFlushWorld) state(t *testing.T) (map[string][]byte, map[format.StreamID][]metastore.Ref) {
	t.Helper()
	ctx := context.Background()
	keys, err := w.bucket.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string][]byte{}
	for _, k := range keys {
		if objs[k], err = w.bucket.Bucket.Get(ctx, k, 0, -1); err != nil {
			t.Fatal(err)
		}
	}
	refs := map[format.StreamID][]metastore.Ref{}
	for _, id := range w.ids {
		if refs[id], err = w.s.refs(ctx, id, 0, ^uint64(0)); err != nil {
			t.Fatal(err)
		}
	}
	return objs, refs
}

// TestCoalescedAgeFlushGets (issue 17): an age flush of many streams
// reads its pieces of a pack in coalesced GETs: at most a quarter of its
// pieces' GETs (here one a run), where each piece was a GET of its own
// (before: 250 GETs for 250 pieces); with a bytes bound that holds a
// third of the pieces, in between. The settled objects and the refs are
// the same byte for byte.
func TestCoalescedAgeFlushGets(t *testing.T) {
	const streams, hours, minutes = 600, 3, 7
	ref := newAgeFlushWorld(t, streams, hours, minutes)
	gets, res, err := ref.flush(t, false)
	if err != nil || res.Flushes != len(ref.ids) {
		t.Fatalf("one by one: %d flushes of %d, %v", res.Flushes, len(ref.ids), err)
	}
	if gets < int64(ref.pieces) {
		t.Fatalf("one by one: %d GETs for %d pieces", gets, ref.pieces)
	}
	wantObjs, wantRefs := ref.state(t)
	t.Logf("one by one: %d GETs, %d pieces, %d streams", gets, ref.pieces, len(ref.ids))
	for _, bound := range []int64{0, 1} {
		t.Run(fmt.Sprintf("bound=%d", bound), func(t *testing.T) {
			w := newAgeFlushWorld(t, streams, hours, minutes)
			if bound != 0 {
				var all int64
				for _, p := range settledPieces(w.partsOf) {
					all += p.n
				}
				old := coalesceBytes
				coalesceBytes = all / 3
				defer func() { coalesceBytes = old }()
			}
			gets, res, err := w.flush(t, true)
			if err != nil || res.Flushes != len(w.ids) {
				t.Fatalf("coalesced: %d flushes of %d, %v", res.Flushes, len(w.ids), err)
			}
			t.Logf("coalesced: %d GETs for %d pieces", gets, w.pieces)
			switch {
			case bound == 0 && gets > int64(hours+minutes):
				t.Fatalf("coalesced: %d GETs for %d pieces in %d packs: want one a pack", gets, w.pieces, hours+minutes)
			case bound == 0 && gets > int64(w.pieces/4):
				t.Fatalf("coalesced: %d GETs for %d pieces: want at most a quarter", gets, w.pieces)
			case bound != 0 && (gets <= int64(hours+minutes) || gets >= int64(w.pieces)):
				t.Fatalf("coalesced, a third held: %d GETs for %d pieces", gets, w.pieces)
			}
			objs, refs := w.state(t)
			if !reflect.DeepEqual(refs, wantRefs) {
				t.Fatal("coalesced: the refs differ from the flush one by one")
			}
			if len(objs) != len(wantObjs) {
				t.Fatalf("coalesced: %d objects, one by one %d", len(objs), len(wantObjs))
			}
			for k, b := range wantObjs {
				if !bytes.Equal(objs[k], b) {
					t.Fatalf("coalesced: object %s differs from the flush one by one", k)
				}
			}
		})
	}
}

// TestCoalescedFlushObjectGone: a pack deleted after the step planned its
// flushes (a copy merged it away) fails the coalesced read of it, and
// the flushes report it as they did reading one by one (errGone: each
// re-reads its refs, swapRetries times): the same errors.
func TestCoalescedFlushObjectGone(t *testing.T) {
	const streams, hours, minutes = 240, 1, 3
	var errs [2][]string
	for i, coalesce := range []bool{false, true} {
		w := newAgeFlushWorld(t, streams, hours, minutes)
		gone := w.partsOf[0][1].Locations[0].Key // the second run's pack
		if err := w.bucket.Delete(t.Context(), gone); err != nil {
			t.Fatal(err)
		}
		_, res, err := w.flush(t, coalesce)
		if err == nil || res.Flushes != 0 || !errors.Is(err, metastore.ErrConflict) {
			t.Fatalf("coalesce %t: %d flushes, %v: want none, the settles losing", coalesce, res.Flushes, err)
		}
		errs[i] = strings.Split(err.Error(), "\n")
		slices.Sort(errs[i]) // the flushes end in any order
	}
	if !slices.Equal(errs[0], errs[1]) {
		t.Fatalf("coalesced: errors\n%s\none by one:\n%s", strings.Join(errs[1], "\n"), strings.Join(errs[0], "\n"))
	}
	if !strings.Contains(errs[1][0], "kept losing") {
		t.Fatalf("error %q: want the settles losing", errs[1][0])
	}
}

// FuzzPlanSpans: whatever the pieces, every span planned is of one
// object, covers 2 pieces or more, each within it, small, at most the
// gap after the pieces before it, the span within its limit; no piece is
// in two spans; the pieces held fit the bound.
func FuzzPlanSpans(f *testing.F) {
	f.Add([]byte{0, 0, 10, 0, 20, 10, 1, 0, 5}, uint16(100))
	f.Add([]byte{0, 0, 200, 0, 40, 40, 0, 90, 10, 0, 255, 1}, uint16(30))
	f.Fuzz(func(t *testing.T, b []byte, bound uint16) {
		lim := coalesceLimits{piece: 64, gap: 16, span: 256, bytes: int64(bound)}
		var pieces []piece
		for ; len(b) >= 3; b = b[3:] {
			pieces = append(pieces, piece{key: string('a' + b[0]%3), off: int64(b[1]) * 4, n: int64(b[2])})
		}
		seen := map[piece]bool{}
		var held int64
		for _, sp := range planSpans(pieces, lim) {
			if len(sp.pieces) < 2 || sp.n > lim.span {
				t.Fatalf("span %+v: %d pieces, %d bytes", sp, len(sp.pieces), sp.n)
			}
			end := sp.off
			for i, p := range sp.pieces {
				if p.key != sp.key || p.off < sp.off || p.off+p.n > sp.off+sp.n || p.n <= 0 || p.n > lim.piece || seen[p] {
					t.Fatalf("span %+v: piece %+v", sp, p)
				}
				if i > 0 && p.off-end > lim.gap {
					t.Fatalf("span %+v: a gap of %d before %+v", sp, p.off-end, p)
				}
				seen[p] = true
				end = max(end, p.off+p.n)
			}
			if sp.pieces[0].off != sp.off || end != sp.off+sp.n {
				t.Fatalf("span %+v is not its pieces' extent", sp)
			}
			held += sp.held()
		}
		if held > lim.bytes {
			t.Fatalf("%d bytes held, bound %d", held, lim.bytes)
		}
	})
}
