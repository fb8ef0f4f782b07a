package star

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/metastore"
)

// Quiesce prepares a graceful Close (node.Close's drain) and reports how it
// went: like Stop it refuses new batches (ErrClosed: nothing written) and
// waits until every admitted batch is acknowledged or has failed (the pool
// is cut, flights in the air commit and release in slot order), but it
// does not close, so the caller can end its sessions after their acks and
// close later; and it then publishes each chain's final released head to
// the waker, so the absorb catches up without waiting for a sweep.
//
// It returns nil when nothing admitted is left pending, else what is (ctx
// ended: a commit outlasted the drain budget, or the epoch is halted; a
// successor took over), joined with any release event not delivered.
// Close then fails what is pending as it says. A star that quiesced only
// closes.
func (s *Star) Quiesce(ctx context.Context) error {
	var errs []error
	for _, cl := range s.classes() {
		l := s.loglets[cl]
		l.quiesce(ctx)
		if err := l.pendingErr(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.waker != nil {
		for _, c := range s.Chains() {
			if err := s.waker.Released(ctx, c, s.Released(c)); err != nil {
				errs = append(errs, fmt.Errorf("star: final release event of %s: %w", c, err))
			}
		}
	}
	return errors.Join(errs...)
}

// classes are the star's classes with a loglet, in a fixed order.
func (s *Star) classes() []metastore.Class {
	var out []metastore.Class
	for _, cl := range []metastore.Class{metastore.Standard, metastore.Express} {
		if s.loglets[cl] != nil {
			out = append(out, cl)
		}
	}
	return out
}

// pendingErr says what the loglet still has pending after quiesce, or nil.
func (l *loglet) pendingErr(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pool.n == 0 && len(l.inflight) == 0 {
		return nil
	}
	why := ctx.Err()
	switch {
	case l.deposed != nil:
		why = l.deposed
	case l.closed:
		why = ErrClosed
	case why == nil:
		why = errors.New("epoch halted past its wait")
	}
	return fmt.Errorf("star: drain %s: %d batches pooled, %d flights in the air: %w", l.chain, l.pool.n, len(l.inflight), why)
}
