package dynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/metastore"
)

// CreateStream writes the stream's META item and its listing item in one
// transaction, if no META item exists. On ErrExists it returns the stream
// that is there.
func (st *Store) CreateStream(ctx context.Context, s metastore.Stream) (metastore.Stream, error) {
	if err := ctxErr(ctx); err != nil {
		return metastore.Stream{}, fmt.Errorf("create stream %q: %w", s.Name, err)
	}
	if err := metastore.ValidateStream(s); err != nil {
		return metastore.Stream{}, err
	}
	for attempt := 1; ; attempt++ {
		reasons, err := st.transact(ctx, []types.TransactWriteItem{
			{Put: &types.Put{
				TableName:                           aws.String(st.table),
				Item:                                streamAttrs(metastore.StreamPK(s.Name), metastore.MetaSK, s),
				ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			{Put: &types.Put{
				TableName: aws.String(st.table),
				Item:      streamAttrs(ListPK, s.Name, s),
			}},
		})
		if err != nil {
			return metastore.Stream{}, fmt.Errorf("create stream %q in %s: %w", s.Name, st.table, err)
		}
		if reasons == nil {
			return s, nil
		}
		old := reasons[0].Item
		if old == nil {
			// The emulator did not return the old item: read it.
			if old, err = st.getItem(ctx, metastore.StreamPK(s.Name), metastore.MetaSK); err != nil {
				return metastore.Stream{}, fmt.Errorf("create stream %q: read the existing stream: %w", s.Name, err)
			}
		}
		if old == nil {
			if attempt >= TxAttempts {
				return metastore.Stream{}, fmt.Errorf("create stream %q: created and deleted concurrently %d times: %w",
					s.Name, attempt, metastore.ErrUnavailable)
			}
			continue // deleted in between: try again
		}
		cur, err := decodeStream(old)
		if err != nil {
			return metastore.Stream{}, err
		}
		return cur, fmt.Errorf("create stream %q: %w", s.Name, metastore.ErrExists)
	}
}

// GetStream reads the stream's META item.
func (st *Store) GetStream(ctx context.Context, name string) (metastore.Stream, error) {
	if metastore.ValidateStreamName(name) != nil {
		// Never stored; DynamoDB would refuse some such keys outright.
		return metastore.Stream{}, fmt.Errorf("stream %q: %w", name, metastore.ErrNotFound)
	}
	m, err := st.getItem(ctx, metastore.StreamPK(name), metastore.MetaSK)
	if err != nil {
		return metastore.Stream{}, fmt.Errorf("get stream %q from %s: %w", name, st.table, err)
	}
	if m == nil {
		return metastore.Stream{}, fmt.Errorf("stream %q: %w", name, metastore.ErrNotFound)
	}
	return decodeStream(m)
}

// ListStreams queries the listing items (PK STREAMS) in name order.
func (st *Store) ListStreams(ctx context.Context, prefix, startAfter string, limit int) ([]metastore.Stream, string, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, "", err
	}
	in := &dynamodb.QueryInput{
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(ListPK)},
	}
	switch {
	case prefix == "" && startAfter == "":
		in.KeyConditionExpression = aws.String("#pk = :pk")
		delete(in.ExpressionAttributeNames, "#sk") // unused names are refused
	case prefix == "":
		in.KeyConditionExpression = aws.String("#pk = :pk AND #sk > :after")
		in.ExpressionAttributeValues[":after"] = s(startAfter)
	case startAfter < prefix:
		in.KeyConditionExpression = aws.String("#pk = :pk AND begins_with(#sk, :prefix)")
		in.ExpressionAttributeValues[":prefix"] = s(prefix)
	case strings.HasPrefix(startAfter, prefix):
		// startAfter lies inside the prefix's range, so it is a valid
		// exclusive start key for the query (it need not exist).
		in.KeyConditionExpression = aws.String("#pk = :pk AND begins_with(#sk, :prefix)")
		in.ExpressionAttributeValues[":prefix"] = s(prefix)
		in.ExclusiveStartKey = key(ListPK, startAfter)
	default:
		// startAfter is past every name with the prefix.
		return nil, "", nil
	}
	out, next, err := st.streamPage(ctx, in, limit, func(s metastore.Stream) string { return s.Name })
	if err != nil {
		return nil, "", fmt.Errorf("list streams %q after %q in %s: %w", prefix, startAfter, st.table, err)
	}
	return out, next, nil
}

