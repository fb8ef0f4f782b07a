package settle

import (
	"context"
	"fmt"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
)

// mode decides the mode of step st of chain c read from head h (design
// 014, "Switching a live chain"): indexed when it starts at or after
// where the chain's indexed passes begin, else a refs step, bounded so
// that it ends there (st is cut short in place). runsFrom is where the
// live runs start (the flushed cursor, or that start when flushed is
// behind it). With PassIndex off an indexed step is absorb.ErrIndexed
// (the refs steps before it still run).
func (s *Settler) mode(ctx context.Context, c metastore.ChainID, h metastore.Head, st *absorb.Step) (indexed bool, runsFrom metastore.Cursor, err error) {
	at := h.Indexed
	if s.PassIndex {
		s.initWindow()
		if at, err = s.window.IndexedFrom(ctx, c, h); err != nil {
			return false, h.Flushed, fmt.Errorf("settle %s: %w", c, err)
		}
	}
	if at.IsZero() {
		return false, h.Flushed, nil // refs mode
	}
	if !st.From.Less(at) {
		if !s.PassIndex {
			return false, h.Flushed, absorb.IndexedErr("settle", c, at)
		}
		runsFrom, _, _ = passindex.WindowFrom(h, at)
		return true, runsFrom, nil
	}
	if st.Epoch == at.Epoch && at.Slot < st.End {
		st.End, st.To = at.Slot, at
	}
	return false, h.Flushed, nil
}
