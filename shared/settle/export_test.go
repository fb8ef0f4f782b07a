package settle

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// SetMergeChunk sets the merge's ranged GET size (tests: small chunks
// exercise the read ahead) and returns the function that restores it.
func SetMergeChunk(n int64) (restore func()) {
	old := mergeChunk
	mergeChunk = n
	return func() { mergeChunk = old }
}

// SetCommandIndexMin sets the command table size above which settle
// writes a run's command index (tests: -1 writes one for every version 2
// run) and returns the function that restores it.
func SetCommandIndexMin(n int64) (restore func()) {
	old := cmdxMinTable
	cmdxMinTable = n
	return func() { cmdxMinTable = old }
}

// SetScratch makes every step of s hold the live runs and compute the
// unflushed state from them (the settle step before issue 17), its
// decision and flushed cursor visiting every stream (not the state's
// index): the reference the kept state is tested against.
func (s *Settler) SetScratch(on bool) { s.scratch = on }

// CheckState compares the unflushed state s keeps for chain c (if any)
// with the state rebuilt from scratch for its key, both by holding the
// live runs (unflushedOf) and by streaming them (buildState). It reports
// whether s kept a state; no step of s may run meanwhile.
func (s *Settler) CheckState(ctx context.Context, c metastore.ChainID) (bool, error) {
	s.stateMu.Lock()
	cs := s.states[c]
	s.stateMu.Unlock()
	if cs == nil {
		return false, nil
	}
	ref, _, err := s.scratchState(ctx, c, cs.key)
	if err != nil {
		return true, err
	}
	if err := cs.equal(ref); err != nil {
		return true, fmt.Errorf("kept state against the runs held: %w", err)
	}
	built, err := s.buildState(ctx, c, cs.key)
	if err != nil {
		return true, err
	}
	if err := built.equal(ref); err != nil {
		return true, fmt.Errorf("streamed rebuild against the runs held: %w", err)
	}
	return true, nil
}

// SetFlushPath forces how the steps of s get the flushed streams'
// unflushed entries: "walk" (one walk of the live runs), "ranged" (a
// per-stream lookup each) or "" (by the count of streams).
func (s *Settler) SetFlushPath(path string) {
	switch path {
	case "walk":
		s.flushPath = flushWalk
	case "ranged":
		s.flushPath = flushRanged
	default:
		s.flushPath = flushAuto
	}
}

// PeakOf and HeapObjects are the benchmarks' heap sampler
// (peak_bench_test.go), for the external benchmarks.
func PeakOf() func() uint64 { return peakOf() }
func HeapObjects() uint64   { return heapObjects() }

// SetMergeIndexChunk sets how many stream table entries of an input run
// a merge reads at once, until restore.
func SetMergeIndexChunk(n uint32) (restore func()) {
	old := mergeIndexChunk
	mergeIndexChunk = n
	return func() { mergeIndexChunk = old }
}

// SetDefaultMaxAgeFlushes sets the bound on a step's flushes by age of
// settlers that leave MaxAgeFlushes 0, until restore.
func SetDefaultMaxAgeFlushes(n int) (restore func()) {
	old := defaultMaxAgeFlushes
	defaultMaxAgeFlushes = n
	return func() { defaultMaxAgeFlushes = old }
}

// SetCoalesce turns the coalesced flush reads of s's steps on (the
// default) or off (every piece read by its flush, as before them).
func (s *Settler) SetCoalesce(on bool) { s.noCoalesce = !on }

// merge is a merge on its own, for tests and benchmarks: mergeAt from
// the stored head, then its merged cursor committed (MoveCursors, the
// settled and flushed cursors as conditions). It reports whether it
// merged.
func (s *Settler) merge(ctx context.Context, c metastore.ChainID, res *Result) (bool, error) {
	h, err := s.Meta.GetHead(ctx, c)
	if err != nil {
		return false, err
	}
	end, err := s.mergeAt(ctx, c, h, res)
	if err != nil || end == h.Merged {
		return false, err
	}
	return true, s.Meta.MoveCursors(ctx, c, []metastore.CursorMove{
		{Kind: metastore.Settled, From: h.Settled, To: h.Settled},
		{Kind: metastore.Flushed, From: h.Flushed, To: h.Flushed},
		{Kind: metastore.Merged, From: h.Merged, To: end},
	})
}

// CountSegmentChecks counts the segments whose CRC settle checks from now
// on (format.ParseSegment) and returns the count's reader and the function
// that stops counting.
func CountSegmentChecks() (n func() int64, restore func()) {
	var c atomic.Int64
	old := parseSegment
	parseSegment = func(b []byte) (format.SegmentInfo, []byte, error) {
		c.Add(1)
		return old(b)
	}
	return c.Load, func() { parseSegment = old }
}
