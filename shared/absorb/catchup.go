package absorb

import (
	"context"
	"fmt"

	"github.com/strandlog/strand/shared/metastore"
)

// AbsorbTo runs passes until chain's checkpoint reaches `to`: every
// committed slot below it is in refs. A star calls it during takeover with
// the fenced epoch's cut, before it mints its own epoch, so that each
// stream's tail can be recovered from refs (it satisfies star.Absorber).
func (a *Absorber) AbsorbTo(ctx context.Context, c metastore.ChainID, to metastore.Cursor) error {
	prev := metastore.Cursor{}
	for first := true; ; first = false {
		at, err := a.Run(ctx, c, to)
		if err != nil {
			return fmt.Errorf("absorb %s up to %s: %w", c, to, err)
		}
		if !at.Less(to) {
			return nil
		}
		h, err := a.Meta.GetHead(ctx, c)
		if err != nil {
			return fmt.Errorf("absorb %s up to %s: %w", c, to, err)
		}
		if !h.Checkpoint.Less(to) {
			return nil
		}
		if !first && !prev.Less(h.Checkpoint) {
			return fmt.Errorf("absorb %s up to %s: no progress past %s", c, to, h.Checkpoint)
		}
		prev = h.Checkpoint
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
