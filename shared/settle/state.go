package settle

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// The unflushed state of a chain, kept across steps (issue 17): what a
// step's plan and flushed cursor depend on, compact and independent of
// the decoded runs.
//
// It is a function of the walk of the live runs of a head, [Flushed,
// Settled) with merged runs below Merged (absorb.IndexWindow.HeadRuns):
// its key. Objects are immutable and their keys determine their content,
// so the state of a key is the same in every copy; a settler keeps one
// per chain and uses it only for a step whose head has exactly its key,
// else it rebuilds it by streaming the runs (VisitHeadRuns: the peak is
// the state, the window cache's budget and one run). A step updates it
// with its own run (markers remove streams, packed entries add) and drops
// the runs below its new flushed cursor, so a step's state work is
// O(active streams + the step's entries), not O(entries of the window). A
// merge that moves the Merged cursor from the state's key remaps it: the
// group's level-1 runs replaced by the merged run (remapMerged).

// stateKey is the head a state is valid for.
type stateKey struct {
	flushed, merged, settled metastore.Cursor
}

// liveRun is one run of a state's walk: where it starts and its time (the
// largest LastTsMs of its entries).
type liveRun struct {
	at   metastore.Cursor
	time int64
}

// streamState is one stream's unflushed entries (its packed entries in
// the live runs after its last marker), summed up.
type streamState struct {
	bytes             int64
	firstSeq, lastSeq uint64 // of the first and the last entry
	firstTs, lastTs   int64
	oldest            int // ordinal of the run of its first entry
}

// chainState is the unflushed state of one chain at key.
type chainState struct {
	key     stateKey
	runs    []liveRun // in walk order; runs[i] has ordinal base+i
	base    int
	streams map[format.StreamID]streamState
}

func newChainState(key stateKey) *chainState {
	return &chainState{key: key, streams: map[format.StreamID]streamState{}}
}

// run is the run of ordinal o.
func (cs *chainState) run(o int) liveRun { return cs.runs[o-cs.base] }

// fold adds run r, the next of the walk, to the state.
func (cs *chainState) fold(r *format.PassIndex) {
	o := cs.base + len(cs.runs)
	var t int64
	for i := range r.Streams {
		e := &r.Streams[i]
		t = max(t, e.LastTsMs)
		if e.Marker() {
			delete(cs.streams, e.Stream)
			continue
		}
		u, ok := cs.streams[e.Stream]
		if !ok {
			u = streamState{firstSeq: e.FirstSeq, firstTs: e.FirstTsMs, oldest: o}
		}
		u.lastSeq, u.lastTs = e.LastSeq, e.LastTsMs
		u.bytes += e.Bytes
		cs.streams[e.Stream] = u
	}
	cs.runs = append(cs.runs, liveRun{at: metastore.Cursor{Epoch: r.Epoch, Slot: r.FirstSlot}, time: t})
}

// dropBelow forgets the runs that start below flushed; no stream may
// still have its oldest entry in one (the caller's flushed cursor is the
// first run still holding an unflushed entry).
func (cs *chainState) dropBelow(flushed metastore.Cursor) error {
	n := 0
	for n < len(cs.runs) && cs.runs[n].at.Less(flushed) {
		n++
	}
	if n == 0 {
		return nil
	}
	for id, u := range cs.streams {
		if u.oldest < cs.base+n {
			return fmt.Errorf("stream %s still has an entry in the run at %s, below the flushed cursor %s: %w", id, cs.run(u.oldest).at, flushed, ErrMismatch)
		}
	}
	cs.runs = slices.Delete(cs.runs, 0, n)
	cs.base += n
	return nil
}

// remapMerged turns cs into the state of the head whose Merged cursor is
// merged run m's end (a merge after the step that kept cs): the level-1
// runs m covers are replaced by m, whose time is its newest entry's, and
// the streams whose oldest entry was in one of them have it in m. Their
// sums are unchanged: a merged run holds, per stream, its last marker of
// the group and one packed entry with the bytes, first and last seq and
// timestamps of its packed entries after it. It reports false, leaving
// cs as it was, when the walk of the new head might differ otherwise than
// by m: m not starting at a run of cs at or past its Merged cursor, not
// ending at one (or at its settled cursor), or a run of cs between its
// Merged cursor and m's start (the new walk would look for a merged run
// there).
func (cs *chainState) remapMerged(m *format.PassIndex) bool {
	a, end := metastore.Cursor{Epoch: m.Epoch, Slot: m.FirstSlot}, metastore.Cursor{Epoch: m.Epoch, Slot: m.EndSlot}
	if a.Less(cs.key.merged) || !cs.key.merged.Less(end) {
		return false
	}
	i := 0
	for i < len(cs.runs) && cs.runs[i].at.Less(a) {
		if !cs.runs[i].at.Less(cs.key.merged) {
			return false
		}
		i++
	}
	if i == len(cs.runs) || cs.runs[i].at != a {
		return false
	}
	j := i
	for j < len(cs.runs) && cs.runs[j].at.Less(end) {
		j++
	}
	if (j < len(cs.runs) && cs.runs[j].at != end) || (j == len(cs.runs) && end != cs.key.settled) {
		return false
	}
	var t int64
	for k := range m.Streams {
		t = max(t, m.Streams[k].LastTsMs)
	}
	lo, hi := cs.base+i, cs.base+j
	cs.runs = slices.Replace(cs.runs, i, j, liveRun{at: a, time: t})
	for id, u := range cs.streams {
		switch {
		case u.oldest >= hi:
			u.oldest -= hi - lo - 1
		case u.oldest >= lo:
			u.oldest = lo
		default:
			continue
		}
		cs.streams[id] = u
	}
	cs.key.merged = end
	return true
}

