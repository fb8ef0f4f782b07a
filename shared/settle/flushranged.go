package settle

import (
	"context"
	"fmt"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
)

// Flushes past the window budget (issue 17; design 014, "Left"). A step
// that flushes few streams gets each one's unflushed entries by a
// per-stream lookup of the live runs from the run of its oldest
// unflushed entry (passindex.Window.StreamRuns): runs cached, or with
// room in the cache, are read whole, the others by range (a header, a
// block of the stream table, the stream's segments and marks; then each
// version 2 run's command table once for all the streams), so a byte
// flush of one stream that reaches back hours reads a few ranged GETs
// per run, not every run whole. A step that flushes many (the hourly age
// flush) keeps the one walk of the live runs (unflushedRefs). Both give
// the same refs: the lookup applies markers as the walk does (a marker
// drops every entry before it), and every entry keeps its command state
// (the flush splits a stream's parts into groups, each keeping the
// latest state of its own parts: lastCommands; so every part's state is
// needed, not only the last one's).

// flushPath is how a step gets the flushed streams' unflushed entries.
type flushPath uint8

const (
	flushAuto   flushPath = iota // by the count of streams (rangedFlush)
	flushWalk                    // always the walk (tests)
	flushRanged                  // always the per-stream lookups (tests)
)

// rangedFlushRatio: a step takes the per-stream lookups when the streams
// it flushes, times rangedFlushRatio, are at most the chain's unflushed
// streams (a proxy for the streams of a run, whose object is about 104
// bytes a stream, plus its command table). A lookup of an object by
// range reads about 64 KiB (a block of the stream table:
// format.RangedBlockBytes) and the stream's segments in about 2 GETs,
// plus the object's header and command table once for all the streams; the walk reads every object whole in
// one GET. Measured (BenchmarkFlushPastBudget; docs/performance/settle.md,
// "Flushes past the window budget"), 24 runs at 100,000 streams not
// cached: the walk 24 GETs and 251 MB (360 MB with command state on
// every stream); by range one stream 96 GETs and 2.7 MB (112 MB), 100
// streams 4,848 GETs and 144 MB (256 MB). So bytes break even near a
// flush of streams/600; at 2048 the lookups read at most about a third
// of the walk's bytes (half, with command state on every stream), for up
// to 100 times its GETs (at $0.0004 per 1,000, a tenth of a cent).
const rangedFlushRatio = 2048

// rangedFlushParallel bounds the streams whose lookups run at once (each
// keeps up to the window's RangedParallel ranged reads in flight).
const rangedFlushParallel = 4

// rangedFlush reports whether a step that flushes n streams with
// unflushed entries in cs takes the per-stream lookups.
func (s *Settler) rangedFlush(cs *chainState, n int) bool {
	switch s.flushPath {
	case flushWalk:
		return false
	case flushRanged:
		return true
	}
	return n*rangedFlushRatio <= len(cs.streams)
}

// unflushedRanged is unflushedRefs by per-stream lookups: for each
// stream of want (each with unflushed entries in cs), its entries in the
// live runs of cs's key from the run of its oldest unflushed entry, a
// marker dropping what came before it, as the walk does.
func (s *Settler) unflushedRanged(ctx context.Context, c metastore.ChainID, cs *chainState, want []format.StreamID) (map[format.StreamID][]metastore.Ref, error) {
	heads := make([]metastore.Head, len(want))
	for i, id := range want {
		heads[i] = metastore.Head{Flushed: cs.run(cs.streams[id].oldest).at, Merged: cs.key.merged, Settled: cs.key.settled}
	}
	found, err := s.window.StreamRuns(ctx, c, heads, want, rangedFlushParallel)
	if err != nil {
		return nil, fmt.Errorf("unflushed entries by stream %s-%s: %w", cs.key.flushed, cs.key.settled, err)
	}
	out := make(map[format.StreamID][]metastore.Ref, len(want))
	for i, runs := range found {
		var refs []metastore.Ref
		for _, r := range runs {
			for j := range r.Entries {
				e := &r.Entries[j]
				if e.Marker() {
					refs = nil // what came before it is behind its ref
					continue
				}
				refs = append(refs, passindex.RunRef(c, r.Run, e))
			}
		}
		if refs != nil {
			out[want[i]] = refs
		}
	}
	return out, nil
}
