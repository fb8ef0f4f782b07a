package dynamo

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/metastore"
)

// PutRefs writes refs under the absorb lease: each transaction holds a
// ConditionCheck that the chain's head has Absorbing == pass, and up to
// metastore.MaxPutRefsPerTx (99) Puts of at most metastore.MaxTxRefBytes
// together (metastore.RefChunks), so it is under DynamoDB's 100 actions
// and 4 MB. Each Put replaces the item at its key, so writing the same refs
// again leaves identical items. A batch of more than that takes several
// transactions: each is atomic and checked against the lease, but a lease
// lost between two of them leaves the first ones written (they are the
// refs the pass computed; the pass that holds the lease writes the same
// ones). The batch is validated whole before anything is written.
func (st *Store) PutRefs(ctx context.Context, chain metastore.ChainID, pass metastore.Cursor, refs []metastore.Ref) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("put refs: %w", err)
	}
	if err := metastore.ValidateChain(chain); err != nil {
		return err
	}
	if err := metastore.ValidatePass(pass); err != nil {
		return err
	}
	if err := metastore.ValidatePutRefs(refs); err != nil {
		return err
	}
	pk := metastore.ChainPK(chain)
	for chunk := range metastore.RefChunks(refs) {
		items := make([]types.TransactWriteItem, 0, len(chunk)+1)
		items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(st.table),
			Key:       key(pk, metastore.HeadSK),
			// Either layout: a layout-1 name holds a string on a
			// layout-2 head, a layout-2 name is absent on a layout-1 one.
			ConditionExpression: aws.String("attribute_exists(#pk) AND ((#ae = :pe AND #as = :ps) OR (#ae2 = :pe AND #as2 = :ps))"),
			ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#ae": attrAbsorbingEpoch, "#as": attrAbsorbingSlot,
				"#ae2": headName(2, attrAbsorbingEpoch), "#as2": headName(2, attrAbsorbingSlot)},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pe": nu(pass.Epoch), ":ps": nu(pass.Slot),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
		for _, r := range chunk {
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(st.table),
				Item:      refAttrs(r),
			}})
		}
		reasons, err := st.transact(ctx, items)
		if err != nil {
			return fmt.Errorf("put %d refs of chain %s to %s: %w", len(refs), chain, st.table, err)
		}
		if reasons != nil {
			lease := "no head"
			if old, err := st.oldItem(ctx, reasons[0], pk, metastore.HeadSK); err == nil && old != nil {
				if h, err := decodeHead(old); err == nil {
					lease = h.Absorbing.String()
				}
			}
			return fmt.Errorf("put refs of chain %s for pass to %s: the lease is %s (0/0: no pass): %w",
				chain, pass, lease, metastore.ErrConflict)
		}
	}
	return nil
}

// QueryRefs returns up to limit refs of the stream whose range ends at or
// after fromSeq, in seq order: the last ref that starts before fromSeq, if
// it reaches fromSeq, then the refs that start at or after fromSeq. This
// relies on a stream's refs not overlapping (see the package documentation).
// The refs from fromSeq are one Query page: at most 1 MB (QueryPage), so
// the result may be short of limit while more refs follow.
func (st *Store) QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, err
	}
	if metastore.ValidateStreamID(streamID) != nil {
		return nil, nil // never stored
	}
	pk := metastore.RefPK(streamID)
	var out []metastore.Ref
	if fromSeq > 0 {
		prev, err := st.query(ctx, &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":lo": s(metastore.RefSK(0)), ":hi": s(metastore.RefSK(fromSeq - 1))},
			ScanIndexForward:          aws.Bool(false),
		}, 1)
		if err != nil {
			return nil, fmt.Errorf("query refs of stream %s from %d in %s: %w", streamID, fromSeq, st.table, err)
		}
		if len(prev) > 0 {
			r, err := decodeRef(prev[0])
			if err != nil {
				return nil, err
			}
			if r.LastSeq >= fromSeq {
				out = append(out, r)
			}
		}
	}
	if len(out) >= limit {
		return out, nil
	}
	// One Query call: DynamoDB ends its page at 1 MB of items read, and
	// QueryPage cuts at the same point (by RefSize) whatever the service
	// or the emulator, which does not enforce the limit, returned.
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(st.table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":lo": s(metastore.RefSK(fromSeq)), ":hi": s(metastore.RefSK(^uint64(0)))},
		Limit:                     aws.Int32(int32(min(limit-len(out), 1000))),
	}
	res, err := st.client.Query(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("query refs of stream %s from %d in %s: %w", streamID, fromSeq, st.table, translate(err))
	}
	fwd := make([]metastore.Ref, 0, len(res.Items))
	for _, m := range res.Items {
		r, err := decodeRef(m)
		if err != nil {
			return nil, err
		}
		fwd = append(fwd, r)
	}
	return append(out, metastore.QueryPage(fwd, limit-len(out))...), nil
}

