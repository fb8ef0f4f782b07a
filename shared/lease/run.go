package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
)

// ID returns a holder id for this process: prefix and 8 random bytes in
// hex, so that a restarted task never takes its predecessor's writes for
// its own.
func ID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Runner drives a Core against a store, on a clock: the I/O shell of the
// lease. Run it in one goroutine; the other methods are safe from any.
type Runner struct {
	core  *Core
	store metastore.Leases
	clk   clock.Clock
	log   *slog.Logger

	mu      sync.Mutex
	leading bool
	holder  metastore.Lease
	led     chan struct{} // closed when this task first leads
	release chan struct{} // closed by Release
	once    sync.Once
}

// NewRunner returns a runner of a new standby for cfg. clk nil is the
// wall clock, log nil discards.
func NewRunner(cfg Config, store metastore.Leases, clk clock.Clock, log *slog.Logger) (*Runner, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{core: c, store: store, clk: clock.OrReal(clk), log: log,
		led: make(chan struct{}), release: make(chan struct{})}, nil
}

// Led is closed once this task leads.
func (r *Runner) Led() <-chan struct{} { return r.led }

// Leading reports whether this task led at its last step.
func (r *Runner) Leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading
}

// Holder is the lease as last read or written: who leads, and where.
func (r *Runner) Holder() metastore.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holder
}

// Release asks Run to give the lease up (a leader writes it released, so
// a standby takes over at its next read) and return nil.
func (r *Runner) Release() { r.once.Do(func() { close(r.release) }) }

// Run contends for the lease until it is released (nil), lost (an error
// wrapping ErrDeposed), or ctx ends (ctx's error; the lease is left to
// lapse, as a crash would leave it).
func (r *Runner) Run(ctx context.Context) error {
	rel := r.release // nil once seen: a closed channel would spin the loop
	for {
		now := r.clk.Now()
		a := r.core.Next(now)
		r.publish(now)
		switch a.Kind {
		case Stop:
			if r.core.Role() == Deposed {
				h := r.core.Holder()
				r.log.Warn("lease lost to another task: stop serving", "star", r.core.cfg.Star, "holder", h.Holder, "addr", h.Addr, "version", h.Version)
				return fmt.Errorf("%w: star %s: %s", ErrDeposed, r.core.cfg.Star, h)
			}
			return nil
		case Wait:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-rel:
				rel = nil
				r.core.Release()
			case <-r.clk.After(a.Until.Sub(now)):
			}
		case Read:
			cctx, cancel := context.WithTimeout(ctx, r.core.cfg.TTL/2)
			l, err := r.store.GetLease(cctx, r.core.cfg.Star)
			cancel()
			found := err == nil
			if errors.Is(err, metastore.ErrNotFound) {
				err = nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				r.log.Warn("lease read failed; retrying", "star", r.core.cfg.Star, "err", err.Error())
			}
			r.core.Observed(r.clk.Now(), l, found, err)
		case Write:
			// A call that outlives half the TTL is abandoned (its outcome
			// unknown, as a lost answer's).
			cctx, cancel := context.WithTimeout(ctx, r.core.cfg.TTL/2)
			stored, err := r.store.PutLease(cctx, a.Lease)
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil && !errors.Is(err, metastore.ErrConflict) {
				r.log.Warn("lease write failed; retrying", "star", r.core.cfg.Star, "version", a.Lease.Version, "err", err.Error())
			}
			r.core.Wrote(r.clk.Now(), stored, err)
		}
	}
}

func (r *Runner) publish(now time.Time) {
	leading := r.core.Leading(now)
	r.mu.Lock()
	was := r.leading
	r.leading, r.holder = leading, r.core.Holder()
	r.mu.Unlock()
	if leading && !was {
		select {
		case <-r.led:
		default:
			close(r.led)
			r.log.Info("lease taken: leading", "star", r.core.cfg.Star, "version", r.core.Holder().Version)
		}
	}
}
