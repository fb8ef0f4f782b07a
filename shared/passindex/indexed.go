package passindex

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// Where a chain's indexed passes begin (design 014, "Switching a live
// chain"; the switch itself is absorb's: absorb/switch.go).

// WindowFrom is where the runs and the passes of head h's window start
// when its indexed passes begin at indexed (Window.IndexedFrom):
// runs [runs, h.Settled), passes [passes, h.Checkpoint). Below indexed
// every record is behind a ref; a flushed cursor behind it (0/0 on a
// head stored before it existed, or never moved in refs mode) is read as
// indexed. ok is false when no pass is indexed: the window is empty.
func WindowFrom(h metastore.Head, indexed metastore.Cursor) (runs, passes metastore.Cursor, ok bool) {
	if indexed.IsZero() {
		return h.Settled, h.Checkpoint, false
	}
	runs, passes = h.Flushed, h.Settled
	if runs.Less(indexed) {
		runs = indexed
	}
	if passes.Less(indexed) {
		passes = indexed
	}
	if h.Settled.Less(runs) {
		runs = h.Settled // empty: the runs end at settled
	}
	if h.Checkpoint.Less(passes) {
		passes = h.Checkpoint
	}
	return runs, passes, true
}

// indexedAt caches IndexedFrom's answer for a head without Indexed, by
// the window start it probed.
type indexedAt struct {
	c                metastore.ChainID
	flushed, settled metastore.Cursor
	checkpointEmpty  bool
}

// IndexedFrom is where chain c's indexed passes begin, per head h:
// h.Indexed when set; for a head without it, the start of its window
// when an index is there (a chain run on the pass index before
// Head.Indexed existed: a run index at h.Flushed, or a pass index at
// h.Settled when flushed is 0/0 or equal), else zero (refs mode). The
// probe is one GET per window start, cached found or not.
func (w *Window) IndexedFrom(ctx context.Context, c metastore.ChainID, h metastore.Head) (metastore.Cursor, error) {
	if !h.Indexed.IsZero() {
		return h.Indexed, nil
	}
	runsFrom := h.Flushed
	if runsFrom.IsZero() || !runsFrom.Less(h.Settled) {
		runsFrom = h.Settled
	}
	run := runsFrom.Less(h.Settled)
	upper := h.Checkpoint
	if run {
		upper = h.Settled
	}
	if !runsFrom.Less(upper) {
		return metastore.Cursor{}, nil // no window: nothing to tell
	}
	k := indexedAt{c: c, flushed: runsFrom, settled: h.Settled}
	w.mu.Lock()
	v, ok := w.legacy[k]
	w.mu.Unlock()
	if ok {
		return v, nil
	}
	found, err := w.first(ctx, c, runsFrom, upper, run)
	if err != nil {
		return metastore.Cursor{}, err
	}
	var at metastore.Cursor
	if found {
		at = runsFrom
	}
	w.mu.Lock()
	if w.legacy == nil {
		w.legacy = map[indexedAt]metastore.Cursor{}
	}
	w.legacy[k] = at
	w.mu.Unlock()
	return at, nil
}

// first reports whether the first run (run) or pass of the walk from
// `from` to `to` has an index.
func (w *Window) first(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, run bool) (bool, error) {
	at := from
	for at.Epoch < to.Epoch {
		cut, exists, err := w.cut(ctx, c, at.Epoch)
		if err != nil {
			return false, err
		}
		if exists && at.Slot < cut {
			break
		}
		at = metastore.Cursor{Epoch: at.Epoch + 1}
	}
	if !at.Less(to) {
		return false, nil
	}
	key := format.PassIndexKey(c.Star, c.Class.String(), at.Epoch, at.Slot)
	if run {
		key = format.RunIndexKey(c.Star, c.Class.String(), at.Epoch, at.Slot)
	}
	_, err := w.Bucket.Get(ctx, key, 0, 1)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, objstore.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("chain %s: look for an index at %s: %w", c, at, err)
}