// streamPage runs query in for a page of at most limit stream items (one
// more is read, to know whether another page follows); next is keyOf of
// the page's last stream when one may follow, else "".
func (st *Store) streamPage(ctx context.Context, in *dynamodb.QueryInput, limit int, keyOf func(metastore.Stream) string) ([]metastore.Stream, string, error) {
	items, err := st.query(ctx, in, limit+1)
	if err != nil {
		return nil, "", err
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	out := make([]metastore.Stream, len(items))
	for i, m := range items {
		if out[i], err = decodeStream(m); err != nil {
			return nil, "", err
		}
	}
	next := ""
	if more {
		next = keyOf(out[len(out)-1])
	}
	return out, next, nil
}

// SetStreamState sets the state on the META item and the listing item in
// one transaction, if the META item exists with the given id and, unless
// the new state is StreamDeleting, is not deleting. StreamDeleting retires
// the name instead (retire).
func (st *Store) SetStreamState(ctx context.Context, name, id string, state metastore.StreamState) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("set state of stream %q: %w", name, err)
	}
	if err := metastore.ValidateStreamState(state); err != nil {
		return err
	}
	if metastore.ValidateStreamName(name) != nil {
		return fmt.Errorf("set state of stream %q: %w", name, metastore.ErrNotFound)
	}
	if state == metastore.StreamDeleting {
		return st.retire(ctx, name, id)
	}
	cond := "attribute_exists(#pk) AND #id = :id AND #state <> :deleting"
	vals := map[string]types.AttributeValue{":id": s(id), ":state": nu(uint64(state)), ":deleting": nu(uint64(metastore.StreamDeleting))}
	names := map[string]string{"#pk": attrPK, "#id": attrID, "#state": attrState}
	update := func(pk, sk string) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{
			TableName:                           aws.String(st.table),
			Key:                                 key(pk, sk),
			UpdateExpression:                    aws.String("SET #state = :state"),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           vals,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	reasons, err := st.transact(ctx, []types.TransactWriteItem{update(metastore.StreamPK(name), metastore.MetaSK), update(ListPK, name)})
	if err != nil {
		return fmt.Errorf("set state of stream %q in %s: %w", name, st.table, err)
	}
	if reasons == nil {
		return nil
	}
	if gone, err := st.deletingItem(ctx, id); err != nil {
		return fmt.Errorf("set state of stream %q: %w", name, err)
	} else if gone != nil {
		return fmt.Errorf("set state of stream %q: it is being deleted (final): %w", name, metastore.ErrConflict)
	}
	old, err := st.oldItem(ctx, reasons[0], metastore.StreamPK(name), metastore.MetaSK)
	if err != nil {
		return fmt.Errorf("set state of stream %q: %w", name, err)
	}
	if old == nil {
		return fmt.Errorf("set state of stream %q: %w", name, metastore.ErrNotFound)
	}
	cur, err := decodeStream(old)
	if err != nil {
		return err
	}
	if cur.ID != id {
		return fmt.Errorf("set state of stream %q: id is %s, not %s: %w", name, cur.ID, id, metastore.ErrConflict)
	}
	return fmt.Errorf("set state of stream %q: it is %d (deleting is final): %w", name, cur.State, metastore.ErrConflict)
}