// LastRef queries the stream's refs backward for the first one.
func (st *Store) LastRef(ctx context.Context, streamID string) (metastore.Ref, error) {
	if metastore.ValidateStreamID(streamID) != nil {
		return metastore.Ref{}, fmt.Errorf("last ref of stream %q: %w", streamID, metastore.ErrNotFound)
	}
	items, err := st.query(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :ref)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(metastore.RefPK(streamID)), ":ref": s(metastore.RefSKPrefix)},
		ScanIndexForward:          aws.Bool(false),
	}, 1)
	if err != nil {
		return metastore.Ref{}, fmt.Errorf("last ref of stream %s in %s: %w", streamID, st.table, err)
	}
	if len(items) == 0 {
		return metastore.Ref{}, fmt.Errorf("last ref of stream %s: %w", streamID, metastore.ErrNotFound)
	}
	return decodeRef(items[0])
}

// RefsBefore is one Query backward over the stream's refs below
// beforeSeq's sort key, cut with QueryPage (DynamoDB's 1 MB page).
func (st *Store) RefsBefore(ctx context.Context, streamID string, beforeSeq uint64, limit int) ([]metastore.Ref, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, err
	}
	if metastore.ValidateStreamID(streamID) != nil || beforeSeq == 0 {
		return nil, nil // never stored, or nothing before seq 0
	}
	res, err := st.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(st.table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(metastore.RefPK(streamID)), ":lo": s(metastore.RefSK(0)), ":hi": s(metastore.RefSK(beforeSeq - 1))},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(min(limit, 1000))),
	})
	if err != nil {
		return nil, fmt.Errorf("query refs of stream %s before %d in %s: %w", streamID, beforeSeq, st.table, translate(err))
	}
	page := make([]metastore.Ref, 0, len(res.Items))
	for _, m := range res.Items {
		r, err := decodeRef(m)
		if err != nil {
			return nil, err
		}
		page = append(page, r)
	}
	return metastore.QueryPage(page, limit), nil
}

// SwapRefs replaces old with repl in one transaction: a Put of repl at
// old[0]'s key and a Delete of every other old ref, each conditioned on the
// stored ref's Sum being the old ref's (the ref is still exactly as given).
// At most metastore.MaxSwapRefs items: within DynamoDB's 100-item limit.
func (st *Store) SwapRefs(ctx context.Context, old []metastore.Ref, repl metastore.Ref) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("swap refs: %w", err)
	}
	if err := metastore.ValidateSwap(old, repl); err != nil {
		return err
	}
	names := map[string]string{"#sum": attrSum}
	items := make([]types.TransactWriteItem, len(old))
	items[0] = types.TransactWriteItem{Put: &types.Put{
		TableName:                 aws.String(st.table),
		Item:                      refAttrs(repl),
		ConditionExpression:       aws.String("#sum = :sum"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":sum": s(refSum(old[0]))},
	}}
	for i, o := range old[1:] {
		items[i+1] = st.deleteRef(o, "#sum = :sum")
	}
	reasons, err := st.transact(ctx, items)
	if err != nil {
		return fmt.Errorf("swap %d refs of stream %s in %s: %w", len(old), repl.StreamID, st.table, err)
	}
	if reasons != nil {
		i := condFailed(reasons)[0]
		return fmt.Errorf("swap refs of stream %s: ref at %d changed or gone: %w", repl.StreamID, old[i].FirstSeq, metastore.ErrConflict)
	}
	return nil
}

