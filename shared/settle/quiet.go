package settle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// quietFlush is the step of a quiet chain (issue 30: "chains with no new
// traffic still settle, flush, trim and finish deletions"; ADR 0057): a
// step with no new passes takes no plan, so the age flush, which a plan
// decides, never comes, and the live runs' records, their packs and the
// deletions that wait for them stay until the chain's next append.
//
// When the settler has a Clock, head h (settled at the checkpoint) has
// live runs [Flushed, Settled), the newest record of all of them is at
// least FlushAge older than the clock's now (every stream's oldest entry
// is then FlushAge old: the next plan would flush them all by age) and
// the chain is quiet (quietFor), it seals the live runs, flushes every
// stream with unflushed entries behind a ref (streamParts, SettleRef
// under the settled cursor, as a plan's flushes) and then moves the
// flushed cursor to Settled: no run below it holds an entry no ref
// holds. It writes no run and no pack: nothing at a determined key but
// settled objects, whose keys name their stream and seqs (their bytes
// are the records'), and refs, whose conditions are on the key and the
// settled cursor.
//
// Both its cursor writes (the seal, the flushed move) are MoveCursors
// conditioned on the checkpoint still being at Settled (no new pass):
// a plan at Settled is made only by a copy that read a later
// checkpoint, so every plan at Settled is made on a head after the
// seal (merges start past these runs) and, once this flush moved
// flushed, after it too: every copy plans on one head (design 014).
// A copy that plans on new passes meanwhile moves Settled: this step's
// SettleRefs and moves fail (the step is Lost; its refs are held parts
// the plan's flushes skip).
//
// Work per call is bounded as the age flush's: streams are visited by
// their oldest run, then id, MaxAgeFlushes at a time, and the call stops
// after the first batch that wrote anything; streams a ref already holds
// cost one ref query each. The cursor moves only when every stream is
// held.
func (s *Settler) quietFlush(ctx context.Context, c metastore.ChainID, h metastore.Head, res *Result) error {
	if s.Clock == nil {
		return nil
	}
	now := s.Clock.Now().UnixMilli()
	since, known := s.idleSince(c, h.Settled, now)
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
	if !quietFor(now, newest, since, known, orDefault(s.FlushAge, DefaultFlushAge).Milliseconds()) {
		return nil // not quiet for FlushAge yet: the next plan may flush
	}
	// Seal the live runs against merges first: a merge compacts a
	// stream's entries of a group into one segment, and a ref this flush
	// wrote (no marker records it) would end inside one a later merge
	// made, which neither a flush nor a read can take apart (the harness
	// found it: "refs end at 3 inside the part 0-7"). With the merged
	// cursor at Settled, merges start past these runs, and the window
	// reads them as the level-1 runs they are.
	still := metastore.CursorMove{Kind: metastore.Checkpoint, From: h.Checkpoint, To: h.Checkpoint}
	at := metastore.CursorMove{Kind: metastore.Settled, From: h.Settled, To: h.Settled}
	sealed := h.Merged
	if h.Merged.Less(h.Settled) {
		sealed = h.Settled
		err := s.Meta.MoveCursors(ctx, c, []metastore.CursorMove{at, still, {Kind: metastore.Merged, From: h.Merged, To: sealed}})
		if errors.Is(err, metastore.ErrConflict) {
			res.Lost = true // a copy merged or planned meanwhile: the next call reads it
			return nil
		}
		if err != nil {
			return fmt.Errorf("quiet flush: seal the live runs: %w", err)
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
	err = s.Meta.MoveCursors(ctx, c, []metastore.CursorMove{at, still,
		{Kind: metastore.Merged, From: sealed, To: sealed}, {Kind: metastore.Flushed, From: h.Flushed, To: h.Settled}})
	if errors.Is(err, metastore.ErrConflict) {
		res.Lost = true // a copy moved the head: the next call reads it
		return nil
	}
	if err != nil {
		return fmt.Errorf("quiet flush: advance flushed: %w", err)
	}
	res.Flushed = h.Settled
	s.window.PruneRuns(c, h.Settled)
	kept = newChainState(stateKey{flushed: h.Settled, merged: sealed, settled: h.Settled})
	return nil
}

// idleSince is the clock time (ms) since which this settler knows chain
// c's settled cursor to be at settled: since its own step moved it
// there (sawSettled) or it first saw it there, now if not before; known
// is false when it had seen nothing of the chain (a new settler: a cold
// Lambda). In memory only.
func (s *Settler) idleSince(c metastore.ChainID, settled metastore.Cursor, now int64) (since int64, known bool) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	seen, known := s.idle[c]
	if known && seen.settled == settled {
		return seen.since, true
	}
	s.sawSettledLocked(c, settled, now)
	return now, known
}

// sawSettled records that chain c's settled cursor is at settled since
// now (a step of this settler moved it there).
func (s *Settler) sawSettled(c metastore.ChainID, settled metastore.Cursor) {
	if s.Clock == nil {
		return
	}
	now := s.Clock.Now().UnixMilli()
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	s.sawSettledLocked(c, settled, now)
}

func (s *Settler) sawSettledLocked(c metastore.ChainID, settled metastore.Cursor, now int64) {
	if s.idle == nil {
		s.idle = map[metastore.ChainID]idleSeen{}
	}
	s.idle[c] = idleSeen{settled: settled, since: now}
}

// idleSeen is since when a settler knows a chain's settled cursor where
// it is.
type idleSeen struct {
	settled metastore.Cursor
	since   int64
}

// quietFor is the quiet flush's clock rule (the clock decides only
// whether to flush, never what an object holds): the newest record of
// the live runs is at least ageMs old by the clock (now), and either it
// is less than 2 ageMs old (a chain that turned quiet lately), or the
// settler knows nothing of the chain (known false: a new settler flushes
// by record time, as before), or it has known the settled cursor where
// it is for ageMs (since). So a warm settler quiet-flushes a chain of
// old record times (a backfill) once it has had no new pass for ageMs,
// not at every idle step between its passes; liveness is a new
// settler's rule at worst.
func quietFor(now, newest, since int64, known bool, ageMs int64) bool {
	if now-newest < ageMs {
		return false
	}
	return now-newest < 2*ageMs || !known || now-since >= ageMs
}
