package bolt

import (
	"context"

	"go.etcd.io/bbolt"

	"github.com/strandlog/strand/shared/metastore"
)

var _ metastore.Leases = (*Store)(nil)

func leaseKey(star string) []byte { return itemKey(metastore.LeasePK(star), metastore.MetaSK) }

// GetLease implements metastore.Leases.
func (s *Store) GetLease(ctx context.Context, star string) (metastore.Lease, error) {
	return getItem[metastore.Lease](s, ctx, "get lease of "+star, leaseKey(star))
}

// PutLease implements metastore.Leases: one write transaction reads the
// stored lease and writes l over it when LeaseOn allows.
func (s *Store) PutLease(ctx context.Context, l metastore.Lease) (metastore.Lease, error) {
	if err := metastore.ValidateLease(l); err != nil {
		return metastore.Lease{}, err
	}
	var cur metastore.Lease
	err := s.update(ctx, "put lease of "+l.Star, func(b *bbolt.Bucket) error {
		found, err := get(b, leaseKey(l.Star), &cur)
		if err != nil {
			return err
		}
		if err := metastore.LeaseOn(cur, found, l); err != nil {
			return err
		}
		cur = l
		return put(b, leaseKey(l.Star), l)
	})
	return cur, err
}