// SettleRef writes repl in one transaction: a ConditionCheck that the
// chain's settled cursor is `settled`, a Put of repl at its key (on
// condition that the item there is old[0], by Sum; without old refs, that
// it is absent or already repl), and a Delete of every other old ref on
// its Sum, and the ConditionCheck of settleApart. At most
// metastore.MaxSwapRefs items (ValidateSettleRef takes at most
// MaxSettleOldRefs old refs).
func (st *Store) SettleRef(ctx context.Context, chain metastore.ChainID, settled metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("settle ref: %w", err)
	}
	if err := metastore.ValidateChain(chain); err != nil {
		return err
	}
	if err := metastore.ValidateSettleRef(old, repl); err != nil {
		return err
	}
	ce, cs := headCursorNames(1, metastore.Settled)
	ce2, cs2 := headCursorNames(2, metastore.Settled)
	items := make([]types.TransactWriteItem, 0, len(old)+2)
	items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(st.table),
		Key:       key(metastore.ChainPK(chain), metastore.HeadSK),
		// Either layout, as PutRefs's.
		ConditionExpression:      aws.String("attribute_exists(#pk) AND ((#se = :se AND #ss = :ss) OR (#se2 = :se AND #ss2 = :ss))"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#se": ce, "#ss": cs, "#se2": ce2, "#ss2": cs2},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":se": nu(settled.Epoch), ":ss": nu(settled.Slot),
		},
	}})
	put := &types.Put{TableName: aws.String(st.table), Item: refAttrs(repl)}
	if len(old) == 0 {
		put.ConditionExpression = aws.String("attribute_not_exists(#pk) OR #sum = :sum")
		put.ExpressionAttributeNames = map[string]string{"#pk": attrPK, "#sum": attrSum}
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":sum": s(refSum(repl))}
	} else {
		put.ConditionExpression = aws.String("#sum = :sum")
		put.ExpressionAttributeNames = map[string]string{"#sum": attrSum}
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":sum": s(refSum(old[0]))}
	}
	items = append(items, types.TransactWriteItem{Put: put})
	for _, o := range old[min(1, len(old)):] {
		items = append(items, st.deleteRef(o, "#sum = :sum"))
	}
	apart, err := st.settleApart(ctx, old, repl)
	if err != nil {
		return err
	}
	items = append(items, apart...)
	reasons, err := st.transact(ctx, items)
	if err != nil {
		return fmt.Errorf("settle ref of stream %s at %d-%d in %s: %w", repl.StreamID, repl.FirstSeq, repl.LastSeq, st.table, err)
	}
	if reasons != nil {
		if i := condFailed(reasons); len(i) > 0 && i[0] == 0 {
			return fmt.Errorf("settle ref of chain %s from %s: the settled cursor moved: %w", chain, settled, metastore.ErrConflict)
		}
		return fmt.Errorf("settle ref of stream %s at %d: a ref changed or is gone: %w", repl.StreamID, repl.FirstSeq, metastore.ErrConflict)
	}
	return nil
}

