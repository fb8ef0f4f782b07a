package metastoretest

import (
	"context"
	"fmt"

	"github.com/strandlog/strand/shared/metastore"
)

// PutPaged writes refs to s as the absorb pass of a fresh chain would (a
// mint of epoch 1 on chain, a lease, PutRefs), for tests of callers that
// read refs: with Padded refs, a few fill more than one QueryRefs page.
func PutPaged(ctx context.Context, s metastore.Store, chain metastore.ChainID, refs []metastore.Ref) error {
	e := metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}
	if err := s.MintEpoch(ctx, chain, 0, e); err != nil {
		return fmt.Errorf("mint: %w", err)
	}
	pass := metastore.Cursor{Epoch: 1, Slot: 1}
	if _, err := s.BeginAbsorb(ctx, chain, metastore.Cursor{Epoch: 1}, pass); err != nil {
		return fmt.Errorf("begin absorb: %w", err)
	}
	return s.PutRefs(ctx, chain, pass, refs)
}

// PaddedRefs returns n adjacent Padded refs of stream id: ref i holds seqs
// 10i to 10i+9, 7 bytes at loc(i) (FirstSeq set), for tests of callers
// that page through refs.
func PaddedRefs(id string, n int, loc func(i uint64) metastore.Location) []metastore.Ref {
	refs := make([]metastore.Ref, n)
	for i := range uint64(n) {
		l := loc(i)
		l.Length, l.FirstSeq = 7, 10*i
		refs[i] = Padded(metastore.Ref{StreamID: id, FirstSeq: 10 * i, LastSeq: 10*i + 9, Bytes: 7, Locations: []metastore.Location{l}})
	}
	return refs
}