// retire moves stream name (id) off its name: one transaction deletes its
// META and listing items (on condition that the META item has the id)
// and puts its deleting item (DeletingPK, id) with the fields read
// before (an id's name, class, star and creation never change; its
// retention, floor and timestamping no longer matter). Done again it is
// nil (the deleting item is there).
func (st *Store) retire(ctx context.Context, name, id string) error {
	old, err := st.getItem(ctx, metastore.StreamPK(name), metastore.MetaSK)
	if err != nil {
		return fmt.Errorf("delete stream %q: read it: %w", name, err)
	}
	var cur metastore.Stream
	if old != nil {
		if cur, err = decodeStream(old); err != nil {
			return err
		}
	}
	if old == nil || cur.ID != id {
		gone, err := st.deletingItem(ctx, id)
		switch {
		case err != nil:
			return fmt.Errorf("delete stream %q: %w", name, err)
		case gone != nil:
			return nil // again
		case old == nil:
			return fmt.Errorf("delete stream %q: %w", name, metastore.ErrNotFound)
		}
		return fmt.Errorf("delete stream %q: id is %s, not %s: %w", name, cur.ID, id, metastore.ErrConflict)
	}
	cur.State = metastore.StreamDeleting
	cond := "attribute_exists(#pk) AND #id = :id"
	names := map[string]string{"#pk": attrPK, "#id": attrID}
	vals := map[string]types.AttributeValue{":id": s(id)}
	del := func(pk, sk string) types.TransactWriteItem {
		return types.TransactWriteItem{Delete: &types.Delete{
			TableName:                 aws.String(st.table),
			Key:                       key(pk, sk),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: vals,
		}}
	}
	reasons, err := st.transact(ctx, []types.TransactWriteItem{
		del(metastore.StreamPK(name), metastore.MetaSK),
		del(ListPK, name),
		{Put: &types.Put{TableName: aws.String(st.table), Item: streamAttrs(metastore.DeletingPK, id, cur)}},
	})
	if err != nil {
		return fmt.Errorf("delete stream %q in %s: %w", name, st.table, err)
	}
	if reasons != nil {
		// Deleted or recreated since it was read: at most one retire of
		// an id wins, and a later call sees the outcome.
		return fmt.Errorf("delete stream %q: changed while it was retired: %w", name, metastore.ErrConflict)
	}
	return nil
}

// deletingItem is the deleting item of id, nil when there is none (or id
// could not be a key).
func (st *Store) deletingItem(ctx context.Context, id string) (map[string]types.AttributeValue, error) {
	if id == "" {
		return nil, nil
	}
	return st.getItem(ctx, metastore.DeletingPK, id)
}

// ListDeleting queries the deleting streams' items (PK DELETING) in id
// order.
func (st *Store) ListDeleting(ctx context.Context, startAfter string, limit int) ([]metastore.Stream, string, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, "", err
	}
	in := &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :after"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(metastore.DeletingPK), ":after": s(startAfter)},
	}
	if startAfter == "" {
		in.KeyConditionExpression = aws.String("#pk = :pk")
		delete(in.ExpressionAttributeNames, "#sk")
		delete(in.ExpressionAttributeValues, ":after")
	}
	out, next, err := st.streamPage(ctx, in, limit, func(s metastore.Stream) string { return s.ID })
	if err != nil {
		return nil, "", fmt.Errorf("list deleting streams after %q in %s: %w", startAfter, st.table, err)
	}
	return out, next, nil
}

// SetStreamConfig sets RetentionMs and the timestamping attributes on the
// META item and the listing item in one transaction, on condition that the
// META item exists with the given id (else ErrNotFound or ErrConflict).
func (st *Store) SetStreamConfig(ctx context.Context, name, id string, retentionMs int64, ts metastore.Timestamping) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("set the config of stream %q: %w", name, err)
	}
	if _, err := metastore.SetConfigOn(metastore.Stream{ID: id}, true, name, id, retentionMs, ts); err != nil {
		return err // bad values
	}
	if metastore.ValidateStreamName(name) != nil {
		return fmt.Errorf("set the config of stream %q: %w", name, metastore.ErrNotFound)
	}
	names := map[string]string{"#pk": attrPK, "#id": attrID, "#ret": attrRetentionMs, "#mode": attrTsMode, "#unc": attrTsUncapped}
	vals := map[string]types.AttributeValue{":id": s(id), ":ret": ni(retentionMs)}
	// Zero timestamping attributes are absent (codec.go): set or remove.
	var set, remove []string
	set = append(set, "#ret = :ret")
	if ts.Mode != 0 {
		set, vals[":mode"] = append(set, "#mode = :mode"), nu(uint64(ts.Mode))
	} else {
		remove = append(remove, "#mode")
	}
	if ts.Uncapped {
		set, vals[":unc"] = append(set, "#unc = :unc"), &types.AttributeValueMemberBOOL{Value: true}
	} else {
		remove = append(remove, "#unc")
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	op := fmt.Sprintf("set the config of stream %q", name)
	done, cur, found, err := st.updateStream(ctx, op, name, expr, "attribute_exists(#pk) AND #id = :id", names, vals)
	switch {
	case err != nil || done:
		return err
	case !found:
		return fmt.Errorf("%s: %w", op, metastore.ErrNotFound)
	}
	return fmt.Errorf("%s: id is %s, not %s: %w", op, cur.ID, id, metastore.ErrConflict)
}

