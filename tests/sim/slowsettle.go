package sim

import (
	"context"
	"time"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/settle"
)

// SlowSettler is a settler whose SwapRefs waits d before it reaches the
// metastore: a Lambda paused between reading its refs and swapping them,
// so that other settlers and the absorb change the refs under it. Only the
// swap's condition (the old refs unchanged) keeps its stale view out.
func (w *World) SlowSettler(d time.Duration) *settle.Settler {
	s := w.Settler()
	s.Meta = slowSwap{Store: w.SettleMeta, d: d}
	return s
}

type slowSwap struct {
	metastore.Store
	d time.Duration
}

func (s slowSwap) SwapRefs(ctx context.Context, old []metastore.Ref, repl metastore.Ref) error {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return s.Store.SwapRefs(ctx, old, repl)
}
