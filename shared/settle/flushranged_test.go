package settle

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

var chainF = metastore.ChainID{Star: "f", Class: metastore.Express}

// flushWindow is a chain's live runs for the flush tests: level-1 runs
// of one epoch, merged runs over some groups of them below the merged
// cursor, written to a bucket as a settler writes them.
type flushWindow struct {
	bucket objstore.Bucket
	runs   []*format.PassIndex // level-1, in order
	merged []*format.PassIndex // the merged runs written
	key    stateKey
	// cmdxGetBytes is the settlers' windows' CommandIndexGetBytes (0:
	// the default; below 0: every usable command index read).
	cmdxGetBytes int64
}

// randomFlushWindow writes n level-1 runs over `streams` streams (random
// ids): each stream in a run with probability p, as a marker (its
// flushed seqs) one time in five, else a packed entry with one segment
// and, at random, producer marks and command state (a version 2 run);
// each run's command index, mostly (cmdindex.go); then merged runs over random groups of consecutive runs below a merged
// cursor (each group's first run may also be left unmerged: the walk
// reads the level-1 runs there). The flushed cursor is a random run's.
func randomFlushWindow(t testing.TB, rng *rand.Rand, n, streams int, p float64) *flushWindow {
	t.Helper()
	ctx := context.Background()
	ids := randomStreamIDs(rng, streams)
	next := make([]uint64, len(ids))
	flushedTo := make([]uint64, len(ids))
	fw := &flushWindow{bucket: objstore.NewMem("settled")}
	put := func(key string, r *format.PassIndex) {
		obj, err := format.AppendPassIndex(nil, *r)
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.bucket.PutIfAbsent(ctx, key, obj); err != nil {
			t.Fatal(err)
		}
		// Its command index (design 014, "The command index"), as settle
		// writes it, mostly; none (an earlier build's run), or a corrupt
		// one (refused: the table read instead), sometimes.
		if cmdx, err := format.AppendCommandIndex(nil, obj); err == nil {
			switch rng.IntN(6) {
			case 0:
				return
			case 1:
				cmdx[len(cmdx)-5] ^= 1
			}
			if err := fw.bucket.PutIfAbsent(ctx, format.CommandIndexKey(key), cmdx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r := range n {
		run := &format.PassIndex{Epoch: 1, FirstSlot: uint64(3 * r), EndSlot: uint64(3*r + 3)}
		for i, id := range ids {
			if rng.Float64() >= p {
				continue
			}
			ts := int64(1000 + 10*r)
			if rng.IntN(5) == 0 && next[i] > flushedTo[i] {
				run.Streams = append(run.Streams, format.PassStream{Stream: id, FirstSeq: flushedTo[i], LastSeq: next[i] - 1, FirstTsMs: ts, LastTsMs: ts})
				flushedTo[i] = next[i]
				continue
			}
			k := uint64(1 + rng.IntN(3))
			e := format.PassStream{Stream: id, FirstSeq: next[i], LastSeq: next[i] + k - 1, FirstTsMs: ts, LastTsMs: ts + 5,
				Bytes: int64(50 * k), Segments: []format.PassSegment{{Slot: run.FirstSlot + uint64(rng.IntN(3)), FirstSeq: next[i], Count: uint32(k), Offset: uint32(rng.IntN(1 << 20)), Length: uint32(60 * k), CRC: rng.Uint32()}}}
			if rng.IntN(3) == 0 {
				e.Marks = []format.PassMark{{Producer: format.ProducerID{byte(1 + rng.IntN(9))}, BatchSeq: rng.Uint64N(100), FirstSeq: next[i], LastSeq: next[i] + k - 1}}
			}
			if rng.IntN(4) == 0 {
				e.Commands = &format.StreamCommands{FenceToken: fmt.Sprintf("t%d", rng.IntN(100)), TrimSeq: rng.Uint64N(next[i] + 1)}
			}
			run.Streams = append(run.Streams, e)
			next[i] += k
		}
		fw.runs = append(fw.runs, run)
		put(format.RunIndexKey(chainF.Star, chainF.Class.String(), 1, run.FirstSlot), run)
	}
	// Merged runs over groups of 2-4 runs below the merged cursor.
	m := rng.IntN(n + 1)
	for a := 0; a < m; {
		b := min(a+2+rng.IntN(3), m)
		if b-a >= 2 && rng.IntN(4) > 0 {
			mr := mergedOf(fw.runs[a:b])
			for i := range mr.Streams {
				if e := &mr.Streams[i]; !e.Marker() {
					// The group's latest command state, as makeMerged keeps it.
					for _, r := range slices.Backward(fw.runs[a:b]) {
						if x := r.FindAll(e.Stream); len(x) > 0 && x[len(x)-1].Commands != nil && !x[len(x)-1].Marker() {
							e.Commands = x[len(x)-1].Commands
							break
						}
					}
				}
			}
			fw.merged = append(fw.merged, mr)
			put(format.MergedRunKey(chainF.Star, chainF.Class.String(), 1, mr.FirstSlot), mr)
		}
		a = b
	}
	at := func(i int) metastore.Cursor {
		if i == n {
			return metastore.Cursor{Epoch: 1, Slot: uint64(3 * n)}
		}
		return metastore.Cursor{Epoch: 1, Slot: fw.runs[i].FirstSlot}
	}
	fw.key = stateKey{flushed: at(rng.IntN(n)), merged: at(m), settled: at(n)}
	return fw
}

// settler is a settler of fw's chain with a window of budget bytes,
// taking the flush path given.
func (fw *flushWindow) settler(budget int64, path flushPath) *Settler {
	s := &Settler{Settled: fw.bucket, Window: &passindex.Window{Bucket: fw.bucket, MaxBytes: budget, RangedParallel: 3, CommandIndexGetBytes: fw.cmdxGetBytes}, flushPath: path}
	s.initWindow()
	return s
}

// TestRangedFlushEqualsWalk (issue 17): the flushed streams' unflushed
// entries by per-stream lookups (unflushedRanged) are exactly those of
// the walk of the live runs (unflushedRefs's), refs, locations, marks
// and command state alike, for random windows (merged runs below the
// merged cursor and level-1 runs left unmerged, markers, producer marks,
// version 2 runs with command state in some entries, stream tables over
// several ranged blocks; command state read through the runs' command
// indexes, or their tables where a run has none or a corrupt one), any
// set of streams (some without unflushed entries), and window budgets that read every run by range (sharing no
// command table, or some: a quarter of the budget), some runs, or none.
func TestRangedFlushEqualsWalk(t *testing.T) {
	ctx := t.Context()
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	var rangedLookups, indexed, refused int64
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 17))
		n := 1 + rng.IntN(10)
		streams := 1 + rng.IntN(40)
		if seed%5 == 0 {
			streams = 1000 + rng.IntN(2000) // stream tables over several 64 KiB blocks
		}
		fw := randomFlushWindow(t, rng, n, streams, 0.2+0.6*rng.Float64())
		fw.cmdxGetBytes = -1 // the runs' command indexes, where usable
		walk := fw.settler(-1, flushWalk)
		cs, err := walk.buildState(ctx, chainF, fw.key)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		// The streams to flush: some with unflushed entries, some not.
		var all []format.StreamID
		for _, r := range fw.runs {
			for i := range r.Streams {
				all = append(all, r.Streams[i].Stream)
			}
		}
		slices.SortFunc(all, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
		all = slices.Compact(all)
		var ids []format.StreamID
		k := 1 + rng.IntN(min(len(all)+1, 50))
		for _, i := range rng.Perm(len(all))[:min(k, len(all))] {
			ids = append(ids, all[i])
		}
		ids = append(ids, format.StreamID{0xff, 0xfe}) // in no run
		slices.SortFunc(ids, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
		ids = slices.Compact(ids)
		want, err := walk.unflushedRefs(ctx, chainF, cs, ids)
		if err != nil {
			t.Fatalf("seed %d: walk: %v", seed, err)
		}
		for _, budget := range []int64{1, 4 << 10, 64 << 10, -1} {
			ranged := fw.settler(budget, flushRanged)
			got, err := ranged.unflushedRefs(ctx, chainF, cs, ids)
			if err != nil {
				t.Fatalf("seed %d budget %d: ranged: %v", seed, budget, err)
			}
			if !reflect.DeepEqual(got, want) {
				for id, w := range want {
					if g := got[id]; !reflect.DeepEqual(g, w) {
						t.Fatalf("seed %d budget %d: stream %s: ranged\n %+v\nwalk\n %+v", seed, budget, id, g, w)
					}
				}
				t.Fatalf("seed %d budget %d: ranged %d streams, walk %d", seed, budget, len(got), len(want))
			}
			st := ranged.window.Stats()
			if budget == 1 && len(want) > 0 && (st.Ranged == 0 || st.Gets != 0) {
				t.Fatalf("seed %d: budget 1: %d objects by range, %d whole: the ranged path was not taken", seed, st.Ranged, st.Gets)
			}
			rangedLookups += st.Ranged
			indexed, refused = indexed+st.CommandIndexed, refused+st.CommandIndexRefused
		}
		// From the chain's flushed cursor, not each stream's oldest run:
		// the lookups meet the streams' markers and must drop what came
		// before them, as the walk does.
		early := *cs
		early.streams = maps.Clone(cs.streams)
		for _, id := range ids {
			if u, ok := early.streams[id]; ok {
				u.oldest = cs.base
				early.streams[id] = u
			}
		}
		got, err := fw.settler(1, flushRanged).unflushedRefs(ctx, chainF, &early, ids)
		if err != nil {
			t.Fatalf("seed %d: ranged from the flushed cursor: %v", seed, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: ranged from the flushed cursor: %d streams, walk %d", seed, len(got), len(want))
		}
	}
	t.Logf("%d objects read by range, %d through their command index, %d command indexes refused", rangedLookups, indexed, refused)
	if indexed == 0 || refused == 0 {
		t.Fatal("the command indexes were never read, or a corrupt one never refused")
	}
}

// TestRangedFlushOfOneStreamIsCheaper: a flush of one stream over a
// window of whole runs not cached (budget 1) reads a few ranged GETs per
// run and a small part of the bytes the walk fetches whole; the step's
// choice (rangedFlush) takes the lookups for it and the walk for many.
func TestRangedFlushOfOneStreamIsCheaper(t *testing.T) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	const runs, streams = 6, 20000
	fw := randomFlushWindow(t, rng, runs, streams, 0.9)
	fw.key.flushed = metastore.Cursor{Epoch: 1}
	walk := fw.settler(1, flushAuto)
	cs, err := fw.settler(-1, flushWalk).buildState(ctx, chainF, fw.key)
	if err != nil {
		t.Fatal(err)
	}
	var id format.StreamID
	for x, u := range cs.streams {
		if u.oldest == 0 {
			id = x
			break
		}
	}
	ids := []format.StreamID{id}
	if !walk.rangedFlush(cs, 1) || walk.rangedFlush(cs, len(cs.streams)/2) {
		t.Fatalf("rangedFlush of 1 or %d of %d streams: want the lookups for one, the walk for half", len(cs.streams)/2, len(cs.streams))
	}
	walk.flushPath = flushWalk
	want, err := walk.unflushedRefs(ctx, chainF, cs, ids)
	if err != nil {
		t.Fatal(err)
	}
	ranged := fw.settler(1, flushAuto)
	got, err := ranged.unflushedRefs(ctx, chainF, cs, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || len(want[id]) == 0 {
		t.Fatalf("ranged %v, walk %v", got, want)
	}
	ws, rs := walk.window.Stats(), ranged.window.Stats()
	t.Logf("walk: %d whole GETs, %d bytes; ranged: %d objects, %d GETs, %d bytes", ws.Gets, ws.GetBytes, rs.Ranged, rs.RangedGets, rs.RangedBytes)
	if rs.Gets != 0 || rs.Ranged == 0 || rs.RangedBytes*10 > ws.GetBytes {
		t.Fatalf("ranged path: %d whole GETs, %d objects by range, %d bytes (walk %d): want no whole GET and under a tenth of the walk's bytes", rs.Gets, rs.Ranged, rs.RangedBytes, ws.GetBytes)
	}
}

// randomStreamIDs is up to n distinct random stream ids, sorted.
func randomStreamIDs(rng *rand.Rand, n int) []format.StreamID {
	ids := make([]format.StreamID, n)
	for i := range ids {
		for j := range ids[i] {
			ids[i][j] = byte(rng.IntN(256))
		}
	}
	slices.SortFunc(ids, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(ids)
}
