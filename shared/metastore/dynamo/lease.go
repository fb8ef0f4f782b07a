package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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

// PutLease writes the LEASE item with a conditional PutItem: its Version
// must be l.Version-1 (absent for version 1). One write unit, not a
// transaction's two: it is written every renewal. A retry after a lost
// answer fails its condition on its own write, and returns ErrConflict
// with exactly l stored, which the contract tells the caller to take for
// success. On a failed condition the stored item comes back with the
// refusal (ALL_OLD; read when an emulator leaves it out).
func (st *Store) PutLease(ctx context.Context, l metastore.Lease) (metastore.Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return metastore.Lease{}, fmt.Errorf("put lease: %w", err)
	}
	if err := metastore.ValidateLease(l); err != nil {
		return metastore.Lease{}, err
	}
	in := &dynamodb.PutItemInput{
		TableName:                           aws.String(st.table),
		Item:                                leaseAttrs(l),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if l.Version > 1 {
		in.ExpressionAttributeNames = map[string]string{"#v": attrVersion}
		in.ConditionExpression = aws.String("#v = :prev")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": nu(l.Version - 1)}
	}
	_, err := st.client.PutItem(ctx, in)
	if err == nil {
		return l, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return metastore.Lease{}, fmt.Errorf("put lease of %s v%d to %s: %w", l.Star, l.Version, st.table, translate(err))
	}
	conflict := fmt.Errorf("put lease of %s v%d: %w", l.Star, l.Version, metastore.ErrConflict)
	old, err := st.oldItem(ctx, types.CancellationReason{Item: ccf.Item}, metastore.LeasePK(l.Star), metastore.MetaSK)
	if err != nil || old == nil {
		return metastore.Lease{}, conflict
	}
	cur, err := decodeLease(old)
	if err != nil {
		return metastore.Lease{}, fmt.Errorf("put lease of %s: %w", l.Star, err)
	}
	return cur, conflict
}
