package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/metastore"
)

// Lease attributes (LEASE#<star>/META). Part of the stored format: do not
// change them.
const (
	attrHolder  = "Holder" // absent when released
	attrAddr    = "Addr"   // absent when released
	attrVersion = "Version"
	attrTTLMs   = "TTLMs"
	// also attrStar
)

var _ metastore.Leases = (*Store)(nil)

func leaseAttrs(l metastore.Lease) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		attrPK:      s(metastore.LeasePK(l.Star)),
		attrSK:      s(metastore.MetaSK),
		attrStar:    s(l.Star),
		attrVersion: nu(l.Version),
		attrTTLMs:   ni(l.TTLMs),
	}
	if l.Holder != "" {
		m[attrHolder], m[attrAddr] = s(l.Holder), s(l.Addr)
	}
	return m
}

func decodeLease(m map[string]types.AttributeValue) (metastore.Lease, error) {
	it := &item{m: m}
	l := metastore.Lease{Star: it.str(attrStar), Version: it.u64(attrVersion), TTLMs: it.i64(attrTTLMs)}
	if _, ok := m[attrHolder]; ok {
		l.Holder, l.Addr = it.str(attrHolder), it.str(attrAddr)
	}
	if it.err != nil {
		return metastore.Lease{}, it.err
	}
	// Only valid leases are written: anything else is not one of ours.
	if err := metastore.ValidateLease(l); err != nil {
		return metastore.Lease{}, fmt.Errorf("dynamo: lease item: %w", err)
	}
	return l, nil
}

// GetLease reads the LEASE item (strongly consistent).
func (st *Store) GetLease(ctx context.Context, star string) (metastore.Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return metastore.Lease{}, fmt.Errorf("get lease: %w", err)
	}
	m, err := st.getItem(ctx, metastore.LeasePK(star), metastore.MetaSK)
	if err != nil {
		return metastore.Lease{}, fmt.Errorf("lease of %s in %s: %w", star, st.table, err)
	}
	if m == nil {
		return metastore.Lease{}, fmt.Errorf("lease of %s: %w", star, metastore.ErrNotFound)
	}
	return decodeLease(m)
}

// PutLease writes the LEASE item on condition that its Version is
// l.Version-1 (absent for version 1), in a one-item transaction: the
// SDK's client token makes a retry after a lost answer report success.
// On a failed condition the stored item comes back with the cancellation
// (ALL_OLD).
func (st *Store) PutLease(ctx context.Context, l metastore.Lease) (metastore.Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return metastore.Lease{}, fmt.Errorf("put lease: %w", err)
	}
	if err := metastore.ValidateLease(l); err != nil {
		return metastore.Lease{}, err
	}
	put := &types.Put{
		TableName:                           aws.String(st.table),
		Item:                                leaseAttrs(l),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if l.Version > 1 {
		put.ExpressionAttributeNames = map[string]string{"#v": attrVersion}
		put.ConditionExpression = aws.String("#v = :prev")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": nu(l.Version - 1)}
	}
	reasons, err := st.transact(ctx, []types.TransactWriteItem{{Put: put}})
	if err != nil {
		return metastore.Lease{}, fmt.Errorf("put lease of %s v%d to %s: %w", l.Star, l.Version, st.table, err)
	}
	if reasons == nil {
		return l, nil
	}
	conflict := fmt.Errorf("put lease of %s v%d: %w", l.Star, l.Version, metastore.ErrConflict)
	old, err := st.oldItem(ctx, reasons[0], metastore.LeasePK(l.Star), metastore.MetaSK)
	if err != nil || old == nil {
		return metastore.Lease{}, conflict
	}
	cur, err := decodeLease(old)
	if err != nil {
		return metastore.Lease{}, fmt.Errorf("put lease of %s: %w", l.Star, err)
	}
	return cur, conflict
}
