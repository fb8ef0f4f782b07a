package absorb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Sets holds the bucket set of each class, from configuration. Star in the
// sets is ignored: For fills it in from the chain.
type Sets struct {
	Standard chain.Set
	Express  chain.Set
}

// For is chain's bucket set.
func (s Sets) For(c metastore.ChainID) (chain.Set, error) {
	var set chain.Set
	switch c.Class {
	case metastore.Standard:
		set = s.Standard
	case metastore.Express:
		set = s.Express
	default:
		return chain.Set{}, fmt.Errorf("absorb: chain %s: unknown class", c)
	}
	set.Star = c.Star
	if err := set.Validate(); err != nil {
		return chain.Set{}, fmt.Errorf("absorb: bucket set of chain %s: %w", c, err)
	}
	return set, nil
}

// Step is one move of a cursor that follows another on a chain (the
// settled cursor follows the checkpoint, the trimmed cursor the settled
// one): process slots [First, End) of Epoch, then move the cursor from From
// to To. An epoch step (First == End) only moves the cursor from an
// epoch's cut to the next epoch's slot 0.
type Step struct {
	From, To   metastore.Cursor
	Epoch      uint64
	First, End uint64
}

// Empty reports whether there is nothing to do.
func (s Step) Empty() bool { return s.From == s.To }

// Follow plans the next step of a cursor at from that follows upper (from
// < upper moves it; the store's cursors only move forward), covering at
// most max slots. Across an epoch boundary it reads the earlier epoch's cut.
func Follow(ctx context.Context, meta metastore.Store, c metastore.ChainID, from, upper metastore.Cursor, max int) (Step, error) {
	st := Step{From: from, To: from, Epoch: from.Epoch, First: from.Slot, End: from.Slot}
	if !from.Less(upper) {
		return st, nil
	}
	end := upper.Slot
	if from.Epoch < upper.Epoch {
		cut, exists, err := passindex.EpochCut(ctx, meta, c, from.Epoch)
		if err != nil {
			return st, err
		}
		if !exists || from.Slot >= cut {
			st.To = metastore.Cursor{Epoch: from.Epoch + 1}
			return st, nil
		}
		end = cut
	}
	end = min(end, from.Slot+uint64(max))
	st.End = end
	st.To = metastore.Cursor{Epoch: from.Epoch, Slot: end}
	return st, nil
}

// Advance moves a following cursor over a processed step by CAS. Losing
// the CAS means another copy moved it first: lost is true and it is not an
// error (the work was idempotent).
func Advance(ctx context.Context, meta metastore.Store, c metastore.ChainID, kind metastore.CursorKind, st Step) (lost bool, err error) {
	err = meta.AdvanceCursor(ctx, c, kind, st.From, st.To)
	switch {
	case errors.Is(err, metastore.ErrConflict):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("advance %s cursor of %s from %s to %s: %w", kind, c, st.From, st.To, err)
	}
	return false, nil
}

// RunSteps calls step at most n times, until a step makes no progress, and
// returns the cursor reached.
func RunSteps(n int, step func() (from, to metastore.Cursor, err error)) (metastore.Cursor, error) {
	var at metastore.Cursor
	for range n {
		from, to, err := step()
		if err != nil {
			return to, err
		}
		at = to
		if from == to {
			break
		}
	}
	return at, nil
}

// Sweep runs run on every chain, in order: a chain never minted
// (metastore.ErrNotFound) is skipped, and one chain's failure does not stop
// the others. Failures are logged (what names the work) and joined. No
// chain starts within the default deadline margin of ctx (Margin.Sweep).
func Sweep(ctx context.Context, chains []metastore.ChainID, log *slog.Logger, what string, run func(context.Context, metastore.ChainID) error) error {
	return Margin{}.Sweep(ctx, chains, log, what, run)
}

// Sweep is the package Sweep under margin m: once the margin closes, the
// chains not started are logged and left to the next run, and ErrMargin is
// among the errors returned.
func (m Margin) Sweep(ctx context.Context, chains []metastore.ChainID, log *slog.Logger, what string, run func(context.Context, metastore.ChainID) error) error {
	var errs []error
	for i, c := range chains {
		if !m.Open(ctx) {
			if log != nil && ctx.Err() == nil {
				log.Warn(what+": chains not started, within the invocation's deadline margin; the next run takes them", "chains", len(chains)-i, "first", c.String())
			}
			errs = append(errs, fmt.Errorf("%s: %d chains from %s: %w", what, len(chains)-i, c, ErrMargin))
			break
		}
		if err := run(ctx, c); err != nil && !errors.Is(err, metastore.ErrNotFound) {
			if log != nil && ctx.Err() == nil {
				log.Warn(what+" failed; the next run retries", "chain", c.String(), "err", err.Error())
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
