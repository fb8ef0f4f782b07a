package absorb

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
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

// win is the absorber's window, for IndexedFrom's cached probes.
func (a *Absorber) win() *passindex.Window {
	a.windowOnce.Do(func() { a.window = &passindex.Window{Meta: a.Meta, Bucket: a.Index} })
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
