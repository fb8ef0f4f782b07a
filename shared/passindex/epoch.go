package passindex

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/metastore"
)

// EpochCut returns the cut of epoch e of chain: the epoch must be fenced
// (the chain has moved past it). exists is false when no epoch e was ever
// minted (epoch numbers may skip): it has no slots.
func EpochCut(ctx context.Context, meta metastore.Store, c metastore.ChainID, e uint64) (cut uint64, exists bool, err error) {
	ep, err := meta.GetEpoch(ctx, c, e)
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("epoch %d of chain %s: %w", e, c, err)
	case ep.State != metastore.EpochFenced:
		return 0, true, fmt.Errorf("passindex: chain %s moved past epoch %d, which is not fenced: %w", c, e, ErrUnfenced)
	}
	return ep.Cut, true, nil
}

// ErrUnfenced: a later epoch exists but an earlier one was never fenced, so
// its cut is unknown. Never normal: takeover fences before it mints.
var ErrUnfenced = errors.New("passindex: superseded epoch not fenced")
