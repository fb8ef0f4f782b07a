package metastoretest

import (
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// mv is a CursorMove.
func mv(k metastore.CursorKind, from, to metastore.Cursor) metastore.CursorMove {
	return metastore.CursorMove{Kind: k, From: from, To: to}
}

// testMoveCursors: MoveCursors (settle's one commit point per step,
// design 014) moves settled, flushed and merged in one write, on the
// condition that every named cursor (the checkpoint as a condition only)
// is at its From; any cursor elsewhere fails the whole write
// (ErrConflict) and moves none; arguments that break an order the head
// keeps are ErrInvalid and change nothing.
func testMoveCursors(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	z := metastore.Cursor{}
	wantErr(t, s.MoveCursors(ctx, chainA, []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 1))}), metastore.ErrNotFound, "move before mint")
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(2)), "mint")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(2, 0), at(2, 9)), "advance checkpoint")
	h0 := head(t, s, chainA)
	for _, bad := range []struct {
		what  string
		moves []metastore.CursorMove
	}{
		{"no move", nil},
		{"five moves", []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 1)), mv(metastore.Flushed, at(2, 0), at(2, 1)),
			mv(metastore.Merged, z, at(2, 1)), mv(metastore.Checkpoint, at(2, 9), at(2, 9)), mv(metastore.Settled, at(2, 0), at(2, 1))}},
		{"a kind twice", []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 1)), mv(metastore.Settled, at(2, 0), at(2, 2))}},
		{"trimmed", []metastore.CursorMove{mv(metastore.Trimmed, at(2, 0), at(2, 1))}},
		{"indexed", []metastore.CursorMove{mv(metastore.Indexed, z, at(2, 9))}},
		{"unknown kind", []metastore.CursorMove{mv(99, at(2, 0), at(2, 1))}},
		{"the checkpoint moved", []metastore.CursorMove{mv(metastore.Checkpoint, at(2, 9), at(2, 10))}},
		{"backward", []metastore.CursorMove{mv(metastore.Settled, at(2, 1), at(2, 0))}},
		{"conditions only", []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 0)), mv(metastore.Checkpoint, at(2, 9), at(2, 9))}},
		{"flushed without settled", []metastore.CursorMove{mv(metastore.Flushed, at(2, 0), at(2, 1))}},
		{"merged without settled", []metastore.CursorMove{mv(metastore.Merged, z, at(2, 1))}},
		{"flushed past settled", []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 3)), mv(metastore.Flushed, at(2, 0), at(2, 4))}},
		{"merged past settled", []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 3)), mv(metastore.Merged, z, at(2, 4))}},
		{"settled past the checkpoint", []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 10)), mv(metastore.Checkpoint, at(2, 9), at(2, 9))}},
	} {
		wantErr(t, s.MoveCursors(ctx, chainA, bad.moves), metastore.ErrInvalid, bad.what)
		wantEqual(t, head(t, s, chainA), h0, "head after "+bad.what)
	}
	// The exact boundaries are valid: flushed and merged at settled,
	// settled at the checkpoint.
	step := []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 9)), mv(metastore.Flushed, at(2, 0), at(2, 9)),
		mv(metastore.Merged, z, at(2, 9)), mv(metastore.Checkpoint, at(2, 9), at(2, 9))}
	// One cursor elsewhere fails the whole write, whichever it is.
	for i := range step {
		stale := append([]metastore.CursorMove(nil), step...)
		stale[i].From.Slot++
		stale[i].To.Slot = max(stale[i].To.Slot, stale[i].From.Slot)
		wantErr(t, s.MoveCursors(ctx, chainA, stale), metastore.ErrConflict, "a stale "+stale[i].Kind.String())
		wantEqual(t, head(t, s, chainA), h0, "head after a stale "+stale[i].Kind.String())
	}
	// A step: settled and flushed move, merged stays (a condition).
	must(t, s.MoveCursors(ctx, chainA, []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 6)),
		mv(metastore.Flushed, at(2, 0), at(2, 4)), mv(metastore.Merged, z, z)}), "a step")
	want := h0
	want.Settled, want.Flushed = at(2, 6), at(2, 4)
	wantEqual(t, head(t, s, chainA), want, "head after a step")
	wantErr(t, s.MoveCursors(ctx, chainA, []metastore.CursorMove{mv(metastore.Settled, at(2, 6), at(2, 7)), mv(metastore.Merged, at(2, 1), at(2, 1))}),
		metastore.ErrConflict, "a condition on merged elsewhere")
	wantEqual(t, head(t, s, chainA), want, "head after a failed condition")
	// The next, to the boundaries, and the merged cursor from zero.
	must(t, s.MoveCursors(ctx, chainA, []metastore.CursorMove{mv(metastore.Settled, at(2, 6), at(2, 9)),
		mv(metastore.Flushed, at(2, 4), at(2, 9)), mv(metastore.Merged, z, at(2, 9)), mv(metastore.Checkpoint, at(2, 9), at(2, 9))}), "to the boundaries")
	want.Settled, want.Flushed, want.Merged = at(2, 9), at(2, 9), at(2, 9)
	wantEqual(t, head(t, s, chainA), want, "head after the boundaries")
	// Survives a mint like every cursor.
	must(t, s.MintEpoch(ctx, chainA, 2, newEpoch(3)), "mint 3")
	want.Epoch = 3
	wantEqual(t, head(t, s, chainA), want, "head after mint 3")
}

// testRaceMoveCursors: racing copies of one step's commit move the
// cursors once; the others get ErrConflict.
func testRaceMoveCursors(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(2)), "mint")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(2, 0), at(2, 9)), "advance checkpoint")
	onceOf(t, 8, "cursor moves", func() error {
		return s.MoveCursors(ctx, chainA, []metastore.CursorMove{mv(metastore.Settled, at(2, 0), at(2, 5)),
			mv(metastore.Flushed, at(2, 0), at(2, 3)), mv(metastore.Merged, metastore.Cursor{}, at(2, 2))})
	})
	h := head(t, s, chainA)
	wantEqual(t, []metastore.Cursor{h.Settled, h.Flushed, h.Merged}, []metastore.Cursor{at(2, 5), at(2, 3), at(2, 2)}, "cursors after the race")
}
