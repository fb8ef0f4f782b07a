package star

import (
	"context"
	"errors"
	"fmt"
)

// ErrDraining: the star is draining for a shutdown (Quiesce) and admits no
// new batch; its successor will. It matches ErrClosed (errors.Is), so it is
// reported as unavailable, which clients retry.
var ErrDraining = fmt.Errorf("%w: draining for shutdown", ErrClosed)

// Quiesce prepares a graceful Close: it stops admitting batches (Submit
// fails with ErrDraining, also for a batch waiting for pool budget), waits
// until every batch admitted before is acknowledged (the pool is cut and
// every flight in the air is committed and released, in slot order), and
// then publishes each chain's final released head to the waker, so the
// absorb catches up without waiting for a sweep. Close after Quiesce fails
// nothing.
//
// If ctx ends first (a commit outlasts the drain budget, or the epoch is
// halted), Quiesce returns what is still pending; Close then fails it with
// ErrClosed, as without Quiesce. Quiesce is not undone: a star that
// quiesced only closes.
func (s *Star) Quiesce(ctx context.Context) error {
	for _, l := range s.loglets {
		l.mu.Lock()
		l.draining = true
		l.broadcast() // batches waiting for pool budget are refused
		l.mu.Unlock()
	}
	var errs []error
	for _, l := range s.loglets {
		if err := l.quiesce(ctx); err != nil {
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

// quiesce waits until nothing admitted is unacknowledged: the pool is empty
// and no slot is in the air.
func (l *loglet) quiesce(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.pool) > 0 || l.ord.pending() > 0 {
		if l.closed {
			return fmt.Errorf("star: drain %s: %w", l.chain, ErrClosed)
		}
		if l.deposed != nil {
			return fmt.Errorf("star: drain %s: %w", l.chain, l.deposed)
		}
		if err := l.wait(ctx, nil); err != nil {
			return fmt.Errorf("star: drain %s: %d batches pooled, %d slots in the air: %w", l.chain, len(l.pool), l.ord.pending(), err)
		}
	}
	return nil
}
