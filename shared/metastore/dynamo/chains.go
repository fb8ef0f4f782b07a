package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/metastore"
)

// GetHead reads the chain's HEAD item, in either layout.
func (st *Store) GetHead(ctx context.Context, chain metastore.ChainID) (metastore.Head, error) {
	if metastore.ValidateChain(chain) != nil {
		return metastore.Head{}, fmt.Errorf("head of chain %s: %w", chain, metastore.ErrNotFound)
	}
	m, err := st.getItem(ctx, metastore.ChainPK(chain), metastore.HeadSK)
	if err != nil {
		return metastore.Head{}, fmt.Errorf("head of chain %s in %s: %w", chain, st.table, err)
	}
	if m == nil {
		return metastore.Head{}, fmt.Errorf("head of chain %s: %w", chain, metastore.ErrNotFound)
	}
	h, layout, err := decodeHeadLayout(m)
	if err != nil {
		return metastore.Head{}, err
	}
	if layout == 2 {
		st.sawLayout(chain, 2)
	}
	return h, nil
}

// AdvanceCursor sets one cursor of the HEAD item to `to` on condition that
// it is `from` (compare-and-set), in a one-item transaction. Moving the
// checkpoint also requires that no other pass holds the absorb lease
// (Absorbing is 0/0 or `to`) and clears the lease. Setting the indexed
// cursor on a layout-1 head moves the head to layout 2 (switchHead).
func (st *Store) AdvanceCursor(ctx context.Context, chain metastore.ChainID, kind metastore.CursorKind, from, to metastore.Cursor) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("advance cursor: %w", err)
	}
	if err := metastore.ValidateAdvance(kind, from, to); err != nil {
		return err
	}
	if metastore.ValidateChain(chain) != nil {
		return fmt.Errorf("advance %s cursor of chain %s: %w", kind, chain, metastore.ErrNotFound)
	}
	layout := st.headLayout(chain)
	if kind == metastore.Indexed && layout == 1 {
		return st.switchHead(ctx, chain, from, to)
	}
	expr := func(layout uint8) (update, cond string, names map[string]string, vals map[string]types.AttributeValue) {
		ea, sa := headCursorNames(layout, kind)
		names = map[string]string{"#pk": attrPK, "#e": ea, "#s": sa}
		vals = map[string]types.AttributeValue{
			":fe": nu(from.Epoch), ":fs": nu(from.Slot), ":te": nu(to.Epoch), ":ts": nu(to.Slot),
		}
		update = "SET #e = :te, #s = :ts"
		cond = "attribute_exists(#pk) AND #e = :fe AND #s = :fs"
		if layout == 1 && (kind == metastore.Flushed || kind == metastore.Merged) && from.IsZero() {
			// A layout-1 head stored before the flushed (or merged)
			// cursor existed has none: it reads as 0/0 (decodeHead).
			cond = "attribute_exists(#pk) AND ((#e = :fe AND #s = :fs) OR attribute_not_exists(#e))"
		}
		if kind == metastore.Indexed || kind == metastore.Checkpoint {
			names["#ae"], names["#as"] = headName(layout, attrAbsorbingEpoch), headName(layout, attrAbsorbingSlot)
			vals[":zero"] = nu(0)
		}
		if kind == metastore.Indexed {
			// Layout 2 only (layout 1 is switchHead's), where the cursor
			// is set already: the condition fails and says why.
			names["#ce"], names["#cs"] = headCursorNames(layout, metastore.Checkpoint)
			cond += " AND #ae = :zero AND #as = :zero AND #ce = :te AND #cs = :ts"
		}
		if kind == metastore.Checkpoint {
			update += ", #ae = :zero, #as = :zero"
			cond += " AND ((#ae = :zero AND #as = :zero) OR (#ae = :te AND #as = :ts))"
		}
		return update, cond, names, vals
	}
	what := fmt.Sprintf("advance %s cursor of chain %s", kind, chain)
	h, failed, err := st.updateHead(ctx, chain, what, layout, expr, func(got uint8) (bool, error) {
		if kind == metastore.Indexed && got == 1 {
			return true, st.switchHead(ctx, chain, from, to)
		}
		return false, nil
	})
	if err != nil || !failed {
		return err
	}
	if _, err := metastore.AdvanceOn(h, kind, from, to); err != nil {
		return fmt.Errorf("chain %s: %w", chain, err)
	}
	return fmt.Errorf("%s from %s: condition failed: %w", what, from, metastore.ErrConflict)
}

