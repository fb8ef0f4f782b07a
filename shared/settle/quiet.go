package settle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// quietFlush is the step of a quiet chain (issue 30: "chains with no new
// traffic still settle, flush, trim and finish deletions"; ADR 0057): a
// step with no new passes takes no plan, so the age flush, which a plan
// decides, never comes, and the live runs' records, their packs and the
// deletions that wait for them stay until the chain's next append.
//
// When the settler has a Clock, the chain's head has live runs
// [Flushed, Settled) and the newest record of all of them is at least
// FlushAge older than the clock's now (every stream's oldest entry is
// then FlushAge old: the next plan would flush them all by age), it
// flushes every stream with unflushed entries behind a ref (streamParts,
// SettleRef under the settled cursor, as a plan's flushes) and then
// moves the flushed cursor to Settled: no run below it holds an entry no
// ref holds. It writes no run and no pack: nothing at a determined key
// but settled objects, whose keys name their stream and seqs (their
// bytes are the records'), and refs, whose conditions are on the key
// and the settled cursor. So copies whose clocks differ cannot write two
// versions of one object: one that decides the chain is quiet flushes
// what a copy that does not would flush later, or skips (a ref holds
// the parts); a copy that plans meanwhile (new passes) moves the settled
// cursor, and this step's SettleRefs fail (ErrConflict: the step is
// Lost, the next call starts again). Its cursor move is conditional on the flushed cursor it
// read; it loses to any copy that moved it, and then moves nothing.
//
// Work per call is bounded as the age flush's: streams are visited by
// their oldest run, then id, MaxAgeFlushes at a time, and the call stops
// after the first batch that wrote anything; streams a ref already holds
// cost one ref query each. The cursor moves only when every stream is
// held.
func (s *Settler) quietFlush(ctx context.Context, c metastore.ChainID, res *Result) error {
	if s.Clock == nil {
		return nil
	}
	h, err := s.Meta.GetHead(ctx, c) // finishIdle may have moved it
	if err != nil {
		return fmt.Errorf("quiet flush: %w", err)
	}
	if h.Indexed.IsZero() || !h.Flushed.Less(h.Settled) {
		return nil
	}
	s.initWindow()
	indexed, err := s.window.IndexedFrom(ctx, c, h)
	if err != nil || indexed.IsZero() {
		return err
	}
	from := h.Flushed
	if from.Less(indexed) {
		from = indexed // below it, refs: flushed follows settled
	}
	if !from.Less(h.Settled) {
		return nil
	}
	key := stateKey{flushed: from, merged: h.Merged, settled: h.Settled}
	cs := s.takeState(c, key)
	if cs == nil {
		if cs, err = s.buildState(ctx, c, key); err != nil {
			return fmt.Errorf("quiet flush: %w", err)
		}
		res.StateBuilt = true
	}
	kept := cs // owned until the return: kept for the next step
	defer func() { s.putState(c, kept) }()
	var newest int64
	for _, r := range cs.runs {
		newest = max(newest, r.time)
	}
	ageMs := orDefault(s.FlushAge, DefaultFlushAge).Milliseconds()
	if now := s.Clock.Now().UnixMilli(); now-newest < ageMs {
		return nil // not quiet for FlushAge yet: the next plan may flush
	}
	// Seal the live runs against merges first: a merge compacts a
	// stream's entries of a group into one segment, and a ref this flush
	// wrote (no marker records it) would end inside one a later merge
	// made, which neither a flush nor a read can take apart (the harness
	// found it: "refs end at 3 inside the part 0-7"). With the merged
	// cursor at Settled, merges start past these runs, and the window
	// reads them as the level-1 runs they are.
	if h.Merged.Less(h.Settled) {
		if err := s.Meta.AdvanceCursor(ctx, c, metastore.Merged, h.Merged, h.Settled); err != nil {
			if errors.Is(err, metastore.ErrConflict) {
				res.Lost = true // a copy merged meanwhile: the next call reads it
				return nil
			}
			return fmt.Errorf("quiet flush: seal the live runs: advance merged: %w", err)
		}
	}
	ids := make([]format.StreamID, 0, len(cs.streams))
	for id := range cs.streams {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b format.StreamID) int {
		ra, rb := cs.run(cs.streams[a].oldest).at, cs.run(cs.streams[b].oldest).at
		switch {
		case ra.Less(rb):
			return -1
		case rb.Less(ra):
			return 1
		}
		return bytes.Compare(a[:], b[:])
	})
	set, err := s.Sets.For(c)
	if err != nil {
		return err
	}
	batch := len(ids)
	if m := s.maxAgeFlushes(); m > 0 && m < batch {
		batch = m
	}
	for len(ids) > 0 {
		n := min(batch, len(ids))
		part := slices.Clone(ids[:n])
		ids = ids[n:]
		slices.SortFunc(part, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
		entries, err := s.unflushedRefs(ctx, c, cs, part)
		if err != nil {
			return fmt.Errorf("quiet flush: %w", err)
		}
		partsOf := make([][]metastore.Ref, 0, n)
		with := make([]format.StreamID, 0, n)
		for _, id := range part {
			if refs := entries[id]; len(refs) > 0 {
				with = append(with, id)
				partsOf = append(partsOf, refs)
			}
		}
		before := res.Objects
		if err := s.flushStreams(ctx, set, c, h.Settled, with, partsOf, res); err != nil {
			if now, herr := s.Meta.GetHead(ctx, c); herr == nil && now.Settled != h.Settled && errors.Is(err, metastore.ErrConflict) {
				res.Lost = true // a copy planned on new passes meanwhile: its step goes on
				return nil
			}
			return fmt.Errorf("quiet flush at %s: %w", h.Settled, err)
		}
		if res.Objects > before && len(ids) > 0 {
			return nil // bounded: the next call goes on
		}
	}
	// Every stream of the live runs is held by a ref.
	if err := s.Meta.AdvanceCursor(ctx, c, metastore.Flushed, h.Flushed, h.Settled); err != nil {
		if errors.Is(err, metastore.ErrConflict) {
			return nil // a copy moved it: the next call reads it
		}
		return fmt.Errorf("quiet flush: advance flushed: %w", err)
	}
	res.Flushed = h.Settled
	s.window.PruneRuns(c, h.Settled)
	sealed := h.Merged
	if sealed.Less(h.Settled) {
		sealed = h.Settled
	}
	kept = newChainState(stateKey{flushed: h.Settled, merged: sealed, settled: h.Settled})
	return nil
}

// errSealed: a quiet flush sealed the runs a merge was about to commit
// (checkUnsealed); the merge writes nothing.
var errSealed = errors.New("settle: the runs of the merge were sealed by a quiet flush")

// checkUnsealed is a merge's check right before it commits its merged
// run at `run`'s start a: when the stored merged cursor is past a and no
// merged run is stored at a, a quiet flush sealed the runs after this
// merge read its head (every other merge moves the cursor past a only
// after a merged run at a is stored), and its refs may end inside the
// segments this merge compacted: errSealed. A merged run stored at a is
// adopted as before. What is left is the time between this read and the
// merge's put (ADR 0057).
func (s *Settler) checkUnsealed(ctx context.Context, c metastore.ChainID, run *format.PassIndex) error {
	h, err := s.Meta.GetHead(ctx, c)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	a := metastore.Cursor{Epoch: run.Epoch, Slot: run.FirstSlot}
	if !a.Less(h.Merged) {
		return nil
	}
	if _, err := s.window.MergedRun(ctx, c, a); err == nil {
		return nil // stored: the put finds it and adopts it
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("merge: %w", err)
	}
	return fmt.Errorf("merged run at %s, merged cursor at %s: %w", a, h.Merged, errSealed)
}
