package absorb

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// Switching a live chain from refs to the pass index (design 014,
// "Switching a live chain"): Head.Indexed says where the indexed passes
// begin. Passes before it wrote refs; passes from it on wrote pass
// indexes; zero: no pass is indexed.

// ErrIndexed: a stage with the pass index off met a chain whose passes
// are indexed (Head.Indexed is set). A chain does not go back to refs:
// the fix is to switch the stage on.
var ErrIndexed = errors.New("absorb: chain indexes its passes (design 014) and this stage runs with the pass index off; a chain cannot go back to refs: switch the pass index on (strand --pass-index, STRAND_PASS_INDEX=true, CDK strand:passIndex=true)")

// IndexedErr is ErrIndexed for chain c indexed since `since`, naming the
// stage that refused.
func IndexedErr(stage string, c metastore.ChainID, since metastore.Cursor) error {
	return fmt.Errorf("%s of chain %s, indexed since %s: %w", stage, c, since, ErrIndexed)
}

// PassIndexed reports whether the pass starting at from is indexed,
// per the head h that holds its lease (or any head read since).
func PassIndexed(h metastore.Head, from metastore.Cursor) bool {
	return !h.Indexed.IsZero() && !from.Less(h.Indexed)
}

// WindowFrom is where the runs and the passes of head h's window start
// when its indexed passes begin at indexed (IndexWindow.IndexedFrom):
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
func (w *IndexWindow) IndexedFrom(ctx context.Context, c metastore.ChainID, h metastore.Head) (metastore.Cursor, error) {
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
func (w *IndexWindow) first(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, run bool) (bool, error) {
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

// win is the absorber's window, for IndexedFrom's cached probes.
func (a *Absorber) win() *IndexWindow {
	a.windowOnce.Do(func() { a.window = &IndexWindow{Meta: a.Meta, Bucket: a.Index} })
	return a.window
}

// passIndexed reports whether the pass of chain c from `from`, whose
// lease head h holds, is indexed: from at or after h.Indexed; or, on a
// head without it, from at or after the start of a window that a chain
// indexed before Head.Indexed existed has (IndexedFrom; only with Index
// set: a copy with it nil knows nothing of such chains).
func (a *Absorber) passIndexed(ctx context.Context, c metastore.ChainID, h metastore.Head, from metastore.Cursor) (bool, error) {
	if !h.Indexed.IsZero() || a.Index == nil {
		return PassIndexed(h, from), nil
	}
	at, err := a.win().IndexedFrom(ctx, c, h)
	if err != nil {
		return false, fmt.Errorf("absorb %s: %w", c, err)
	}
	return !at.IsZero() && !from.Less(at), nil
}

// startIndexing records where chain c's indexed passes begin, on a pass
// with the switch on that finds Head.Indexed zero and no lease, once a
// settle with the switch on has settled a step of the chain (its flushed
// cursor equals its settled one): the checkpoint, by a write the store takes only while the checkpoint is
// still there and no pass holds the lease, so that every pass begun since
// starts at or after it. A chain indexed before Head.Indexed existed
// (IndexedFrom finds an index where its window starts) is left as it is
// until its window is empty: its passes are indexed by that rule
// (passIndexed), and its window below the checkpoint must stay readable.
// It returns the head to go on from: re-read after the write, won or
// lost.
func (a *Absorber) startIndexing(ctx context.Context, c metastore.ChainID, h metastore.Head) (metastore.Head, error) {
	legacy, err := a.win().IndexedFrom(ctx, c, h)
	if err != nil {
		return h, fmt.Errorf("absorb %s: start indexing: %w", c, err)
	}
	if !legacy.IsZero() {
		return h, nil
	}
	if h.Flushed != h.Settled {
		// No settle with the switch on has settled a step of this chain
		// yet (in refs mode it moves flushed with settled; a settle of a
		// build before design 014's switch never moves flushed): such a
		// settle would take an indexed pass for a refs pass and move the
		// settled cursor over records no ref holds. Go on with refs until
		// one has (a new chain, never settled, has them equal).
		return h, nil
	}
	err = a.Meta.AdvanceCursor(ctx, c, metastore.Indexed, metastore.Cursor{}, h.Checkpoint)
	if err != nil && !errors.Is(err, metastore.ErrConflict) {
		return h, fmt.Errorf("absorb %s: start indexing at %s: %w", c, h.Checkpoint, err)
	}
	if err == nil {
		a.log().Info("absorb: chain switched to the pass index", "chain", c.String(), "indexed", h.Checkpoint.String())
	}
	h, err = a.Meta.GetHead(ctx, c)
	if err != nil {
		return h, fmt.Errorf("absorb %s: %w", c, err)
	}
	return h, nil
}
