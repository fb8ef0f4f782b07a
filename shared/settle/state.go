package settle

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
)

// The unflushed state of a chain, kept across steps (issue 17): what a
// step's plan and flushed cursor depend on, compact and independent of
// the decoded runs.
//
// It is a function of the walk of the live runs of a head, [Flushed,
// Settled) with merged runs below Merged (passindex.Window.HeadRuns):
// its key. Objects are immutable and their keys determine their content,
// so the state of a key is the same in every copy; a settler keeps one
// per chain and uses it only for a step whose head has exactly its key,
// else it rebuilds it by streaming the runs (VisitHeadRuns: the peak is
// the state, the window cache's budget and one run). A step updates it
// with its own run (markers remove streams, packed entries add) and drops
// the runs below its new flushed cursor. An index of the streams by the
// run of their oldest entry (per live run, a count and a list) makes a
// step's state work proportional to the step, not to the active streams:
// the age check visits the streams of the runs that are FlushAge old
// only, the new flushed cursor is the first run whose count is not zero,
// and dropping runs checks their lists only. So a step costs O(the
// step's entries + the aged runs' streams + live runs), not O(entries of
// the window) nor O(active streams). A merge that moves the Merged cursor
// from the state's key remaps it: the group's level-1 runs replaced by
// the merged run (remapMerged; O(the streams whose oldest entry is in the
// group or after it), once per merge).

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
	// The index of the streams by their oldest run, parallel to runs:
	// held[i] is the number of streams whose oldest entry is in runs[i];
	// firsts[i] lists them, and, cleaned lazily, streams that were
	// removed since (a marker) or have their oldest entry in a later run
	// (removed and added again): an id of firsts[i] is one of them only
	// when its streamState says so (isFirst). A list is compacted when a
	// removal leaves it more than twice (plus firstsSlack) as long as its
	// count, so the lists hold O(active streams + live runs) ids.
	held   []int
	firsts [][]format.StreamID
}

// firstsSlack is how many stale ids a list of firsts may hold beyond
// its count before a removal compacts it.
const firstsSlack = 16

func newChainState(key stateKey) *chainState {
	return &chainState{key: key, streams: map[format.StreamID]streamState{}}
}

// run is the run of ordinal o.
func (cs *chainState) run(o int) liveRun { return cs.runs[o-cs.base] }

// isFirst reports whether stream id has its oldest entry in the run of
// ordinal o (an id of that run's list may not: see firsts).
func (cs *chainState) isFirst(id format.StreamID, o int) bool {
	u, ok := cs.streams[id]
	return ok && u.oldest == o
}

// add makes id, not in the state, a stream whose oldest entry is u's,
// indexed under its run.
func (cs *chainState) add(id format.StreamID, u streamState) {
	cs.streams[id] = u
	i := u.oldest - cs.base
	cs.held[i]++
	cs.firsts[i] = append(cs.firsts[i], id)
}

// remove forgets stream id (a marker: its entries are behind a ref), if
// it is in the state, and compacts its run's list when it is mostly
// stale.
func (cs *chainState) remove(id format.StreamID) {
	u, ok := cs.streams[id]
	if !ok {
		return
	}
	delete(cs.streams, id)
	i := u.oldest - cs.base
	cs.held[i]--
	if len(cs.firsts[i]) > 2*cs.held[i]+firstsSlack {
		cs.firsts[i] = slices.DeleteFunc(cs.firsts[i], func(id format.StreamID) bool { return !cs.isFirst(id, u.oldest) })
	}
}

// fold adds run r, the next of the walk, to the state.
func (cs *chainState) fold(r *format.PassIndex) {
	o := cs.base + len(cs.runs)
	cs.runs = append(cs.runs, liveRun{at: metastore.Cursor{Epoch: r.Epoch, Slot: r.FirstSlot}})
	cs.held = append(cs.held, 0)
	cs.firsts = append(cs.firsts, nil)
	var t int64
	for i := range r.Streams {
		e := &r.Streams[i]
		t = max(t, e.LastTsMs)
		if e.Marker() {
			cs.remove(e.Stream)
			continue
		}
		u, ok := cs.streams[e.Stream]
		if !ok {
			cs.add(e.Stream, streamState{firstSeq: e.FirstSeq, lastSeq: e.LastSeq, firstTs: e.FirstTsMs, lastTs: e.LastTsMs, bytes: e.Bytes, oldest: o})
			continue
		}
		u.lastSeq, u.lastTs = e.LastSeq, e.LastTsMs
		u.bytes += e.Bytes
		cs.streams[e.Stream] = u
	}
	cs.runs[len(cs.runs)-1].time = t
}

// firstHeld is where the first run holding a stream's oldest entry
// starts (the first whose count is not zero), or end when none does: the
// flushed cursor of the state.
func (cs *chainState) firstHeld(end metastore.Cursor) metastore.Cursor {
	for i, n := range cs.held {
		if n > 0 {
			return cs.runs[i].at
		}
	}
	return end
}

