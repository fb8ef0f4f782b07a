package settle

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// randomRuns is n consecutive level-1 runs of one epoch over `streams`
// streams: each stream in a run with probability 1/2, as a marker (its
// flushed seqs) one time in four, else a packed entry; seqs and
// timestamps increase per stream.
func randomRuns(rng *rand.Rand, n, streams int) []*format.PassIndex {
	next := make([]uint64, streams)
	flushedTo := make([]uint64, streams) // the first seq not behind a marker
	runs := make([]*format.PassIndex, n)
	for r := range runs {
		run := &format.PassIndex{Epoch: 1, FirstSlot: uint64(3 * r), EndSlot: uint64(3*r + 3)}
		for i := range streams {
			if rng.IntN(2) == 0 {
				continue
			}
			var id format.StreamID
			id[0] = byte(i)
			ts := int64(1000 + 10*r)
			if rng.IntN(4) == 0 && next[i] > flushedTo[i] {
				run.Streams = append(run.Streams, format.PassStream{Stream: id, FirstSeq: flushedTo[i], LastSeq: next[i] - 1, FirstTsMs: ts, LastTsMs: ts})
				flushedTo[i] = next[i]
				continue
			}
			k := uint64(1 + rng.IntN(3))
			run.Streams = append(run.Streams, format.PassStream{Stream: id, FirstSeq: next[i], LastSeq: next[i] + k - 1, FirstTsMs: ts, LastTsMs: ts + 5,
				Bytes: int64(50 * k), Segments: []format.PassSegment{{Slot: run.FirstSlot, FirstSeq: next[i], Count: uint32(k), Length: uint32(60 * k)}}})
			next[i] += k
		}
		runs[r] = run
	}
	return runs
}

// mergedOf is the merged run of group as makeMerged resolves it (its
// entries; no packs): per stream its last marker, then one packed entry
// for its packed entries after it.
func mergedOf(group []*format.PassIndex) *format.PassIndex {
	first, last := group[0], group[len(group)-1]
	m := &format.PassIndex{Epoch: first.Epoch, FirstSlot: first.FirstSlot, EndSlot: last.EndSlot, Merged: true}
	byID := map[format.StreamID]*mergedStream{}
	for _, r := range group {
		for i := range r.Streams {
			e := &r.Streams[i]
			ms := byID[e.Stream]
			if ms == nil {
				ms = &mergedStream{}
				byID[e.Stream] = ms
			}
			if e.Marker() {
				ms.marker, ms.ents = e, nil
				continue
			}
			ms.ents = append(ms.ents, e)
		}
	}
	ids := slices.SortedFunc(func(yield func(format.StreamID) bool) {
		for id := range byID {
			if !yield(id) {
				return
			}
		}
	}, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		ms := byID[id]
		if ms.marker != nil {
			m.Streams = append(m.Streams, *ms.marker)
		}
		if len(ms.ents) == 0 {
			continue
		}
		e := format.PassStream{Stream: id, FirstSeq: ms.ents[0].FirstSeq, LastSeq: ms.ents[len(ms.ents)-1].LastSeq,
			FirstTsMs: ms.ents[0].FirstTsMs, LastTsMs: ms.ents[len(ms.ents)-1].LastTsMs}
		for _, pe := range ms.ents {
			e.Bytes += pe.Bytes
		}
		e.Segments = []format.PassSegment{{Slot: m.FirstSlot, FirstSeq: e.FirstSeq, Count: uint32(e.LastSeq - e.FirstSeq + 1), Length: 1}}
		m.Streams = append(m.Streams, e)
	}
	return m
}