// equal reports whether cs and o hold the same state (for tests): the
// same runs and the same streams, each with its oldest entry in the same
// run.
func (cs *chainState) equal(o *chainState) error {
	if cs.key != o.key {
		return fmt.Errorf("key %+v, other %+v", cs.key, o.key)
	}
	if !slices.Equal(cs.runs, o.runs) {
		return fmt.Errorf("runs %v, other %v", cs.runs, o.runs)
	}
	if len(cs.streams) != len(o.streams) {
		return fmt.Errorf("%d streams, other %d", len(cs.streams), len(o.streams))
	}
	for id, u := range cs.streams {
		v, ok := o.streams[id]
		if !ok {
			return fmt.Errorf("stream %s not in the other", id)
		}
		u.oldest -= cs.base
		v.oldest -= o.base
		if u != v {
			return fmt.Errorf("stream %s: %+v, other %+v (relative run ordinals)", id, u, v)
		}
	}
	return nil
}

// buildState folds the live runs of key into a new state, one run at a
// time.
func (s *Settler) buildState(ctx context.Context, c metastore.ChainID, key stateKey) (*chainState, error) {
	cs := newChainState(key)
	err := s.window.VisitHeadRuns(ctx, c, metastore.Head{Flushed: key.flushed, Merged: key.merged, Settled: key.settled}, func(r *format.PassIndex) error {
		cs.fold(r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("live runs %s-%s: %w", key.flushed, key.settled, err)
	}
	return cs, nil
}

// scratchState is the state of key from the live runs held at once
// (unflushedOf: the settle step before issue 17), with the runs, for the
// flushes: the reference the kept state is tested against (Settler.scratch).
func (s *Settler) scratchState(ctx context.Context, c metastore.ChainID, key stateKey) (*chainState, map[format.StreamID]*unflushed, error) {
	runs, err := s.window.HeadRuns(ctx, c, metastore.Head{Flushed: key.flushed, Merged: key.merged, Settled: key.settled})
	if err != nil {
		return nil, nil, fmt.Errorf("live runs %s-%s: %w", key.flushed, key.settled, err)
	}
	old, times := unflushedOf(c, runs)
	cs := newChainState(key)
	for i, r := range runs {
		cs.runs = append(cs.runs, liveRun{at: metastore.Cursor{Epoch: r.Epoch, Slot: r.FirstSlot}, time: times[i]})
	}
	for id, u := range old {
		first, last := u.ents[0], u.ents[len(u.ents)-1]
		cs.streams[id] = streamState{bytes: u.bytes, firstSeq: first.FirstSeq, lastSeq: last.LastSeq,
			firstTs: first.FirstTsMs, lastTs: last.LastTsMs, oldest: u.oldest}
	}
	return cs, old, nil
}

// takeState returns the kept state of chain c if it is of key (and no
// other step holds it), else nil. The caller owns it until putState.
func (s *Settler) takeState(c metastore.ChainID, key stateKey) *chainState {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	cs := s.states[c]
	delete(s.states, c)
	if cs == nil || cs.key != key {
		return nil
	}
	return cs
}

// putState keeps cs as chain c's state.
func (s *Settler) putState(c metastore.ChainID, cs *chainState) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.states == nil {
		s.states = map[metastore.ChainID]*chainState{}
	}
	s.states[c] = cs
}

// unflushedRefs is, for each stream of ids (sorted) that has unflushed
// entries in cs, those entries as refs (settled locations in packs), in
// seq order: for few streams a per-stream lookup each (unflushedRanged),
// else one walk of the live runs of cs's key from the oldest run of any
// of them, through the window's cache (one run at a time), each run
// searched for the streams, never held together.
func (s *Settler) unflushedRefs(ctx context.Context, c metastore.ChainID, cs *chainState, ids []format.StreamID) (map[format.StreamID][]metastore.Ref, error) {
	out := map[format.StreamID][]metastore.Ref{}
	var want []format.StreamID
	from := cs.key.settled
	for _, id := range ids {
		if u, ok := cs.streams[id]; ok {
			want = append(want, id)
			if at := cs.run(u.oldest).at; at.Less(from) {
				from = at
			}
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	if s.rangedFlush(cs, len(want)) {
		// Few streams: a per-stream lookup each, ranged past the window
		// budget (flushranged.go).
		return s.unflushedRanged(ctx, c, cs, want)
	}
	h := metastore.Head{Flushed: from, Merged: cs.key.merged, Settled: cs.key.settled}
	err := s.window.VisitHeadRuns(ctx, c, h, func(r *format.PassIndex) error {
		add := func(e *format.PassStream) {
			if e.Marker() {
				delete(out, e.Stream)
				return
			}
			out[e.Stream] = append(out[e.Stream], absorb.RunRef(c, r, e))
		}
		if len(want)*16 < len(r.Streams) {
			// Few streams: a binary search each.
			for _, id := range want {
				ents := r.FindAll(id)
				for i := range ents {
					add(&ents[i])
				}
			}
			return nil
		}
		// Many: one merge of the sorted ids with the run's sorted entries.
		j := 0
		for i := range r.Streams {
			e := &r.Streams[i]
			for j < len(want) && bytes.Compare(want[j][:], e.Stream[:]) < 0 {
				j++
			}
			if j == len(want) {
				break
			}
			if want[j] == e.Stream {
				add(e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("unflushed entries %s-%s: %w", from, cs.key.settled, err)
	}
	return out, nil
}