// aged calls yield for each stream whose oldest entry is in a run whose
// time is at least ageMs older than now, in no order: the lists of those
// runs only. (A stream is yielded once unless a run removed it and added
// it again: its list has it twice.)
func (cs *chainState) aged(now, ageMs int64, yield func(format.StreamID)) {
	for i, r := range cs.runs {
		if cs.held[i] == 0 || now-r.time < ageMs {
			continue
		}
		for _, id := range cs.firsts[i] {
			if cs.isFirst(id, cs.base+i) {
				yield(id)
			}
		}
	}
}

// dropBelow forgets the runs that start below flushed; no stream may
// still have its oldest entry in one (the caller's flushed cursor is the
// first run still holding an unflushed entry): their lists are checked.
func (cs *chainState) dropBelow(flushed metastore.Cursor) error {
	n := 0
	for n < len(cs.runs) && cs.runs[n].at.Less(flushed) {
		n++
	}
	if n == 0 {
		return nil
	}
	for i := range n {
		for _, id := range cs.firsts[i] {
			if cs.isFirst(id, cs.base+i) {
				return fmt.Errorf("stream %s still has an entry in the run at %s, below the flushed cursor %s: %w", id, cs.runs[i].at, flushed, ErrMismatch)
			}
		}
		if cs.held[i] != 0 {
			return fmt.Errorf("the run at %s below the flushed cursor %s counts %d streams, lists none: %w", cs.runs[i].at, flushed, cs.held[i], ErrMismatch)
		}
	}
	cs.runs = slices.Delete(cs.runs, 0, n)
	cs.held = slices.Delete(cs.held, 0, n)
	cs.firsts = slices.Delete(cs.firsts, 0, n)
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
	// The streams whose oldest entry is in the group move to m's list;
	// those after it, to their run's new ordinal: the lists from i on,
	// their stale ids dropped from the group's.
	lo, hi := cs.base+i, cs.base+j
	var group []format.StreamID
	held := 0
	for k := i; k < j; k++ {
		for _, id := range cs.firsts[k] {
			if u := cs.streams[id]; cs.isFirst(id, cs.base+k) {
				u.oldest = lo
				cs.streams[id] = u
				group = append(group, id)
			}
		}
		held += cs.held[k]
	}
	if d := hi - lo - 1; d > 0 {
		for k := j; k < len(cs.runs); k++ {
			for _, id := range cs.firsts[k] {
				// A stream is moved once: its new ordinal is below k.
				if u := cs.streams[id]; cs.isFirst(id, cs.base+k) {
					u.oldest -= d
					cs.streams[id] = u
				}
			}
		}
	}
	cs.runs = slices.Replace(cs.runs, i, j, liveRun{at: a, time: t})
	cs.held = slices.Replace(cs.held, i, j, held)
	cs.firsts = slices.Replace(cs.firsts, i, j, group)
	cs.key.merged = end
	return true
}

// checkIndex reports whether the index of cs is its streams': per run,
// the count of the streams whose oldest entry is in it, each of them in
// its list, and the list at most twice its count plus firstsSlack long
// (for tests).
func (cs *chainState) checkIndex() error {
	if len(cs.held) != len(cs.runs) || len(cs.firsts) != len(cs.runs) {
		return fmt.Errorf("%d runs, %d counts, %d lists", len(cs.runs), len(cs.held), len(cs.firsts))
	}
	held := make([]int, len(cs.runs))
	for id, u := range cs.streams {
		i := u.oldest - cs.base
		if i < 0 || i >= len(cs.runs) {
			return fmt.Errorf("stream %s: oldest run %d, runs %d-%d", id, u.oldest, cs.base, cs.base+len(cs.runs))
		}
		held[i]++
	}
	for i, l := range cs.firsts {
		seen := map[format.StreamID]bool{}
		for _, id := range l {
			if cs.isFirst(id, cs.base+i) {
				seen[id] = true
			}
		}
		n := len(seen)
		if cs.held[i] != held[i] || n != held[i] {
			return fmt.Errorf("the run at %s holds the oldest entry of %d streams, counts %d, lists %d", cs.runs[i].at, held[i], cs.held[i], n)
		}
		if len(l) > 2*held[i]+firstsSlack {
			return fmt.Errorf("the run at %s lists %d ids for %d streams: not compacted", cs.runs[i].at, len(l), held[i])
		}
	}
	return nil
}

// equal reports whether cs and o hold the same state (for tests): the
// same runs and the same streams, each with its oldest entry in the same
// run, and each with an index consistent with its streams (checkIndex).
func (cs *chainState) equal(o *chainState) error {
	if err := cs.checkIndex(); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if err := o.checkIndex(); err != nil {
		return fmt.Errorf("other's index: %w", err)
	}
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
	cs.held, cs.firsts = make([]int, len(runs)), make([][]format.StreamID, len(runs))
	for id, u := range old {
		first, last := u.ents[0], u.ents[len(u.ents)-1]
		cs.add(id, streamState{bytes: u.bytes, firstSeq: first.FirstSeq, lastSeq: last.LastSeq,
			firstTs: first.FirstTsMs, lastTs: last.LastTsMs, oldest: u.oldest})
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
			out[e.Stream] = append(out[e.Stream], passindex.RunRef(c, r, e))
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