// updateStream applies expr to stream name's META item and listing item
// in one transaction, on condition cond (on each). done: written;
// otherwise cur is the META item the condition saw (found false: there
// was none), for the caller to say which condition failed.
func (st *Store) updateStream(ctx context.Context, op, name, expr, cond string, names map[string]string, vals map[string]types.AttributeValue) (done bool, cur metastore.Stream, found bool, err error) {
	update := func(pk, sk string) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{
			TableName:                           aws.String(st.table),
			Key:                                 key(pk, sk),
			UpdateExpression:                    aws.String(expr),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           vals,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	reasons, err := st.transact(ctx, []types.TransactWriteItem{update(metastore.StreamPK(name), metastore.MetaSK), update(ListPK, name)})
	if err != nil {
		return false, cur, false, fmt.Errorf("%s in %s: %w", op, st.table, err)
	}
	if reasons == nil {
		return true, cur, false, nil
	}
	old, err := st.oldItem(ctx, reasons[0], metastore.StreamPK(name), metastore.MetaSK)
	if err != nil {
		return false, cur, false, fmt.Errorf("%s: %w", op, err)
	}
	if old == nil {
		return false, cur, false, nil
	}
	cur, err = decodeStream(old)
	return false, cur, err == nil, err
}

// DeleteStream deletes the deleting item of id, then the META item and
// the listing item in one transaction if the META item has the given id
// (a stream marked deleting in place, before names were retired); a
// name that holds another id is left alone.
func (st *Store) DeleteStream(ctx context.Context, name, id string) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("delete stream %q: %w", name, err)
	}
	if id != "" && len(id) <= maxSKBytes {
		if _, err := st.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(st.table), Key: key(metastore.DeletingPK, id)}); err != nil {
			return fmt.Errorf("delete stream %q (%s) from %s: %w", name, id, st.table, translate(err))
		}
	}
	if metastore.ValidateStreamName(name) != nil {
		return nil // never stored
	}
	cond := "attribute_not_exists(#pk) OR #id = :id"
	names := map[string]string{"#pk": attrPK, "#id": attrID}
	vals := map[string]types.AttributeValue{":id": s(id)}
	reasons, err := st.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{
			TableName:                 aws.String(st.table),
			Key:                       key(metastore.StreamPK(name), metastore.MetaSK),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: vals,
		}},
		{Delete: &types.Delete{
			TableName:                 aws.String(st.table),
			Key:                       key(ListPK, name),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: vals,
		}},
	})
	if err != nil {
		return fmt.Errorf("delete stream %q from %s: %w", name, st.table, err)
	}
	_ = reasons // another id holds the name: a new stream, not ours
	return nil
}