// updateHead sends one conditional Update of chain's head (a one-item
// transaction), its expression built by expr for the head's layout.
// failed: the condition failed, and h is the head stored then. A head
// stored in the other layout than the expression named (first try only)
// is recorded and the Update sent again in its layout, unless relayout
// (nil: none) says it is done (with its error).
func (st *Store) updateHead(ctx context.Context, chain metastore.ChainID, what string, layout uint8,
	expr func(layout uint8) (update, cond string, names map[string]string, vals map[string]types.AttributeValue),
	relayout func(got uint8) (bool, error)) (h metastore.Head, failed bool, err error) {
	pk := metastore.ChainPK(chain)
	for try := 0; ; try++ {
		update, cond, names, vals := expr(layout)
		reasons, err := st.transact(ctx, []types.TransactWriteItem{{Update: &types.Update{
			TableName:                           aws.String(st.table),
			Key:                                 key(pk, metastore.HeadSK),
			UpdateExpression:                    aws.String(update),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           vals,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}})
		if err != nil {
			return h, false, fmt.Errorf("%s in %s: %w", what, st.table, err)
		}
		if reasons == nil {
			return h, false, nil
		}
		old, err := st.oldItem(ctx, reasons[0], pk, metastore.HeadSK)
		if err != nil {
			return h, false, fmt.Errorf("%s: %w", what, err)
		}
		if old == nil {
			return h, false, fmt.Errorf("%s: %w", what, metastore.ErrNotFound)
		}
		h, got, err := decodeHeadLayout(old)
		if err != nil {
			return h, false, err
		}
		if got != layout && try == 0 {
			// The condition named the other layout's attributes: send
			// it again in the head's layout.
			st.sawLayout(chain, got)
			if relayout != nil {
				if done, err := relayout(got); done {
					return h, false, err
				}
			}
			layout = got
			continue
		}
		return h, true, nil
	}
}

// switchTries bounds switchHead's reads and conditional puts when the
// head keeps changing between them.
const switchTries = 4

// switchHead sets the indexed cursor of a layout-1 head from `from`
// (0/0) to `to` and moves the head to layout 2 in the same write: it
// reads the head, checks the move (metastore.AdvanceOn: the cursor
// unset, no lease, `to` the checkpoint), and puts the layout-2 item on
// condition that the layout-1 item is still exactly as read (putHead).
// A head that changed in between (another cursor moved) is read again.
// Once the put lands, no build before the fence can decode the head or
// meet a condition on it (doc.go, "The head's layouts").
func (st *Store) switchHead(ctx context.Context, chain metastore.ChainID, from, to metastore.Cursor) error {
	pk := metastore.ChainPK(chain)
	for range switchTries {
		m, err := st.getItem(ctx, pk, metastore.HeadSK)
		if err != nil {
			return fmt.Errorf("advance indexed cursor of chain %s in %s: %w", chain, st.table, err)
		}
		if m == nil {
			return fmt.Errorf("advance indexed cursor of chain %s: %w", chain, metastore.ErrNotFound)
		}
		h, layout, err := decodeHeadLayout(m)
		if err != nil {
			return err
		}
		next, err := metastore.AdvanceOn(h, metastore.Indexed, from, to)
		if err != nil {
			if layout == 2 {
				st.sawLayout(chain, 2)
			}
			return fmt.Errorf("chain %s: %w", chain, err)
		}
		if layout == 2 {
			// Only a layout-2 head whose indexed cursor is unset gets
			// here, which no build writes; refuse rather than guess.
			return fmt.Errorf("advance indexed cursor of chain %s: a layout-2 head without it: %w", chain, metastore.ErrConflict)
		}
		ok, err := st.putHead(ctx, chain, m, next)
		if err != nil {
			return fmt.Errorf("advance indexed cursor of chain %s: %w", chain, err)
		}
		if ok {
			st.sawLayout(chain, 2)
			return nil
		}
	}
	return fmt.Errorf("advance indexed cursor of chain %s from %s: the head changed under %d tries: %w", chain, from, switchTries, metastore.ErrConflict)
}

// putHead replaces the layout-1 head item old of chain c with h in layout
// 2, on condition that every head attribute is still as in old (present
// and equal, or absent) and the head is not in layout 2: a whole-item
// compare-and-set, in a one-item transaction. ok is false when the
// condition failed (the head changed).
func (st *Store) putHead(ctx context.Context, c metastore.ChainID, old map[string]types.AttributeValue, h metastore.Head) (ok bool, err error) {
	names := map[string]string{"#pk": attrPK, "#hl": attrHeadLayout}
	vals := map[string]types.AttributeValue{}
	cond := "attribute_exists(#pk) AND attribute_not_exists(#hl)"
	for i, n := range layout1HeadNames() {
		a, v := fmt.Sprintf("#a%d", i), fmt.Sprintf(":v%d", i)
		names[a] = n
		if x, ok := old[n]; ok {
			vals[v] = x
			cond += " AND " + a + " = " + v
		} else {
			cond += " AND attribute_not_exists(" + a + ")"
		}
	}
	reasons, err := st.transact(ctx, []types.TransactWriteItem{{Put: &types.Put{
		TableName:                 aws.String(st.table),
		Item:                      headAttrsIn(2, c, h),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}}})
	if err != nil {
		return false, fmt.Errorf("put the layout-2 head of chain %s to %s: %w", c, st.table, err)
	}
	return reasons == nil, nil
}

// BeginAbsorb takes the absorb lease for the pass [from, to): one
// UpdateItem that sets Absorbing to `to` on condition that the checkpoint is
// `from` and Absorbing is 0/0 or already `to`. The condition accepts its own
// effect, so the SDK's retry after a lost answer is harmless. It returns
// the head as stored after the update; on ErrConflict, the head the
// condition saw. A layout-1 head whose indexed cursor is set (by a build
// before the fence) is moved to layout 2 after the update (putHead; a
// head changed in between is left for the next pass).
func (st *Store) BeginAbsorb(ctx context.Context, chain metastore.ChainID, from, to metastore.Cursor) (metastore.Head, error) {
	if err := ctxErr(ctx); err != nil {
		return metastore.Head{}, fmt.Errorf("begin absorb: %w", err)
	}
	if err := metastore.ValidateBeginAbsorb(from, to); err != nil {
		return metastore.Head{}, err
	}
	if metastore.ValidateChain(chain) != nil {
		return metastore.Head{}, fmt.Errorf("begin absorb on chain %s: %w", chain, metastore.ErrNotFound)
	}
	pk := metastore.ChainPK(chain)
	layout := st.headLayout(chain)
	for try := 0; ; try++ {
		ce, cs := headCursorNames(layout, metastore.Checkpoint)
		out, err := st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(st.table),
			Key:                 key(pk, metastore.HeadSK),
			UpdateExpression:    aws.String("SET #ae = :te, #as = :ts"),
			ConditionExpression: aws.String("attribute_exists(#pk) AND #ce = :fe AND #cs = :fs AND ((#ae = :zero AND #as = :zero) OR (#ae = :te AND #as = :ts))"),
			ExpressionAttributeNames: map[string]string{
				"#pk": attrPK, "#ce": ce, "#cs": cs, "#ae": headName(layout, attrAbsorbingEpoch), "#as": headName(layout, attrAbsorbingSlot),
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":fe": nu(from.Epoch), ":fs": nu(from.Slot), ":te": nu(to.Epoch), ":ts": nu(to.Slot), ":zero": nu(0),
			},
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			h, got, err := decodeHeadLayout(out.Attributes)
			if err != nil {
				return metastore.Head{}, err
			}
			if got == 1 && !h.Indexed.IsZero() {
				moved, err := st.putHead(ctx, chain, out.Attributes, h)
				if err != nil {
					return metastore.Head{}, fmt.Errorf("begin absorb on chain %s: %w", chain, err)
				}
				if moved {
					st.sawLayout(chain, 2)
				}
			}
			return h, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return metastore.Head{}, fmt.Errorf("begin absorb %s-%s on chain %s in %s: %w", from, to, chain, st.table, translate(err))
		}
		old, err := st.oldItem(ctx, types.CancellationReason{Item: ccf.Item}, pk, metastore.HeadSK)
		if err != nil {
			return metastore.Head{}, fmt.Errorf("begin absorb on chain %s: %w", chain, err)
		}
		if old == nil {
			return metastore.Head{}, fmt.Errorf("begin absorb on chain %s: %w", chain, metastore.ErrNotFound)
		}
		h, got, err := decodeHeadLayout(old)
		if err != nil {
			return metastore.Head{}, err
		}
		if got != layout && try == 0 {
			st.sawLayout(chain, got)
			layout = got
			continue
		}
		if _, err := metastore.BeginAbsorbOn(h, from, to); err != nil {
			return h, fmt.Errorf("chain %s: %w", chain, err)
		}
		return h, fmt.Errorf("begin absorb %s-%s on chain %s: condition failed: %w", from, to, chain, metastore.ErrConflict)
	}
}

