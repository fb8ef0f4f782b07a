package dynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/metastore"
)

// MoveCursors moves several cursors of the HEAD item in one Update (a
// one-item transaction, as AdvanceCursor), on one condition: every
// move's cursor is at its From. The moves' order rules are checked on
// the arguments (metastore.ValidateMoves), so the condition needs
// nothing else. One item of a few hundred bytes: far inside a
// transaction's limits (100 items, 4 MB).
func (st *Store) MoveCursors(ctx context.Context, chain metastore.ChainID, moves []metastore.CursorMove) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("move cursors: %w", err)
	}
	if err := metastore.ValidateMoves(moves); err != nil {
		return err
	}
	if metastore.ValidateChain(chain) != nil {
		return fmt.Errorf("move cursors of chain %s: %w", chain, metastore.ErrNotFound)
	}
	what := fmt.Sprintf("move cursors %v of chain %s", moves, chain)
	h, failed, err := st.updateHead(ctx, chain, what, st.headLayout(chain), func(layout uint8) (string, string, map[string]string, map[string]types.AttributeValue) {
		return moveExpr(layout, moves)
	}, nil)
	if err != nil || !failed {
		return err
	}
	if _, err := metastore.MoveCursorsOn(h, moves); err != nil {
		return fmt.Errorf("chain %s: %w", chain, err)
	}
	return fmt.Errorf("%s: condition failed: %w", what, metastore.ErrConflict)
}

// moveExpr is MoveCursors' update and condition in the head's layout:
// per move, its cursor equal to From (on a layout-1 head, a Flushed or
// Merged From of 0/0 also matches the attribute's absence: a head stored
// before the cursor existed reads it as 0/0), and SET To for each move
// that moves.
func moveExpr(layout uint8, moves []metastore.CursorMove) (update, cond string, names map[string]string, vals map[string]types.AttributeValue) {
	names = map[string]string{"#pk": attrPK}
	vals = map[string]types.AttributeValue{}
	conds := []string{"attribute_exists(#pk)"}
	var sets []string
	for i, m := range moves {
		ea, sa := headCursorNames(layout, m.Kind)
		e, s := fmt.Sprintf("#e%d", i), fmt.Sprintf("#s%d", i)
		fe, fs := fmt.Sprintf(":fe%d", i), fmt.Sprintf(":fs%d", i)
		names[e], names[s] = ea, sa
		vals[fe], vals[fs] = nu(m.From.Epoch), nu(m.From.Slot)
		c := fmt.Sprintf("%s = %s AND %s = %s", e, fe, s, fs)
		if layout == 1 && (m.Kind == metastore.Flushed || m.Kind == metastore.Merged) && m.From.IsZero() {
			c = fmt.Sprintf("((%s) OR attribute_not_exists(%s))", c, e)
		}
		conds = append(conds, c)
		if m.To != m.From {
			te, ts := fmt.Sprintf(":te%d", i), fmt.Sprintf(":ts%d", i)
			vals[te], vals[ts] = nu(m.To.Epoch), nu(m.To.Slot)
			sets = append(sets, fmt.Sprintf("%s = %s, %s = %s", e, te, s, ts))
		}
	}
	return "SET " + strings.Join(sets, ", "), strings.Join(conds, " AND "), names, vals
}