// RaiseFloor sets Floor on the META item and the listing item in one
// transaction, on condition that the META item exists with the given id and
// its floor is below the new one. When the condition fails it reads the
// stream to tell a floor already as high (nil) from a missing stream
// (ErrNotFound) or a recreated one (ErrConflict).
func (st *Store) RaiseFloor(ctx context.Context, name, id string, floor uint64) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("raise the floor of stream %q: %w", name, err)
	}
	if metastore.ValidateStreamName(name) != nil {
		return fmt.Errorf("raise the floor of stream %q: %w", name, metastore.ErrNotFound)
	}
	cond := "attribute_exists(#pk) AND #id = :id AND (attribute_not_exists(#floor) OR #floor < :floor)"
	names := map[string]string{"#pk": attrPK, "#id": attrID, "#floor": attrFloor}
	vals := map[string]types.AttributeValue{":id": s(id), ":floor": nu(floor)}
	for attempt := 1; ; attempt++ {
		update := func(pk, sk string) types.TransactWriteItem {
			return types.TransactWriteItem{Update: &types.Update{
				TableName:                 aws.String(st.table),
				Key:                       key(pk, sk),
				UpdateExpression:          aws.String("SET #floor = :floor"),
				ConditionExpression:       aws.String(cond),
				ExpressionAttributeNames:  names,
				ExpressionAttributeValues: vals,
			}}
		}
		reasons, err := st.transact(ctx, []types.TransactWriteItem{
			update(metastore.StreamPK(name), metastore.MetaSK), update(ListPK, name),
		})
		if err != nil {
			return fmt.Errorf("raise the floor of stream %q in %s: %w", name, st.table, err)
		}
		if reasons == nil {
			return nil
		}
		old, err := st.getItem(ctx, metastore.StreamPK(name), metastore.MetaSK)
		if err != nil {
			return fmt.Errorf("raise the floor of stream %q: %w", name, err)
		}
		var cur metastore.Stream
		if old != nil {
			if cur, err = decodeStream(old); err != nil {
				return err
			}
		}
		_, changed, err := metastore.RaiseFloorOn(cur, old != nil, name, id, floor)
		if err != nil || !changed {
			return err
		}
		if attempt >= TxAttempts {
			return fmt.Errorf("raise the floor of stream %q: recreated concurrently %d times: %w", name, attempt, metastore.ErrUnavailable)
		}
	}
}

// MoveStream sets Star (and From, the star it leaves) on the META item
// and the listing item in one
// transaction, on condition that the META item exists with the given id,
// is active and is led by from. When the condition fails it reads the
// stream to tell a stream already led by to (nil: a retry) from a
// missing one (ErrNotFound) or another id or leader (ErrConflict).
func (st *Store) MoveStream(ctx context.Context, name, id, from, to string) error {
	if err := ctxErr(ctx); err != nil {
		return fmt.Errorf("move stream %q: %w", name, err)
	}
	if _, _, err := metastore.MoveStreamOn(metastore.Stream{ID: id, Star: from, State: metastore.StreamActive}, true, name, id, from, to); err != nil {
		return err // bad arguments
	}
	if metastore.ValidateStreamName(name) != nil {
		return fmt.Errorf("move stream %q: %w", name, metastore.ErrNotFound)
	}
	names := map[string]string{"#pk": attrPK, "#id": attrID, "#star": attrStar, "#state": attrState, "#from": attrFrom}
	vals := map[string]types.AttributeValue{":id": s(id), ":from": s(from), ":to": s(to), ":active": nu(uint64(metastore.StreamActive))}
	done, cur, found, err := st.updateStream(ctx, fmt.Sprintf("move stream %q", name), name, "SET #star = :to, #from = :from",
		"attribute_exists(#pk) AND #id = :id AND #star = :from AND #state = :active", names, vals)
	if err != nil || done {
		return err
	}
	_, changed, err := metastore.MoveStreamOn(cur, found, name, id, from, to)
	if err == nil && changed {
		// The condition failed on an item that satisfies it now: it
		// changed in between; the caller retries.
		return fmt.Errorf("move stream %q: changed concurrently: %w", name, metastore.ErrUnavailable)
	}
	return err
}

// oldItem returns the item a failed condition saw: from the cancellation
// reason (ALL_OLD) when the service returned it, else read now (nil when
// absent). DynamoDB returns no item when there was none; reading again
// covers emulators that ignore ALL_OLD. The read only decides which error
// to report (ErrNotFound or ErrConflict), never whether the write happened.
func (st *Store) oldItem(ctx context.Context, r types.CancellationReason, pk, sk string) (map[string]types.AttributeValue, error) {
	if r.Item != nil {
		return r.Item, nil
	}
	return st.getItem(ctx, pk, sk)
}