// MintEpoch writes the EPOCH item (if absent) and moves the HEAD item from
// prev to e.Epoch (creating it in layout 1, all cursors at {e.Epoch, 0},
// when prev is 0 and no head exists, whatever its layout) in one
// transaction.
func (st *Store) MintEpoch(ctx context.Context, chain metastore.ChainID, prev uint64, e metastore.Epoch) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("mint epoch: %w", err)
	}
	if err := metastore.ValidateChain(chain); err != nil {
		return err
	}
	if err := metastore.ValidateMint(prev, e); err != nil {
		return err
	}
	if err := metastore.CheckEpochSize(chain, e); err != nil {
		return err
	}
	pk := metastore.ChainPK(chain)
	layout := st.headLayout(chain)
	for try := 0; ; try++ {
		var head types.TransactWriteItem
		if prev == 0 {
			head = types.TransactWriteItem{Put: &types.Put{
				TableName:                aws.String(st.table),
				Item:                     headAttrs(chain, metastore.NewHead(e.Epoch)),
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}}
		} else {
			head = types.TransactWriteItem{Update: &types.Update{
				TableName:                           aws.String(st.table),
				Key:                                 key(pk, metastore.HeadSK),
				UpdateExpression:                    aws.String("SET #e = :e"),
				ConditionExpression:                 aws.String("attribute_exists(#pk) AND #e = :prev"),
				ExpressionAttributeNames:            map[string]string{"#pk": attrPK, "#e": headName(layout, attrEpoch)},
				ExpressionAttributeValues:           map[string]types.AttributeValue{":e": nu(e.Epoch), ":prev": nu(prev)},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}}
		}
		reasons, err := st.transact(ctx, []types.TransactWriteItem{
			head,
			{Put: &types.Put{
				TableName:                aws.String(st.table),
				Item:                     epochAttrs(chain, e),
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}},
		})
		if err != nil {
			return fmt.Errorf("mint epoch %d of chain %s in %s: %w", e.Epoch, chain, st.table, err)
		}
		if reasons == nil {
			return nil
		}
		failed := condFailed(reasons)
		if prev != 0 && try == 0 && len(failed) > 0 && failed[0] == 0 {
			old, err := st.oldItem(ctx, reasons[0], pk, metastore.HeadSK)
			if err != nil {
				return fmt.Errorf("mint epoch %d of chain %s: %w", e.Epoch, chain, err)
			}
			if old != nil {
				if _, got, err := decodeHeadLayout(old); err == nil && got != layout {
					st.sawLayout(chain, got)
					layout = got
					continue
				}
			}
		}
		what := "the head is not at the previous epoch"
		if len(failed) > 0 && failed[0] == 1 {
			what = "the epoch exists"
		}
		return fmt.Errorf("mint epoch %d of chain %s after %d: %s: %w", e.Epoch, chain, prev, what, metastore.ErrConflict)
	}
}

