package metastore

import "fmt"

// MaxMoves bounds the moves of one MoveCursors: one per kind it accepts
// (Checkpoint, Settled, Flushed, Merged). A MoveCursors is one write of
// one item (the head), far inside DynamoDB's transaction limits (100
// items, 4 MB) and its item size.
const MaxMoves = 4

// ValidateMoves checks MoveCursors' arguments, independently of any
// head: 1 to MaxMoves moves, each kind at most once; Settled, Flushed
// and Merged move forward or stay (a condition); Checkpoint is a
// condition only (the absorb lease moves it); Trimmed and Indexed are
// refused (trim and the switch move them, with rules of their own); at
// least one move is forward; a move of Flushed or Merged names Settled
// (as a move or a condition), and the result keeps flushed and merged at
// or below settled, and settled at or below a named checkpoint. So every
// order the head keeps is checked on the arguments alone, and a store
// that states MoveCursors as one condition needs none but the moves'
// From.
func ValidateMoves(moves []CursorMove) error {
	if len(moves) == 0 || len(moves) > MaxMoves {
		return fmt.Errorf("%w: %d cursor moves (want 1 to %d)", ErrInvalid, len(moves), MaxMoves)
	}
	to := map[CursorKind]Cursor{}
	forward := false
	for _, m := range moves {
		switch m.Kind {
		case Settled, Flushed, Merged:
		case Checkpoint:
			if m.To != m.From {
				return fmt.Errorf("%w: %s: the checkpoint is only a condition of a cursor move", ErrInvalid, m)
			}
		case Trimmed, Indexed:
			return fmt.Errorf("%w: %s: the %s cursor moves only by AdvanceCursor", ErrInvalid, m, m.Kind)
		default:
			return fmt.Errorf("%w: unknown cursor kind %d", ErrInvalid, m.Kind)
		}
		if _, dup := to[m.Kind]; dup {
			return fmt.Errorf("%w: the %s cursor moves twice in one write", ErrInvalid, m.Kind)
		}
		if m.To.Less(m.From) {
			return fmt.Errorf("%w: %s is backward", ErrInvalid, m)
		}
		forward = forward || m.From != m.To
		to[m.Kind] = m.To
	}
	if !forward {
		return fmt.Errorf("%w: no cursor of %v moves", ErrInvalid, moves)
	}
	settled, ok := to[Settled]
	for _, k := range []CursorKind{Flushed, Merged} {
		c, named := to[k]
		if !named {
			continue
		}
		if !ok {
			return fmt.Errorf("%w: a move of the %s cursor without the settled cursor", ErrInvalid, k)
		}
		if settled.Less(c) {
			return fmt.Errorf("%w: the %s cursor to %s, past the settled cursor %s", ErrInvalid, k, c, settled)
		}
	}
	if ck, named := to[Checkpoint]; named && ok && ck.Less(settled) {
		return fmt.Errorf("%w: the settled cursor to %s, past the checkpoint %s", ErrInvalid, settled, ck)
	}
	return nil
}

// MoveCursorsOn is MoveCursors' decision on the stored head h: the head to
// store, or ErrConflict when a cursor is not at its move's From. Moves
// must be valid (ValidateMoves). Implementations that hold the head
// under a lock use it; DynamoDB states it as one condition.
func MoveCursorsOn(h Head, moves []CursorMove) (Head, error) {
	for _, m := range moves {
		if cur := h.Cursor(m.Kind); cur != m.From {
			return h, fmt.Errorf("move cursors %v: the %s cursor is at %s: %w", moves, m.Kind, cur, ErrConflict)
		}
	}
	for _, m := range moves {
		h = SetCursor(h, m.Kind, m.To)
	}
	return h, nil
}