// TestRemapMergedEqualsFold: the kept state remapped to a merged run
// (remapMerged) equals the state folded from the walk that reads the
// merged run in place of its group, for random runs, groups anywhere in
// the window (runs before and after them), and a merged cursor before
// the group; and a group the remap cannot take (a run of the state
// between the merged cursor and the group) is refused, the state
// unchanged.
func TestRemapMergedEqualsFold(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 5))
		n := 2 + rng.IntN(8)
		runs := randomRuns(rng, n, 1+rng.IntN(12))
		a := rng.IntN(n - 1)         // the group's first run
		b := a + 2 + rng.IntN(n-a-1) // its end (at least two runs)
		b = min(b, n)
		merged := metastore.Cursor{Epoch: 1}
		if a > 0 && rng.IntN(2) == 0 {
			// The head's Merged at a (runs below it read as they are).
			merged.Slot = runs[a].FirstSlot
		}
		key := stateKey{flushed: metastore.Cursor{Epoch: 1}, merged: merged, settled: metastore.Cursor{Epoch: 1, Slot: runs[n-1].EndSlot}}
		kept := newChainState(key)
		for _, r := range runs {
			kept.fold(r)
		}
		m := mergedOf(runs[a:b])
		want := newChainState(key)
		for _, r := range append(append(slices.Clone(runs[:a]), m), runs[b:]...) {
			want.fold(r)
		}
		want.key.merged = metastore.Cursor{Epoch: 1, Slot: m.EndSlot}
		ok := kept.remapMerged(m)
		if a > 0 && merged.Slot == 0 {
			// Runs of the state at or past Merged before the group: the new
			// walk might read another merged run there. Refused.
			if ok {
				t.Fatalf("seed %d: remapped a group at run %d with Merged at 0", seed, a)
			}
			continue
		}
		if !ok {
			t.Fatalf("seed %d: group %d-%d of %d runs not remapped", seed, a, b, n)
		}
		if err := kept.equal(want); err != nil {
			t.Fatalf("seed %d: group %d-%d of %d runs: %v", seed, a, b, n, err)
		}
	}
}

// TestStateIndex: the index of the kept state (issue 17) stays its
// streams' (checkIndex: counts, lists, compaction) through random runs
// folded and the runs below the first held one dropped (not past it:
// refused), and answers as
// a visit of every stream does: the aged streams (aged) and the flushed
// cursor (firstHeld).
func TestStateIndex(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 17))
		n, streams := 2+rng.IntN(30), 1+rng.IntN(200)
		runs := randomRuns(rng, n, streams)
		end := metastore.Cursor{Epoch: 1, Slot: runs[n-1].EndSlot}
		cs := newChainState(stateKey{})
		for ri, r := range runs {
			cs.fold(r)
			if err := cs.checkIndex(); err != nil {
				t.Fatalf("seed %d: run %d folded: %v", seed, ri, err)
			}
			// The flushed cursor: the oldest run of any stream.
			want := end
			for _, u := range cs.streams {
				if at := cs.run(u.oldest).at; at.Less(want) {
					want = at
				}
			}
			if got := cs.firstHeld(end); got != want {
				t.Fatalf("seed %d: run %d: first held run %s, the streams' oldest %s", seed, ri, got, want)
			}
			// The aged streams at a random age.
			now, ageMs := int64(1000+10*ri+5), int64(rng.IntN(10*(ri+2)))
			var got, scan []format.StreamID
			cs.aged(now, ageMs, func(id format.StreamID) { got = append(got, id) })
			for id, u := range cs.streams {
				if now-cs.run(u.oldest).time >= ageMs {
					scan = append(scan, id)
				}
			}
			cmp := func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) }
			slices.SortFunc(got, cmp)
			slices.SortFunc(scan, cmp)
			if !slices.Equal(got, scan) {
				t.Fatalf("seed %d: run %d: aged %d streams, %d by a visit of every stream", seed, ri, len(got), len(scan))
			}
			if want != end {
				// Past a run still held: refused, the state unchanged.
				if err := cs.dropBelow(end); !errors.Is(err, ErrMismatch) {
					t.Fatalf("seed %d: run %d: dropped below %s, runs held from %s: %v", seed, ri, end, want, err)
				}
			}
			if rng.IntN(3) == 0 {
				if err := cs.dropBelow(want); err != nil {
					t.Fatalf("seed %d: run %d: %v", seed, ri, err)
				}
				if err := cs.checkIndex(); err != nil {
					t.Fatalf("seed %d: run %d: dropped below %s: %v", seed, ri, want, err)
				}
			}
		}
	}
}