// settleApart reads repl's neighbours and decides
// metastore.SettleApart on them, then returns the ConditionCheck that
// keeps what the decision read until the transaction: without old refs,
// that the ref before repl (if any) is unchanged, by Sum (a copy that
// merged it into a ref reaching repl changed it); with old refs and a
// repl that reaches past them, that the key just past them holds no ref
// (a copy that flushed the seqs there without merging put one there).
// So of two copies that flush one stream's step, one merging the previous
// ref and one not, the second transaction fails. A ref keyed strictly
// inside repl's new seqs is seen by the read only: settle puts none
// there (a flush's refs start at its groups' starts or at a merged
// previous ref's).
func (st *Store) settleApart(ctx context.Context, old []metastore.Ref, repl metastore.Ref) ([]types.TransactWriteItem, error) {
	pk := metastore.RefPK(repl.StreamID)
	one := func(lo, hi uint64, forward bool) (metastore.Ref, bool, error) {
		items, err := st.query(ctx, &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":lo": s(metastore.RefSK(lo)), ":hi": s(metastore.RefSK(hi))},
			ScanIndexForward:          aws.Bool(forward),
		}, 1)
		if err != nil || len(items) == 0 {
			return metastore.Ref{}, false, err
		}
		r, err := decodeRef(items[0])
		return r, err == nil, err
	}
	var before, next metastore.Ref
	var hasBefore, hasNext bool
	var err error
	if repl.FirstSeq > 0 {
		if before, hasBefore, err = one(0, repl.FirstSeq-1, false); err != nil {
			return nil, fmt.Errorf("settle ref of stream %s: the ref before %d in %s: %w", repl.StreamID, repl.FirstSeq, st.table, err)
		}
	}
	if reach := metastore.SettleReach(old, repl); reach < repl.LastSeq {
		if next, hasNext, err = one(reach+1, repl.LastSeq, true); err != nil {
			return nil, fmt.Errorf("settle ref of stream %s: the refs in %d-%d in %s: %w", repl.StreamID, reach+1, repl.LastSeq, st.table, err)
		}
	}
	if err := metastore.SettleApart(repl, before, hasBefore, next, hasNext); err != nil {
		return nil, err
	}
	switch {
	case len(old) == 0 && hasBefore:
		return []types.TransactWriteItem{{ConditionCheck: &types.ConditionCheck{
			TableName:                 aws.String(st.table),
			Key:                       key(pk, metastore.RefSK(before.FirstSeq)),
			ConditionExpression:       aws.String("#sum = :sum"),
			ExpressionAttributeNames:  map[string]string{"#sum": attrSum},
			ExpressionAttributeValues: map[string]types.AttributeValue{":sum": s(refSum(before))},
		}}}, nil
	case len(old) > 0 && repl.LastSeq > old[len(old)-1].LastSeq:
		return []types.TransactWriteItem{{ConditionCheck: &types.ConditionCheck{
			TableName:                aws.String(st.table),
			Key:                      key(pk, metastore.RefSK(old[len(old)-1].LastSeq+1)),
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		}}}, nil
	}
	return nil, nil
}

// DeleteRefs deletes refs with TransactWriteItems, up to
// metastore.MaxDeleteRefsPerTx per transaction, each Delete on condition
// that the item is absent (deletes are idempotent) or its Sum is the given
// ref's (it is still the ref that was read). Each transaction lands whole
// or not at all; a changed ref fails its transaction with ErrConflict, and
// the transactions before it stay done.
func (st *Store) DeleteRefs(ctx context.Context, refs []metastore.Ref) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("delete refs: %w", err)
	}
	if err := metastore.ValidateDeleteRefs(refs); err != nil {
		return err
	}
	for chunk := range slices.Chunk(refs, metastore.MaxDeleteRefsPerTx) {
		items := make([]types.TransactWriteItem, len(chunk))
		for i, r := range chunk {
			items[i] = st.deleteRef(r, "attribute_not_exists(#pk) OR #sum = :sum")
		}
		reasons, err := st.transact(ctx, items)
		if err != nil {
			return fmt.Errorf("delete %d refs from %s: %w", len(chunk), st.table, err)
		}
		if reasons != nil {
			r := chunk[condFailed(reasons)[0]]
			return fmt.Errorf("delete ref %s@%d: it changed since it was read: %w", r.StreamID, r.FirstSeq, metastore.ErrConflict)
		}
	}
	return nil
}

// deleteRef is a transaction's Delete of ref r on condition cond, which may
// use #pk (the partition key) and #sum = :sum (r's Sum).
func (st *Store) deleteRef(r metastore.Ref, cond string) types.TransactWriteItem {
	names := map[string]string{"#sum": attrSum}
	if strings.Contains(cond, "#pk") {
		names["#pk"] = attrPK // unused names are refused
	}
	return types.TransactWriteItem{Delete: &types.Delete{
		TableName:                 aws.String(st.table),
		Key:                       key(metastore.RefPK(r.StreamID), metastore.RefSK(r.FirstSeq)),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":sum": s(refSum(r))},
	}}
}
