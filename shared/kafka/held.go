package kafka

import (
	"context"
	"sync"

	"github.com/strandlog/strand/shared/metrics"
)

// The held-bytes budget (ADR 0074). A connection keeps up to
// maxPipelined requests read and not yet answered, a produce of up to
// MaxProduceBytes each, so without a bound across connections N
// connections hold N times 34 produces. Every request's bytes are taken
// from one budget of Limits.MaxHeldBytes before its body is read and put
// back once its answer is written; one tenant (a root token and every
// token minted under it; before SASL, every unauthenticated connection
// together) holds at most half of it, except the unauthenticated, who
// together hold at most a sixteenth (never less than one largest request
// before SASL): with half, one tenant and a flood of strangers would hold
// the whole budget between them, and every other tenant would wait. A connection whose request does not
// fit stops reading until answers free room: the client sees a slow
// broker (TCP backpressure, then its request timeout), as with Kafka's
// own queued.max.request.bytes, and every Kafka client handles that; a
// refusal would have to be a produce error code, and a client retries
// those at once.

// heldBudget counts the request bytes held, in all and by tenant.
type heldBudget struct {
	mu        sync.Mutex
	max       int64
	strangers int64 // the unauthenticated connections' share
	cur       int64
	by        map[string]int64
	wake      chan struct{} // closed (and replaced) when bytes are put back
	gauge     *metrics.Gauge
	peak      int64 // the most held at once (tests)
}

// newHeldBudget: a budget of total bytes, where a request before SASL is
// at most preAuth bytes.
func newHeldBudget(total, preAuth int64, gauge *metrics.Gauge) *heldBudget {
	return &heldBudget{max: total, strangers: max(total/16, min(preAuth, total/2)), by: map[string]int64{}, wake: make(chan struct{}), gauge: gauge}
}

// share is the most tenant may hold: half the budget, or the
// unauthenticated connections' sixteenth.
func (b *heldBudget) share(tenant string) int64 {
	if tenant == unauthenticated {
		return b.strangers
	}
	return b.max / 2
}

// charge is what tenant's request of n bytes is charged: at most its
// share, so the largest request fits a tenant that holds nothing else.
func (b *heldBudget) charge(tenant string, n int64) int64 { return min(n, b.share(tenant)) }

// take waits until tenant may hold n more bytes and takes them, or
// returns ctx's error when it ends first.
func (b *heldBudget) take(ctx context.Context, tenant string, n int64) error {
	for {
		b.mu.Lock()
		if b.cur+n <= b.max && b.by[tenant]+n <= b.share(tenant) {
			b.cur += n
			b.by[tenant] += n
			b.peak = max(b.peak, b.cur)
			b.mu.Unlock()
			b.gauge.Add(n)
			return nil
		}
		w := b.wake
		b.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// put gives back n bytes tenant took.
func (b *heldBudget) put(tenant string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.cur -= n
	if b.by[tenant] -= n; b.by[tenant] <= 0 {
		delete(b.by, tenant)
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
	b.gauge.Add(-n)
}
