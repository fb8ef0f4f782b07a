package absorb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// ErrMargin: work a Lambda pass did not start because its invocation was
// within its deadline margin. Nothing went wrong; the work is reported as
// failed so that it is redelivered (SQS) or picked up by the next run.
var ErrMargin = errors.New("absorb: not started: within the invocation's deadline margin")

// DefaultMargin is how long before an invocation's deadline a Lambda pass
// stops starting new work (a chain run, a probe): one walk's bucket retry
// (DefaultRetryFor) plus room to answer. The settlement functions' timeouts
// (60 s to 300 s) leave most of the invocation to work.
const DefaultMargin = DefaultRetryFor + 5*time.Second

// DefaultFinish is how long before the invocation's deadline a run in
// progress is cut off (its context ends), so that the handler still answers
// with its BatchItemFailures instead of the whole batch timing out. A pass
// cut off is safe: its lease is completed by the next run.
const DefaultFinish = 2 * time.Second

// Margin is a Lambda pass's deadline margin, read from the invocation's
// context deadline.
type Margin struct {
	// Before: no new work starts with less than this left (0:
	// DefaultMargin; negative: no margin).
	Before time.Duration
	// Finish: work in progress is cut off this long before the deadline (0:
	// DefaultFinish; negative: never).
	Finish time.Duration
	// Clock: nil is the real clock.
	Clock clock.Clock
}

func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Open reports whether new work may start under ctx: ctx has not ended,
// and it has no deadline or more than Before left before it.
func (m Margin) Open(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return true
	}
	return dl.Sub(clock.OrReal(m.Clock).Now()) > orDefault(m.Before, DefaultMargin)
}

// Work is the context for one piece of work started under ctx: it ends
// Finish before ctx's deadline (ctx itself when ctx has none).
func (m Margin) Work(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-orDefault(m.Finish, DefaultFinish)))
}

// Transient reports whether a failed run may succeed if retried at once:
// the metastore or a bucket was unavailable or answered ambiguously, a
// bucket retry deadline passed, or a superseded epoch is not fenced yet.
// Malformed events, gaps, lost slots and unknown chains are not.
func Transient(err error) bool {
	for _, t := range []error{metastore.ErrUnavailable, objstore.ErrUnavailable, objstore.ErrAmbiguous,
		chain.ErrDeadline, chain.ErrNoCopy, passindex.ErrUnfenced, context.DeadlineExceeded} {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// Retry is how a handler retries a failed chain run inside one invocation:
// at most Attempts runs, pausing Backoff before the second and doubling up
// to MaxBackoff, and only while the invocation's margin is open.
type Retry struct {
	Attempts   int           // 0: 3
	Backoff    time.Duration // 0: 200 ms
	MaxBackoff time.Duration // 0: 2 s
}

// DefaultRetry: three runs over about 0.6 s.
var DefaultRetry = Retry{Attempts: 3, Backoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second}

func (r Retry) orDefault() Retry {
	if r.Attempts <= 0 {
		r.Attempts = DefaultRetry.Attempts
	}
	if r.Backoff <= 0 {
		r.Backoff = DefaultRetry.Backoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = DefaultRetry.MaxBackoff
	}
	return r
}

// Do runs run until it succeeds, fails with an error that is not
// Transient, has run Attempts times, or the margin closes; it sleeps on
// m's clock between runs. It returns the last run's result, or ErrMargin
// (joined with the last error) if the margin closed before a run.
func (r Retry) Do(ctx context.Context, m Margin, run func(ctx context.Context) error) error {
	r = r.orDefault()
	clk := clock.OrReal(m.Clock)
	wait := r.Backoff
	var last error
	for i := range r.Attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(last, ctx.Err())
			case <-clk.After(wait):
			}
			wait = min(2*wait, r.MaxBackoff)
		}
		if !m.Open(ctx) {
			return errors.Join(ErrMargin, last)
		}
		wctx, cancel := m.Work(ctx)
		last = run(wctx)
		cancel()
		if last == nil || !Transient(last) {
			return last
		}
	}
	return fmt.Errorf("after %d runs: %w", r.Attempts, last)
}