// GetEpoch reads the chain's EPOCH item.
func (st *Store) GetEpoch(ctx context.Context, chain metastore.ChainID, epoch uint64) (metastore.Epoch, error) {
	if metastore.ValidateChain(chain) != nil {
		return metastore.Epoch{}, fmt.Errorf("epoch %d of chain %s: %w", epoch, chain, metastore.ErrNotFound)
	}
	m, err := st.getItem(ctx, metastore.ChainPK(chain), metastore.EpochSK(epoch))
	if err != nil {
		return metastore.Epoch{}, fmt.Errorf("epoch %d of chain %s in %s: %w", epoch, chain, st.table, err)
	}
	if m == nil {
		return metastore.Epoch{}, fmt.Errorf("epoch %d of chain %s: %w", epoch, chain, metastore.ErrNotFound)
	}
	return decodeEpoch(m)
}

// UpdateEpoch sets State and Cut of the EPOCH item on condition that its
// state is `from`, in a one-item transaction.
func (st *Store) UpdateEpoch(ctx context.Context, chain metastore.ChainID, from metastore.EpochState, e metastore.Epoch) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("update epoch: %w", err)
	}
	if err := metastore.ValidateEpochUpdate(from, e); err != nil {
		return err
	}
	if metastore.ValidateChain(chain) != nil {
		return fmt.Errorf("update epoch %d of chain %s: %w", e.Epoch, chain, metastore.ErrNotFound)
	}
	pk, sk := metastore.ChainPK(chain), metastore.EpochSK(e.Epoch)
	reasons, err := st.transact(ctx, []types.TransactWriteItem{{Update: &types.Update{
		TableName:                           aws.String(st.table),
		Key:                                 key(pk, sk),
		UpdateExpression:                    aws.String("SET #state = :state, #cut = :cut"),
		ConditionExpression:                 aws.String("attribute_exists(#pk) AND #state = :from"),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK, "#state": attrState, "#cut": attrCut},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":state": nu(uint64(e.State)), ":cut": nu(e.Cut), ":from": nu(uint64(from))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}})
	if err != nil {
		return fmt.Errorf("update epoch %d of chain %s in %s: %w", e.Epoch, chain, st.table, err)
	}
	if reasons == nil {
		return nil
	}
	old, err := st.oldItem(ctx, reasons[0], pk, sk)
	if err != nil {
		return fmt.Errorf("update epoch %d of chain %s: %w", e.Epoch, chain, err)
	}
	if old == nil {
		return fmt.Errorf("update epoch %d of chain %s: %w", e.Epoch, chain, metastore.ErrNotFound)
	}
	return fmt.Errorf("update epoch %d of chain %s from state %d: %w", e.Epoch, chain, from, metastore.ErrConflict)
}

// PutToken writes the TOKEN item and its listing item (PK TOKENS) in one
// transaction, replacing any grant at the same hash.
func (st *Store) PutToken(ctx context.Context, t metastore.Token) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("put token: %w", err)
	}
	if err := metastore.ValidateToken(t); err != nil {
		return err
	}
	_, err := st.transact(ctx, []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(st.table), Item: tokenAttrs(metastore.TokenPK(t.Hash), metastore.MetaSK, t)}},
		{Put: &types.Put{TableName: aws.String(st.table), Item: tokenAttrs(TokenListPK, t.Hash, t)}},
	})
	if err != nil {
		return fmt.Errorf("put token %.8s... to %s: %w", t.Hash, st.table, err)
	}
	return nil
}

// DeleteToken deletes the TOKEN item and its listing item in one
// transaction; deleting a missing token is nil.
func (st *Store) DeleteToken(ctx context.Context, hash string) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("delete token: %w", err)
	}
	if metastore.ValidateTokenHash(hash) != nil {
		return nil // never stored
	}
	_, err := st.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: aws.String(st.table), Key: key(metastore.TokenPK(hash), metastore.MetaSK)}},
		{Delete: &types.Delete{TableName: aws.String(st.table), Key: key(TokenListPK, hash)}},
	})
	if err != nil {
		return fmt.Errorf("delete token %.8s... from %s: %w", hash, st.table, err)
	}
	return nil
}

// ListTokens queries the token listing items (PK TOKENS), in hash order,
// and keeps those whose prefix starts with prefix.
func (st *Store) ListTokens(ctx context.Context, prefix string) ([]metastore.Token, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	items, err := st.query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(TokenListPK)},
	}, 0)
	if err != nil {
		return nil, fmt.Errorf("list tokens in %s: %w", st.table, err)
	}
	var out []metastore.Token
	for _, m := range items {
		t, err := decodeToken(m)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(t.Prefix, prefix) {
			out = append(out, t)
		}
	}
	return out, nil
}

// GetToken reads the TOKEN item.
func (st *Store) GetToken(ctx context.Context, hash string) (metastore.Token, error) {
	if metastore.ValidateTokenHash(hash) != nil {
		return metastore.Token{}, fmt.Errorf("token %.8s...: %w", hash, metastore.ErrNotFound)
	}
	m, err := st.getItem(ctx, metastore.TokenPK(hash), metastore.MetaSK)
	if err != nil {
		return metastore.Token{}, fmt.Errorf("token %.8s... in %s: %w", hash, st.table, err)
	}
	if m == nil {
		return metastore.Token{}, fmt.Errorf("token %.8s...: %w", hash, metastore.ErrNotFound)
	}
	return decodeToken(m)
}
